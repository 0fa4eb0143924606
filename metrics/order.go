package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Per-object order on queue routes (order.by): the series exist for the
// routes with order, created at 0 by the first call of any method below
// for the route (the queue's stats refresher calls SetOrderWaiting when
// the route starts).

// SkipStale is the reason label of webhook_queue_skipped_total for an
// event older (order.stale) than one already delivered for its value.
const SkipStale = "stale"

// ordering are the collectors of per-object order.
type ordering struct {
	OrderWaiting *prometheus.GaugeVec   // webhook_queue_order_waiting{route}
	Unordered    *prometheus.CounterVec // webhook_queue_unordered_total{route}
	Skipped      *prometheus.CounterVec // webhook_queue_skipped_total{route,reason}
}

func (m *Metrics) newOrdering(reg prometheus.Registerer) {
	m.OrderWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_queue_order_waiting",
		Help: "Events of the ordered queue route parked behind an earlier event of the same order.by value (it is being tried, waits for its retry, or is dead-lettered with on_dead: hold). Cluster-wide on Redis and Kafka, like dead_letter_queue_size.",
	}, []string{"route"})
	m.Unordered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_queue_unordered_total",
		Help: "Events this instance queued on an ordered route without an order.by value (missing from the delivery, or not a valid key): they are delivered unordered.",
	}, []string{"route"})
	m.Skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_queue_skipped_total",
		Help: "Events of an ordered route this instance settled without delivering them, by reason: stale (older, by order.stale, than an event already delivered for the same order.by value; its key is finished with a 200 answer {\"status\":\"skipped\",\"reason\":\"stale\"}).",
	}, []string{"route", "reason"})
	reg.MustRegister(m.OrderWaiting, m.Unordered, m.Skipped)
}

// orderRoute creates route's order counters at 0, once.
func (m *Metrics) orderRoute(route string) {
	if _, done := m.orderRoutes.LoadOrStore(route, struct{}{}); done {
		return
	}
	m.Unordered.WithLabelValues(route)
	m.Skipped.WithLabelValues(route, SkipStale)
}

// SetOrderWaiting shows the events of route parked behind an earlier one
// of their order value.
func (m *Metrics) SetOrderWaiting(route string, n int64) {
	m.orderRoute(route)
	m.OrderWaiting.WithLabelValues(route).Set(float64(max(n, 0)))
}

// QueueUnordered counts an event of an ordered route queued without an
// order value.
func (m *Metrics) QueueUnordered(route string) {
	m.orderRoute(route)
	m.Unordered.WithLabelValues(route).Inc()
}

// QueueSkipped counts an event of an ordered route settled without
// delivery, by reason (SkipStale).
func (m *Metrics) QueueSkipped(route, reason string) {
	m.orderRoute(route)
	m.Skipped.WithLabelValues(route, reason).Inc()
}
