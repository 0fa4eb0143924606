package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Route controls (control.go): pause, circuit breaker and pace. The
// gauges exist for the routes that can use them (a queue route's paused
// flag, a route with a breaker its breaker gauge), set by the server's
// refresh of the shared state; the counter and the histogram appear with
// the first transition or wait.

// controls are the collectors of the route controls.
type controls struct {
	RoutePaused        *prometheus.GaugeVec     // webhook_route_paused{route}
	BreakerOpen        *prometheus.GaugeVec     // webhook_upstream_breaker_open{route}
	BreakerTransitions *prometheus.CounterVec   // webhook_breaker_transitions_total{route,to}
	PaceWaits          *prometheus.HistogramVec // webhook_pace_wait_seconds{route}
}

func (m *Metrics) newControls(reg prometheus.Registerer) {
	m.RoutePaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_route_paused",
		Help: "1 while an operator has paused the queue route (it acknowledges and does not deliver), else 0. Cluster-wide on Redis: every instance reports the same value, refreshed every 5 s; aggregate with max by (route).",
	}, []string{"route"})
	m.BreakerOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_upstream_breaker_open",
		Help: "1 while the route's circuit breaker is open or half open (no try reaches the upstream but a probe), else 0; routes with a breaker only. Cluster-wide like webhook_route_paused.",
	}, []string{"route"})
	m.BreakerTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_breaker_transitions_total",
		Help: "Circuit breaker transitions made by this instance, by the state entered: open (failures in a row reached, or a failed probe) or closed (a probe or a try succeeded).",
	}, []string{"route", "to"})
	m.PaceWaits = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "webhook_pace_wait_seconds",
		Help:    "How long this instance's workers were told to wait for the route's pace when it was spent (one observation per refusal).",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route"})
	reg.MustRegister(m.RoutePaused, m.BreakerOpen, m.BreakerTransitions, m.PaceWaits)
}

// SetRouteControl shows route's shared control state: paused (queue
// routes: queued true) and whether its breaker is open (routes with a
// breaker: breaker true).
func (m *Metrics) SetRouteControl(route string, queued, paused, breaker, open bool) {
	if queued {
		m.RoutePaused.WithLabelValues(route).Set(b2f(paused))
	} else {
		m.RoutePaused.DeleteLabelValues(route)
	}
	if breaker {
		m.BreakerOpen.WithLabelValues(route).Set(b2f(open))
	} else {
		m.BreakerOpen.DeleteLabelValues(route)
	}
}

// ForgetRouteControl drops the gauges of a route that is gone.
func (m *Metrics) ForgetRouteControl(route string) {
	m.RoutePaused.DeleteLabelValues(route)
	m.BreakerOpen.DeleteLabelValues(route)
}

// BreakerTransition counts a transition this instance made.
func (m *Metrics) BreakerTransition(route, to string) {
	m.BreakerTransitions.WithLabelValues(route, to).Inc()
}

// PaceWait observes a wait for route's pace.
func (m *Metrics) PaceWait(route string, seconds float64) {
	m.PaceWaits.WithLabelValues(route).Observe(seconds)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
