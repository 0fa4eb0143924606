package store

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store/redistest"
)

// A finished record as the releases before the schema version was
// recorded wrote it (route "orders", key "evt-old"): status 201,
// application/json, {"points_deducted":100}, fingerprint "sha256-old".
const v1DoneRecord = "010000c90a7368613235362d6f6c64106170706c69636174696f6e2f6a736f6e177b22706f696e74735f6465647563746564223a3130307d"

func TestRedisSchemaVersion(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()

	t.Run("absent is written", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		v, err := r.CheckSchema(ctx)
		if err != nil || v != SchemaVersion {
			t.Fatalf("CheckSchema on an empty store = %d, %v; want %d", v, err, SchemaVersion)
		}
		got, err := r.client.Get(ctx, r.prefix+"webhook_schema").Result()
		if err != nil || got != "1" {
			t.Fatalf("schema key = %q, %v; want \"1\"", got, err)
		}
		if v, err := r.CheckSchema(ctx); err != nil || v != SchemaVersion {
			t.Fatalf("second CheckSchema = %d, %v", v, err)
		}
	})

	t.Run("records from before the version are read as they are", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		rec, _ := hex.DecodeString(v1DoneRecord)
		k := r.keys("orders:evt-old")
		if err := r.client.Set(ctx, k[1], rec, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.client.HSet(ctx, k[2], "n", 3, "first", 1700000000000, "last", 1700000001000).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := r.CheckSchema(ctx); err != nil || v != 1 {
			t.Fatalf("CheckSchema on a version-1 store without the key = %d, %v", v, err)
		}
		c, err := r.Claim(ctx, "orders:evt-old", "sha256-old", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if c.State != Finished || c.Outcome.Status != 201 || string(c.Outcome.Body) != `{"points_deducted":100}` ||
			c.Outcome.ContentType != "application/json" || c.Attempts != 4 {
			t.Fatalf("the old record is read as %+v, want finished 201 with its body and 4 attempts", c)
		}
	})

	t.Run("newer refuses", func(t *testing.T) {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		r.client.Set(ctx, r.prefix+"webhook_schema", "2", 0)
		_, err := r.CheckSchema(ctx)
		if !errors.Is(err, ErrSchemaNewer) {
			t.Fatalf("CheckSchema on a version-2 store: %v, want ErrSchemaNewer", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "version 2") || !strings.Contains(msg, "version 1") {
			t.Fatalf("the error does not name both versions: %s", msg)
		}
		if got, _ := r.client.Get(ctx, r.prefix+"webhook_schema").Result(); got != "2" {
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
