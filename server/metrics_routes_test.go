package server

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
)

// maxIdleRouteSeries bounds the series a route exports before its first
// delivery: with 1,000 routes /metrics stays a few MB per scrape.
const maxIdleRouteSeries = 40

// routesYAML is a config with exact sync routes (/x/0, ...), prefix sync
// routes (/p/0/, ...) and exact queue routes (/q/0, ...) on the memory
// store, all forwarding to upstream.
func routesYAML(exact, prefix, queued int, upstream string) string {
	var b strings.Builder
	b.WriteString("listen: \"127.0.0.1:0\"\nadmin: { listen: \"127.0.0.1:0\" }\nroutes:\n")
	route := func(name, match, extra string) {
		fmt.Fprintf(&b, "  - name: %s\n    match: { %s }\n    upstream: %s\n    idempotency: { key: [\"json:id\"] }\n    verify: { scheme: none }\n%s",
			name, match, upstream, extra)
	}
	for i := 0; i < exact; i++ {
		route(fmt.Sprintf("x%d", i), fmt.Sprintf("path: /x/%d", i), "")
	}
	for i := 0; i < prefix; i++ {
		route(fmt.Sprintf("p%d", i), fmt.Sprintf("path_prefix: /p/%d/", i), "")
	}
	for i := 0; i < queued; i++ {
		route(fmt.Sprintf("q%d", i), fmt.Sprintf("path: /q/%d", i), "    delivery: queue\n    workers: 1\n")
	}
	return b.String()
}

// startRoutes starts a gateway on y (on the test's front door) with its
// own registry.
func startRoutes(t *testing.T, y string) (*Server, *prometheus.Registry) {
	t.Helper()
	cfg, err := config.Parse([]byte(doorYAML(t, y)), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: reg, Version: "metrics-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(time.Second) })
	return s, reg
}

// seriesOf is the number of lines a sample takes in the text exposition:
// 1 for a counter or gauge, buckets + _sum + _count for a histogram.
func seriesOf(m *dto.Metric) int {
	h := m.GetHistogram()
	if h == nil {
		return 1
	}
	n := len(h.GetBucket()) + 2
	if b := h.GetBucket(); len(b) == 0 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) {
		n++ // the +Inf bucket, implicit in the protobuf form
	}
	return n
}

func labelOf(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// seriesByRoute counts the series of each route label in reg.
func seriesByRoute(t *testing.T, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if r, ok := labelOf(m, "route"); ok {
				out[r] += seriesOf(m)
			}
		}
	}
	return out
}

// sample finds the sample of name whose labels include want; ok false
// when there is none.
func sample(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (*dto.Metric, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if got, ok := labelOf(m, k); !ok || got != v {
					continue next
				}
			}
			return m, true
		}
	}
	return nil, false
}

// waitQueueStats waits for the first stats of every queue route (their
// gauges exist from then on), at most 10 s.
func waitQueueStats(t *testing.T, reg prometheus.Gatherer, routes []string) {
	t.Helper()
	for _, r := range routes {
		eventually.Within(t, 10*time.Second, func() bool {
			_, ok := sample(t, reg, "webhook_queue_depth", map[string]string{"route": r})
			return ok
		}, func() string { return "route " + r + ": no webhook_queue_depth" })
	}
}

// increaseRule finds increase(name{matchers}[...]) in the alert rules.
var increaseRule = regexp.MustCompile(`increase\(([a-z_]+)(\{[^}]*\})?\[`)
var matcher = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)

func TestIdleRoutesExportAtMost40SeriesWithAlertSeriesAtZero(t *testing.T) {
	up := newQUpstream(t)
	_, reg := startRoutes(t, routesYAML(20, 5, 5, up.srv.URL))
	var sync, queued []string
	for i := 0; i < 20; i++ {
		sync = append(sync, fmt.Sprintf("x%d", i))
	}
	for i := 0; i < 5; i++ {
		sync = append(sync, fmt.Sprintf("p%d", i))
		queued = append(queued, fmt.Sprintf("q%d", i))
	}
	waitQueueStats(t, reg, queued)

	counts := seriesByRoute(t, reg)
	t.Logf("series of an idle route: %d (sync, exact), %d (sync, prefix), %d (queue)", counts["x0"], counts["p0"], counts["q0"])
	for _, r := range append(append([]string{}, sync...), queued...) {
		if n := counts[r]; n == 0 || n > maxIdleRouteSeries {
			t.Errorf("idle route %s exports %d series, want 1 to %d", r, n, maxIdleRouteSeries)
		}
	}
	if len(counts) != len(sync)+len(queued) {
		t.Errorf("series of %d routes, want %d: %v", len(counts), len(sync)+len(queued), counts)
	}

	// zero asserts that the series exists and reads 0.
	zero := func(what, name string, labels map[string]string) {
		t.Helper()
		m, ok := sample(t, reg, name, labels)
		if !ok {
			t.Errorf("%s: no %s%v before the first delivery", what, name, labels)
			return
		}
		if v := m.GetCounter().GetValue() + m.GetGauge().GetValue(); v != 0 {
			t.Errorf("%s: %s%v = %v, want 0", what, name, labels, v)
		}
	}
	// Every counter an alert takes increase() of exists at 0, so that its
	// first event is an increase: per route (queue-only ones on queue
	// routes), or once for the instance.
	rules, err := os.ReadFile("../deploy/rules/clawgate.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	perRoute := map[string]bool{"webhook_attempts_exceeded_total": true, "webhook_finish_deferred_total": true}
	queueOnly := map[string]bool{"webhook_queue_reclaimed_total": true}
	global := map[string]bool{"clawgate_config_reloads_total": true}
	found := 0
	for _, mm := range increaseRule.FindAllStringSubmatch(string(rules), -1) {
		found++
		name, labels := mm[1], map[string]string{}
		for _, l := range matcher.FindAllStringSubmatch(mm[2], -1) {
			labels[l[1]] = l[2]
		}
		routes := []string{}
		switch {
		case perRoute[name]:
			routes = append(append(routes, sync...), queued...)
		case queueOnly[name]:
			routes = queued
		case global[name]:
			zero("increase() in the alert rules", name, labels)
			continue
		default:
			t.Errorf("the alert rules take increase(%s): say here whether its series exist per route, per queue route or per instance", name)
			continue
		}
		for _, r := range routes {
			l := map[string]string{"route": r}
			for k, v := range labels {
				l[k] = v
			}
			zero("increase() in the alert rules", name, l)
		}
	}
	if found < 4 {
		t.Fatalf("found %d increase() in the alert rules, want at least 4", found)
	}
	// The rest the rules and the dashboard need before traffic: the
	// gateway's own 5xx (Upstream5xxRatio; the dashboard's route variable
	// lists the routes of webhook_requests_total), the store errors
	// (StoreErrors), and the queue routes' gauges (the DLQ and lag alerts).
	for _, r := range append(append([]string{}, sync...), queued...) {
		for _, code := range []string{"500", "502", "503", "504"} {
			zero("webhook_requests_total", "webhook_requests_total", map[string]string{"route": r, "code": code})
		}
		zero("webhook_signature_replays_total", "webhook_signature_replays_total", map[string]string{"route": r})
	}
	for _, op := range []string{"claim", "finish", "release"} {
		zero("StoreErrors", "webhook_store_errors_total", map[string]string{"op": op})
	}
	for _, r := range queued {
		for _, g := range []string{"dead_letter_queue_size", "dead_letter_queue_fill_ratio", "webhook_queue_depth", "webhook_queue_lag_seconds"} {
			zero("queue gauges", g, map[string]string{"route": r})
		}
	}
	// Histograms come with a route's first delivery.
	for _, r := range append(append([]string{}, sync...), queued...) {
		for _, h := range []string{"webhook_processing_duration_seconds", "webhook_upstream_duration_seconds", "webhook_queue_delivery_delay_seconds"} {
			if _, ok := sample(t, reg, h, map[string]string{"route": r}); ok {
				t.Errorf("idle route %s has a %s series", r, h)
			}
		}
	}
}

func TestHistogramsAppearOnARoutesFirstDelivery(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		up := newQUpstream(t)
		s, reg := startRoutes(t, routesYAML(2, 0, 1, up.srv.URL))
		waitQueueStats(t, reg, []string{"q0"})
		count := func(name string, labels map[string]string) uint64 {
			m, ok := sample(t, reg, name, labels)
			if !ok {
				return 0
			}
			return m.GetHistogram().GetSampleCount()
		}
		for _, p := range []struct{ path, id string }{{"/x/0", "e1"}, {"/q/0", "e2"}} {
			if a := qPost("http://"+s.Addr().String()+p.path, p.id); a.err != nil || a.status/100 != 2 {
				t.Fatalf("POST %s: %d %v %s", p.path, a.status, a.err, a.raw)
			}
		}
		for _, c := range []struct {
			name   string
			labels map[string]string
		}{
			{"webhook_processing_duration_seconds", map[string]string{"route": "x0", "outcome": "forwarded"}},
			{"webhook_upstream_duration_seconds", map[string]string{"route": "x0"}},
			{"webhook_processing_duration_seconds", map[string]string{"route": "q0", "outcome": "queued"}},
		} {
			if n := count(c.name, c.labels); n != 1 {
				t.Errorf("%s%v: %d observations after one delivery, want 1", c.name, c.labels, n)
			}
		}
		// The queued event's delay is observed once the worker delivered it.
		eventually.Within(t, 10*time.Second, func() bool {
			return count("webhook_queue_delivery_delay_seconds", map[string]string{"route": "q0"}) == 1
		}, func() string {
			return "webhook_queue_delivery_delay_seconds{route=q0}: not one observation after the delivery"
		})
		// Only the outcomes that happened, only on the routes they happened.
		for _, c := range []struct {
			name   string
			labels map[string]string
		}{
			{"webhook_processing_duration_seconds", map[string]string{"route": "x0", "outcome": "replayed"}},
			{"webhook_processing_duration_seconds", map[string]string{"route": "x1"}},
			{"webhook_upstream_duration_seconds", map[string]string{"route": "x1"}},
		} {
			if _, ok := sample(t, reg, c.name, c.labels); ok {
				t.Errorf("%s%v exists without such a delivery", c.name, c.labels)
			}
		}
	})
}

// TestMetricsScrapeSize1100Routes measures /metrics of an idle gateway with
// 1,000 exact and 100 prefix routes over loopback (docs/benchmarks.md,
// "Metrics per idle route"; go test -run TestMetricsScrapeSize -v prints
// the figures), and has promtool check it.
func TestMetricsScrapeSize1100Routes(t *testing.T) {
	if testing.Short() {
		t.Skip("1,100 routes")
	}
	up := newQUpstream(t)
	s, reg := startRoutes(t, routesYAML(1000, 100, 0, up.srv.URL))
	t0 := time.Now()
	resp, err := http.Get("http://" + s.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(t0)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	lines, series := 0, 0
	for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		lines++
		if !strings.HasPrefix(l, "#") {
			series++
		}
	}
	counts := seriesByRoute(t, reg)
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	t.Logf("1,000 exact + 100 prefix routes, idle: /metrics %d lines, %d series, %d bytes, scraped in %v; %d routes, at most %d series per route",
		lines, series, len(body), took.Round(time.Millisecond), len(counts), most)
	if out := os.Getenv("CLAWGATE_METRICS_OUT"); out != "" {
		os.WriteFile(out, body, 0o644)
	}
	if len(counts) != 1100 || most > maxIdleRouteSeries {
		t.Errorf("%d routes export series, at most %d each; want 1100, at most %d", len(counts), most, maxIdleRouteSeries)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run `make test` (it installs Debian's prometheus package) or apt-get install -y prometheus")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
