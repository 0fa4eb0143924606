package kafka

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// produceReserved does what Enqueue does up to the crash: the key is
// reserved and its record produced, but the reservation is never
// confirmed (the instance died before it could).
func produceReserved(t *testing.T, b *Backend, l ledger.Ledger, key, eid, tok string, lease time.Duration) {
	t.Helper()
	e := entry(key)
	res, err := l.Reserve(t.Context(), ledger.Reservation{Route: testRoute, Key: key, Fingerprint: e.Fingerprint,
		EventID: eid, Token: tok, FirstSeen: e.FirstSeen, Lease: lease, MaxDepth: 1000})
	if err != nil || res.State != queue.Enqueued {
		t.Fatalf("Reserve: %+v %v", res, err)
	}
	rec := &kgo.Record{Topic: b.topic(testRoute), Key: []byte(key), Value: e.Payload, Headers: []kgo.RecordHeader{
		{Key: hEventID, Value: []byte(eid)}, {Key: hToken, Value: []byte(tok)},
		{Key: hFirst, Value: strconv.AppendInt(nil, e.FirstSeen.UnixMilli(), 10)},
	}}
	if err := b.produce(t.Context(), rec); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// A crash between the produce and the confirmation: while the
// reservation lasts, the copy the provider sends again is told to retry
// (409), and the consumer that reads the record adopts it: delivered
// once, and the next copy gets 202 replayed.
func TestKafkaCrashBeforeConfirmAdopted(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		produceReserved(t, b, l, "crash-1", "e1", "t1", time.Minute)
		mustEnqueue(t, b, "crash-1", queue.InFlight)
		lease := readOne(t, b, "w1")
		j := mustBegin(t, b, lease)
		if j.EventID != "e1" || j.Try != 1 {
			t.Fatalf("adopted job %+v", j)
		}
		if ks := mustGet(t, b, "crash-1"); ks.State != queue.StateQueued {
			t.Fatalf("after adoption: %+v", ks)
		}
		ack := mustEnqueue(t, b, "crash-1", queue.Pending)
		if ack.ID != "e1" {
			t.Fatalf("copy acknowledged as %q, want the adopted event e1", ack.ID)
		}
		mustSettle(t, b, "w1", j, delivered("ok"))
		mustEnqueue(t, b, "crash-1", queue.Delivered)
	})
}

// The same crash, but the record is read only after the reservation
// expired: the record is dropped (its key is gone), and the provider's
// next copy is queued anew and delivered once.
func TestKafkaCrashBeforeConfirmExpired(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		produceReserved(t, b, l, "crash-2", "e2", "t2", 50*time.Millisecond)
		eventually(t, bound, func() bool { return mustGet(t, b, "crash-2").State == queue.StateAbsent },
			func() string { return "the reservation did not expire" })
		old := readOne(t, b, "w1")
		if _, ok, err := b.Begin(t.Context(), old); ok || err != nil {
			t.Fatalf("Begin of the unconfirmed record after its reservation expired: ok=%v err=%v, want dropped", ok, err)
		}
		ack := mustEnqueue(t, b, "crash-2", queue.Enqueued)
		j := mustBegin(t, b, readOne(t, b, "w1"))
		if j.EventID != ack.ID || j.Total != 1 {
			t.Fatalf("job %+v, want the new event %s, first try", j, ack.ID)
		}
		mustSettle(t, b, "w1", j, delivered("ok"))
	})
}

// An instance dies with a record begun and not settled: the consumer
// group gives its partition to another instance, which reads the record
// again and counts it in webhook_queue_reclaimed_total, as Redis Streams
// count a reclaimed entry. (Issue: on Kafka the counter stayed 0 after a
// SIGKILL although the dead instance's records were redelivered.)
func TestKafkaRedeliveredRecordOfAnotherInstanceCountsAsReclaimed(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		var mu sync.Mutex
		reclaimed := map[string]int{}
		count := func(o *Options) {
			o.DrainWait = 100 * time.Millisecond
			o.Reclaimed = func(route string, n int) { mu.Lock(); reclaimed[route] += n; mu.Unlock() }
		}
		first := newBackend(t, kc, l, count)
		ack := mustEnqueue(t, first, "r1", queue.Enqueued)
		mustBegin(t, first, readOne(t, first, "dead-instance")) // never settled
		first.Close()

		second := newBackend(t, kc, l, count)
		ls := readOne(t, second, "live-instance")
		if ls.Key != "r1" || ls.EventID != ack.ID {
			t.Fatalf("read %+v, want r1 again", ls)
		}
		j := mustBegin(t, second, ls)
		mu.Lock()
		got := reclaimed[testRoute]
		mu.Unlock()
		if got != 1 {
			t.Fatalf("reclaimed %d, want 1", got)
		}
		mustSettle(t, second, "live-instance", j, delivered("ok"))
		// A record begun once is not counted.
		mustEnqueue(t, second, "r2", queue.Enqueued)
		mustSettle(t, second, "live-instance", mustBegin(t, second, readOne(t, second, "live-instance")), delivered("ok"))
		mu.Lock()
		defer mu.Unlock()
		if reclaimed[testRoute] != 1 {
			t.Fatalf("reclaimed %d after a first delivery, want still 1", reclaimed[testRoute])
		}
	})
}
