// Package ledgertest checks that a ledger.Ledger keeps keys as every
// ledger must, in the style of testing/fstest: Run runs the conformance
// suite (every transition of a queued key: reserve, confirm, abort, begin,
// intend, settle, dead-letter, replay, purge, list, get, delete, stats,
// leases and retentions) against fresh ledgers from the caller's
// constructor. The memory and Redis ledgers run it in package ledger; a
// new implementation runs it the same way.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// Route is the route every case's keys belong to.
const Route = "hooks"

// waitBound bounds every wait for a condition in these tests.
const waitBound = 10 * time.Second

// What Subject.TTL reports, as PTTL does, and the lease and retention
// the cases ask for.
const (
	NoTTL  time.Duration = -1
	NoKey  time.Duration = -2
	Lease                = time.Minute
	Retain               = time.Hour
)

// Clock is a settable clock, at millisecond precision; the ledger under
// test must read its time from it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{t: time.UnixMilli(1_700_000_000_000).UTC()}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Subject is a fresh, empty ledger with probes into its expiries.
type Subject struct {
	ledger.Ledger
	// TTL is how long route's key has left: NoTTL when it does not
	// expire, NoKey when it is absent.
	TTL func(t *testing.T, route, key string) time.Duration
	// Expire lets the time of route's key run out; it must have one.
	Expire func(t *testing.T, route, key string)
	// EndLease lets the lease of a sync copy's lock on route's key run
	// out (Lease at most), the key itself not. Needed by the sync cases,
	// which run when the ledger is a ledger.Sync too.
	EndLease func(t *testing.T, route, key string)
}

// Run runs every conformance case as a subtest of t, each on a fresh,
// empty ledger from newLedger, on a fresh clock.
func Run(t *testing.T, newLedger func(t *testing.T, clock *Clock) Subject) {
	t.Helper()
	all := append(append(cases[:len(cases):len(cases)], pendingCases...), orderCases...)
	probe := newLedger(t, NewClock()).Ledger
	_, hist := probe.(Historian)
	if hist {
		all = append(all, historyCases...)
	}
	if _, ok := probe.(ledger.Sync); ok {
		all = append(all, syncCases...)
		if hist {
			all = append(all, syncHistoryCases...)
		}
	}
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			clock := NewClock()
			c.run(t, newLedger(t, clock), clock)
		})
	}
}

// WaitFor polls cond until it holds, failing t once waitBound has passed.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitBound, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// testCase is one conformance case.
type testCase struct {
	name string
	run  func(t *testing.T, l Subject, clock *Clock)
}

// --- helpers ---

var background = context.Background()

// Res is a reservation of Route's key for event eid with token tok, first
// seen now, fingerprint "fp-KEY", lease Lease.
func Res(clock *Clock, key, eid, tok string) ledger.Reservation {
	return ledger.Reservation{Route: Route, Key: key, Fingerprint: "fp-" + key, EventID: eid, Token: tok,
		FirstSeen: clock.Now(), Lease: Lease}
}

// MustReserve reserves r, failing t on an error.
func MustReserve(t *testing.T, l ledger.Ledger, r ledger.Reservation) ledger.Reserved {
	t.Helper()
	got, err := l.Reserve(background, r)
	if err != nil {
		t.Fatalf("Reserve %s: %v", r.Key, err)
	}
	return got
}

// MustConfirm confirms Route's key with tok and checks the answer.
func MustConfirm(t *testing.T, l ledger.Ledger, key, tok string, want bool) {
	t.Helper()
	ok, err := l.Confirm(background, Route, key, tok)
	if err != nil || ok != want {
		t.Fatalf("Confirm %s %s = %v, %v; want %v", key, tok, ok, err, want)
	}
}

// MustBegin begins and checks ok.
func MustBegin(t *testing.T, l ledger.Ledger, key, eid, tok, pos, owner string, want bool) ledger.Begun {
	t.Helper()
	b, ok, err := l.Begin(background, Route, key, eid, tok, pos, owner)
	if err != nil || ok != want {
		t.Fatalf("Begin %s %s %s @%s by %s = %+v, %v, %v; want ok %v", key, eid, tok, pos, owner, b, ok, err, want)
	}
	if !ok && b != (ledger.Begun{}) {
		t.Fatalf("Begin refused with %+v", b)
	}
	return b
}

// MustSettle settles owner's try and checks the answer.
func MustSettle(t *testing.T, l ledger.Ledger, key, eid, tok, owner string, s ledger.Settlement, want queue.Settled) {
	t.Helper()
	got, err := l.Settle(background, Route, key, eid, tok, owner, s)
	if err != nil || got != want {
		t.Fatalf("Settle %s %s %s by %s (kind %d) = %v, %v; want %v", key, eid, tok, owner, s.Kind, got, err, want)
	}
}

// MustGet reads Route's key, failing t on an error.
func MustGet(t *testing.T, l ledger.Ledger, key string) queue.KeyState {
	t.Helper()
	ks, err := l.Get(background, Route, key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return ks
}

// WantState reads Route's key and checks its state.
func WantState(t *testing.T, l ledger.Ledger, key, state string) queue.KeyState {
	t.Helper()
	ks := MustGet(t, l, key)
	if ks.State != state {
		t.Fatalf("Get %s = %+v, want state %s", key, ks, state)
	}
	return ks
}

// WantStats checks Route's depth, DLQ size and oldest first-seen.
func WantStats(t *testing.T, l ledger.Ledger, depth, dlq int64, oldest time.Time) {
	t.Helper()
	st, err := l.Stats(background, Route)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Depth != depth || st.DLQ != dlq || !st.Oldest.Equal(oldest) {
		t.Fatalf("Stats = %+v, want depth %d, dlq %d, oldest %v", st, depth, dlq, oldest)
	}
}

// wantTTL checks route's key expires within (0, max], or has want's
// special value (NoTTL, NoKey).
func wantTTL(t *testing.T, l Subject, key string, want time.Duration) {
	t.Helper()
	got := l.TTL(t, Route, key)
	if want < 0 {
		if got != want {
			t.Fatalf("ttl of %s = %v, want %v", key, got, want)
		}
		return
	}
	if got <= 0 || got > want {
		t.Fatalf("ttl of %s = %v, want within (0, %v]", key, got, want)
	}
}

// WantErr checks errors.Is(err, want).
func WantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// Enqueue reserves and confirms key: event "e-KEY", token "t-KEY".
func Enqueue(t *testing.T, l ledger.Ledger, clock *Clock, key string) (eid, tok string) {
	t.Helper()
	eid, tok = "e-"+key, "t-"+key
	if got := MustReserve(t, l, Res(clock, key, eid, tok)); got.State != queue.Enqueued {
		t.Fatalf("Reserve %s = %+v, want Enqueued", key, got)
	}
	MustConfirm(t, l, key, tok, true)
	return eid, tok
}

// DeadSettlement dead-letters a try (rejected:400) at DLQ position pos.
func DeadSettlement(clock *Clock, pos string) ledger.Settlement {
	return ledger.Settlement{Kind: queue.SettleDead, Reason: "rejected:400", Status: 400,
		Error: "bad request", At: clock.Now(), DLQPos: pos}
}

// DoneSettlement delivers a try with a 201 kept for Retain.
func DoneSettlement(key string) ledger.Settlement {
	return ledger.Settlement{Kind: queue.SettleDelivered, Retention: Retain,
		Outcome: store.Outcome{Status: 201, ContentType: "text/plain", Body: []byte("ok " + key), Fingerprint: "fp-" + key}}
}

// RetrySettlement retries a try under the new token tok.
func RetrySettlement(tok string) ledger.Settlement {
	return ledger.Settlement{Kind: queue.SettleRetry, NewToken: tok}
}

// Kill enqueues key, begins it once and dead-letters it at DLQ
// position pos.
func Kill(t *testing.T, l ledger.Ledger, clock *Clock, key, pos string) (eid string) {
	t.Helper()
	eid, tok := Enqueue(t, l, clock, key)
	MustBegin(t, l, key, eid, tok, "p-"+key, "w1", true)
	MustSettle(t, l, key, eid, tok, "w1", DeadSettlement(clock, pos), queue.Recorded)
	return eid
}

// listAllDead pages through the route's dead index limit at a time.
func listAllDead(t *testing.T, l ledger.Ledger, limit int) []queue.DeadEntry {
	t.Helper()
	var all []queue.DeadEntry
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatalf("ListDead(limit %d) did not end", limit)
		}
		list, next, err := l.ListDead(background, Route, cursor, limit)
		if err != nil {
			t.Fatalf("ListDead(limit %d, cursor %q): %v", limit, cursor, err)
		}
		if len(list) > limit {
			t.Fatalf("ListDead(limit %d) returned %d entries", limit, len(list))
		}
		all = append(all, list...)
		if next == "" {
			return all
		}
		if next == cursor && len(list) == 0 {
			t.Fatalf("ListDead(limit %d) is stuck at cursor %q", limit, cursor)
		}
		cursor = next
	}
}

func sameOutcome(a, b store.Outcome) bool {
	return a.Status == b.Status && a.ContentType == b.ContentType && string(a.Body) == string(b.Body) &&
		a.Fingerprint == b.Fingerprint
}

// --- cases ---

var cases = []testCase{
	{"ReserveAbsent", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		got := MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		want := ledger.Reserved{State: queue.Enqueued, ID: "e1", Fingerprint: "fp-k", Copies: 1}
		if !reservedEqual(got, want) {
			t.Fatalf("Reserve = %+v, want %+v", got, want)
		}
		ks := WantState(t, l, "k", queue.StateQueued)
		if ks.EventID != "e1" || ks.Copies != 1 || ks.Attempts != 0 || !ks.FirstSeen.Equal(first) ||
			!ks.LastSeen.Equal(first) || ks.Fingerprint != "fp-k" || ks.Status != 0 {
			t.Fatalf("Get = %+v", ks)
		}
		wantTTL(t, l, "k", Lease)
		WantStats(t, l, 0, 0, time.Time{}) // not in the age index until confirmed
	}},
	{"InFlight", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		clock.Add(time.Second)
		r := Res(clock, "k", "e2", "t2")
		r.Fingerprint = "other"
		got := MustReserve(t, l, r)
		want := ledger.Reserved{State: queue.InFlight, ID: "e1", Fingerprint: "fp-k", Copies: 2}
		if !reservedEqual(got, want) {
			t.Fatalf("Reserve of a reserved key = %+v, want %+v", got, want)
		}
		ks := WantState(t, l, "k", queue.StateQueued)
		if ks.EventID != "e1" || ks.Copies != 2 || !ks.FirstSeen.Equal(first) || !ks.LastSeen.Equal(clock.Now()) {
			t.Fatalf("Get = %+v", ks)
		}
		wantTTL(t, l, "k", Lease) // counting a copy keeps the lease
		// The other reservation's token does not confirm it.
		MustConfirm(t, l, "k", "t2", false)
	}},
	{"Confirm", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		MustConfirm(t, l, "k", "other", false)
		MustConfirm(t, l, "k", "t1", true)
		wantTTL(t, l, "k", NoTTL)
		WantStats(t, l, 1, 0, first)
		MustConfirm(t, l, "k", "t1", true) // again: still true, counted once
		WantStats(t, l, 1, 0, first)
		clock.Add(time.Second)
		got := MustReserve(t, l, Res(clock, "k", "e2", "t2"))
		want := ledger.Reserved{State: queue.Pending, ID: "e1", Fingerprint: "fp-k", Copies: 2}
		if !reservedEqual(got, want) {
			t.Fatalf("Reserve of a queued key = %+v, want %+v", got, want)
		}
		MustConfirm(t, l, "k", "t2", false)
		MustConfirm(t, l, "absent", "t1", false)
	}},
	{"ConfirmAfterAdoption", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		b := MustBegin(t, l, "k", "e1", "t1", "p1", "w1", true)
		if b != (ledger.Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 1}) {
			t.Fatalf("Begin adopting = %+v", b)
		}
		WantState(t, l, "k", queue.StateQueued)
		wantTTL(t, l, "k", NoTTL)
		WantStats(t, l, 1, 0, first)
		// The producer's late confirmation still succeeds, also once
		// the consumer moved the key on, and counts nothing twice.
		MustSettle(t, l, "k", "e1", "t1", "w1", RetrySettlement("t1b"), queue.Recorded)
		MustConfirm(t, l, "k", "t1", true)
		WantStats(t, l, 1, 0, first)
		MustBegin(t, l, "k", "e1", "t1b", "p2", "w1", true)
		MustSettle(t, l, "k", "e1", "t1b", "w1", DoneSettlement("k"), queue.Recorded)
		MustConfirm(t, l, "k", "t1", true)
		WantState(t, l, "k", queue.StateFinished)
		WantStats(t, l, 0, 0, time.Time{})
		MustConfirm(t, l, "k", "t1b", false) // a retry token is no reservation
	}},
	{"LeaseExpiry", func(t *testing.T, l Subject, clock *Clock) {
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		l.Expire(t, Route, "k")
		WantState(t, l, "k", queue.StateAbsent)
		MustConfirm(t, l, "k", "t1", false)
		MustBegin(t, l, "k", "e1", "t1", "p1", "w1", false)
		WantStats(t, l, 0, 0, time.Time{})
		// Another copy reserves the key afresh; the stale producer can
		// neither confirm nor abort it.
		got := MustReserve(t, l, Res(clock, "k", "e2", "t2"))
		if got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after the lease = %+v", got)
		}
		MustConfirm(t, l, "k", "t1", false)
		if err := l.Abort(background, Route, "k", "t1"); err != nil {
			t.Fatal(err)
		}
		if ks := WantState(t, l, "k", queue.StateQueued); ks.EventID != "e2" {
			t.Fatalf("Get = %+v", ks)
		}
		MustBegin(t, l, "k", "e1", "t1", "p1", "w1", false)
		MustConfirm(t, l, "k", "t2", true)
	}},
	{"Abort", func(t *testing.T, l Subject, clock *Clock) {
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		if err := l.Abort(background, Route, "k", "other"); err != nil {
			t.Fatal(err)
		}
		WantState(t, l, "k", queue.StateQueued)
		if err := l.Abort(background, Route, "k", "t1"); err != nil {
			t.Fatal(err)
		}
		WantState(t, l, "k", queue.StateAbsent)
		MustConfirm(t, l, "k", "t1", false)
		if err := l.Abort(background, Route, "absent", "t1"); err != nil {
			t.Fatal(err)
		}
		// A confirmed (or adopted) reservation's record exists: an abort
		// leaves it alone.
		eid, tok := Enqueue(t, l, clock, "k2")
		if err := l.Abort(background, Route, "k2", tok); err != nil {
			t.Fatal(err)
		}
		WantState(t, l, "k2", queue.StateQueued)
		MustReserve(t, l, Res(clock, "k3", "e3", "t3"))
		MustBegin(t, l, "k3", "e3", "t3", "p3", "w1", true)
		if err := l.Abort(background, Route, "k3", "t3"); err != nil {
			t.Fatal(err)
		}
		WantState(t, l, "k3", queue.StateQueued)
		WantStats(t, l, 2, 0, clock.Now())
		MustBegin(t, l, "k2", eid, tok, "p2", "w1", true)
	}},
	{"Full", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		Enqueue(t, l, clock, "a")
		clock.Add(time.Second)
		eb, tb := Enqueue(t, l, clock, "b")
		r := Res(clock, "c", "ec", "tc")
		r.MaxDepth = 2
		if got := MustReserve(t, l, r); !reservedEqual(got, ledger.Reserved{State: queue.Full}) {
			t.Fatalf("Reserve at max depth = %+v, want Full", got)
		}
		WantState(t, l, "c", queue.StateAbsent)
		WantStats(t, l, 2, 0, first)
		// A known key is still reported and counted at max depth.
		ra := Res(clock, "a", "x", "y")
		ra.MaxDepth = 2
		if got := MustReserve(t, l, ra); got.State != queue.Pending || got.ID != "e-a" || got.Copies != 2 {
			t.Fatalf("Reserve of a queued key at max depth = %+v", got)
		}
		// Unconfirmed reservations do not count against the depth.
		r.MaxDepth = 3
		if got := MustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve below max depth = %+v", got)
		}
		rd := Res(clock, "d", "ed", "td")
		rd.MaxDepth = 3
		if got := MustReserve(t, l, rd); got.State != queue.Enqueued {
			t.Fatalf("Reserve below max depth (reservations pending) = %+v", got)
		}
		MustConfirm(t, l, "c", "tc", true)
		re := Res(clock, "e", "ee", "te")
		re.MaxDepth = 3
		if got := MustReserve(t, l, re); got.State != queue.Full {
			t.Fatalf("Reserve at max depth 3 = %+v", got)
		}
		// A delivered event frees its place; 0 is no limit.
		MustBegin(t, l, "b", eb, tb, "pb", "w1", true)
		MustSettle(t, l, "b", eb, tb, "w1", DoneSettlement("b"), queue.Recorded)
		if got := MustReserve(t, l, re); got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after a delivery = %+v", got)
		}
		re = Res(clock, "f", "ef", "tf")
		if got := MustReserve(t, l, re); got.State != queue.Enqueued {
			t.Fatalf("Reserve with max depth 0 = %+v", got)
		}
		// queue.RefuseNew (the route's DLQ at its bound): no new key,
		// known ones still reported.
		rg := Res(clock, "g", "eg", "tg")
		rg.MaxDepth = queue.RefuseNew
		if got := MustReserve(t, l, rg); got.State != queue.Full {
			t.Fatalf("Reserve with RefuseNew = %+v, want Full", got)
		}
		WantState(t, l, "g", queue.StateAbsent)
		ra.MaxDepth = queue.RefuseNew
		if got := MustReserve(t, l, ra); got.State != queue.Pending {
			t.Fatalf("Reserve of a queued key with RefuseNew = %+v", got)
		}
	}},
	{"Begin", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "absent", eid, tok, "p1", "w1", false)
		MustBegin(t, l, "k", "other", tok, "p1", "w1", false)
		MustBegin(t, l, "k", eid, "other", "p1", "w1", false)
		b := MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		if b != (ledger.Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 1}) {
			t.Fatalf("Begin = %+v", b)
		}
		// A second copy of the record (another position) is a leftover,
		// and changes nothing.
		MustBegin(t, l, "k", eid, tok, "p2", "w2", false)
		if ks := MustGet(t, l, "k"); ks.Attempts != 1 {
			t.Fatalf("Get after a refused Begin = %+v", ks)
		}
		// The same record read again (the first consumer died) is a new try
		// by its new owner, who is told the former one; the former owner
		// can no longer settle.
		b = MustBegin(t, l, "k", eid, tok, "p1", "w2", true)
		if b.Try != 2 || b.Total != 2 || b.PrevOwner != "w1" {
			t.Fatalf("Begin again = %+v", b)
		}
		MustSettle(t, l, "k", eid, tok, "w1", DoneSettlement("k"), queue.NotOwner)
		if ks := WantState(t, l, "k", queue.StateQueued); ks.Attempts != 2 {
			t.Fatalf("Get = %+v", ks)
		}
		MustSettle(t, l, "k", eid, tok, "w2", DoneSettlement("k"), queue.Recorded)
		MustBegin(t, l, "k", eid, tok, "p1", "w2", false)
	}},
	{"ConcurrentBegin", func(t *testing.T, l Subject, clock *Clock) {
		for i := range 20 {
			key := "k" + strconv.Itoa(i)
			eid, tok := Enqueue(t, l, clock, key)
			var oks atomic.Int32
			var wg sync.WaitGroup
			for _, pos := range []string{"p1", "p2"} {
				wg.Go(func() {
					_, ok, err := l.Begin(background, Route, key, eid, tok, pos, "w-"+pos)
					if err != nil {
						t.Errorf("Begin @%s: %v", pos, err)
					}
					if ok {
						oks.Add(1)
					}
				})
			}
			wg.Wait()
			if n := oks.Load(); n != 1 {
				t.Fatalf("%d of two Begins of one token from two positions passed", n)
			}
			if ks := MustGet(t, l, key); ks.Attempts != 1 {
				t.Fatalf("Get = %+v", ks)
			}
		}
	}},
	{"SettleDelivered", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		s := DoneSettlement("k")
		// Not begun: nobody owns it.
		MustSettle(t, l, "k", eid, tok, "w1", s, queue.NotOwner)
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		MustSettle(t, l, "absent", eid, tok, "w1", s, queue.Stale)
		MustSettle(t, l, "k", "other", tok, "w1", s, queue.Stale)
		MustSettle(t, l, "k", eid, "other", "w1", s, queue.Stale)
		MustSettle(t, l, "k", eid, tok, "w2", s, queue.NotOwner)
		WantState(t, l, "k", queue.StateQueued)
		WantStats(t, l, 1, 0, clock.Now())
		MustSettle(t, l, "k", eid, tok, "w1", s, queue.Recorded)
		ks := WantState(t, l, "k", queue.StateFinished)
		if ks.Status != 201 || ks.Attempts != 1 || ks.EventID != eid || ks.Fingerprint != "fp-k" || ks.Copies != 1 {
			t.Fatalf("Get = %+v", ks)
		}
		WantStats(t, l, 0, 0, time.Time{})
		wantTTL(t, l, "k", Retain)
		// Settling or beginning again finds the key moved on.
		MustSettle(t, l, "k", eid, tok, "w1", s, queue.Stale)
		MustBegin(t, l, "k", eid, tok, "p1", "w1", false)
		// A later copy gets the stored answer (with the finishing
		// delivery's fingerprint).
		r := Res(clock, "k", "e2", "t2")
		r.Fingerprint = "another"
		got := MustReserve(t, l, r)
		if got.State != queue.Delivered || got.Copies != 2 || got.Fingerprint != "fp-k" || got.ID != "" ||
			!sameOutcome(got.Outcome, s.Outcome) {
			t.Fatalf("Reserve of a finished key = %+v", got)
		}
		wantTTL(t, l, "k", Retain) // counting a copy keeps the retention
		l.Expire(t, Route, "k")
		WantState(t, l, "k", queue.StateAbsent)
		if got := MustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve after the retention = %+v", got)
		}
	}},
	{"SettleRetry", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		if _, err := l.Settle(background, Route, "k", eid, tok, "w1", RetrySettlement("")); err == nil {
			t.Fatal("Settle retry without a new token passed")
		}
		MustSettle(t, l, "k", eid, tok, "w2", RetrySettlement("t2"), queue.NotOwner)
		MustSettle(t, l, "k", eid, tok, "w1", RetrySettlement("t2"), queue.Recorded)
		WantState(t, l, "k", queue.StateQueued)
		wantTTL(t, l, "k", NoTTL)
		WantStats(t, l, 1, 0, first)
		// The old token is gone: its record is a leftover, its owner stale.
		MustBegin(t, l, "k", eid, tok, "p1", "w1", false)
		MustSettle(t, l, "k", eid, tok, "w1", RetrySettlement("t3"), queue.Stale)
		// The retry record begins from its own position.
		b := MustBegin(t, l, "k", eid, "t2", "r1", "w3", true)
		if b != (ledger.Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 2, Total: 2}) {
			t.Fatalf("Begin of the retry = %+v", b)
		}
		MustBegin(t, l, "k", eid, "t2", "r2", "w3", false)
		if got := MustReserve(t, l, Res(clock, "k", "x", "y")); got.State != queue.Pending || got.Dead || got.ID != eid {
			t.Fatalf("Reserve of a retrying key = %+v", got)
		}
	}},
	{"SettleDead", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		MustSettle(t, l, "k", eid, tok, "w1", RetrySettlement("t2"), queue.Recorded)
		MustBegin(t, l, "k", eid, "t2", "p2", "w1", true)
		clock.Add(time.Minute)
		s := DeadSettlement(clock, "dlq-7")
		s.Attempts = 99 // the ledger counts tries itself
		MustSettle(t, l, "k", eid, "t2", "w2", s, queue.NotOwner)
		WantStats(t, l, 1, 0, first)
		MustSettle(t, l, "k", eid, "t2", "w1", s, queue.Recorded)
		ks := WantState(t, l, "k", queue.StateDeadLettered)
		if ks.Attempts != 2 || ks.EventID != eid || ks.Status != 0 {
			t.Fatalf("Get = %+v", ks)
		}
		WantStats(t, l, 0, 1, time.Time{})
		wantTTL(t, l, "k", NoTTL)
		key, pos, err := l.Dead(background, Route, eid, "")
		if err != nil || key != "k" || pos != "dlq-7" {
			t.Fatalf("Dead = %q, %q, %v", key, pos, err)
		}
		_, _, err = l.Dead(background, Route, "other", "")
		WantErr(t, "Dead of an unknown event", err, queue.ErrNotFound)
		list := listAllDead(t, l, 10)
		want := queue.DeadEntry{ID: eid, Key: "k", Reason: "rejected:400", Status: 400, Attempts: 2,
			Error: "bad request", FirstSeen: first, DiedAt: clock.Now()}
		if len(list) != 1 || !deadEqual(list[0], want) {
			t.Fatalf("ListDead = %+v, want [%+v]", list, want)
		}
		// DeadEntry reports the event as the listing does, with its DLQ
		// position, and changes nothing.
		d, pos, err := l.DeadEntry(background, Route, eid)
		if err != nil || pos != "dlq-7" || !deadEqual(d, want) {
			t.Fatalf("DeadEntry = %+v, %q, %v; want %+v at dlq-7", d, pos, err, want)
		}
		_, _, err = l.DeadEntry(background, Route, "other")
		WantErr(t, "DeadEntry of an unknown event", err, queue.ErrNotFound)
		WantState(t, l, "k", queue.StateDeadLettered)
		MustBegin(t, l, "k", eid, "t2", "p2", "w1", false)
		MustSettle(t, l, "k", eid, "t2", "w1", s, queue.Stale)
		got := MustReserve(t, l, Res(clock, "k", "x", "y"))
		if got.State != queue.Pending || !got.Dead || got.ID != eid || got.Fingerprint != "fp-k" || got.Copies != 2 {
			t.Fatalf("Reserve of a dead key = %+v", got)
		}
	}},
	{"Replay", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		eid := Kill(t, l, clock, "k", "dlq-1")
		WantErr(t, "Replay at another DLQ position", l.Replay(background, Route, eid, "dlq-2", "r1"), queue.ErrNotFound)
		WantErr(t, "Replay of an unknown event", l.Replay(background, Route, "other", "dlq-1", "r1"), queue.ErrNotFound)
		WantStats(t, l, 0, 1, time.Time{})
		if err := l.Replay(background, Route, eid, "dlq-1", "r1"); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if ks := WantState(t, l, "k", queue.StateQueued); ks.Attempts != 1 || ks.EventID != eid {
			t.Fatalf("Get = %+v", ks)
		}
		WantStats(t, l, 1, 0, first)
		wantTTL(t, l, "k", NoTTL)
		_, _, err := l.Dead(background, Route, eid, "")
		WantErr(t, "Dead after a replay", err, queue.ErrNotFound)
		_, _, err = l.DeadEntry(background, Route, eid)
		WantErr(t, "DeadEntry after a replay", err, queue.ErrNotFound)
		WantErr(t, "Replay twice", l.Replay(background, Route, eid, "dlq-1", "r2"), queue.ErrNotFound)
		WantErr(t, "Purge after a replay", l.Purge(background, Route, eid, Retain), queue.ErrNotFound)
		if list := listAllDead(t, l, 10); len(list) != 0 {
			t.Fatalf("ListDead after a replay = %+v", list)
		}
		if got := MustReserve(t, l, Res(clock, "k", "x", "y")); got.State != queue.Pending || got.Dead {
			t.Fatalf("Reserve of a replayed key = %+v", got)
		}
		// The replayed record begins anew (its begun position was
		// cleared): this round's tries restart, the total goes on.
		MustBegin(t, l, "k", eid, "r2", "q1", "w1", false)
		b := MustBegin(t, l, "k", eid, "r1", "q1", "w1", true)
		if b != (ledger.Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 2}) {
			t.Fatalf("Begin after a replay = %+v", b)
		}
		// It can die again, and its listing shows this death only.
		clock.Add(time.Hour)
		s := DeadSettlement(clock, "dlq-9")
		s.Reason, s.Status, s.Error = "exhausted", 0, ""
		MustSettle(t, l, "k", eid, "r1", "w1", s, queue.Recorded)
		list := listAllDead(t, l, 10)
		want := queue.DeadEntry{ID: eid, Key: "k", Reason: "exhausted", Attempts: 2, FirstSeen: first, DiedAt: clock.Now()}
		if len(list) != 1 || !deadEqual(list[0], want) {
			t.Fatalf("ListDead = %+v, want [%+v]", list, want)
		}
		WantErr(t, "Replay at the old position", l.Replay(background, Route, eid, "dlq-1", "r3"), queue.ErrNotFound)
		if err := l.Replay(background, Route, eid, "dlq-9", "r3"); err != nil {
			t.Fatalf("Replay again: %v", err)
		}
	}},
	{"Purge", func(t *testing.T, l Subject, clock *Clock) {
		eid := Kill(t, l, clock, "k", "dlq-1")
		WantErr(t, "Purge of an unknown event", l.Purge(background, Route, "other", Retain), queue.ErrNotFound)
		if err := l.Purge(background, Route, eid, Retain); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if ks := WantState(t, l, "k", queue.StateDeadLettered); ks.EventID != eid || ks.Attempts != 1 {
			t.Fatalf("Get = %+v", ks)
		}
		wantTTL(t, l, "k", Retain)
		WantStats(t, l, 0, 0, time.Time{})
		_, _, err := l.Dead(background, Route, eid, "")
		WantErr(t, "Dead after a purge", err, queue.ErrNotFound)
		_, _, err = l.DeadEntry(background, Route, eid)
		WantErr(t, "DeadEntry after a purge", err, queue.ErrNotFound)
		WantErr(t, "Replay after a purge", l.Replay(background, Route, eid, "dlq-1", "r1"), queue.ErrNotFound)
		WantErr(t, "Purge twice", l.Purge(background, Route, eid, Retain), queue.ErrNotFound)
		if list := listAllDead(t, l, 10); len(list) != 0 {
			t.Fatalf("ListDead after a purge = %+v", list)
		}
		// Provider retries still find it dead-lettered, until the
		// retention runs out.
		if got := MustReserve(t, l, Res(clock, "k", "x", "y")); got.State != queue.Pending || !got.Dead || got.ID != eid {
			t.Fatalf("Reserve of a purged key = %+v", got)
		}
		l.Expire(t, Route, "k")
		WantState(t, l, "k", queue.StateAbsent)
		if got := MustReserve(t, l, Res(clock, "k", "x", "y")); got.State != queue.Enqueued {
			t.Fatalf("Reserve after the retention = %+v", got)
		}
	}},
	{"Delete", func(t *testing.T, l Subject, clock *Clock) {
		del := func(key, state string) queue.KeyState {
			t.Helper()
			ks, err := l.Delete(background, Route, key)
			if err != nil || ks.State != state {
				t.Fatalf("Delete %s = %+v, %v; want state %s", key, ks, err, state)
			}
			WantState(t, l, key, queue.StateAbsent)
			return ks
		}
		del("absent", queue.StateAbsent)

		MustReserve(t, l, Res(clock, "enq", "e0", "t0"))
		if ks := del("enq", queue.StateQueued); ks.EventID != "e0" || ks.Copies != 1 {
			t.Fatalf("Delete = %+v", ks)
		}
		MustConfirm(t, l, "enq", "t0", false)

		eid, tok := Enqueue(t, l, clock, "queued")
		MustBegin(t, l, "queued", eid, tok, "p1", "w1", true)
		if ks := del("queued", queue.StateQueued); ks.EventID != eid || ks.Attempts != 1 {
			t.Fatalf("Delete = %+v", ks)
		}
		WantStats(t, l, 0, 0, time.Time{})
		MustSettle(t, l, "queued", eid, tok, "w1", DoneSettlement("queued"), queue.Stale)
		MustBegin(t, l, "queued", eid, tok, "p1", "w1", false)

		dead := Kill(t, l, clock, "dead", "dlq-1")
		if ks := del("dead", queue.StateDeadLettered); ks.EventID != dead {
			t.Fatalf("Delete = %+v", ks)
		}
		WantStats(t, l, 0, 0, time.Time{})
		_, _, err := l.Dead(background, Route, dead, "")
		WantErr(t, "Dead after a delete", err, queue.ErrNotFound)
		WantErr(t, "Replay after a delete", l.Replay(background, Route, dead, "dlq-1", "r"), queue.ErrNotFound)

		eid, tok = Enqueue(t, l, clock, "done")
		MustBegin(t, l, "done", eid, tok, "p1", "w1", true)
		MustSettle(t, l, "done", eid, tok, "w1", DoneSettlement("done"), queue.Recorded)
		if ks := del("done", queue.StateFinished); ks.Status != 201 || ks.EventID != eid {
			t.Fatalf("Delete = %+v", ks)
		}
		if got := MustReserve(t, l, Res(clock, "done", "e9", "t9")); got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after a delete = %+v", got)
		}
	}},
	{"ListDeadPages", func(t *testing.T, l Subject, clock *Clock) {
		// More than a small hash holds (Redis switches its encoding past
		// 128 entries), with a few gone from the index.
		const n = 300
		want := map[string]bool{}
		for i := range n {
			key := fmt.Sprintf("k%03d", i)
			eid := Kill(t, l, clock, key, "dlq-"+key)
			switch i % 50 {
			case 7:
				if err := l.Purge(background, Route, eid, Retain); err != nil {
					t.Fatal(err)
				}
			case 8:
				if err := l.Replay(background, Route, eid, "dlq-"+key, "r"); err != nil {
					t.Fatal(err)
				}
			default:
				want[eid] = true
			}
		}
		WantStats(t, l, n/50, int64(len(want)), clock.Now())
		for _, limit := range []int{1, 7, 100, 1000} {
			list := listAllDead(t, l, limit)
			seen := map[string]bool{}
			for _, e := range list {
				if !want[e.ID] || seen[e.ID] {
					t.Fatalf("ListDead(limit %d) lists %q (dead %v, twice %v)", limit, e.ID, want[e.ID], seen[e.ID])
				}
				if e.Key != "k"+e.ID[len("e-k"):] || e.Attempts != 1 || e.Status != 400 {
					t.Fatalf("ListDead entry %+v", e)
				}
				seen[e.ID] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("ListDead(limit %d) listed %d of %d events", limit, len(seen), len(want))
			}
		}
		for _, bad := range []string{"x", "-1", "/e", "1.5/e"} {
			_, _, err := l.ListDead(background, Route, bad, 10)
			WantErr(t, fmt.Sprintf("ListDead(cursor %q)", bad), err, queue.ErrBadCursor)
		}
		// A limit below one lists one.
		if list, _, err := l.ListDead(background, Route, "", 0); err != nil || len(list) != 1 {
			t.Fatalf("ListDead(limit 0) = %d entries, %v", len(list), err)
		}
	}},
	{"StatsOldest", func(t *testing.T, l Subject, clock *Clock) {
		WantStats(t, l, 0, 0, time.Time{})
		t0 := clock.Now()
		// ledger.Reserved in one order, first seen in another.
		var toks [3]string
		for i, off := range []time.Duration{2 * time.Second, 0, time.Second} {
			r := Res(clock, "k"+strconv.Itoa(i), "e"+strconv.Itoa(i), "t"+strconv.Itoa(i))
			r.FirstSeen = t0.Add(off)
			MustReserve(t, l, r)
			toks[i] = r.Token
			MustConfirm(t, l, r.Key, r.Token, true)
		}
		WantStats(t, l, 3, 0, t0)
		MustBegin(t, l, "k1", "e1", toks[1], "p", "w", true)
		MustSettle(t, l, "k1", "e1", toks[1], "w", DoneSettlement("k1"), queue.Recorded)
		WantStats(t, l, 2, 0, t0.Add(time.Second))
		MustBegin(t, l, "k2", "e2", toks[2], "p", "w", true)
		MustSettle(t, l, "k2", "e2", toks[2], "w", DeadSettlement(clock, "d"), queue.Recorded)
		WantStats(t, l, 1, 1, t0.Add(2*time.Second))
		// Other routes are apart.
		st, err := l.Stats(background, "other")
		if err != nil || st != (queue.Stats{}) {
			t.Fatalf("Stats of another route = %+v, %v", st, err)
		}
	}},
	{"RoutesApart", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		r := Res(clock, "k", "e2", "t2")
		r.Route = "other"
		if got := MustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve of the key on another route = %+v", got)
		}
		if _, ok, err := l.Begin(background, "other", "k", eid, tok, "p", "w"); ok || err != nil {
			t.Fatalf("Begin on another route = %v, %v", ok, err)
		}
		if ks := MustGet(t, l, "k"); ks.EventID != eid {
			t.Fatalf("Get = %+v", ks)
		}
	}},
	{"ConcurrentReserve", func(t *testing.T, l Subject, clock *Clock) {
		const n = 1000
		var wg sync.WaitGroup
		states := make([]ledger.Reserved, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				states[i], errs[i] = l.Reserve(background, Res(clock, "k", "e"+strconv.Itoa(i), "t"+strconv.Itoa(i)))
			})
		}
		wg.Wait()
		enqueued := -1
		copies := map[int64]bool{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Reserve %d: %v", i, errs[i])
			}
			switch states[i].State {
			case queue.Enqueued:
				if enqueued >= 0 {
					t.Fatalf("Reserves %d and %d both reserved the key", enqueued, i)
				}
				enqueued = i
			case queue.InFlight:
			default:
				t.Fatalf("Reserve %d = %+v", i, states[i])
			}
			copies[states[i].Copies] = true
		}
		if enqueued < 0 {
			t.Fatal("no Reserve reserved the key")
		}
		for i := range n {
			if states[i].State == queue.InFlight && states[i].ID != "e"+strconv.Itoa(enqueued) {
				t.Fatalf("Reserve %d = %+v, reserved by %d", i, states[i], enqueued)
			}
		}
		if len(copies) != n || !copies[1] || !copies[n] {
			t.Fatalf("copies counted: %d distinct of %d", len(copies), n)
		}
		if ks := MustGet(t, l, "k"); ks.Copies != n || ks.EventID != "e"+strconv.Itoa(enqueued) {
			t.Fatalf("Get = %+v", ks)
		}
	}},
}

func reservedEqual(a, b ledger.Reserved) bool {
	return a.State == b.State && a.ID == b.ID && a.Fingerprint == b.Fingerprint && a.Dead == b.Dead &&
		a.Copies == b.Copies && sameOutcome(a.Outcome, b.Outcome)
}

func deadEqual(a, b queue.DeadEntry) bool {
	return a.ID == b.ID && a.Key == b.Key && a.Reason == b.Reason && a.Status == b.Status &&
		a.Attempts == b.Attempts && a.Error == b.Error && a.FirstSeen.Equal(b.FirstSeen) && a.DiedAt.Equal(b.DiedAt)
}
