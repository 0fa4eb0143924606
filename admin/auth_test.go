package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// stubGateway is the little of the gateway the key API needs.
type stubGateway struct{ cfg *config.Config }

func (s stubGateway) Config() *config.Config                    { return s.cfg }
func (stubGateway) Forget(string)                               {}
func (stubGateway) WindowState(string) (int64, time.Time, bool) { return 0, time.Time{}, false }

// downStore is a store that never answers.
type downStore struct{ store.Store }

func (downStore) Ping(context.Context) error {
	return errors.New("store: redis ping: store: unavailable: dial tcp 10.0.0.5:6379: connection refused")
}

func adminServer(t *testing.T, tok string, st store.Store) *httptest.Server {
	t.Helper()
	srv, _ := adminServerOnError(t, tok, st, "reject")
	return srv
}

// adminServerOnError is adminServer with store.on_error set, and the
// registry behind its /metrics.
func adminServerOnError(t *testing.T, tok string, st store.Store, onError string) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	cfg := &config.Config{Store: config.Store{OnError: config.OnError(onError)}, Routes: []config.Route{{Name: "orders"}}}
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: reg, Store: st, Gateway: stubGateway{cfg}, Token: tok,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}))
	t.Cleanup(srv.Close)
	return srv, reg
}

func get(t *testing.T, url, host, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Regression: without a token the admin API answered any Host, so a web
// page whose domain was rebound to 127.0.0.1 (DNS rebinding) could reset
// keys or read profiles through the operator's browser.
func TestAdminWithoutTokenServesOnlyLoopbackHosts(t *testing.T) {
	srv := adminServer(t, "", ledger.NewMemoryStore(store.MemoryOptions{}))
	for _, tc := range []struct {
		host string
		want int
	}{
		{"", 200}, // 127.0.0.1:port
		{"localhost:9090", 200},
		{"LOCALHOST", 200},
		{"127.0.0.2:9090", 200},
		{"[::1]:9090", 200},
		{"evil.example:9090", 403},
		{"evil.example", 403},
		{"127.0.0.1.evil.example", 403},
		{"10.0.0.5:9090", 403},
	} {
		for _, path := range []string{"/admin/keys/orders/evt_1", "/debug/pprof/"} {
			if code, _ := get(t, srv.URL+path, tc.host, ""); code != tc.want {
				t.Errorf("Host %q %s: %d, want %d", tc.host, path, code, tc.want)
			}
		}
	}
	// Scrapers and probes are not behind the check.
	if code, _ := get(t, srv.URL+"/healthz", "gateway.internal", ""); code != 200 {
		t.Errorf("/healthz with a non-loopback Host: %d", code)
	}
}

func TestAdminBearerSchemeIsCaseInsensitive(t *testing.T) {
	srv := adminServer(t, "s3cret-token", ledger.NewMemoryStore(store.MemoryOptions{}))
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer s3cret-token", 200},
		{"bearer s3cret-token", 200},
		{"BEARER s3cret-token", 200},
		{"Bearer wrong", 401},
		{"Basic s3cret-token", 401},
		{"s3cret-token", 401},
		{"", 401},
	} {
		if code, _ := get(t, srv.URL+"/admin/keys/orders/evt_1", "any.host", tc.auth); code != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, code, tc.want)
		}
	}
}

// /readyz shows the store's error (which names addresses) only to a caller
// with the token.
func TestReadyzHidesTheStoreErrorWithoutTheToken(t *testing.T) {
	srv := adminServer(t, "s3cret-token", downStore{})
	code, body := get(t, srv.URL+"/readyz", "", "")
	if code != 503 || strings.Contains(body, "10.0.0.5") {
		t.Fatalf("without token: %d %s", code, body)
	}
	var m map[string]string
	json.Unmarshal([]byte(body), &m)
	if m["status"] != "unavailable" || m["store"] != "unavailable" || m["error"] != "" {
		t.Fatalf("body %s", body)
	}
	if code, body = get(t, srv.URL+"/readyz", "", "Bearer s3cret-token"); code != 503 || !strings.Contains(body, "10.0.0.5") {
		t.Fatalf("with token: %d %s", code, body)
	}
}

// Regression: /readyz answered 503 whenever the store was down, even with
// store.on_error forward, where the gateway still forwards deliveries (on
// its local window alone). In Kubernetes that pulled every pod out of
// service at once and turned the degraded mode into an outage.
func TestReadyzDegradedNotUnreadyWithOnErrorForward(t *testing.T) {
	for _, tc := range []struct {
		onError        string
		st             store.Store
		code           int
		status, sstore string
		ready, storeUp float64
	}{
		{"forward", downStore{}, 200, "degraded", "unavailable", 1, 0},
		{"reject", downStore{}, 503, "unavailable", "unavailable", 0, 0},
		{"forward", ledger.NewMemoryStore(store.MemoryOptions{}), 200, "ready", "ok", 1, 1},
		{"reject", ledger.NewMemoryStore(store.MemoryOptions{}), 200, "ready", "ok", 1, 1},
	} {
		srv, reg := adminServerOnError(t, "s3cret-token", tc.st, tc.onError)
		code, body := get(t, srv.URL+"/readyz", "", "")
		var m map[string]string
		json.Unmarshal([]byte(body), &m)
		if code != tc.code || m["status"] != tc.status || m["store"] != tc.sstore || strings.Contains(body, "10.0.0.5") {
			t.Errorf("on_error %s, %T: /readyz %d %s, want %d status %s store %s", tc.onError, tc.st, code, body, tc.code, tc.status, tc.sstore)
		}
		// The same state, as gauges read at the scrape.
		got := map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
		if got["clawgate_ready"] != tc.ready || got["clawgate_store_up"] != tc.storeUp {
			t.Errorf("on_error %s, %T: clawgate_ready %v clawgate_store_up %v, want %v %v", tc.onError, tc.st, got["clawgate_ready"], got["clawgate_store_up"], tc.ready, tc.storeUp)
		}
		// The metrics endpoint serves them too.
		if _, text := get(t, srv.URL+"/metrics", "", ""); !strings.Contains(text, "\nclawgate_ready ") || !strings.Contains(text, "\nclawgate_store_up ") {
			t.Errorf("/metrics lacks the readiness gauges:\n%s", text)
		}
	}
}
