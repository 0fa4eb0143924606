package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRefusedCountsByReasonFromZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	r := m.Route("orders")
	m.Route("idle")
	r.Refused(RefusedIPNotAllowed)
	r.Refused(RefusedRateLimited)
	r.Refused(RefusedRateLimited)
	r.Done(403, OutcomeRejected, 0.001)
	r.Done(429, OutcomeRejected, 0.001)
	want := `
# HELP webhook_refused_total Deliveries refused before their body was read, by reason: ip_not_allowed (403, client not in the route's allow_ips), rate_limited (429, past the route's rate_limit).
# TYPE webhook_refused_total counter
webhook_refused_total{reason="ip_not_allowed",route="idle"} 0
webhook_refused_total{reason="ip_not_allowed",route="orders"} 1
webhook_refused_total{reason="rate_limited",route="idle"} 0
webhook_refused_total{reason="rate_limited",route="orders"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "webhook_refused_total"); err != nil {
		t.Fatal(err)
	}
	for code, v := range map[string]float64{"403": 1, "429": 1} {
		if got := testutil.ToFloat64(m.Requests.WithLabelValues("orders", code)); got != v {
			t.Errorf("webhook_requests_total{code=%s} = %v, want %v", code, got, v)
		}
		if got := testutil.ToFloat64(m.Requests.WithLabelValues("idle", code)); got != 0 {
			t.Errorf("idle webhook_requests_total{code=%s} = %v", code, got)
		}
	}
}

func TestRefusedDoesNoLabelLookups(t *testing.T) {
	r := New(prometheus.NewRegistry()).Route("orders")
	if n := testing.AllocsPerRun(100, func() {
		r.Refused(RefusedIPNotAllowed)
		r.Refused(RefusedRateLimited)
		r.Done(429, OutcomeRejected, 0.001)
	}); n != 0 {
		t.Fatalf("%v allocations per refusal", n)
	}
}
