package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store"
)

// A route's DLQ is bounded by count and by bytes: once it holds the
// bound, new events are refused (Full: the gateway answers 503 with
// Retry-After, acknowledging nothing it could not keep) while copies of
// known keys are still answered; a purge makes room again. (Issue: the
// DLQ had no bound; an upstream rejecting everything parked every new
// event's body until memory or Redis ran out.)
func TestManagerDLQBoundRefusesNewEvents(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxDLQ   int
		maxBytes int64
	}{
		{"count", 3, 1 << 20},
		{"bytes", 1000, 3 * int64(len("dead-0"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b Backend) {
				ctx := context.Background()
				sender := newSender(func(context.Context, string, int64) Result { return answer(400) })
				route := testQueueRoute()
				route.MaxDLQ, route.MaxDLQBytes = c.maxDLQ, c.maxBytes
				env := startManager(t, b, sender, route)
				env.enqueue(t, "dead-0", "dead-1", "dead-2")
				rn := env.m.route(testRoute)
				waitFor(t, "the DLQ at its bound", func() bool { return rn.dlqFull.Load() })
				if st := mustStats(t, b); st.DLQ != 3 || st.DLQBytes != 18 {
					t.Fatalf("stats %+v, want 3 events, 18 bytes", st)
				}
				ack, err := env.m.Enqueue(ctx, testEntry("new", "fp-new"))
				if err != nil || ack.State != Full {
					t.Fatalf("a new event with the DLQ full = %+v, %v; want Full", ack, err)
				}
				ack, err = env.m.Enqueue(ctx, testEntry("dead-1", "fp-dead-1"))
				if err != nil || ack.State != Pending || !ack.Dead {
					t.Fatalf("a copy of a dead-lettered event = %+v, %v; want Pending, dead", ack, err)
				}
				if ks := mustGet(t, b, "new"); ks.State != StateAbsent {
					t.Fatalf("refused key stored: %+v", ks)
				}
				dead, _, err := env.m.ListDLQ(ctx, testRoute, "", 10)
				if err != nil || len(dead) != 3 {
					t.Fatalf("DLQ %v, %v", dead, err)
				}
				if err := env.m.Purge(ctx, testRoute, dead[0].ID); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "room in the DLQ", func() bool { return !rn.dlqFull.Load() })
				if st := mustStats(t, b); st.DLQ != 2 || st.DLQBytes != 12 {
					t.Fatalf("stats after a purge %+v, want 2 events, 12 bytes", st)
				}
				ack, err = env.m.Enqueue(ctx, testEntry("new", "fp-new"))
				if err != nil || ack.State != Enqueued {
					t.Fatalf("a new event after a purge = %+v, %v; want Enqueued", ack, err)
				}
			})
		})
	}
}

// The memory queue's finished keys, kept for their retention with the
// upstream's answers, are bounded by its ledger's MaxBytes: the oldest are
// forgotten first. (Issue: they were not counted against any memory
// budget.) ledger's own test covers the budget in full; this one checks
// that the queue's finishes and resets go through it.
func TestMemoryFinishedKeysBoundedByMaxBytes(t *testing.T) {
	m := NewMemory()
	keys := m.Keys()
	keys.MaxBytes = 16 << 10
	evicted := 0
	keys.OnEvict = func() { evicted++ }
	body := []byte(strings.Repeat("x", 1<<10))
	for i := range 100 {
		key := fmt.Sprintf("k%03d", i)
		mustEnqueue(t, m, testEntry(key, "fp"), 1000)
		j := mustBegin(t, m, readOne(t, m, "c"))
		mustSettle(t, m, "c", j, Settlement{Kind: SettleDelivered, Retention: time.Hour, At: msNow(),
			Outcome: store.Outcome{Status: 200, Body: body, Fingerprint: "fp"}}, Recorded)
	}
	if done := keys.Bytes(); done > keys.MaxBytes {
		t.Fatalf("finished keys take %d bytes, over MaxBytes %d", done, keys.MaxBytes)
	}
	if evicted < 80 {
		t.Fatalf("%d keys forgotten, want most of 100", evicted)
	}
	if ks := mustGet(t, m, "k000"); ks.State != StateAbsent {
		t.Fatalf("the oldest finished key is kept: %+v", ks)
	}
	if ks := mustGet(t, m, "k099"); ks.State != StateFinished {
		t.Fatalf("the newest finished key: %+v", ks)
	}
	// Forgetting a key (a reset) uncounts it.
	done := keys.Bytes()
	if _, err := m.Delete(context.Background(), testRoute, "k099"); err != nil {
		t.Fatal(err)
	}
	if keys.Bytes() >= done {
		t.Fatalf("a reset left the finished bytes at %d", keys.Bytes())
	}
}

// A DLQ written before its byte count existed (an upgrade) is counted
// when the route is prepared, and the count never goes below zero.
func TestRedisDLQByteCountFromAnOlderDLQ(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	deadLetter(t, b, "old-0", msNow())
	deadLetter(t, b, "old-1", msNow())
	const counter = "test:webhook_dlq_bytes:{q:hooks:0}"
	if err := c.Del(ctx, counter).Err(); err != nil { // as before the upgrade
		t.Fatal(err)
	}
	if err := b.Prepare(ctx, testRoute, 1); err != nil {
		t.Fatal(err)
	}
	check("the count from the DLQ")
	if st := mustStats(t, b); st.DLQBytes != 10 {
		t.Fatalf("DLQ bytes %d, want 10", st.DLQBytes)
	}
	if err := c.Set(ctx, counter, 3, 0).Err(); err != nil { // a count that drifted low
		t.Fatal(err)
	}
	dead, _, err := b.ListDLQ(ctx, testRoute, "", 10)
	if err != nil || len(dead) != 2 {
		t.Fatalf("DLQ %v %v", dead, err)
	}
	if err := b.Purge(ctx, testRoute, dead[0].ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Get(ctx, counter).Int64(); err != nil || n != 0 {
		t.Fatalf("count after a purge past zero: %d %v, want 0", n, err)
	}
}
