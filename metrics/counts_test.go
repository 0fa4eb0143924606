package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// RouteCounts sums each route's answers by outcome, as the series count
// them, and creates none.
func TestRouteCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	a, b := m.Route("a"), m.Route("b")
	for _, d := range []struct {
		code    int
		outcome string
	}{
		{200, OutcomeForwarded}, {201, OutcomeForwarded}, {200, OutcomeReplayed},
		{401, OutcomeUnauthorized}, {429, OutcomeRejected}, {400, OutcomeRejected},
		{409, OutcomeInFlight}, {422, OutcomeConflict}, {502, OutcomeError},
	} {
		a.Done(d.code, d.outcome, 0.01)
	}
	b.Done(202, OutcomeQueued, 0.01)
	b.Done(202, OutcomeQueued, 0.01)
	b.Done(200, OutcomeReplayed, 0.01)
	before := testutil.CollectAndCount(m.Processing) + testutil.CollectAndCount(m.Requests)
	got := m.RouteCounts()
	if after := testutil.CollectAndCount(m.Processing) + testutil.CollectAndCount(m.Requests); after != before {
		t.Errorf("RouteCounts created series: %d, then %d", before, after)
	}
	want := map[string]RouteCounts{
		"a": {Deliveries: 9, Forwarded: 2, Replayed: 1, Refused: 3},
		"b": {Deliveries: 3, Queued: 2, Replayed: 1},
	}
	for route, w := range want {
		if got[route] != w {
			t.Errorf("route %s: %+v, want %+v", route, got[route], w)
		}
	}
	m.Route("idle")
	if c := m.RouteCounts()["idle"]; c != (RouteCounts{}) {
		t.Errorf("an idle route: %+v, want zeros", c)
	}
}
