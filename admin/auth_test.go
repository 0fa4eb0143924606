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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/store"
)

// stubGateway is the little of the gateway the key API needs.
type stubGateway struct{ cfg *config.Config }

func (s stubGateway) Config() *config.Config            { return s.cfg }
func (stubGateway) Forget(string)                       {}
func (stubGateway) WindowAttempts(string) (int64, bool) { return 0, false }

// downStore is a store that never answers.
type downStore struct{ store.Store }

func (downStore) Ping(context.Context) error {
	return errors.New("store: redis ping: store: unavailable: dial tcp 10.0.0.5:6379: connection refused")
}

func adminServer(t *testing.T, tok string, st store.Store) *httptest.Server {
	t.Helper()
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: st, Gateway: stubGateway{cfg}, Token: tok,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}))
	t.Cleanup(srv.Close)
	return srv
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
	srv := adminServer(t, "", store.NewMemory(store.MemoryOptions{}))
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
	srv := adminServer(t, "s3cret-token", store.NewMemory(store.MemoryOptions{}))
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
	if m["status"] != "store unavailable" {
		t.Fatalf("body %s", body)
	}
	if code, body = get(t, srv.URL+"/readyz", "", "Bearer s3cret-token"); code != 503 || !strings.Contains(body, "10.0.0.5") {
		t.Fatalf("with token: %d %s", code, body)
	}
}
