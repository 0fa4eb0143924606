package metrics

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHitRatioIsHitsOverHitsAndMisses(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	r := m.Route("orders")
	m.Route("idle") // no keyed delivery yet: ratio 0, not NaN
	for i := 0; i < 3; i++ {
		r.CacheHit()
	}
	r.CacheMiss()
	want := `
# HELP idempotency_cache_hit_ratio Share of keyed deliveries answered from the in-process window: hits / (hits + misses).
# TYPE idempotency_cache_hit_ratio gauge
idempotency_cache_hit_ratio{route="idle"} 0
idempotency_cache_hit_ratio{route="orders"} 0.75
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "idempotency_cache_hit_ratio"); err != nil {
		t.Fatal(err)
	}
	// A reload builds the route's series again; the ratio keeps counting.
	m.Route("orders").CacheMiss()
	if got := testutil.ToFloat64(m.CacheMisses.WithLabelValues("orders")); got != 2 {
		t.Fatalf("misses %v", got)
	}
}

func TestSeriesExistBeforeTheFirstEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Route("orders")
	for _, name := range []string{"webhook_store_errors_total", "webhook_attempts_exceeded_total",
		"webhook_lock_released_total", "webhook_duplicate_requests_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series (%v), want them at 0 from the start", name, n, err)
		}
	}
}

func TestDoneCountsCodesAndOutcomes(t *testing.T) {
	m := New(prometheus.NewRegistry())
	r := m.Route("orders")
	r.Done(200, OutcomeReplayed, 0.001)
	r.Done(418, OutcomeForwarded, 0.002) // a code outside the pre-built set
	r.Duplicate("cache", OutcomeReplayed)
	r.SignatureVerified("k1")
	r.SignatureVerified("k1")
	for _, c := range []struct {
		got  prometheus.Collector
		want float64
	}{
		{m.Requests.WithLabelValues("orders", "200"), 1},
		{m.Requests.WithLabelValues("orders", "418"), 1},
		{m.Duplicates.WithLabelValues("orders", "cache", "replayed"), 1},
		{m.SignatureVerified.WithLabelValues("orders", "k1"), 2},
	} {
		if v := testutil.ToFloat64(c.got); v != c.want {
			t.Errorf("got %v, want %v", v, c.want)
		}
	}
}

// seriesByRoute counts the lines of each route in the text exposition
// (a histogram: its buckets, +Inf, _sum and _count).
func seriesByRoute(t *testing.T, reg *prometheus.Registry) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n := 1
			if h := m.GetHistogram(); h != nil {
				n = len(h.GetBucket()) + 3 // + the implicit +Inf, _sum, _count
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					out[l.GetValue()] += n
				}
			}
		}
	}
	return out
}

func TestIdleRouteHasAtMost40Series(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Route("orders")
	m.Route("refunds") // a queue route: its stats and DLQ fill as the refresher sets them
	m.SetQueueStats("refunds", 0, 0, 0)
	m.SetDLQFill("refunds", 0)
	m.SetKafkaLag("refunds", 0)
	for route, n := range seriesByRoute(t, reg) {
		if n > 40 {
			t.Errorf("idle route %s: %d series, want at most 40", route, n)
		}
	}
	for _, name := range []string{"webhook_processing_duration_seconds", "webhook_upstream_duration_seconds",
		"webhook_queue_delivery_delay_seconds"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("%s: %d series (%v) before the first delivery", name, n, err)
		}
	}
}

func TestHistogramsComeWithTheFirstObservation(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	r := m.Route("orders")
	m.Route("idle")
	r.Done(200, OutcomeForwarded, 0.01)
	r.Upstream(0.005)
	r.Done(200, OutcomeForwarded, 0.02)
	want := `
# HELP webhook_processing_duration_seconds Time from a delivery's arrival to its answer, by outcome.
# TYPE webhook_processing_duration_seconds histogram
`
	var b strings.Builder
	b.WriteString(want)
	for _, le := range []string{"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "+Inf"} {
		n := 2
		switch le {
		case "0.0005", "0.001", "0.0025", "0.005":
			n = 0
		case "0.01":
			n = 1
		}
		fmt.Fprintf(&b, "webhook_processing_duration_seconds_bucket{outcome=\"forwarded\",route=\"orders\",le=%q} %d\n", le, n)
	}
	b.WriteString("webhook_processing_duration_seconds_sum{outcome=\"forwarded\",route=\"orders\"} 0.03\n")
	b.WriteString("webhook_processing_duration_seconds_count{outcome=\"forwarded\",route=\"orders\"} 2\n")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(b.String()), "webhook_processing_duration_seconds"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "webhook_upstream_duration_seconds"); err != nil || n != 1 {
		t.Fatalf("webhook_upstream_duration_seconds: %d series (%v), want orders' only", n, err)
	}
}

func TestDoneDoesNoLabelLookupsOnceBound(t *testing.T) {
	r := New(prometheus.NewRegistry()).Route("orders")
	// AllocsPerRun runs the function once before measuring: that first
	// run binds the series.
	if n := testing.AllocsPerRun(100, func() {
		r.Done(200, OutcomeForwarded, 0.001)
		r.Done(418, OutcomeReplayed, 0.001)
		r.Upstream(0.001)
		r.Duplicate("cache", OutcomeReplayed)
	}); n != 0 {
		t.Fatalf("%v allocations per delivery", n)
	}
}

func TestRouteSeriesBoundConcurrently(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(reg).Route("orders")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := 200; c < 210; c++ {
				r.Done(c, OutcomeForwarded, 0.001)
			}
		}()
	}
	wg.Wait()
	mfs, _ := reg.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "webhook_requests_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	if total != 80 {
		t.Fatalf("webhook_requests_total sums to %v, want 80", total)
	}
}
