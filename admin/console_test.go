package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

func consoleHandler(tok string) http.Handler {
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}}}
	return admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}),
		Gateway: stubGateway{cfg}, Token: tok,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
}

// consoleGet sends method target (kept as written: no cleaning) with Host
// host to h.
func consoleGet(h http.Handler, method, target, host string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.Host = host
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

var consoleHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"Cache-Control":           "no-store",
}

// The console's files and pages: every page address answers index.html
// (deep links survive a reload), its files answer with their type, and a
// path with a dot-segment, an empty segment or an unknown extension is
// 404; every answer, refusals included, carries the strict headers.
func TestConsolePathsAndHeaders(t *testing.T) {
	h := consoleHandler("")
	index := consoleGet(h, "GET", "/ui/", "127.0.0.1:9090").Body.String()
	if !strings.Contains(index, `<script type="module" src="/ui/app.js">`) {
		t.Fatalf("/ui/ is not the console's index.html:\n%s", index)
	}
	for _, tc := range []struct {
		name, method, target string
		code                 int
		ctype                string
		index                bool
	}{
		{"overview", "GET", "/ui/", 200, "text/html; charset=utf-8", true},
		{"route page", "GET", "/ui/routes/orders", 200, "text/html; charset=utf-8", true},
		{"dlq page", "GET", "/ui/routes/orders/dlq", 200, "text/html; charset=utf-8", true},
		{"key page", "GET", "/ui/keys/orders/evt_1", 200, "text/html; charset=utf-8", true},
		{"key with a dot and an escaped slash", "GET", "/ui/keys/orders/a%2Fb.exe", 200, "text/html; charset=utf-8", true},
		{"key with markup", "GET", "/ui/keys/orders/%3Cimg%20src=x%20onerror=alert(1)%3E", 200, "text/html; charset=utf-8", true},
		{"unknown page", "GET", "/ui/nothing/here", 200, "text/html; charset=utf-8", true},
		{"HEAD", "HEAD", "/ui/routes/orders", 200, "text/html; charset=utf-8", false},
		{"script", "GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", false},
		{"module", "GET", "/ui/api.js", 200, "text/javascript; charset=utf-8", false},
		{"style", "GET", "/ui/style.css", 200, "text/css; charset=utf-8", false},
		{"dot-dot", "GET", "/ui/../admin/routes", 404, "", false},
		{"dot-dot at the end", "GET", "/ui/routes/..", 404, "", false},
		{"escaped dot-dot", "GET", "/ui/%2e%2e/admin/routes", 404, "", false},
		{"dot", "GET", "/ui/./app.js", 404, "", false},
		{"dot-dot in a key page", "GET", "/ui/keys/orders/../../app.js", 404, "", false},
		{"empty segment", "GET", "/ui//app.js", 404, "", false},
		{"unknown extension", "GET", "/ui/x.exe", 404, "", false},
		{"missing file", "GET", "/ui/missing.js", 404, "", false},
		{"go source", "GET", "/ui/console.go", 404, "", false},
		{"POST", "POST", "/ui/", 405, "", false},
		{"DELETE", "DELETE", "/ui/routes/orders", 405, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := consoleGet(h, tc.method, tc.target, "127.0.0.1:9090")
			if w.Code != tc.code {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.target, w.Code, tc.code, w.Body)
			}
			for k, v := range consoleHeaders {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if tc.ctype != "" && w.Header().Get("Content-Type") != tc.ctype {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), tc.ctype)
			}
			if tc.index && w.Body.String() != index {
				t.Errorf("not index.html: %.200s", w.Body)
			}
		})
	}
	if w := consoleGet(h, "GET", "/ui", "127.0.0.1:9090"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/ui/" {
		t.Errorf("/ui: %d to %q, want 301 to /ui/", w.Code, w.Header().Get("Location"))
	}
}

// Without an admin token the console, like /admin/, answers only a
// loopback Host: a page that rebinds its domain to 127.0.0.1 cannot load
// it. With a token the files are served to any Host (they hold no data;
// every API call the pages make needs the token).
func TestConsoleHostCheck(t *testing.T) {
	for _, tc := range []struct {
		name, token, host string
		code              int
	}{
		{"no token, 127.0.0.1", "", "127.0.0.1:9090", 200},
		{"no token, localhost", "", "localhost:9090", 200},
		{"no token, [::1]", "", "[::1]:9090", 200},
		{"no token, rebound name", "", "evil.example:9090", 403},
		{"no token, LAN address", "", "192.168.1.10:9090", 403},
		{"token, any host", "s3cret", "gateway.internal:9090", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := consoleHandler(tc.token)
			for _, target := range []string{"/ui/", "/ui/app.js", "/ui/keys/orders/k"} {
				w := consoleGet(h, "GET", target, tc.host)
				if w.Code != tc.code {
					t.Errorf("GET %s Host %s: %d, want %d", target, tc.host, w.Code, tc.code)
				}
				if got := w.Header().Get("Content-Security-Policy"); got != consoleHeaders["Content-Security-Policy"] {
					t.Errorf("GET %s: CSP %q", target, got)
				}
			}
			if tc.token != "" {
				// The files need no token; the API still does.
				if w := consoleGet(h, "GET", "/admin/routes", tc.host); w.Code != http.StatusUnauthorized {
					t.Errorf("GET /admin/routes without the token: %d, want 401", w.Code)
				}
			}
		})
	}
}
