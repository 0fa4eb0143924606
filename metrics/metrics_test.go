package metrics

import (
	"strings"
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
