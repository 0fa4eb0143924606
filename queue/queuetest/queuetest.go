// Package queuetest checks that a delivery queue backend (queue.Backend)
// behaves as the queue expects, in the style of testing/fstest: a backend
// package's test calls Run with a function that makes a fresh backend.
// The memory, Redis and Kafka backends all run every case (queue's and
// queue/kafka's conformance tests). The cases check what a user of
// queue.Backend relies on; where a backend promises more (the memory and
// Redis backends' DLQ order, their immediate Promote and Reclaim), its
// own tests check that. Entries move between consumers the backend's own
// way: Options.Takeover.
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// Route is the route every case uses; Run prepares it with one shard.
const Route = "hooks"

const testRoute = Route

// waitBound bounds every wait for a condition.
const waitBound = 10 * time.Second

// Run runs the conformance cases, each as a subtest on a fresh backend
// from newBackend (with Route prepared, one shard). A backend must not
// hold entries of Route when it is made.
func Run(t *testing.T, newBackend func(t *testing.T) queue.Backend) {
	t.Helper()
	RunWith(t, newBackend, Options{})
}

// Options adjusts RunWith.
type Options struct {
	// Skip names the cases a backend does not run, each with the reason
	// (reported by t.Skip): a behaviour the backend has by design, not a
	// bug. A name that is not a case fails the test. Nil: every case runs.
	Skip map[string]string
	// Takeover moves the entries consumer from holds on b (leases it read,
	// perhaps began, and will never settle: it stalled or died) to
	// consumer to, the way the backend moves entries between consumers,
	// and returns to's leases of them with the backend to uses: b, or
	// another instance of the same queue (same store, same topics) that
	// the test closes when it ends. from stays alive and may settle or
	// hand back its stale leases on b afterwards. Nil: to takes them over
	// by Reclaim on b, polled with an idle of 20ms, and must get the very
	// entries (same Entry id), as on the memory and Redis backends.
	Takeover func(t *testing.T, b queue.Backend, from, to string, held []queue.Lease) (queue.Backend, []queue.Lease)
}

// takeover is o.Takeover, or a Reclaim on b; it fails the test unless
// to gets the same event and round as each held lease.
func (o Options) takeover(t *testing.T, b queue.Backend, from, to string, held []queue.Lease) (queue.Backend, []queue.Lease) {
	t.Helper()
	nb, taken := b, []queue.Lease(nil)
	if o.Takeover != nil {
		nb, taken = o.Takeover(t, b, from, to, held)
	} else {
		waitFor(t, to+" to reclaim "+from+"'s idle entries", func() bool {
			ls, err := b.Reclaim(context.Background(), testRoute, 0, to, 20*time.Millisecond)
			if err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			taken = append(taken, ls...)
			return len(taken) >= len(held)
		})
		for i := range taken {
			if i >= len(held) || taken[i].Entry != held[i].Entry {
				t.Fatalf("%s reclaimed %+v, want %s's entries %+v", to, taken, from, held)
			}
		}
	}
	if len(taken) != len(held) {
		t.Fatalf("%s took over %+v, want %s's %+v", to, taken, from, held)
	}
	for i := range held {
		if !sameRound(taken[i], held[i]) || taken[i].Consumer != to {
			t.Fatalf("%s took over %+v, want %s's %+v (same event, same round), now %s's", to, taken[i], from, held[i], to)
		}
	}
	return nb, taken
}

// cases are the conformance cases, by name.
var cases = []struct {
	name string
	f    func(t *testing.T, b queue.Backend, o Options)
}{
	{"EnqueueStates", plain(testEnqueueStates)},
	{"Full", plain(testFull)},
	{"Deliver", plain(testDeliver)},
	{"RetryAndPromote", plain(testRetryAndPromote)},
	{"DeadLetterReplayPurge", plain(testDeadLetterReplayPurge)},
	{"DeadEvent", plain(testDeadEvent)},
	{"StaleOwnerSettle", testStaleOwnerSettle},
	{"DeleteDropsLeftovers", plain(testDeleteDropsLeftovers)},
	{"ListDLQPagination", plain(testListDLQPagination)},
	{"HandBack", plain(testHandBack)},
	{"HandBackByStaleOwner", testHandBackByStaleOwner},
	{"OrderInterleaved", plain(testOrderInterleaved)},
	{"OrderContinue", plain(testOrderContinue)},
	{"OrderHold", plain(testOrderHold)},
	{"OrderHoldPurged", plain(testOrderHoldPurged)},
	{"OrderStale", plain(testOrderStale)},
	{"OrderLeaseRecovery", testOrderLeaseRecovery},
}

// plain is a case that needs no options.
func plain(f func(t *testing.T, b queue.Backend)) func(t *testing.T, b queue.Backend, o Options) {
	return func(t *testing.T, b queue.Backend, _ Options) { f(t, b) }
}

// RunWith is Run with options.
func RunWith(t *testing.T, newBackend func(t *testing.T) queue.Backend, o Options) {
	t.Helper()
	known := map[string]bool{}
	for _, c := range cases {
		known[c.name] = true
	}
	for name := range o.Skip {
		if !known[name] {
			t.Fatalf("queuetest: Options.Skip names %q, which is not a case", name)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := o.Skip[c.name]; ok {
				t.Skip(why)
			}
			b := newBackend(t)
			if err := b.Prepare(context.Background(), Route, 1); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			c.f(t, b, o)
		})
	}
}

// promoteAndRead promotes the retries due at now and reads the one entry
// that makes ready, promoting again while none is: a backend may learn of
// a retry in the background (Kafka's retry topic), so a Promote can come
// before it has the retry to move.
func promoteAndRead(t testing.TB, b queue.Backend, consumer string, now time.Time) queue.Lease {
	t.Helper()
	var got []queue.Lease
	waitFor(t, "a promoted entry", func() bool {
		if _, err := b.Promote(context.Background(), testRoute, 0, now); err != nil {
			t.Fatalf("Promote: %v", err)
		}
		got = tryRead(t, b, consumer, 1)
		return len(got) > 0
	})
	return got[0]
}

// waitFor polls cond every few milliseconds and fails the test when it
// does not hold within waitBound.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitBound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// msNow is the current time at millisecond precision (what Redis keeps).
func msNow() time.Time { return time.UnixMilli(time.Now().UnixMilli()).UTC() }

func testEntry(key, fp string) queue.Entry {
	return queue.Entry{Route: testRoute, Key: key, Fingerprint: fp, Payload: []byte(key), FirstSeen: msNow()}
}

func mustEnqueue(t testing.TB, b queue.Backend, e queue.Entry, maxDepth int) queue.Ack {
	t.Helper()
	ack, err := b.Enqueue(context.Background(), e, maxDepth)
	if err != nil {
		t.Fatalf("Enqueue %q: %v", e.Key, err)
	}
	return ack
}

func mustGet(t testing.TB, b queue.Backend, key string) queue.KeyState {
	t.Helper()
	ks, err := b.Get(context.Background(), testRoute, key)
	if err != nil {
		t.Fatalf("Get %q: %v", key, err)
	}
	return ks
}

func mustStats(t testing.TB, b queue.Backend) queue.Stats {
	t.Helper()
	st, err := b.Stats(context.Background(), testRoute)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// tryRead reads at most n ready entries of shard 0 without waiting long.
func tryRead(t testing.TB, b queue.Backend, consumer string, n int) []queue.Lease {
	t.Helper()
	ls, err := b.Read(context.Background(), testRoute, 0, consumer, n, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return ls
}

// readOne waits for one ready entry of shard 0.
func readOne(t testing.TB, b queue.Backend, consumer string) queue.Lease {
	t.Helper()
	var got []queue.Lease
	waitFor(t, "a ready entry", func() bool {
		got = tryRead(t, b, consumer, 1)
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("Read(n=1) returned %d entries", len(got))
	}
	return got[0]
}

func mustBegin(t testing.TB, b queue.Backend, l queue.Lease) queue.Job {
	t.Helper()
	j, ok, err := b.Begin(context.Background(), l)
	if err != nil || !ok {
		t.Fatalf("Begin %+v: ok=%v err=%v, want a job", l, ok, err)
	}
	return j
}

func mustSettle(t testing.TB, b queue.Backend, consumer string, j queue.Job, s queue.Settlement, want queue.Settled) {
	t.Helper()
	got, err := b.Settle(context.Background(), consumer, j, s)
	if err != nil {
		t.Fatalf("Settle %s: %v", j.Key, err)
	}
	if got != want {
		t.Fatalf("Settle %s by %s = %s, want %s", j.Key, consumer, settledName(got), settledName(want))
	}
}

// assertNoEntries fails when any entry is ready or held by anyone.
func assertNoEntries(t testing.TB, b queue.Backend) {
	t.Helper()
	if ls := tryRead(t, b, "probe", 100); len(ls) != 0 {
		t.Fatalf("ready entries left: %+v", ls)
	}
	ls, err := b.Reclaim(context.Background(), testRoute, 0, "probe", 0)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if len(ls) != 0 {
		t.Fatalf("held entries left: %+v", ls)
	}
}

func settledName(s queue.Settled) string {
	switch s {
	case queue.Recorded:
		return "Recorded"
	case queue.NotOwner:
		return "NotOwner"
	case queue.Stale:
		return "Stale"
	}
	return fmt.Sprintf("Settled(%d)", int(s))
}

func delivered(status int, body, fp string) queue.Settlement {
	return queue.Settlement{Kind: queue.SettleDelivered, Retention: time.Hour, At: msNow(),
		Outcome: store.Outcome{Status: status, ContentType: "application/json", Body: []byte(body), Fingerprint: fp}}
}

func dead(reason string, status int, at time.Time) queue.Settlement {
	return queue.Settlement{Kind: queue.SettleDead, Reason: reason, Status: status, Error: "upstream said no", At: at}
}

// deadLetter enqueues key and dead-letters it after one try; it returns
// the event id.
func deadLetter(t testing.TB, b queue.Backend, key string, at time.Time) string {
	t.Helper()
	ack := mustEnqueue(t, b, testEntry(key, "fp-"+key), 1000)
	if ack.State != queue.Enqueued {
		t.Fatalf("Enqueue %q: %+v, want Enqueued", key, ack)
	}
	j := mustBegin(t, b, readOne(t, b, "c"))
	if j.Key != key {
		t.Fatalf("read %q, want %q", j.Key, key)
	}
	mustSettle(t, b, "c", j, dead("exhausted", 500, at), queue.Recorded)
	return ack.ID
}

func testEnqueueStates(t *testing.T, b queue.Backend) {
	{
		first := mustEnqueue(t, b, testEntry("k1", "fp-a"), 100)
		if first.State != queue.Enqueued || first.ID == "" || first.Copies != 1 || first.Fingerprint != "fp-a" {
			t.Fatalf("first Enqueue = %+v, want Enqueued with an id, Copies 1", first)
		}
		steps := []struct {
			name string
			fp   string
			want queue.Ack
		}{
			{"same fingerprint", "fp-a", queue.Ack{State: queue.Pending, ID: first.ID, Fingerprint: "fp-a", Copies: 2}},
			{"other fingerprint reports the stored one", "fp-b", queue.Ack{State: queue.Pending, ID: first.ID, Fingerprint: "fp-a", Copies: 3}},
		}
		for _, s := range steps {
			got := mustEnqueue(t, b, testEntry("k1", s.fp), 100)
			if got.State != s.want.State || got.ID != s.want.ID || got.Fingerprint != s.want.Fingerprint ||
				got.Copies != s.want.Copies || got.Dead {
				t.Fatalf("%s: Enqueue = %+v, want %+v", s.name, got, s.want)
			}
		}
		j := mustBegin(t, b, readOne(t, b, "c"))
		if j.EventID != first.ID || string(j.Payload) != "k1" || j.Fingerprint != "fp-a" || j.Try != 1 || j.Total != 1 {
			t.Fatalf("Begin = %+v", j)
		}
		mustSettle(t, b, "c", j, delivered(201, `{"ok":true}`, "fp-a"), queue.Recorded)

		got := mustEnqueue(t, b, testEntry("k1", "fp-a"), 100)
		want := store.Outcome{Status: 201, ContentType: "application/json", Body: []byte(`{"ok":true}`), Fingerprint: "fp-a"}
		if got.State != queue.Delivered || got.Copies != 4 || got.Fingerprint != "fp-a" ||
			got.Outcome.Status != want.Status || got.Outcome.ContentType != want.ContentType ||
			!bytes.Equal(got.Outcome.Body, want.Body) || got.Outcome.Fingerprint != want.Fingerprint {
			t.Fatalf("Enqueue after delivery = %+v, want Delivered with outcome %+v, Copies 4", got, want)
		}
		ks := mustGet(t, b, "k1")
		if ks.State != queue.StateFinished || ks.Status != 201 || ks.EventID != first.ID || ks.Copies != 4 || ks.Attempts != 1 || ks.Fingerprint != "fp-a" {
			t.Fatalf("Get = %+v", ks)
		}
		if ks := mustGet(t, b, "never-seen"); ks.State != queue.StateAbsent {
			t.Fatalf("Get of an unknown key = %+v, want absent", ks)
		}
	}
}

func testFull(t *testing.T, b queue.Backend) {
	{
		for _, k := range []string{"a", "b"} {
			if ack := mustEnqueue(t, b, testEntry(k, "fp"), 2); ack.State != queue.Enqueued {
				t.Fatalf("Enqueue %q = %+v, want Enqueued", k, ack)
			}
		}
		if ack := mustEnqueue(t, b, testEntry("c", "fp"), 2); ack.State != queue.Full {
			t.Fatalf("third key = %+v, want Full", ack)
		}
		if st := mustStats(t, b); st.Depth != 2 {
			t.Fatalf("Depth = %d after a Full answer, want 2", st.Depth)
		}
		if ks := mustGet(t, b, "c"); ks.State != queue.StateAbsent {
			t.Fatalf("the refused key is %+v, want absent", ks)
		}
		// A copy of a stored key is answered even at max depth.
		if ack := mustEnqueue(t, b, testEntry("a", "fp"), 2); ack.State != queue.Pending {
			t.Fatalf("copy at max depth = %+v, want Pending", ack)
		}
	}
}

func testDeliver(t *testing.T, b queue.Backend) {
	{
		e := testEntry("k", "fp")
		mustEnqueue(t, b, e, 10)
		st := mustStats(t, b)
		if st.Depth != 1 || !st.Oldest.Equal(e.FirstSeen) {
			t.Fatalf("Stats = %+v, want Depth 1, Oldest %v", st, e.FirstSeen)
		}
		l := readOne(t, b, "c")
		if l.Key != "k" || l.Route != testRoute || l.Consumer != "c" {
			t.Fatalf("lease = %+v", l)
		}
		j := mustBegin(t, b, l)
		if !j.FirstSeen.Equal(e.FirstSeen) {
			t.Fatalf("FirstSeen = %v, want %v", j.FirstSeen, e.FirstSeen)
		}
		mustSettle(t, b, "c", j, delivered(200, "ok", "fp"), queue.Recorded)
		if ks := mustGet(t, b, "k"); ks.State != queue.StateFinished || ks.Status != 200 {
			t.Fatalf("Get = %+v, want finished 200", ks)
		}
		if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 || !st.Oldest.IsZero() {
			t.Fatalf("Stats = %+v, want empty", st)
		}
		assertNoEntries(t, b)
	}
}

// A retry is not ready before its due time, becomes ready at a Promote
// at or after it, and is delivered once: one entry, begun as the event's
// next try, whatever Promote is called again. A backend may learn of a
// retry in the background (Kafka's retry topics), so the Promotes are
// polled: each round first checks that a Promote before the due time
// moves nothing, then promotes at it. The memory and Redis backends make
// a retry ready at the first Promote at its due time (their own
// TestPromoteAtDueReadyAtOnce).
func testRetryAndPromote(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	mustEnqueue(t, b, testEntry("k", "fp"), 10)
	j := mustBegin(t, b, readOne(t, b, "c"))
	due := msNow().Add(time.Hour)
	// retryAt settles the try as a retry due at due, promotes it and
	// begins the try that follows.
	retryAt := func(j queue.Job, try int64) queue.Job {
		t.Helper()
		mustSettle(t, b, "c", j, queue.Settlement{Kind: queue.SettleRetry, Due: due}, queue.Recorded)
		if ls := tryRead(t, b, "c", 10); len(ls) != 0 {
			t.Fatalf("a retry is readable before it is due: %+v", ls)
		}
		if ks := mustGet(t, b, "k"); ks.State != queue.StateQueued || ks.Attempts != try-1 {
			t.Fatalf("Get while waiting = %+v, want queued after %d tries", ks, try-1)
		}
		if st := mustStats(t, b); st.Depth != 1 || st.DLQ != 0 {
			t.Fatalf("Stats while waiting = %+v, want Depth 1", st)
		}
		promoted := 0
		var ready []queue.Lease
		waitFor(t, "the retry to become ready", func() bool {
			if promoted == 0 {
				if n, err := b.Promote(ctx, testRoute, 0, due.Add(-time.Millisecond)); err != nil || n != 0 {
					t.Fatalf("Promote before due = %d, %v; want 0", n, err)
				}
				if ls := tryRead(t, b, "c", 10); len(ls) != 0 {
					t.Fatalf("a retry is readable after a Promote before it is due: %+v", ls)
				}
				n, err := b.Promote(ctx, testRoute, 0, due)
				if err != nil {
					t.Fatalf("Promote: %v", err)
				}
				promoted += n
			}
			// Once promoted, the entry may still take a moment to be
			// readable (Kafka: the main topic's consumer fetches it).
			ready = append(ready, tryRead(t, b, "c", 10)...)
			return len(ready) > 0
		})
		// Promote again: the retry was made ready once.
		n, err := b.Promote(ctx, testRoute, 0, due)
		if err != nil {
			t.Fatalf("Promote: %v", err)
		}
		ready = append(ready, tryRead(t, b, "c", 10)...)
		if promoted+n != 1 || len(ready) != 1 {
			t.Fatalf("Promotes at due counted %d and made %d entries ready (%+v), want 1 and 1", promoted+n, len(ready), ready)
		}
		next := mustBegin(t, b, ready[0])
		if next.Try != try || next.Total != try || next.EventID != j.EventID || next.Key != "k" {
			t.Fatalf("try after a retry = %+v, want Try and Total %d of %s", next, try, j.EventID)
		}
		// The earlier try's lease is a leftover now.
		if got, err := b.Settle(ctx, "c", j, delivered(200, "", "fp")); err != nil || got == queue.Recorded {
			t.Fatalf("Settle of the earlier try = %s, %v; want it refused", settledName(got), err)
		}
		return next
	}
	j2 := retryAt(j, 2)
	j3 := retryAt(j2, 3)
	mustSettle(t, b, "c", j3, delivered(200, "", "fp"), queue.Recorded)
	if ks := mustGet(t, b, "k"); ks.State != queue.StateFinished || ks.Attempts != 3 {
		t.Fatalf("Get = %+v, want finished after 3 tries", ks)
	}
	assertNoEntries(t, b)
}

func testDeadLetterReplayPurge(t *testing.T, b queue.Backend) {
	{
		ctx := context.Background()
		e := testEntry("k", "fp")
		ack := mustEnqueue(t, b, e, 10)
		j := mustBegin(t, b, readOne(t, b, "c"))
		mustSettle(t, b, "c", j, queue.Settlement{Kind: queue.SettleRetry, Due: msNow()}, queue.Recorded)
		j = mustBegin(t, b, promoteAndRead(t, b, "c", msNow().Add(time.Second)))
		died := msNow()
		mustSettle(t, b, "c", j, dead("rejected:400", 400, died), queue.Recorded)

		if ks := mustGet(t, b, "k"); ks.State != queue.StateDeadLettered || ks.Attempts != 2 {
			t.Fatalf("Get = %+v, want dead_lettered after 2 tries", ks)
		}
		if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 1 {
			t.Fatalf("Stats = %+v, want Depth 0 DLQ 1", st)
		}
		if a := mustEnqueue(t, b, e, 10); a.State != queue.Pending || !a.Dead || a.ID != ack.ID {
			t.Fatalf("copy of a dead event = %+v, want Pending Dead", a)
		}
		list, next, err := b.ListDLQ(ctx, testRoute, "", 10)
		if err != nil || next != "" || len(list) != 1 {
			t.Fatalf("ListDLQ = %+v, %q, %v; want one entry", list, next, err)
		}
		d := list[0]
		if d.ID != ack.ID || d.Key != "k" || d.Reason != "rejected:400" || d.Status != 400 || d.Attempts != 2 ||
			d.Error != "upstream said no" || !d.FirstSeen.Equal(e.FirstSeen) || !d.DiedAt.Equal(died) {
			t.Fatalf("DLQ entry = %+v; want id %s, reason rejected:400, status 400, 2 attempts, first %v, died %v",
				d, ack.ID, e.FirstSeen, died)
		}

		// Replay: ready again, the round's tries start over, the total goes on.
		if err := b.Replay(ctx, testRoute, ack.ID); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if err := b.Replay(ctx, testRoute, ack.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("second Replay = %v, want ErrNotFound", err)
		}
		if st := mustStats(t, b); st.Depth != 1 || st.DLQ != 0 {
			t.Fatalf("Stats after Replay = %+v, want Depth 1 DLQ 0", st)
		}
		if ks := mustGet(t, b, "k"); ks.State != queue.StateQueued {
			t.Fatalf("Get after Replay = %+v, want queued", ks)
		}
		j = mustBegin(t, b, readOne(t, b, "c"))
		if j.Try != 1 || j.Total != 3 {
			t.Fatalf("try after Replay: Try %d Total %d, want 1 3", j.Try, j.Total)
		}
		mustSettle(t, b, "c", j, dead("exhausted", 503, msNow()), queue.Recorded)

		// Purge: the body goes, the key stays dead-lettered.
		if err := b.Purge(ctx, testRoute, ack.ID, time.Hour); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if list, _, err := b.ListDLQ(ctx, testRoute, "", 10); err != nil || len(list) != 0 {
			t.Fatalf("ListDLQ after Purge = %+v, %v; want empty", list, err)
		}
		if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 {
			t.Fatalf("Stats after Purge = %+v, want empty", st)
		}
		if ks := mustGet(t, b, "k"); ks.State != queue.StateDeadLettered {
			t.Fatalf("Get after Purge = %+v, want dead_lettered", ks)
		}
		if a := mustEnqueue(t, b, e, 10); a.State != queue.Pending || !a.Dead {
			t.Fatalf("Enqueue after Purge = %+v, want Pending Dead", a)
		}
		for name, f := range map[string]func(id string) error{
			"Replay": func(id string) error { return b.Replay(ctx, testRoute, id) },
			"Purge":  func(id string) error { return b.Purge(ctx, testRoute, id, time.Hour) },
		} {
			for _, id := range []string{ack.ID, "0-000000000000000000000000", "nonsense", ""} {
				if err := f(id); !errors.Is(err, queue.ErrNotFound) {
					t.Errorf("%s(%q) = %v, want ErrNotFound", name, id, err)
				}
			}
		}
		for _, cursor := range []string{"bad cursor", "x", "-", "1-", "-1"} {
			if _, _, err := b.ListDLQ(ctx, testRoute, cursor, 10); !errors.Is(err, queue.ErrBadCursor) {
				t.Errorf("ListDLQ(cursor %q) = %v, want ErrBadCursor", cursor, err)
			}
		}
		assertNoEntries(t, b)
	}
}

// Dead reports a dead-lettered event as the DLQ listing does, with the
// payload byte for byte, and changes nothing; it does not find an event
// before it dies, after a replay or a purge, nor an unknown id.
func testDeadEvent(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	e := testEntry("k", "fp")
	e.Payload = []byte("POST /hook \x00\xff\xfe <img src=x onerror=alert(1)> " + strings.Repeat("x", 5000))
	ack := mustEnqueue(t, b, e, 10)
	notFound := func(what, id string) {
		t.Helper()
		if d, p, err := b.Dead(ctx, testRoute, id); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Dead(%q) %s = %+v, %q, %v; want ErrNotFound", id, what, d, p, err)
		}
	}
	notFound("while queued", ack.ID)
	j := mustBegin(t, b, readOne(t, b, "c"))
	died := msNow()
	mustSettle(t, b, "c", j, dead("rejected:400", 400, died), queue.Recorded)

	found := func(what string, attempts int64) {
		t.Helper()
		d, payload, err := b.Dead(ctx, testRoute, ack.ID)
		if err != nil {
			t.Fatalf("Dead %s: %v", what, err)
		}
		list, _, err := b.ListDLQ(ctx, testRoute, "", 10)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListDLQ %s = %+v, %v; want one entry", what, list, err)
		}
		l := list[0]
		if d.ID != ack.ID || d.ID != l.ID || d.Key != "k" || d.Key != l.Key || d.Reason != l.Reason || d.Status != l.Status ||
			d.Attempts != attempts || d.Attempts != l.Attempts || d.Error != l.Error || !d.FirstSeen.Equal(e.FirstSeen) ||
			!d.FirstSeen.Equal(l.FirstSeen) || !d.DiedAt.Equal(l.DiedAt) {
			t.Fatalf("Dead %s = %+v; want the listing's %+v with %d attempts", what, d, l, attempts)
		}
		if !bytes.Equal(payload, e.Payload) {
			t.Fatalf("Dead %s: payload of %d bytes, want the %d enqueued", what, len(payload), len(e.Payload))
		}
		clear(payload) // the caller's copy: the stored event is untouched
	}
	found("after the event died", 1)
	if d := func() queue.DeadEntry { d, _, _ := b.Dead(ctx, testRoute, ack.ID); return d }(); d.Reason != "rejected:400" || d.Status != 400 ||
		d.Error != "upstream said no" || !d.DiedAt.Equal(died) {
		t.Fatalf("Dead = %+v; want rejected:400, status 400, died %v", d, died)
	}
	found("again (it changes nothing)", 1)
	if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 1 {
		t.Fatalf("Stats after Dead = %+v, want Depth 0 DLQ 1", st)
	}
	for _, id := range []string{"0-000000000000000000000000", "1-000000000000000000000000", "nonsense", ""} {
		notFound("(unknown id)", id)
	}

	if err := b.Replay(ctx, testRoute, ack.ID); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	notFound("after a replay", ack.ID)
	j = mustBegin(t, b, readOne(t, b, "c"))
	if !bytes.Equal(j.Payload, e.Payload) {
		t.Fatalf("the replayed try's payload differs from the enqueued one")
	}
	mustSettle(t, b, "c", j, dead("exhausted", 503, msNow()), queue.Recorded)
	found("after it died again", 2)

	if err := b.Purge(ctx, testRoute, ack.ID, time.Hour); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	notFound("after a purge", ack.ID)
	assertNoEntries(t, b)
}

// An entry whose consumer stalled or died is taken over (Options.
// Takeover) and delivered once by the new owner, and the stale owner's
// late settle, delivered, retry or dead, changes nothing: refused as
// NotOwner once the new owner has begun its try. The memory and Redis
// backends refuse it from the takeover on, before the new owner begins
// (their own TestStaleSettleRefusedFromTheTakeover); on Kafka the takeover
// completes at the new owner's Begin.
func testStaleOwnerSettle(t *testing.T, b queue.Backend, o Options) {
	mustEnqueue(t, b, testEntry("k", "fp"), 10)
	ja := mustBegin(t, b, readOne(t, b, "A"))
	nb, taken := o.takeover(t, b, "A", "B", []queue.Lease{ja.Lease})
	jb := mustBegin(t, nb, taken[0])
	if jb.Try != 2 || jb.Total != 2 || jb.EventID != ja.EventID {
		t.Fatalf("B's try = %+v, want Try and Total 2 of %s", jb, ja.EventID)
	}
	for _, s := range []queue.Settlement{delivered(200, "", "fp"), {Kind: queue.SettleRetry, Due: msNow()}, dead("exhausted", 500, msNow())} {
		mustSettle(t, b, "A", ja, s, queue.NotOwner)
	}
	if ks := mustGet(t, b, "k"); ks.State != queue.StateQueued || ks.Attempts != 2 {
		t.Fatalf("Get after stale settles = %+v, want queued, 2 tries", ks)
	}
	if st := mustStats(t, b); st.Depth != 1 || st.DLQ != 0 {
		t.Fatalf("Stats after stale settles = %+v, want Depth 1 DLQ 0", st)
	}
	mustSettle(t, nb, "B", jb, delivered(200, "", "fp"), queue.Recorded)
	if ks := mustGet(t, b, "k"); ks.State != queue.StateFinished || ks.Attempts != 2 {
		t.Fatalf("Get = %+v, want finished after 2 tries", ks)
	}
	assertNoEntries(t, b)
	if nb != b {
		assertNoEntries(t, nb)
	}
}

func testDeleteDropsLeftovers(t *testing.T, b queue.Backend) {
	{
		ctx := context.Background()
		cases := []struct {
			name string
			// held: the entry was read before the reset.
			held bool
		}{{"ready entry", false}, {"held entry", true}}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				key := "k-" + strings.ReplaceAll(c.name, " ", "-")
				first := mustEnqueue(t, b, testEntry(key, "fp"), 10)
				var l queue.Lease
				if c.held {
					l = readOne(t, b, "c")
				}
				ks, err := b.Delete(ctx, testRoute, key)
				if err != nil || ks.State != queue.StateQueued || ks.EventID != first.ID {
					t.Fatalf("Delete = %+v, %v; want the queued key's state", ks, err)
				}
				if !c.held {
					l = readOne(t, b, "c")
				}
				if _, ok, err := b.Begin(ctx, l); err != nil || ok {
					t.Fatalf("Begin of a leftover = ok %v, err %v; want ok false", ok, err)
				}
				assertNoEntries(t, b)
				if ks := mustGet(t, b, key); ks.State != queue.StateAbsent {
					t.Fatalf("Get after Delete = %+v, want absent", ks)
				}
				if st := mustStats(t, b); st.Depth != 0 {
					t.Fatalf("Depth after Delete = %d", st.Depth)
				}
				again := mustEnqueue(t, b, testEntry(key, "fp"), 10)
				if again.State != queue.Enqueued || again.ID == first.ID || again.Copies != 1 {
					t.Fatalf("Enqueue after Delete = %+v, want Enqueued with a new id", again)
				}
				j := mustBegin(t, b, readOne(t, b, "c"))
				mustSettle(t, b, "c", j, delivered(200, "", "fp"), queue.Recorded)
			})
		}
		t.Run("settle after delete is stale", func(t *testing.T) {
			mustEnqueue(t, b, testEntry("s", "fp"), 10)
			j := mustBegin(t, b, readOne(t, b, "c"))
			if _, err := b.Delete(ctx, testRoute, "s"); err != nil {
				t.Fatal(err)
			}
			mustSettle(t, b, "c", j, delivered(200, "", "fp"), queue.Stale)
			if ks := mustGet(t, b, "s"); ks.State != queue.StateAbsent {
				t.Fatalf("Get = %+v, want absent", ks)
			}
			assertNoEntries(t, b)
		})
		t.Run("dead key", func(t *testing.T) {
			id := deadLetter(t, b, "d", msNow())
			if _, err := b.Delete(ctx, testRoute, "d"); err != nil {
				t.Fatal(err)
			}
			if list, _, err := b.ListDLQ(ctx, testRoute, "", 10); err != nil || len(list) != 0 {
				t.Fatalf("ListDLQ after deleting the dead key = %+v, %v", list, err)
			}
			if err := b.Replay(ctx, testRoute, id); !errors.Is(err, queue.ErrNotFound) {
				t.Fatalf("Replay of a deleted key's event = %v, want ErrNotFound", err)
			}
			if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

// A DLQ listing pages through every dead-lettered event exactly once,
// whatever the page size: no page holds more than its limit (a limit
// below one is served as one), every page but the last gives a cursor,
// and each event is listed with its own key. The order is the backend's
// (Backend.ListDLQ): the memory and Redis backends list in the order the
// events died, and their own tests check that.
func testListDLQPagination(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	keyOf := map[string]string{} // event id -> key
	base := msNow()
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		keyOf[deadLetter(t, b, key, base.Add(time.Duration(i)*time.Millisecond))] = key
	}
	for _, limit := range []int{1, 2, 3, 5, 100} {
		seen := map[string]bool{}
		cursor := ""
		for page := 0; ; page++ {
			if page > len(keyOf) {
				t.Fatalf("ListDLQ(limit %d) did not end after %d pages", limit, page)
			}
			list, next, err := b.ListDLQ(ctx, testRoute, cursor, limit)
			if err != nil {
				t.Fatalf("ListDLQ(limit %d) page %d: %v", limit, page, err)
			}
			if len(list) > limit {
				t.Fatalf("ListDLQ(limit %d) page %d holds %d entries", limit, page, len(list))
			}
			for _, d := range list {
				key, ok := keyOf[d.ID]
				if !ok || seen[d.ID] || d.Key != key {
					t.Fatalf("ListDLQ(limit %d) page %d lists %+v: unknown, listed before, or not its key (%q)", limit, page, d, key)
				}
				seen[d.ID] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if len(seen) != len(keyOf) {
			t.Fatalf("ListDLQ(limit %d) listed %d of the %d dead events", limit, len(seen), len(keyOf))
		}
	}
	for _, limit := range []int{0, -1} {
		list, next, err := b.ListDLQ(ctx, testRoute, "", limit)
		if err != nil || len(list) > 1 || len(list) == 1 && keyOf[list[0].ID] == "" || next == "" {
			t.Fatalf("ListDLQ(limit %d) = %+v, next %q, %v; want at most one dead event, and a cursor", limit, list, next, err)
		}
	}
	all, next, err := b.ListDLQ(ctx, testRoute, "", 100)
	if err != nil || next != "" || len(all) != len(keyOf) {
		t.Fatalf("ListDLQ(limit 100) = %d entries, next %q, %v; want all %d on one page", len(all), next, err, len(keyOf))
	}
}

// A lease handed back is taken by another consumer at once, without
// waiting out the lock TTL: before the hand-back another consumer's
// Reclaim finds nothing; after it, that Reclaim takes the same event of
// the same round, and its try is begun and delivered once. (On Kafka the
// other consumer is one of the same instance: other instances get an
// instance's records when its partitions move.) The memory and Redis
// backends hand over the very entry, same Entry id (their own
// TestReclaimKeepsTheEntry).
func testHandBack(t *testing.T, b queue.Backend) {
	ctx := context.Background()
	const lockTTL = time.Hour // nothing is idle that long unless handed back
	mustEnqueue(t, b, testEntry("k", "fp"), 10)
	l := readOne(t, b, "A")
	if ls, err := b.Reclaim(ctx, testRoute, 0, "B", lockTTL); err != nil || len(ls) != 0 {
		t.Fatalf("Reclaim before hand-back = %+v, %v; want nothing", ls, err)
	}
	if err := b.HandBack(ctx, "A", []queue.Lease{l}, lockTTL); err != nil {
		t.Fatalf("HandBack: %v", err)
	}
	ls, err := b.Reclaim(ctx, testRoute, 0, "B", lockTTL)
	if err != nil || len(ls) != 1 || !sameRound(ls[0], l) || ls[0].Consumer != "B" {
		t.Fatalf("Reclaim after hand-back = %+v, %v; want A's %+v, now B's", ls, err, l)
	}
	j := mustBegin(t, b, ls[0])
	if j.Try != 1 {
		t.Fatalf("B's try = %d, want 1 (A never began)", j.Try)
	}
	mustSettle(t, b, "B", j, delivered(200, "", "fp"), queue.Recorded)
	if ks := mustGet(t, b, "k"); ks.State != queue.StateFinished || ks.Attempts != 1 {
		t.Fatalf("Get = %+v, want finished after one try", ks)
	}
	assertNoEntries(t, b)
}

// sameRound reports whether two leases hand out the same event in the
// same round (its token): one taken over from the other. Their Entry may
// differ (Kafka names each hand-out).
func sameRound(a, b queue.Lease) bool {
	return a.Route == b.Route && a.Key == b.Key && a.EventID == b.EventID && a.Token == b.Token
}

// A hand-back by a consumer whose entry was taken over (Options.
// Takeover) meanwhile must not take it from the new owner: nobody else
// can reclaim it, and the new owner's settle is recorded, so the event is
// delivered once. The stale consumer's Begin starts no try either.
func testHandBackByStaleOwner(t *testing.T, b queue.Backend, o Options) {
	ctx := context.Background()
	// A hand-back makes an entry look idle this long: only a hand-back
	// that took the entry lets a Reclaim with it find it.
	const lockTTL = time.Hour
	mustEnqueue(t, b, testEntry("k", "fp"), 10)
	l := readOne(t, b, "A")
	nb, taken := o.takeover(t, b, "A", "B", []queue.Lease{l})
	j := mustBegin(t, nb, taken[0])
	// A wakes up: its Begin starts no try (ErrNotOwner, or ok false where
	// the entry is read again elsewhere).
	if _, ok, err := b.Begin(ctx, l); ok || err != nil && !errors.Is(err, queue.ErrNotOwner) {
		t.Fatalf("stale Begin by A after the takeover: ok=%v err=%v, want no try", ok, err)
	}
	// A shuts down and hands back what it still believes it holds.
	if err := b.HandBack(ctx, "A", []queue.Lease{l}, lockTTL); err != nil {
		t.Fatalf("HandBack: %v", err)
	}
	for _, on := range []queue.Backend{b, nb} {
		if ls, err := on.Reclaim(ctx, testRoute, 0, "C", lockTTL); err != nil || len(ls) != 0 {
			t.Fatalf("Reclaim after a stale consumer's hand-back = %+v, %v; want nothing: the hand-back took the entry from its owner", ls, err)
		}
	}
	got, err := nb.Settle(ctx, "B", j, delivered(200, "", "fp"))
	if err != nil {
		t.Fatal(err)
	}
	if got != queue.Recorded {
		t.Fatalf("the owner's Settle after a stale consumer's hand-back = %s, want Recorded: the hand-back took the entry from its owner, whose delivery is then tried again by whoever reclaims it", settledName(got))
	}
	if ks := mustGet(t, b, "k"); ks.State != queue.StateFinished || ks.Attempts != 1 {
		t.Fatalf("Get = %+v, want finished after one try", ks)
	}
	assertNoEntries(t, b)
	if nb != b {
		assertNoEntries(t, nb)
	}
}
