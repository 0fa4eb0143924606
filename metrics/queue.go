package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Delivery queue (delivery queue owner's block): the series of routes with
// `delivery: queue`, whose events are answered 202 and delivered by
// background workers with retries and backoff; an event that never succeeds
// goes to the route's dead-letter queue (DLQ), which an operator lists,
// replays or purges.
//
// None of these series exists for a route that is not a queue route: a
// route's counters are created at 0 by the first call of any method below
// for it (in practice the queue's stats refresher calling SetQueueStats when
// the route starts), so that alerts taking increase() of the counters see a
// later first event as an increase from 0. The delivery delay histogram
// (22 series) appears with the route's first delivered event.

// Outcome label values of webhook_delivery_attempts_total: how one delivery
// attempt of a queued event ended.
const (
	// AttemptDelivered: the upstream accepted the event (2xx).
	AttemptDelivered = "delivered"
	// AttemptRetried: the attempt failed and the event was scheduled again
	// after a backoff.
	AttemptRetried = "retried"
	// AttemptDeadLettered: the attempt failed and it was the event's last
	// (retry.max_attempts exhausted): the event went to the DLQ.
	AttemptDeadLettered = "dead_lettered"
	// AttemptRejected: the upstream answered a status retrying cannot help
	// (e.g. 400): the event went to the DLQ at once.
	AttemptRejected = "rejected"
	// AttemptNotOwner: this instance's attempt was taken over, the entry
	// having been reclaimed by another instance meanwhile; the outcome is
	// the other instance's to record.
	AttemptNotOwner = "not_owner"
)

// AttemptOutcomes are the outcome values of webhook_delivery_attempts_total,
// whose series each queue route has from the start at 0.
var AttemptOutcomes = []string{AttemptDelivered, AttemptRetried, AttemptDeadLettered, AttemptRejected, AttemptNotOwner}

// newQueue creates the delivery queue's collectors on m and registers them
// on reg.
func (m *Metrics) newQueue(reg prometheus.Registerer) {
	m.DLQSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dead_letter_queue_size",
		Help: "Events in the route's dead-letter queue (queue routes only). Cluster-wide on Redis: every instance reports the same value, refreshed at least every 5 s; aggregate with max by (route).",
	}, []string{"route"})
	m.QueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_queue_depth",
		Help: "Undelivered events of the route's delivery queue: ready, being delivered and waiting to retry (the dead-letter queue excluded). Cluster-wide on Redis, like dead_letter_queue_size.",
	}, []string{"route"})
	m.QueueLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "webhook_queue_lag_seconds",
		Help: "Age of the route's oldest undelivered event (0 when there is none). Cluster-wide on Redis, like dead_letter_queue_size.",
	}, []string{"route"})
	m.QueueAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_delivery_attempts_total",
		Help: "Delivery attempts of queued events by this instance, by outcome: delivered, retried, dead_lettered (retries exhausted), rejected (dead-lettered at once: the upstream answered a status retrying cannot help), not_owner (the entry was reclaimed by another instance meanwhile).",
	}, []string{"route", "outcome"})
	m.QueueDelays = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "webhook_queue_delivery_delay_seconds",
		Help:    "Time from a queued event's acceptance (first seen) to its delivery, retries and backoff included.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 43200},
	}, []string{"route"})
	m.QueueReclaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_queue_reclaimed_total",
		Help: "Queue entries this instance took over from an instance that died or stalled while delivering them: on Redis an entry held for dedupe.lock_ttl without a result; on Kafka a record another instance had begun and not settled, read again here after the consumer group moved its partition (and an entry of this instance's own held for lock_ttl after its try could not begin or settle against the ledger).",
	}, []string{"route"})
	m.DLQReplays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_dlq_replays_total",
		Help: "Events an operator replayed from the route's dead-letter queue into its delivery queue.",
	}, []string{"route"})
	m.DLQPurges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_dlq_purges_total",
		Help: "Events an operator purged from the route's dead-letter queue (their bodies dropped).",
	}, []string{"route"})
	m.DLQFill = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dead_letter_queue_fill_ratio",
		Help: "How full the route's dead-letter queue is against its bound, from 0 to 1 (or above): the larger of its events over queue.max_dlq and its bytes over queue.max_dlq_bytes. At 1 new events of the route are answered 503 with Retry-After. Cluster-wide on Redis, like dead_letter_queue_size.",
	}, []string{"route"})
	m.KafkaLag = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_consumer_lag",
		Help: "Records in the route's main topic not yet committed by the consumer group: end offset minus committed offset, summed over partitions (queue.backend kafka only). The group is shared by every instance, which each report its lag; aggregate with max by (route).",
	}, []string{"route"})
	reg.MustRegister(m.DLQSize, m.QueueDepth, m.QueueLag, m.QueueAttempts, m.QueueDelays,
		m.QueueReclaims, m.DLQReplays, m.DLQPurges, m.KafkaLag, m.DLQFill)
}

// queueRoute creates route's queue counters at 0, once.
func (m *Metrics) queueRoute(route string) {
	if _, done := m.queueRoutes.LoadOrStore(route, struct{}{}); done {
		return
	}
	for _, o := range AttemptOutcomes {
		m.QueueAttempts.WithLabelValues(route, o)
	}
	m.QueueReclaims.WithLabelValues(route)
	m.DLQReplays.WithLabelValues(route)
	m.DLQPurges.WithLabelValues(route)
}

// QueueAttempt counts one delivery attempt of a queued event on route, by
// outcome (AttemptDelivered, AttemptRetried, AttemptDeadLettered,
// AttemptRejected, AttemptNotOwner).
func (m *Metrics) QueueAttempt(route, outcome string) {
	m.queueRoute(route)
	m.QueueAttempts.WithLabelValues(route, outcome).Inc()
}

// QueueDelay records a delivered event's time from acceptance (first seen)
// to delivery. A negative value (the clocks of the accepting and the
// delivering instance disagree) counts as 0.
func (m *Metrics) QueueDelay(route string, seconds float64) {
	m.queueRoute(route)
	if seconds < 0 {
		seconds = 0
	}
	m.QueueDelays.WithLabelValues(route).Observe(seconds)
}

// QueueReclaimed counts n entries this instance took over from a dead or
// stalled instance.
func (m *Metrics) QueueReclaimed(route string, n int) {
	m.queueRoute(route)
	if n > 0 {
		m.QueueReclaims.WithLabelValues(route).Add(float64(n))
	}
}

// DLQReplayed counts n events replayed from route's dead-letter queue.
func (m *Metrics) DLQReplayed(route string, n int) {
	m.queueRoute(route)
	if n > 0 {
		m.DLQReplays.WithLabelValues(route).Add(float64(n))
	}
}

// DLQPurged counts n events purged from route's dead-letter queue.
func (m *Metrics) DLQPurged(route string, n int) {
	m.queueRoute(route)
	if n > 0 {
		m.DLQPurges.WithLabelValues(route).Add(float64(n))
	}
}

// SetQueueStats sets route's gauges: webhook_queue_depth to depth,
// dead_letter_queue_size to dlq and webhook_queue_lag_seconds to
// lagSeconds (negative values count as 0). The first call for a route
// creates its gauges, and its counters at 0.
func (m *Metrics) SetQueueStats(route string, depth, dlq int64, lagSeconds float64) {
	m.queueRoute(route)
	if lagSeconds < 0 {
		lagSeconds = 0
	}
	m.QueueDepth.WithLabelValues(route).Set(float64(depth))
	m.DLQSize.WithLabelValues(route).Set(float64(dlq))
	m.QueueLag.WithLabelValues(route).Set(lagSeconds)
}

// SetDLQFill sets route's dead_letter_queue_fill_ratio to ratio: how full
// its dead-letter queue is against its bound (1: full; new events are
// refused). A negative value counts as 0.
func (m *Metrics) SetDLQFill(route string, ratio float64) {
	m.queueRoute(route)
	if ratio < 0 {
		ratio = 0
	}
	m.DLQFill.WithLabelValues(route).Set(ratio)
}

// SetKafkaLag sets route's kafka_consumer_lag to lag, the records of the
// route's main topic its consumer group has not committed yet (end offset
// minus committed offset, summed over the partitions); a negative value
// counts as 0. For queue.backend kafka only: the first call for a route
// creates its gauge, and its queue counters at 0 as the other queue
// methods do.
func (m *Metrics) SetKafkaLag(route string, lag int64) {
	m.queueRoute(route)
	if lag < 0 {
		lag = 0
	}
	m.KafkaLag.WithLabelValues(route).Set(float64(lag))
}

// ForgetQueueRoute drops route's gauge series (depth, lag, DLQ size and
// fill, Kafka consumer lag), for a queue route a reload removed or turned into a
// synchronous one: a gauge left behind would report its last value forever
// and keep DeadLetterQueueNotEmpty (or KafkaConsumerLagHigh) firing. Call
// it once the route's stats refresher has stopped. The counters and the
// histogram are kept (they stop growing), as other routes' counters are.
func (m *Metrics) ForgetQueueRoute(route string) {
	m.QueueDepth.DeleteLabelValues(route)
	m.DLQSize.DeleteLabelValues(route)
	m.QueueLag.DeleteLabelValues(route)
	m.KafkaLag.DeleteLabelValues(route)
	m.DLQFill.DeleteLabelValues(route)
	m.OrderWaiting.DeleteLabelValues(route)
}
