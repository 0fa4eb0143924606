package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var queueNames = []string{"dead_letter_queue_size", "webhook_queue_depth", "webhook_queue_lag_seconds",
	"webhook_delivery_attempts_total", "webhook_queue_delivery_delay_seconds", "webhook_queue_reclaimed_total",
	"webhook_dlq_replays_total", "webhook_dlq_purges_total", "kafka_consumer_lag"}

func TestQueueSeriesOnlyForQueueRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Route("orders") // a synchronous route: no queue series
	for _, name := range queueNames {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("%s: %d series (%v) before any queue route", name, n, err)
		}
	}
	m.SetQueueStats("refunds", 0, 0, 0)
	// Every counter and gauge of the route exists at 0 from its first
	// stats: the counters so that the first event is an increase(), the
	// outcomes one series each. The delay histogram comes with the first
	// delivered event.
	for name, want := range map[string]int{"dead_letter_queue_size": 1, "webhook_queue_depth": 1,
		"webhook_queue_lag_seconds": 1, "webhook_delivery_attempts_total": len(AttemptOutcomes),
		"webhook_queue_delivery_delay_seconds": 0, "webhook_queue_reclaimed_total": 1,
		"webhook_dlq_replays_total": 1, "webhook_dlq_purges_total": 1} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	m.QueueDelay("refunds", 0.5)
	if n, err := testutil.GatherAndCount(reg, "webhook_queue_delivery_delay_seconds"); err != nil || n != 1 {
		t.Errorf("webhook_queue_delivery_delay_seconds after the first delivery: %d series (%v), want 1", n, err)
	}
	want := `
# HELP webhook_delivery_attempts_total Delivery attempts of queued events by this instance, by outcome: delivered, retried, dead_lettered (retries exhausted), rejected (dead-lettered at once: the upstream answered a status retrying cannot help), not_owner (the entry was reclaimed by another instance meanwhile).
# TYPE webhook_delivery_attempts_total counter
webhook_delivery_attempts_total{outcome="dead_lettered",route="refunds"} 0
webhook_delivery_attempts_total{outcome="delivered",route="refunds"} 0
webhook_delivery_attempts_total{outcome="not_owner",route="refunds"} 0
webhook_delivery_attempts_total{outcome="rejected",route="refunds"} 0
webhook_delivery_attempts_total{outcome="retried",route="refunds"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "webhook_delivery_attempts_total"); err != nil {
		t.Fatal(err)
	}
}

func TestQueueStatsAndForget(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.SetQueueStats("orders", 12, 3, 42.5)
	m.SetQueueStats("refunds", 1, 0, 0)
	m.SetQueueStats("refunds", 0, 0, -2) // clock skew: lag 0, not negative
	want := `
# HELP dead_letter_queue_size Events in the route's dead-letter queue (queue routes only). Cluster-wide on Redis: every instance reports the same value, refreshed at least every 5 s; aggregate with max by (route).
# TYPE dead_letter_queue_size gauge
dead_letter_queue_size{route="orders"} 3
dead_letter_queue_size{route="refunds"} 0
# HELP webhook_queue_depth Undelivered events of the route's delivery queue: ready, being delivered and waiting to retry (the dead-letter queue excluded). Cluster-wide on Redis, like dead_letter_queue_size.
# TYPE webhook_queue_depth gauge
webhook_queue_depth{route="orders"} 12
webhook_queue_depth{route="refunds"} 0
# HELP webhook_queue_lag_seconds Age of the route's oldest undelivered event (0 when there is none). Cluster-wide on Redis, like dead_letter_queue_size.
# TYPE webhook_queue_lag_seconds gauge
webhook_queue_lag_seconds{route="orders"} 42.5
webhook_queue_lag_seconds{route="refunds"} 0
`
	gauges := []string{"dead_letter_queue_size", "webhook_queue_depth", "webhook_queue_lag_seconds"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), gauges...); err != nil {
		t.Fatal(err)
	}

	// A reload removes route orders: its gauges go, its counters stay.
	m.QueueAttempt("orders", AttemptDelivered)
	m.ForgetQueueRoute("orders")
	for _, name := range gauges {
		if n, _ := testutil.GatherAndCount(reg, name); n != 1 {
			t.Errorf("%s: %d series after ForgetQueueRoute(orders), want refunds' only", name, n)
		}
	}
	if got := testutil.ToFloat64(m.QueueAttempts.WithLabelValues("orders", AttemptDelivered)); got != 1 {
		t.Errorf("orders' delivered attempts after ForgetQueueRoute: %v, want 1", got)
	}
	// Forgetting a route that never was a queue route is harmless.
	m.ForgetQueueRoute("nope")
}

func TestQueueCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.QueueAttempt("orders", AttemptRetried)
	m.QueueAttempt("orders", AttemptRetried)
	m.QueueAttempt("orders", AttemptDelivered)
	m.QueueAttempt("orders", AttemptRejected)
	m.QueueAttempt("orders", AttemptNotOwner)
	m.QueueReclaimed("orders", 3)
	m.QueueReclaimed("orders", 0)
	m.DLQReplayed("orders", 5)
	m.DLQPurged("orders", 1)
	m.DLQPurged("orders", -1) // nothing, and no panic
	for _, c := range []struct {
		got  prometheus.Collector
		want float64
	}{
		{m.QueueAttempts.WithLabelValues("orders", AttemptRetried), 2},
		{m.QueueAttempts.WithLabelValues("orders", AttemptDelivered), 1},
		{m.QueueAttempts.WithLabelValues("orders", AttemptRejected), 1},
		{m.QueueAttempts.WithLabelValues("orders", AttemptNotOwner), 1},
		{m.QueueAttempts.WithLabelValues("orders", AttemptDeadLettered), 0},
		{m.QueueReclaims.WithLabelValues("orders"), 3},
		{m.DLQReplays.WithLabelValues("orders"), 5},
		{m.DLQPurges.WithLabelValues("orders"), 1},
	} {
		if v := testutil.ToFloat64(c.got); v != c.want {
			t.Errorf("%s: got %v, want %v", c.got.(prometheus.Metric).Desc(), v, c.want)
		}
	}
	// Counting does not create the gauges: only the stats refresher does.
	if n, _ := testutil.GatherAndCount(reg, "dead_letter_queue_size"); n != 0 {
		t.Errorf("dead_letter_queue_size: %d series without SetQueueStats", n)
	}
}

func TestQueueDelayBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.QueueDelay("orders", 0.0004) // first bucket, 1 ms
	m.QueueDelay("orders", 7200)   // two hours of retries: 6 h bucket
	m.QueueDelay("orders", -1)     // clock skew: counted as 0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "webhook_queue_delivery_delay_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		b := h.GetBucket()
		if first, last := b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(); first != 0.001 || last != 43200 {
			t.Errorf("buckets span %v to %v s, want 0.001 to 43200", first, last)
		}
		cum := map[float64]uint64{}
		for _, bk := range b {
			cum[bk.GetUpperBound()] = bk.GetCumulativeCount()
		}
		if cum[0.001] != 2 || cum[3600] != 2 || cum[21600] != 3 || h.GetSampleCount() != 3 {
			t.Errorf("bucket counts %v, count %d", cum, h.GetSampleCount())
		}
		return
	}
	t.Fatal("no webhook_queue_delivery_delay_seconds")
}

func TestKafkaLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	// Not a Kafka queue route: no series, not even on the other backends.
	m.SetQueueStats("refunds", 0, 0, 0)
	if n, err := testutil.GatherAndCount(reg, "kafka_consumer_lag"); err != nil || n != 0 {
		t.Fatalf("kafka_consumer_lag: %d series (%v) without SetKafkaLag", n, err)
	}
	m.SetKafkaLag("orders", 1234)
	m.SetKafkaLag("invoices", 7)
	m.SetKafkaLag("invoices", -3) // a committed offset past the end offset seen: 0
	want := `
# HELP kafka_consumer_lag Records in the route's main topic not yet committed by the consumer group: end offset minus committed offset, summed over partitions (queue.backend kafka only). The group is shared by every instance, which each report its lag; aggregate with max by (route).
# TYPE kafka_consumer_lag gauge
kafka_consumer_lag{route="invoices"} 0
kafka_consumer_lag{route="orders"} 1234
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafka_consumer_lag"); err != nil {
		t.Fatal(err)
	}
	// The first SetKafkaLag of a route creates its queue counters at 0.
	if n, err := testutil.GatherAndCount(reg, "webhook_delivery_attempts_total"); err != nil || n != 3*len(AttemptOutcomes) {
		t.Errorf("webhook_delivery_attempts_total: %d series (%v), want %d", n, err, 3*len(AttemptOutcomes))
	}

	// A reload removes route orders: its lag goes with its other gauges.
	m.SetQueueStats("orders", 5, 0, 1)
	m.ForgetQueueRoute("orders")
	want = `
# HELP kafka_consumer_lag Records in the route's main topic not yet committed by the consumer group: end offset minus committed offset, summed over partitions (queue.backend kafka only). The group is shared by every instance, which each report its lag; aggregate with max by (route).
# TYPE kafka_consumer_lag gauge
kafka_consumer_lag{route="invoices"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafka_consumer_lag"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"webhook_queue_depth", "webhook_queue_lag_seconds", "dead_letter_queue_size"} {
		if n, _ := testutil.GatherAndCount(reg, name); n != 1 {
			t.Errorf("%s: %d series after ForgetQueueRoute(orders), want refunds' only", name, n)
		}
	}
}
