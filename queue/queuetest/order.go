package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/clawgate/clawgate/queue"
)

// The order gate through a transport: an event begun out of turn is
// parked (its entry settled, no try counted) and handed back as a ready
// entry when its value's head settles.

func orderedEntry(key, v, stale string) queue.Entry {
	e := testEntry(key, "fp-"+key)
	e.Order, e.Stale = v, stale
	return e
}

// enqueueOrdered enqueues each key k with order value v (pairs).
func enqueueOrdered(t testing.TB, b queue.Backend, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if ack := mustEnqueue(t, b, orderedEntry(kv[i], kv[i+1], ""), 1000); ack.State != queue.Enqueued {
			t.Fatalf("Enqueue %s: %+v", kv[i], ack)
		}
	}
}

// readAll reads n entries (waiting for each), by key.
func readAll(t testing.TB, b queue.Backend, consumer string, n int) map[string]queue.Lease {
	t.Helper()
	out := map[string]queue.Lease{}
	for len(out) < n {
		l := readOne(t, b, consumer)
		out[l.Key] = l
	}
	return out
}

// mustPark begins l and wants it parked: not begun, no error, no try.
func mustPark(t testing.TB, b queue.Backend, l queue.Lease) {
	t.Helper()
	if j, ok, err := b.Begin(context.Background(), l); ok || err != nil {
		t.Fatalf("Begin %s = %+v, %v, %v; want parked", l.Key, j, ok, err)
	}
	if ks := mustGet(t, b, l.Key); ks.State != queue.StateQueued || ks.Attempts != 0 {
		t.Fatalf("parked %s = %+v, want queued with no attempt", l.Key, ks)
	}
}

// wantNext waits for the next ready entry and wants it to be key's.
func wantNext(t testing.TB, b queue.Backend, consumer, key string) queue.Lease {
	t.Helper()
	l := readOne(t, b, consumer)
	if l.Key != key {
		t.Fatalf("next ready entry is %s's, want %s's", l.Key, key)
	}
	return l
}

// wantNothingReady checks no entry is ready (a short wait: a backend that
// produces in the background gets a moment).
func wantNothingReady(t testing.TB, b queue.Backend) {
	t.Helper()
	if ls, err := b.Read(context.Background(), testRoute, 0, "probe", 10, 200*time.Millisecond); err != nil || len(ls) != 0 {
		t.Fatalf("Read = %+v, %v; want nothing ready", ls, err)
	}
}

func testOrderInterleaved(t *testing.T, b queue.Backend) {
	enqueueOrdered(t, b, "a1", "A", "b1", "B", "a2", "A", "b2", "B")
	ls := readAll(t, b, "c", 4)
	mustPark(t, b, ls["a2"])
	mustPark(t, b, ls["b2"])
	if st := mustStats(t, b); st.Waiting != 2 || st.Depth != 4 {
		t.Fatalf("Stats = %+v, want 2 waiting of 4", st)
	}
	ja1 := mustBegin(t, b, ls["a1"])
	jb1 := mustBegin(t, b, ls["b1"])
	// A's head delivered: a2 comes back; B's retries: b2 waits.
	mustSettle(t, b, "c", ja1, delivered(200, "", "fp-a1"), queue.Recorded)
	ja2 := mustBegin(t, b, wantNext(t, b, "c", "a2"))
	mustSettle(t, b, "c", jb1, queue.Settlement{Kind: queue.SettleRetry, Due: msNow()}, queue.Recorded)
	jb1 = mustBegin(t, b, promoteAndRead(t, b, "c", time.Now().Add(time.Hour)))
	if jb1.Key != "b1" || jb1.Try != 2 {
		t.Fatalf("after b1's retry the next try is %s try %d, want b1 try 2", jb1.Key, jb1.Try)
	}
	mustSettle(t, b, "c", ja2, delivered(200, "", "fp-a2"), queue.Recorded)
	wantNothingReady(t, b)
	mustSettle(t, b, "c", jb1, delivered(200, "", "fp-b1"), queue.Recorded)
	jb2 := mustBegin(t, b, wantNext(t, b, "c", "b2"))
	if jb2.Try != 1 {
		t.Fatalf("b2's first try counted %d, want 1 (parking counts none)", jb2.Try)
	}
	mustSettle(t, b, "c", jb2, delivered(200, "", "fp-b2"), queue.Recorded)
	if st := mustStats(t, b); st.Waiting != 0 || st.Depth != 0 {
		t.Fatalf("Stats = %+v, want empty", st)
	}
	assertNoEntries(t, b)
}

// dead-letters a1 (its value's head, a2 parked behind it) with hold.
func orderDeadHead(t *testing.T, b queue.Backend, hold bool) (a1 string) {
	enqueueOrdered(t, b, "a1", "A", "a2", "A")
	ls := readAll(t, b, "c", 2)
	mustPark(t, b, ls["a2"])
	j := mustBegin(t, b, ls["a1"])
	s := dead("rejected:400", 400, msNow())
	s.OrderHold = hold
	mustSettle(t, b, "c", j, s, queue.Recorded)
	return j.EventID
}

func testOrderContinue(t *testing.T, b queue.Backend) {
	orderDeadHead(t, b, false)
	j := mustBegin(t, b, wantNext(t, b, "c", "a2"))
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a2"), queue.Recorded)
	assertNoEntries(t, b)
}

func testOrderHold(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	id := orderDeadHead(t, b, true)
	wantNothingReady(t, b)
	if err := b.Replay(ctx, testRoute, id); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	j := mustBegin(t, b, wantNext(t, b, "c", "a1"))
	wantNothingReady(t, b)
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a1"), queue.Recorded)
	j = mustBegin(t, b, wantNext(t, b, "c", "a2"))
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a2"), queue.Recorded)
	assertNoEntries(t, b)
}

func testOrderHoldPurged(t *testing.T, b queue.Backend) {
	id := orderDeadHead(t, b, true)
	wantNothingReady(t, b)
	if err := b.Purge(context.Background(), testRoute, id, time.Hour); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	j := mustBegin(t, b, wantNext(t, b, "c", "a2"))
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a2"), queue.Recorded)
}

func testOrderStale(t *testing.T, b queue.Backend) {
	for _, e := range []queue.Entry{orderedEntry("a1", "A", "100"), orderedEntry("a2", "A", "50"), orderedEntry("a3", "A", "101")} {
		mustEnqueue(t, b, e, 1000)
	}
	ls := readAll(t, b, "c", 3)
	mustPark(t, b, ls["a3"])
	mustPark(t, b, ls["a2"])
	j := mustBegin(t, b, ls["a1"])
	if j.Stale {
		t.Fatal("a1 begun stale")
	}
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a1"), queue.Recorded)
	j = mustBegin(t, b, wantNext(t, b, "c", "a2"))
	if !j.Stale {
		t.Fatal("a2 (50, after 100 was delivered) not begun stale")
	}
	mustSettle(t, b, "c", j, queue.Settlement{Kind: queue.SettleDelivered, Retention: time.Hour, At: msNow(),
		Outcome: queue.SkippedOutcome("fp-a2")}, queue.Recorded)
	if ks := mustGet(t, b, "a2"); ks.State != queue.StateFinished || ks.Status != 200 || string(ks.Outcome.Body) != queue.SkippedBody {
		t.Fatalf("skipped a2 = %+v, want finished with the skipped answer", ks)
	}
	j = mustBegin(t, b, wantNext(t, b, "c", "a3"))
	if j.Stale {
		t.Fatal("a3 (101) begun stale")
	}
	mustSettle(t, b, "c", j, delivered(200, "", "fp-a3"), queue.Recorded)
}

// A consumer that began its value's head and died: the entry is taken
// over after the lease, the head holds its value meanwhile, and its
// settle by the new owner hands the next one back.
func testOrderLeaseRecovery(t *testing.T, b queue.Backend, o Options) {
	enqueueOrdered(t, b, "a1", "A", "a2", "A")
	ls := readAll(t, b, "A", 2)
	mustBegin(t, b, ls["a1"]) // A dies during the try
	mustPark(t, b, ls["a2"])
	// B takes A's begun head over (a Reclaim; on Kafka a rebalance), and
	// the value goes on once B settles it.
	nb, got := o.takeover(t, b, "A", "B", []queue.Lease{ls["a1"]})
	j := mustBegin(t, nb, got[0])
	mustSettle(t, nb, "B", j, delivered(200, "", "fp-a1"), queue.Recorded)
	j = mustBegin(t, nb, wantNext(t, nb, "B", "a2"))
	mustSettle(t, nb, "B", j, delivered(200, "", "fp-a2"), queue.Recorded)
}
