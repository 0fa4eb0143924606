package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RouteCounts is one route's deliveries as this instance answered them
// since it started: each instance counts its own, from 0 at its start.
type RouteCounts struct {
	// Deliveries counts every answered delivery, whatever its status
	// (webhook_requests_total over every code).
	Deliveries int64
	// Forwarded, Queued and Replayed count the deliveries answered with
	// those outcomes: forwarded to the upstream while the provider waited
	// (sync routes), stored for delivery (queue routes), answered from an
	// earlier copy's stored outcome.
	Forwarded, Queued, Replayed int64
	// Refused counts the deliveries the gateway turned away itself,
	// without forwarding them: outcomes rejected (a bad or too large
	// request, allow_ips, rate_limit, and the 503 of an open breaker or of
	// a store or queue that is full or does not answer) and unauthorized
	// (401).
	Refused int64
}

// RouteCounts reads every route's counts from the collectors (not from
// the text exposition), by route name; a route with no series yet is
// absent (its counts are 0). It creates no series.
func (m *Metrics) RouteCounts() map[string]RouteCounts {
	out := map[string]RouteCounts{}
	each(m.Requests, func(d *dto.Metric) {
		route := labelOf(d, "route")
		c := out[route]
		c.Deliveries += int64(d.GetCounter().GetValue())
		out[route] = c
	})
	each(m.Processing, func(d *dto.Metric) {
		route := labelOf(d, "route")
		n := int64(d.GetHistogram().GetSampleCount())
		c := out[route]
		switch labelOf(d, "outcome") {
		case OutcomeForwarded:
			c.Forwarded += n
		case OutcomeQueued:
			c.Queued += n
		case OutcomeReplayed:
			c.Replayed += n
		case OutcomeRejected, OutcomeUnauthorized:
			c.Refused += n
		default:
			return
		}
		out[route] = c
	})
	return out
}

// each calls f with every series c collects.
func each(c prometheus.Collector, f func(*dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) == nil {
			f(&d)
		}
	}
}

// labelOf is d's value of label name ("" when it has none).
func labelOf(d *dto.Metric, name string) string {
	for _, l := range d.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
