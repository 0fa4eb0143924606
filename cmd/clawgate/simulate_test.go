package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/server"
)

const simQueueConfig = `
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
store: { backend: memory }
routes:
  - name: hooks
    match: { path: /webhook/hook }
    upstream: %UPSTREAM%
    delivery: queue
    retry: { max_attempts: 2, initial: 10ms, max: 10ms }
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`

// startSimGateway runs the gateway in-process in front of upstream (or a
// closed port when upstream is nil) and returns its URL, its admin URL
// and the config file simulate loads.
func startSimGateway(t *testing.T, upstream http.Handler) (gwURL, adminURL, cfgPath string) {
	t.Helper()
	up := "http://" + closedAddr(t)
	if upstream != nil {
		srv := httptest.NewServer(upstream)
		t.Cleanup(srv.Close)
		up = srv.URL
	}
	text := strings.ReplaceAll(simQueueConfig, "%UPSTREAM%", up)
	cfgPath = filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := server.Start(cfg, server.Options{Logger: discardLogger(), Registry: prometheus.NewRegistry(), Version: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Shutdown(5 * time.Second) })
	return "http://" + inst.Addr().String(), "http://" + inst.AdminAddr().String(), cfgPath
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Regression: on a queue route simulate printed "202 forwarded" and
// "protection confirmed: the event reached the upstream once" for an
// event the upstream rejected (dead-lettered, rejected:422). A 202 reads
// queued, and simulate follows the key to finished or dead_lettered.
func TestSimulateQueueRouteFollowsTheKey(t *testing.T) {
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "")
	for _, tt := range []struct {
		name     string
		status   int
		code     int
		want     []string
		wantNone string
	}{
		{"dead_lettered", http.StatusUnprocessableEntity, 1, []string{
			"1        202     queued", "1 queued, 2 replayed, 0 in flight, 0 refused\n",
			"dead_lettered: event ", "after 1 attempt; clawgate dlq list hooks shows why\n",
			"protection NOT confirmed: the event was dead-lettered, not delivered\n",
		}, "protection confirmed"},
		{"finished", http.StatusOK, 0, []string{
			"1        202     queued", "1 queued, 2 replayed, 0 in flight, 0 refused\n",
			"finished: the upstream answered 200 after 1 attempt\n",
			"protection confirmed: the event was delivered to the upstream once\n",
		}, "forwarded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gw, adm, cfgPath := startSimGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
			}))
			code, out, errOut := runCmd(t, "simulate", "-url", gw+"/webhook/hook", "-route", "hooks", "-times", "3",
				"-admin", adm, "-wait", "20s", "-config", cfgPath)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s%s", w, out, errOut)
				}
			}
			if strings.Contains(out, tt.wantNone) {
				t.Errorf("output has %q:\n%s", tt.wantNone, out)
			}
		})
	}
}

// Regression: simulate called the gateway's 502 "refused" without saying
// that the upstream was unreachable.
func TestSimulateSaysTheUpstreamIsUnreachable(t *testing.T) {
	gw, _, cfgPath := startSimGateway(t, nil)
	code, out, errOut := runCmd(t, "simulate", "-url", gw+"/webhook/order", "-route", "orders", "-times", "2", "-config", cfgPath)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, w := range []string{"1        502     unreachable", "0 refused, 2 upstream unreachable\n",
		"the gateway answered 502 upstream unreachable\n", "upstream unreachable: the gateway could not connect to route orders's upstream http://127.0.0.1:"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s%s", w, out, errOut)
		}
	}
}

// clawgate reload POSTs /admin/reload: exit 0 when reloaded; exit 1 with
// each problem, file and line, when the new config is refused (the
// running one is kept and still serves).
func TestReloadCommand(t *testing.T) {
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "")
	gw, adm, cfgPath := startSimGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	if code, out, errOut := runCmd(t, "reload", "-admin", adm); code != 0 || out != "config reloaded ("+adm+")\n" || errOut != "" {
		t.Fatalf("reload: exit %d %q %q", code, out, errOut)
	}
	if err := os.WriteFile(cfgPath, []byte("routes:\n  - name: x\n    bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "reload", "-admin", adm)
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "clawgate reload: the new config was refused; the gateway keeps running the old one:\n  "+cfgPath+":3: ") {
		t.Fatalf("broken config: exit %d %q %q", code, out, errOut)
	}
	// The old config still serves.
	resp, err := http.Post(gw+"/webhook/order", "application/json", strings.NewReader(`{"id":"evt_after_reload"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a refused reload: %d", resp.StatusCode)
	}
	if code, _, errOut := runCmd(t, "reload", "-admin", "http://"+closedAddr(t)); code != 1 || !strings.Contains(errOut, "cannot reach the admin API") {
		t.Fatalf("unreachable admin: exit %d %q", code, errOut)
	}
	if code, _, _ := runCmd(t, "reload", "-admin", "ftp://x"); code != 2 {
		t.Fatalf("bad -admin: exit %d", code)
	}
}

// Every state-changing admin request of the CLI carries the token,
// Content-Type: application/json and X-Clawgate-Admin: 1 (a browser
// cannot send those across origins without a preflight).
func TestReloadSendsTheAdminHeaders(t *testing.T) {
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "reload-token")
	var got http.Header
	var method, path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, method, path = r.Header.Clone(), r.Method, r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"reloaded"}`))
	}))
	defer srv.Close()
	if code, _, errOut := runCmd(t, "reload", "-admin", srv.URL); code != 0 {
		t.Fatalf("exit %d %q", code, errOut)
	}
	if method != http.MethodPost || path != "/admin/reload" || got.Get("Authorization") != "Bearer reload-token" ||
		got.Get("Content-Type") != "application/json" || got.Get("X-Clawgate-Admin") != "1" {
		t.Fatalf("%s %s %v", method, path, got)
	}
}
