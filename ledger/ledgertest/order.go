package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// The order gate (package ledger's order.go, model/order.pml): the events
// of one order value are begun one at a time, in the order their keys
// became queued; a key begun out of turn is parked and handed back
// (HandBacks) when its turn comes.

// EnqueueOrdered reserves and confirms key (event "e-KEY", token
// "t-KEY") with order value v and stale value stale ("" none).
func EnqueueOrdered(t *testing.T, l ledger.Ledger, clock *Clock, key, v, stale string) (eid, tok string) {
	t.Helper()
	eid, tok = "e-"+key, "t-"+key
	r := Res(clock, key, eid, tok)
	r.Order, r.Stale = v, stale
	if got := MustReserve(t, l, r); got.State != queue.Enqueued {
		t.Fatalf("Reserve %s = %+v, want Enqueued", key, got)
	}
	MustConfirm(t, l, key, tok, true)
	return eid, tok
}

// mustPark begins key's record at pos and wants it parked: ok false,
// Begun{Parked: true}, no try counted.
func mustPark(t *testing.T, l ledger.Ledger, key, eid, tok, pos string) {
	t.Helper()
	b, ok, err := l.Begin(background, Route, key, eid, tok, pos, "w1")
	if err != nil || ok || !b.Parked {
		t.Fatalf("Begin %s @%s = %+v, %v, %v; want parked", key, pos, b, ok, err)
	}
	if ks := MustGet(t, l, key); ks.State != queue.StateQueued || ks.Attempts != 0 {
		t.Fatalf("parked %s = %+v, want queued with no attempt", key, ks)
	}
}

// mustHandBack calls HandBacks(redo) and wants exactly keys handed back,
// returning each key's new token.
func mustHandBack(t *testing.T, l ledger.Ledger, redo time.Duration, keys ...string) map[string]ledger.HandBack {
	t.Helper()
	hs, err := l.HandBacks(background, Route, redo, 0)
	if err != nil {
		t.Fatalf("HandBacks: %v", err)
	}
	got := map[string]ledger.HandBack{}
	var names []string
	for _, h := range hs {
		if h.Token == "" || h.EventID != "e-"+h.Key {
			t.Fatalf("HandBacks gave %+v", h)
		}
		got[h.Key] = h
		names = append(names, h.Key)
	}
	slices.Sort(names)
	slices.Sort(keys)
	if !slices.Equal(names, keys) {
		t.Fatalf("HandBacks handed back %v, want %v", names, keys)
	}
	return got
}

// wantWaiting checks Stats.Waiting.
func wantWaiting(t *testing.T, l ledger.Ledger, n int64) {
	t.Helper()
	st, err := l.Stats(background, Route)
	if err != nil || st.Waiting != n {
		t.Fatalf("Stats = %+v, %v; want %d waiting", st, err, n)
	}
}

var orderCases = []testCase{
	{"order/two values interleaved: one at a time per value, in order", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		eb1, tb1 := EnqueueOrdered(t, l, clock, "b1", "B", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		eb2, tb2 := EnqueueOrdered(t, l, clock, "b2", "B", "")
		// The transport reads them out of order: the later ones park.
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		mustPark(t, l, "b2", eb2, tb2, "p-b2")
		wantWaiting(t, l, 2)
		MustBegin(t, l, "b1", eb1, tb1, "p-b1", "w1", true)
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w2", true)
		mustHandBack(t, l, 0) // nothing's turn yet
		MustSettle(t, l, "a1", ea1, ta1, "w2", DoneSettlement("a1"), queue.Recorded)
		h := mustHandBack(t, l, 0, "a2")
		if h["a2"].Pos != "p-a2" {
			t.Fatalf("a2 handed back with position %q, want its parked one p-a2", h["a2"].Pos)
		}
		wantWaiting(t, l, 1)
		// The parked record's old token may no longer begin out of turn
		// twice: the handed-back record carries the pending token.
		MustBegin(t, l, "a2", ea2, h["a2"].Token, "p-a2b", "w1", true)
		MustSettle(t, l, "a2", ea2, h["a2"].Token, "w1", DoneSettlement("a2"), queue.Recorded)
		MustSettle(t, l, "b1", eb1, tb1, "w1", DoneSettlement("b1"), queue.Recorded)
		h = mustHandBack(t, l, 0, "b2")
		MustBegin(t, l, "b2", eb2, h["b2"].Token, "p-b2b", "w1", true)
		wantWaiting(t, l, 0)
	}},
	{"order/a retrying head holds only its value", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		eb1, tb1 := EnqueueOrdered(t, l, clock, "b1", "B", "")
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true)
		MustSettle(t, l, "a1", ea1, ta1, "w1", RetrySettlement("t-a1-r"), queue.Recorded)
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		MustBegin(t, l, "b1", eb1, tb1, "p-b1", "w1", true)
		MustSettle(t, l, "b1", eb1, tb1, "w1", DoneSettlement("b1"), queue.Recorded)
		mustHandBack(t, l, 0)
		// The retry's record goes first; then a2's turn comes.
		MustBegin(t, l, "a1", ea1, "t-a1-r", "p-a1r", "w2", true)
		mustHandBack(t, l, 0)
		MustSettle(t, l, "a1", ea1, "t-a1-r", "w2", DoneSettlement("a1"), queue.Recorded)
		h := mustHandBack(t, l, 0, "a2")
		MustBegin(t, l, "a2", ea2, h["a2"].Token, "p-a2b", "w2", true)
	}},
	{"order/a dead head lets the next go with on_dead continue", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true)
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		MustSettle(t, l, "a1", ea1, ta1, "w1", DeadSettlement(clock, "d-1"), queue.Recorded)
		h := mustHandBack(t, l, 0, "a2")
		MustBegin(t, l, "a2", ea2, h["a2"].Token, "p-a2b", "w1", true)
		MustSettle(t, l, "a2", ea2, h["a2"].Token, "w1", DoneSettlement("a2"), queue.Recorded)
		// A replay of a1 goes to the back of its value: begun at once
		// here, the line being empty.
		if _, _, err := l.Dead(background, Route, ea1, ""); err != nil {
			t.Fatal(err)
		}
		if err := l.Replay(background, Route, ea1, "d-1", "t-a1-x"); err != nil {
			t.Fatal(err)
		}
		ea3, ta3 := EnqueueOrdered(t, l, clock, "a3", "A", "")
		MustBegin(t, l, "a1", ea1, "t-a1-x", "p-a1x", "w1", true)
		mustPark(t, l, "a3", ea3, ta3, "p-a3")
		MustSettle(t, l, "a1", ea1, "t-a1-x", "w1", DoneSettlement("a1"), queue.Recorded)
		mustHandBack(t, l, 0, "a3")
	}},
	{"order/a dead head holds its value with on_dead hold until replayed and delivered", func(t *testing.T, l Subject, clock *Clock) {
		ea1, _ := deadHeadHeld(t, l, clock)
		if err := l.Replay(background, Route, ea1, "d-1", "t-a1-x"); err != nil {
			t.Fatal(err)
		}
		// Still the head: begun, not parked.
		MustBegin(t, l, "a1", ea1, "t-a1-x", "p-a1x", "w1", true)
		mustHandBack(t, l, 0)
		MustSettle(t, l, "a1", ea1, "t-a1-x", "w1", DoneSettlement("a1"), queue.Recorded)
		mustHandBack(t, l, 0, "a2")
	}},
	{"order/a dead head held with on_dead hold lets the next go once purged", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ea2 := deadHeadHeld(t, l, clock)
		if err := l.Purge(background, Route, ea1, Retain); err != nil {
			t.Fatal(err)
		}
		h := mustHandBack(t, l, 0, "a2")
		MustBegin(t, l, "a2", ea2, h["a2"].Token, "p-a2b", "w1", true)
	}},
	{"order/stale: an event older than one delivered for its value is begun stale", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "100")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "50")
		ea3, ta3 := EnqueueOrdered(t, l, clock, "a3", "A", "100")
		eb1, tb1 := EnqueueOrdered(t, l, clock, "b1", "B", "10")
		if b := MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true); b.Stale {
			t.Fatal("the first event of a value begun stale")
		}
		MustSettle(t, l, "a1", ea1, ta1, "w1", DoneSettlement("a1"), queue.Recorded)
		if b := MustBegin(t, l, "a2", ea2, ta2, "p-a2", "w1", true); !b.Stale {
			t.Fatal("a2 (50 < 100 delivered) not begun stale")
		}
		MustSettle(t, l, "a2", ea2, ta2, "w1", DoneSettlement("a2"), queue.Recorded)
		if b := MustBegin(t, l, "a3", ea3, ta3, "p-a3", "w1", true); b.Stale {
			t.Fatal("a3 (100, equal to the greatest delivered) begun stale")
		}
		if b := MustBegin(t, l, "b1", eb1, tb1, "p-b1", "w1", true); b.Stale {
			t.Fatal("another value's event begun stale")
		}
	}},
	{"order/a hand-back lost with its instance is redone after redo", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true)
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		MustSettle(t, l, "a1", ea1, ta1, "w1", DoneSettlement("a1"), queue.Recorded)
		first := mustHandBack(t, l, 0, "a2")["a2"]
		// The instance died before producing a2's record: the sweeper
		// finds it due once redo has passed, not before.
		mustHandBack(t, l, Lease)
		clock.Add(Lease)
		again := mustHandBack(t, l, Lease, "a2")["a2"]
		if again.Token != first.Token || again.Pos != "p-a2" {
			t.Fatalf("handed back again as %+v (first %+v): want the same token, the parked position", again, first)
		}
		// Both records land: the first begun wins, the other is a leftover.
		MustBegin(t, l, "a2", ea2, again.Token, "p-a2y", "w1", true)
		MustBegin(t, l, "a2", ea2, first.Token, "p-a2x", "w1", false)
		clock.Add(Lease)
		mustHandBack(t, l, Lease) // begun: no longer due
	}},
	{"order/a dead owner's head is begun again from its record, holding its value", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true)
		// w1 dies; its record is read again by w2 (the lease ran out), while
		// a2 is read and parked.
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		if b := MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w2", true); b.PrevOwner != "w1" {
			t.Fatalf("begun again with PrevOwner %q, want w1", b.PrevOwner)
		}
		MustSettle(t, l, "a1", ea1, ta1, "w1", DoneSettlement("a1"), queue.NotOwner)
		mustHandBack(t, l, 0)
		MustSettle(t, l, "a1", ea1, ta1, "w2", DoneSettlement("a1"), queue.Recorded)
		mustHandBack(t, l, 0, "a2")
	}},
	{"order/an event without a value, and a deleted head", func(t *testing.T, l Subject, clock *Clock) {
		ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
		ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
		eu, tu := EnqueueOrdered(t, l, clock, "u", "", "")
		mustPark(t, l, "a2", ea2, ta2, "p-a2")
		MustBegin(t, l, "u", eu, tu, "p-u", "w1", true)
		if _, err := l.Delete(background, Route, "a1"); err != nil {
			t.Fatal(err)
		}
		MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", false)
		h := mustHandBack(t, l, 0, "a2")
		MustBegin(t, l, "a2", ea2, h["a2"].Token, "p-a2b", "w1", true)
		wantWaiting(t, l, 0)
	}},
}

// deadHeadHeld queues a1 and a2 on value A, begins a1, parks a2 and
// dead-letters a1 with on_dead: hold: nothing is handed back. It returns
// their event ids.
func deadHeadHeld(t *testing.T, l Subject, clock *Clock) (ea1, ea2 string) {
	t.Helper()
	ea1, ta1 := EnqueueOrdered(t, l, clock, "a1", "A", "")
	ea2, ta2 := EnqueueOrdered(t, l, clock, "a2", "A", "")
	MustBegin(t, l, "a1", ea1, ta1, "p-a1", "w1", true)
	mustPark(t, l, "a2", ea2, ta2, "p-a2")
	hold := DeadSettlement(clock, "d-1")
	hold.OrderHold = true
	MustSettle(t, l, "a1", ea1, ta1, "w1", hold, queue.Recorded)
	mustHandBack(t, l, 0)
	return ea1, ea2
}
