package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// The sync routes' transitions (ledger.Sync) on the same key record, and
// a route switching mode on one key.

// syncOf is l's Sync (l may be a Subject).
func syncOf(l ledger.Ledger) ledger.Sync {
	if s, ok := l.(Subject); ok {
		l = s.Ledger
	}
	return l.(ledger.Sync)
}

// MustClaim claims Route's key with fingerprint "fp-KEY" and lease Lease,
// and checks the state.
func MustClaim(t *testing.T, l ledger.Ledger, key string, want store.State) store.Claim {
	t.Helper()
	c, err := syncOf(l).Claim(background, Route, key, "fp-"+key, Lease)
	if err != nil || c.State != want {
		t.Fatalf("Claim %s = %+v, %v; want %v", key, c, err, want)
	}
	if (c.Token != "") != (want == store.Claimed) {
		t.Fatalf("Claim %s = %+v: token with state %v", key, c, c.State)
	}
	return c
}

// SyncOutcome is a sync copy's 202 for key.
func SyncOutcome(key string) store.Outcome {
	return store.Outcome{Status: 202, ContentType: "application/json", Body: []byte(`{"ok":"` + key + `"}`), Fingerprint: "fp-" + key}
}

// mustFinish finishes Route's key with tok and checks the error.
func mustFinish(t *testing.T, l ledger.Ledger, key, tok string, want error) {
	t.Helper()
	err := syncOf(l).Finish(background, Route, key, tok, SyncOutcome(key), Retain)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("Finish %s %q = %v, want %v", key, tok, err, want)
	}
}

// mustRelease releases Route's key with tok and checks the error.
func mustRelease(t *testing.T, l ledger.Ledger, key, tok string, want error) {
	t.Helper()
	err := syncOf(l).Release(background, Route, key, tok)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("Release %s %q = %v, want %v", key, tok, err, want)
	}
}

func mustReset(t *testing.T, l ledger.Ledger, key string) queue.KeyState {
	t.Helper()
	ks, err := syncOf(l).Reset(background, Route, key)
	if err != nil {
		t.Fatalf("Reset %s: %v", key, err)
	}
	return ks
}

func endLease(t *testing.T, l Subject, key string) {
	t.Helper()
	if l.EndLease == nil {
		t.Skip("the subject cannot end a lease")
	}
	l.EndLease(t, Route, key)
}

var syncCases = []testCase{
	{"SyncClaim", func(t *testing.T, l Subject, clock *Clock) {
		first := clock.Now()
		c := MustClaim(t, l, "k", store.Claimed)
		if c.Attempts != 1 {
			t.Fatalf("Claim = %+v, want 1 attempt", c)
		}
		ks := WantState(t, l, "k", ledger.StateInFlight)
		if ks.Copies != 1 || ks.Attempts != 1 || ks.Fingerprint != "fp-k" || !ks.FirstSeen.Equal(first) {
			t.Fatalf("Get = %+v", ks)
		}
		wantTTL(t, l, "k", store.DefaultAttemptsTTL) // the counters outlive the lease
		clock.Add(time.Second)
		got, err := syncOf(l).Claim(background, Route, "k", "other", Lease)
		if err != nil || got.State != store.InFlight || got.Attempts != 2 || got.RetryAfter <= 0 || got.RetryAfter > Lease || got.Token != "" {
			t.Fatalf("Claim of a locked key = %+v, %v", got, err)
		}
		ks = WantState(t, l, "k", ledger.StateInFlight)
		if ks.Copies != 2 || ks.Attempts != 1 || ks.Fingerprint != "fp-k" || !ks.LastSeen.Equal(clock.Now()) {
			t.Fatalf("Get = %+v (the first copy's fingerprint, one try)", ks)
		}
		if _, err := syncOf(l).Claim(background, Route, "k", "fp", 0); err == nil {
			t.Fatal("Claim with no lease: no error")
		}
	}},
	{"SyncFinish", func(t *testing.T, l Subject, clock *Clock) {
		c := MustClaim(t, l, "k", store.Claimed)
		mustFinish(t, l, "k", "other", store.ErrNotOwner) // another copy's live lease
		mustFinish(t, l, "k", "", store.ErrNotOwner)
		mustFinish(t, l, "k", c.Token, nil)
		wantTTL(t, l, "k", Retain)
		ks := WantState(t, l, "k", ledger.StateFinished)
		if ks.Status != 202 || ks.Copies != 1 || !sameOutcome(ks.Outcome, SyncOutcome("k")) {
			t.Fatalf("Get = %+v", ks)
		}
		got := MustClaim(t, l, "k", store.Finished)
		if got.Attempts != 2 || !sameOutcome(got.Outcome, SyncOutcome("k")) {
			t.Fatalf("Claim of a finished key = %+v", got)
		}
		mustFinish(t, l, "k", c.Token, store.ErrNotOwner) // once
		mustRelease(t, l, "k", c.Token, store.ErrNotOwner)
		l.Expire(t, Route, "k")
		if got := MustClaim(t, l, "k", store.Claimed); got.Attempts != 1 {
			t.Fatalf("Claim after the retention = %+v", got)
		}
		err := syncOf(l).Finish(background, Route, "k", "x", store.Outcome{Status: 1000}, Retain)
		if err == nil {
			t.Fatal("Finish of status 1000: no error")
		}
	}},
	{"SyncFinishWithoutLock", func(t *testing.T, l Subject, clock *Clock) {
		// The lock vanished (Redis lost it) and the upstream accepted the
		// copy: recorded, so the next copy is not forwarded again.
		mustFinish(t, l, "k", "t", nil)
		MustClaim(t, l, "k", store.Finished)
		mustFinish(t, l, "k2", "", store.ErrNotOwner) // never with no token
		WantState(t, l, "k2", ledger.StateAbsent)
	}},
	{"SyncRelease", func(t *testing.T, l Subject, clock *Clock) {
		c := MustClaim(t, l, "k", store.Claimed)
		mustRelease(t, l, "k", "other", store.ErrNotOwner)
		mustRelease(t, l, "k", c.Token, nil)
		mustRelease(t, l, "k", c.Token, store.ErrNotOwner)
		ks := WantState(t, l, "k", ledger.StateAbsent)
		if ks.Copies != 1 || ks.Attempts != 1 {
			t.Fatalf("Get of a released key = %+v, want its counters", ks)
		}
		// The counters carry on; the released owner records nothing
		// over the next copy's lock.
		c2 := MustClaim(t, l, "k", store.Claimed)
		if c2.Attempts != 2 || c2.Token == c.Token {
			t.Fatalf("Claim after a release = %+v", c2)
		}
		mustFinish(t, l, "k", c.Token, store.ErrNotOwner)
		if ks := WantState(t, l, "k", ledger.StateInFlight); ks.Attempts != 2 {
			t.Fatalf("Get = %+v, want 2 tries", ks)
		}
	}},
	{"SyncLeaseOver", func(t *testing.T, l Subject, clock *Clock) {
		a := MustClaim(t, l, "k", store.Claimed)
		endLease(t, l, "k")
		WantState(t, l, "k", ledger.StateAbsent)
		mustRelease(t, l, "k", a.Token, store.ErrNotOwner) // too late to release
		b := MustClaim(t, l, "k", store.Claimed)
		mustFinish(t, l, "k", a.Token, store.ErrNotOwner) // b's live lease
		mustFinish(t, l, "k", b.Token, nil)
		// An owner whose lease ran out, with nobody claiming since,
		// still records its outcome.
		c := MustClaim(t, l, "k2", store.Claimed)
		endLease(t, l, "k2")
		mustFinish(t, l, "k2", c.Token, nil)
		MustClaim(t, l, "k2", store.Finished)
	}},
	{"SyncReset", func(t *testing.T, l Subject, clock *Clock) {
		a := MustClaim(t, l, "k", store.Claimed)
		if ks := mustReset(t, l, "k"); ks.State != ledger.StateInFlight || ks.Copies != 1 {
			t.Fatalf("Reset of a locked key = %+v", ks)
		}
		WantState(t, l, "k", ledger.StateAbsent)
		wantTTL(t, l, "k", Lease) // the tombstone, for the lease's rest
		// The copy in flight at the reset records nothing, neither does
		// a copy without the lock; a new copy claims the key.
		mustFinish(t, l, "k", a.Token, store.ErrNotOwner)
		mustFinish(t, l, "k", "x", store.ErrNotOwner)
		b := MustClaim(t, l, "k", store.Claimed)
		if b.Attempts != 1 {
			t.Fatalf("Claim after a reset = %+v, want counted afresh", b)
		}
		mustFinish(t, l, "k", a.Token, store.ErrNotOwner)
		// Released: the tombstone still bars the copy from before the
		// reset.
		mustRelease(t, l, "k", b.Token, nil)
		mustFinish(t, l, "k", a.Token, store.ErrNotOwner)
		b = MustClaim(t, l, "k", store.Claimed)
		mustFinish(t, l, "k", b.Token, nil)
		if ks := mustReset(t, l, "k"); ks.State != ledger.StateFinished || ks.Status != 202 {
			t.Fatalf("Reset of a finished key = %+v", ks)
		}
		// No lock, no hold: no tombstone.
		wantTTL(t, l, "k", NoKey)
		mustFinish(t, l, "k", "t", nil)
	}},
	{"SyncResetThenEnqueue", func(t *testing.T, l Subject, clock *Clock) {
		a := MustClaim(t, l, "k", store.Claimed)
		mustReset(t, l, "k")
		// A tombstone is nothing to the queue; the late finish does not
		// overwrite the queued event.
		if got := MustReserve(t, l, Res(clock, "k", "e1", "t1")); got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve over a tombstone = %+v", got)
		}
		mustFinish(t, l, "k", a.Token, store.ErrNotOwner)
		WantState(t, l, "k", queue.StateQueued)
	}},
	{"SwitchClaimThenEnqueue", func(t *testing.T, l Subject, clock *Clock) {
		a := MustClaim(t, l, "k", store.Claimed)
		got := MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		if got.State != queue.InFlight || got.Copies != 2 || got.Fingerprint != "fp-k" {
			t.Fatalf("Reserve of a key a sync copy holds = %+v", got)
		}
		MustConfirm(t, l, "k", "t1", false)
		WantStats(t, l, 0, 0, time.Time{})
		mustFinish(t, l, "k", a.Token, nil)
		got = MustReserve(t, l, Res(clock, "k", "e2", "t2"))
		if got.State != queue.Delivered || got.Copies != 3 || !sameOutcome(got.Outcome, SyncOutcome("k")) {
			t.Fatalf("Reserve of a key a sync copy finished = %+v", got)
		}
		// Released: the queue takes the key afresh.
		c := MustClaim(t, l, "k2", store.Claimed)
		mustRelease(t, l, "k2", c.Token, nil)
		if got := MustReserve(t, l, Res(clock, "k2", "e3", "t3")); got.State != queue.Enqueued {
			t.Fatalf("Reserve of a released key = %+v", got)
		}
		// A lease run out: the same.
		MustClaim(t, l, "k3", store.Claimed)
		endLease(t, l, "k3")
		if got := MustReserve(t, l, Res(clock, "k3", "e4", "t4")); got.State != queue.Enqueued {
			t.Fatalf("Reserve of a key whose lease ran out = %+v", got)
		}
	}},
	{"SwitchEnqueueThenClaim", func(t *testing.T, l Subject, clock *Clock) {
		// Being stored (Kafka's reservation): in flight, a second's wait.
		MustReserve(t, l, Res(clock, "k", "e1", "t1"))
		if got := MustClaim(t, l, "k", store.InFlight); got.RetryAfter != time.Second || got.Attempts != 2 {
			t.Fatalf("Claim of a reserved key = %+v", got)
		}
		MustConfirm(t, l, "k", "t1", true)
		got := MustClaim(t, l, "k", store.Queued)
		if got.EventID != "e1" || got.Fingerprint != "fp-k" || got.Dead || got.Attempts != 3 {
			t.Fatalf("Claim of a queued key = %+v", got)
		}
		mustFinish(t, l, "k", "x", store.ErrNotOwner) // the queue delivers it
		mustRelease(t, l, "k", "t1", store.ErrNotOwner)
		if ks := WantState(t, l, "k", queue.StateQueued); ks.Copies != 3 || ks.EventID != "e1" {
			t.Fatalf("Get = %+v", ks)
		}
		WantStats(t, l, 1, 0, clock.Now())
		eid := Kill(t, l, clock, "d", "dl1")
		got = MustClaim(t, l, "d", store.Queued)
		if got.EventID != eid || !got.Dead {
			t.Fatalf("Claim of a dead-lettered key = %+v", got)
		}
	}},
	{"SwitchSettleThenClaim", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		MustSettle(t, l, "k", eid, tok, "w1", DoneSettlement("k"), queue.Recorded)
		got := MustClaim(t, l, "k", store.Finished)
		if !sameOutcome(got.Outcome, DoneSettlement("k").Outcome) || got.Attempts != 2 {
			t.Fatalf("Claim of a key the queue delivered = %+v", got)
		}
	}},
}
