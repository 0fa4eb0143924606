package admin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
)

// liveMetrics runs a memory-store gateway through forwarded, replayed, 401,
// 409-free and 422 traffic and returns its /metrics text.
func liveMetrics(t *testing.T) string {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	y := strings.NewReplacer("%UPSTREAM%", up.URL).Replace(`
listen: "127.0.0.1:0"
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    verify: { scheme: hmac, header: X-Signature, secrets: [{ id: k1, secret: s3cret }] }
`)
	cfg, err := config.Parse([]byte(y), "t.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	// As server.Start wires them: the build info, the memory store's size,
	// and the store timed.
	m.SetBuildInfo("test")
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 1000})
	m.ObserveStoreBytes(mem.Bytes)
	st := store.NewTimed(mem, func(op string) store.Observer { return m.StoreObserver(op) })
	// The delivery queue's series exist only for `delivery: queue` routes,
	// from their first stats: export them as a queue route's refresher would,
	// and the delay histogram as its first delivered event would.
	m.SetQueueStats("orders", 0, 0, 0)
	m.SetDLQFill("orders", 0)
	m.QueueDelay("orders", 0.01)
	// The route controls' series, as the server's refresh, a breaker
	// transition and a pace wait make them.
	m.SetRouteControl("orders", true, false, true, false)
	m.BreakerTransition("orders", "open")
	m.PaceWait("orders", 0.05)
	// The order series, as an ordered route's first stats make them.
	m.SetOrderWaiting("orders", 0)
	gw := proxy.New(cfg, proxy.Options{Store: st, Metrics: m, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	c := &cluster{t: t, nodes: []*node{{gw: srv}}}
	c.deliver(0, "k1")
	c.deliver(0, "k1")
	req, _ := http.NewRequest("POST", srv.URL+"/webhook/order", strings.NewReader("{}"))
	req.Header.Set("X-Signature", "00")
	http.DefaultClient.Do(req)
	adm := httptest.NewServer(admin.Handler(admin.Options{Gatherer: reg, Store: st, Gateway: gw}))
	defer adm.Close()
	resp, err := http.Get(adm.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestPromtoolAcceptsLiveMetrics(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run `make test` (it installs Debian's prometheus package) or apt-get install -y prometheus")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(liveMetrics(t))
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// identifier finds PromQL identifiers; metricNames keeps clawgate's own
// (recording rules, which contain ':', are not exported metrics).
var identifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

func metricNames(promql string) []string {
	var out []string
	for _, id := range identifier.FindAllString(promql, -1) {
		if strings.Contains(id, ":") {
			continue
		}
		for _, p := range []string{"webhook_", "idempotency_", "dead_letter_", "clawgate_"} {
			if strings.HasPrefix(id, p) {
				out = append(out, id)
			}
		}
	}
	return out
}

func TestDashboardAndRulesUseLiveMetricNames(t *testing.T) {
	live := liveMetrics(t)
	exported := map[string]bool{}
	for _, line := range strings.Split(live, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			f := strings.Fields(line)
			exported[f[2]] = true
			if f[3] == "histogram" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					exported[f[2]+s] = true
				}
			}
		}
	}
	dash, err := os.ReadFile("../deploy/grafana/dashboards/clawgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	queries := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			for _, name := range metricNames(tg.Expr) {
				if !exported[name] {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, name)
				}
			}
		}
	}
	if queries < 10 {
		t.Fatalf("dashboard has only %d queries", queries)
	}
	rules, err := os.ReadFile("../deploy/rules/clawgate.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range metricNames(string(rules)) {
		if !exported[name] {
			t.Errorf("alert rules use %s, which /metrics does not export", name)
		}
	}
}
