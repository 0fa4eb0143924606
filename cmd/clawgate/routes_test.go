package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// routesEnv is a real admin handler on loopback with a queue route
// ("hooks", on the memory queue) and a sync one with a breaker
// ("orders"), and the routes' control state in memory.
func routesEnv(t *testing.T) (url string, gate *control.Gate) {
	t.Helper()
	t.Setenv("CLAWGATE_ADMIN_TOKEN", dlqToken)
	mgr := queue.New(queue.Options{Backend: queue.NewMemory(), Sender: &dlqSender{}, Metrics: dlqNopMetrics{}, Log: discardLogger()})
	if err := mgr.Apply(context.Background(), []queue.Route{{Name: "hooks", Workers: 1, MaxDepth: 100,
		Retry: queue.Retry{MaxAttempts: 2, Initial: time.Hour, Max: time.Hour}, Retention: time.Hour, LockTTL: 30 * time.Second, Shards: 1}}); err != nil {
		t.Fatal(err)
	}
	gate = control.NewGate(control.NewMemory())
	cfg := &config.Config{Routes: []config.Route{
		{Name: "orders", Breaker: config.Breaker{Failures: 3, Cooldown: time.Minute}},
		{Name: "hooks", Delivery: config.DeliveryQueue},
	}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}), Gateway: stubGateway{cfg},
		Queue: mgr, Controls: gate, Token: dlqToken, Logger: discardLogger(),
	}))
	t.Cleanup(func() { srv.Close(); mgr.Close(time.Second) })
	return srv.URL, gate
}

// clawgate routes lists every route; pause and resume change a queue
// route for every instance (the shared state), say when nothing changed,
// and refuse a sync route, an unknown one and a missing ROUTE.
func TestRoutesCommand(t *testing.T) {
	url, gate := routesEnv(t)
	runCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"routes"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, _ := runCmd("-admin", url)
	if code != 0 || !strings.Contains(out, "ROUTE") || !strings.Contains(out, "hooks") || !strings.Contains(out, "orders") {
		t.Fatalf("routes: %d\n%s", code, out)
	}
	if !strings.Contains(out, "closed") {
		t.Errorf("routes: the sync route's breaker state is missing:\n%s", out)
	}
	code, out, errs := runCmd("pause", "-admin", url, "hooks")
	if code != 0 || !strings.Contains(out, "route hooks: paused since") {
		t.Fatalf("routes pause: %d %q %q", code, out, errs)
	}
	if p, _ := gate.Paused(context.Background(), "hooks"); p.IsZero() {
		t.Fatal("routes pause did not pause the route in the shared state")
	}
	if code, out, _ := runCmd("pause", "-admin", url, "hooks"); code != 0 || !strings.Contains(out, "(it already was)") {
		t.Fatalf("routes pause again: %d %q", code, out)
	}
	if code, out, _ := runCmd("-admin", url); code != 0 || !strings.Contains(out, "since ") {
		t.Fatalf("routes while paused: %d\n%s", code, out)
	}
	if code, out, errs := runCmd("resume", "-admin", url, "hooks"); code != 0 || !strings.Contains(out, "route hooks: running") {
		t.Fatalf("routes resume: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pause", "-admin", url, "orders"}, 1, `route "orders" is not a delivery: queue route`},
		{[]string{"resume", "-admin", url, "nope"}, 1, `unknown route "nope"`},
		{[]string{"pause", "-admin", url}, 2, "want one ROUTE"},
		{[]string{"stop", "-admin", url, "hooks"}, 2, `unknown verb "stop"`},
	} {
		code, _, errs := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("routes %v: %d %q, want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "wrong")
	if code, _, errs := runCmd("-admin", url); code != 1 || !strings.Contains(errs, "refused the token") {
		t.Errorf("routes with a wrong token: %d %q", code, errs)
	}
}
