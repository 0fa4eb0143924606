package server

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// v1DoneRecord is a finished record as the releases before the schema
// version was recorded wrote it, byte by byte: version 1, flags 1 (the
// fingerprint as 32 raw bytes), status 201, the fingerprint, then the
// content type and the body, each after its length.
func v1DoneRecord(fp string) []byte {
	raw, err := hex.DecodeString(fp)
	if err != nil || len(raw) != 32 {
		panic("fingerprint " + fp)
	}
	b := append([]byte{1, 1, 0, 201}, raw...)
	b = append(b, 16)
	b = append(b, "application/json"...)
	b = append(b, 23)
	return append(b, `{"points_deducted":100}`...)
}

func startSchemaGateway(t *testing.T, addr, upstream string) (*Server, error) {
	t.Helper()
	c := qConf{redis: addr, upstream: upstream}
	cfg, err := config.Parse([]byte(syncYAML(c)), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry(), Version: "schema-test"})
	if err == nil {
		t.Cleanup(func() { s.Shutdown(time.Second) })
	}
	return s, err
}

// The Redis store records its schema version at the first start; a
// store from before the version was recorded is version 1, moved to 2,
// and its finished keys are still replayed; a store written by a newer
// schema is refused, at start or, when Redis was down then, once it
// answers.
func TestStartChecksStoreSchema(t *testing.T) {
	ctx := context.Background()
	up := newQUpstream(t)

	t.Run("absent is written and old records replayed", func(t *testing.T) {
		addr := redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		const body = `{"id":"evt-old","amount":42}`
		rec := v1DoneRecord(idkey.Fingerprint("POST", "/webhook/order", []byte(body)))
		if err := rdb.Set(ctx, "clawgate:webhook_done:{orders:evt-old}", rec, 0).Err(); err != nil {
			t.Fatal(err)
		}
		s, err := startSchemaGateway(t, addr, up.srv.URL)
		if err != nil {
			t.Fatalf("Start on a version-1 store: %v", err)
		}
		if v, err := rdb.Get(ctx, "clawgate:webhook_schema").Result(); err != nil || v != "2" {
			t.Fatalf("clawgate:webhook_schema = %q, %v; want \"2\"", v, err)
		}
		resp, err := http.Post("http://"+s.Addr().String()+"/webhook/order", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || string(got) != `{"points_deducted":100}` || resp.Header.Get("Idempotent-Replayed") != "true" ||
			len(up.tries("evt-old")) != 0 {
			t.Fatalf("a retry of the old finished key: %d %q replayed=%q, %d tries upstream; want its stored 201 replayed and none",
				resp.StatusCode, got, resp.Header.Get("Idempotent-Replayed"), len(up.tries("evt-old")))
		}
	})

	t.Run("newer is refused at start", func(t *testing.T) {
		addr := redistest.Start(t)
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		rdb.Set(ctx, "clawgate:webhook_schema", "3", 0)
		_, err := startSchemaGateway(t, addr, up.srv.URL)
		if !errors.Is(err, store.ErrSchemaNewer) {
			t.Fatalf("Start on a version-3 store: %v, want store.ErrSchemaNewer", err)
		}
		if !strings.Contains(err.Error(), "version 3") || !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("the error does not name both versions: %v", err)
		}
	})

	t.Run("newer is refused once Redis answers", func(t *testing.T) {
		srv := redistest.StartServerWith(t, redistest.Options{Args: []string{"--appendonly", "yes"}})
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer rdb.Close()
		if err := rdb.Set(ctx, "clawgate:webhook_schema", "3", 0).Err(); err != nil {
			t.Fatal(err)
		}
		srv.Stop()
		s, err := startSchemaGateway(t, srv.Addr, up.srv.URL)
		if err != nil {
			t.Fatalf("Start while Redis is down: %v (it starts, as before)", err)
		}
		srv.Start()
		select {
		case err := <-s.Err():
			if !errors.Is(err, store.ErrSchemaNewer) {
				t.Fatalf("Err() = %v, want store.ErrSchemaNewer", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the newer schema was not reported once Redis answered")
		}
		if v, _ := rdb.Get(ctx, "clawgate:webhook_schema").Result(); v != "3" {
			t.Fatalf("the version was changed to %q", v)
		}
	})
}
