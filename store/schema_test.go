package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/store/redistest"
)

func TestRedisSchemaVersion(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()

	t.Run("absent is written", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		if _, ok := r.Moved(); ok {
			t.Fatal("Moved before CheckSchema")
		}
		v, err := r.CheckSchema(ctx)
		if err != nil || v != SchemaVersion {
			t.Fatalf("CheckSchema on an empty store = %d, %v; want %d", v, err, SchemaVersion)
		}
		got, err := r.client.Get(ctx, r.prefix+"webhook_schema").Result()
		if err != nil || got != "2" {
			t.Fatalf("schema key = %q, %v; want \"2\"", got, err)
		}
		// A store with no version may hold records of a release from
		// before the version was recorded: taken for version 1, moved.
		if _, ok := r.Moved(); !ok {
			t.Fatal("no move recorded")
		}
		if v, err := r.CheckSchema(ctx); err != nil || v != SchemaVersion {
			t.Fatalf("second CheckSchema = %d, %v", v, err)
		}
	})

	t.Run("version 1 moves once", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		r.client.Set(ctx, r.prefix+"webhook_schema", "1", 0)
		if v, err := r.CheckSchema(ctx); err != nil || v != SchemaVersion {
			t.Fatalf("CheckSchema on a version-1 store = %d, %v", v, err)
		}
		at, ok := r.Moved()
		if !ok {
			t.Fatal("no move recorded")
		}
		moved, err := r.client.Get(ctx, r.prefix+"webhook_schema_moved").Int64()
		if err != nil || moved != at.UnixMilli() {
			t.Fatalf("webhook_schema_moved = %d, %v; Moved %v", moved, err, at)
		}
		// Later starts keep the first move's time.
		r.client.Set(ctx, r.prefix+"webhook_schema_moved", 1700000000000, 0)
		r2 := newTestRedis(t, RedisOptions{Addrs: []string{addr}, KeyPrefix: r.prefix})
		if _, err := r2.CheckSchema(ctx); err != nil {
			t.Fatal(err)
		}
		if at, ok := r2.Moved(); !ok || at.UnixMilli() != 1700000000000 {
			t.Fatalf("Moved after a restart = %v, %v", at, ok)
		}
	})

	t.Run("newer refuses", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		r.client.Set(ctx, r.prefix+"webhook_schema", "3", 0)
		_, err := r.CheckSchema(ctx)
		if !errors.Is(err, ErrSchemaNewer) {
			t.Fatalf("CheckSchema on a version-3 store: %v, want ErrSchemaNewer", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "version 3") || !strings.Contains(msg, "version 2") {
			t.Fatalf("the error does not name both versions: %s", msg)
		}
		if got, _ := r.client.Get(ctx, r.prefix+"webhook_schema").Result(); got != "3" {
			t.Fatalf("the refused check changed the version to %q", got)
		}
	})

	t.Run("not a version", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		r.client.Set(ctx, r.prefix+"webhook_schema", "banana", 0)
		if _, err := r.CheckSchema(ctx); err == nil || errors.Is(err, ErrSchemaNewer) || !strings.Contains(err.Error(), "not a schema version") {
			t.Fatalf("CheckSchema on a foreign value: %v", err)
		}
	})

	t.Run("down", func(t *testing.T) {
		srv := redistest.StartServer(t)
		r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
		srv.Stop()
		if _, err := r.CheckSchema(ctx); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("CheckSchema with Redis down: %v, want ErrUnavailable", err)
		}
	})
}
