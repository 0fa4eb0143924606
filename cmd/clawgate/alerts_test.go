package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/server"
)

// Regression: the gateway read the PagerDuty routing key from the
// undocumented variable CLAWGATE_ALERT_ROUTING_KEY. It sends the key named
// by alerts.pagerduty_routing_key_env, and nothing from the old variable.
func TestServeSendsTheConfiguredPagerDutyRoutingKey(t *testing.T) {
	t.Setenv("CLAWGATE_ALERT_ROUTING_KEY", "legacy-routing-key")
	keys := make(chan string, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			RoutingKey string `json:"routing_key"`
		}
		json.NewDecoder(r.Body).Decode(&ev)
		keys <- ev.RoutingKey
		w.WriteHeader(http.StatusAccepted)
	}))
	defer receiver.Close()
	up := &http.Server{Handler: echoHandler(discardLogger())}
	uln, _ := net.Listen("tcp", "127.0.0.1:0")
	go up.Serve(uln)
	defer up.Close()

	y := strings.NewReplacer("%UP%", "http://"+uln.Addr().String()).Replace(`
listen: "127.0.0.1:0"
admin: { listen: "" }
alerts: { max_attempts: 1, webhook_url_env: ALERT_URL, pagerduty_routing_key_env: PD_ROUTING_KEY }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UP%
    verify: { scheme: none }
`)
	env := map[string]string{"ALERT_URL": receiver.URL, "PD_ROUTING_KEY": "configured-routing-key"}
	cfg, err := config.Parse([]byte(y), "gateway.yaml", t.TempDir(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	inst, err := server.Start(cfg, server.Options{Logger: discardLogger(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Shutdown(5 * time.Second)

	// Two deliveries of one key: one more than max_attempts.
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+inst.Addr().String()+"/webhook/order", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "evt_storm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	select {
	case got := <-keys:
		if got != "configured-routing-key" {
			t.Fatalf("alert carries routing_key %q, want the value of PD_ROUTING_KEY", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no alert was posted")
	}
}
