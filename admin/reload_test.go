package admin_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// stubReloader answers Reload with err and counts the calls.
type stubReloader struct {
	err   error
	calls int
}

func (s *stubReloader) Reload() error {
	s.calls++
	return s.err
}

func reloadServer(t *testing.T, tok string, r admin.Reloader) *httptest.Server {
	t.Helper()
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}),
		Gateway: stubGateway{cfg}, Token: tok, Reloader: r,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}))
	t.Cleanup(srv.Close)
	return srv
}

func postReload(t *testing.T, url, auth string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/admin/reload", nil)
	req.Header.Set(admin.Header, "1")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestReloadAnswers(t *testing.T) {
	const tok = "admin-token-0123456789"
	problems := &config.Error{Problems: []*config.Problem{
		{File: "gateway.yaml", Line: 3, Field: "listen", Msg: "${PORT} is unset or empty"},
		{File: "gateway.yaml", Line: 9, Field: "routes[0] (orders): timeout", Msg: "must be positive"},
	}}
	for _, c := range []struct {
		name   string
		err    error
		code   int
		status string
		errors []any
	}{
		{"ok", nil, 200, "reloaded", nil},
		{"config problems", problems, 400, "failed", []any{
			"gateway.yaml:3: listen: ${PORT} is unset or empty",
			"gateway.yaml:9: routes[0] (orders): timeout: must be positive",
		}},
		{"wrapped config problems", errors.Join(problems), 400, "failed", []any{
			"gateway.yaml:3: listen: ${PORT} is unset or empty",
			"gateway.yaml:9: routes[0] (orders): timeout: must be positive",
		}},
		{"other error", errors.New("tls: open /etc/tls/tls.crt: no such file or directory"), 400, "failed", []any{
			"tls: open /etc/tls/tls.crt: no such file or directory",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &stubReloader{err: c.err}
			srv := reloadServer(t, tok, r)
			if code, _ := postReload(t, srv.URL, ""); code != http.StatusUnauthorized || r.calls != 0 {
				t.Fatalf("without the token: %d, %d reloads", code, r.calls)
			}
			code, body := postReload(t, srv.URL, "Bearer "+tok)
			if code != c.code || body["status"] != c.status || r.calls != 1 {
				t.Fatalf("POST /admin/reload: %d %v (%d reloads)", code, body, r.calls)
			}
			got, _ := body["errors"].([]any)
			if len(got) != len(c.errors) {
				t.Fatalf("errors %v, want %v", got, c.errors)
			}
			for i := range got {
				if got[i] != c.errors[i] {
					t.Errorf("errors[%d] = %v, want %v", i, got[i], c.errors[i])
				}
			}
		})
	}
}

// Only POST reloads; without a Reloader the call says it is not available.
func TestReloadMethodAndAvailability(t *testing.T) {
	r := &stubReloader{}
	srv := reloadServer(t, "", r)
	resp, err := http.Get(srv.URL + "/admin/reload")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || r.calls != 0 {
		t.Errorf("GET /admin/reload: %d, %d reloads", resp.StatusCode, r.calls)
	}
	if code, _ := postReload(t, reloadServer(t, "", nil).URL, ""); code != http.StatusNotImplemented {
		t.Errorf("without a Reloader: %d", code)
	}
}
