// Package storetest checks that a store.Store keeps idempotency keys as
// the guard needs them: Run runs the conformance suite (claim, finish,
// release, get, delete with its reset tombstone, attempts, retention,
// concurrent claims) against fresh stores from the caller's fixture. The
// memory store runs it in package store, the ledger's Redis store in
// package ledger.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/clawgate/clawgate/store"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fixture is one fresh, empty store plus the store-specific ways to let
// time pass.
type Fixture struct {
	S store.Store
	// LockTTL is used where no test waits for a lock to expire.
	LockTTL time.Duration
	// ShortTTL is a lock TTL that expireLock can wait out.
	ShortTTL time.Duration
	// ExpireLock returns once key's lock, taken with shortTTL, has expired.
	ExpireLock func(t *testing.T, key string)
	// ExpireReset returns once the reset tombstone Delete left for key,
	// whose lock was taken with shortTTL, has expired.
	ExpireReset func(t *testing.T, key string)
	// CheckRetention checks that key, just finished with retention, is
	// forgotten (record and counter) once retention has passed.
	CheckRetention func(t *testing.T, key string, retention time.Duration)
}

const (
	FpA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	FpB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

func Outcome(status int, body string) store.Outcome {
	return store.Outcome{Status: status, ContentType: "application/json", Body: []byte(body), Fingerprint: FpA}
}

func MustClaim(t *testing.T, s store.Store, key, fp string, ttl time.Duration, want store.State) store.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), key, fp, ttl)
	if err != nil {
		t.Fatalf("store.Claim(%q): %v", key, err)
	}
	if c.State != want {
		t.Fatalf("store.Claim(%q) = %v, want %v (%+v)", key, c.State, want, c)
	}
	return c
}

func MustGet(t *testing.T, s store.Store, key string) store.KeyState {
	t.Helper()
	st, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return st
}

func SameOutcome(a, b store.Outcome) bool {
	return a.Status == b.Status && a.ContentType == b.ContentType &&
		bytes.Equal(a.Body, b.Body) && a.Fingerprint == b.Fingerprint
}

// Run runs the conformance suite on fresh stores from newFixture.
func Run(t *testing.T, newFixture func(t *testing.T) *Fixture) {
	ctx := context.Background()

	t.Run("Transitions", func(t *testing.T) {
		f := newFixture(t)
		c := MustClaim(t, f.S, "orders:1", FpA, f.LockTTL, store.Claimed)
		if c.Token == "" || c.Attempts != 1 {
			t.Fatalf("first claim = %+v, want a token and Attempts 1", c)
		}
		in := MustClaim(t, f.S, "orders:1", FpA, f.LockTTL, store.InFlight)
		if in.Attempts != 2 || in.Token != "" {
			t.Fatalf("in-flight claim = %+v, want Attempts 2 and no token", in)
		}
		if in.RetryAfter <= 0 || in.RetryAfter > f.LockTTL {
			t.Fatalf("RetryAfter = %v, want in (0, %v]", in.RetryAfter, f.LockTTL)
		}
		st := MustGet(t, f.S, "orders:1")
		if st.State != store.InFlight || st.Attempts != 2 || st.Fingerprint != FpA || st.FirstSeen.IsZero() || st.LastSeen.Before(st.FirstSeen) {
			t.Fatalf("Get while in flight = %+v", st)
		}
		want := Outcome(201, `{"ok":true}`)
		if err := f.S.Finish(ctx, "orders:1", c.Token, want, time.Hour); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		fin := MustClaim(t, f.S, "orders:1", FpB, f.LockTTL, store.Finished)
		if fin.Attempts != 3 || !SameOutcome(fin.Outcome, want) {
			t.Fatalf("claim on finished = %+v, want Attempts 3 and %+v", fin, want)
		}
		st = MustGet(t, f.S, "orders:1")
		if st.State != store.Finished || st.Attempts != 3 || st.Status != 201 || st.Fingerprint != FpA {
			t.Fatalf("Get when finished = %+v", st)
		}
		if st.FirstSeen.IsZero() || st.LastSeen.Before(st.FirstSeen) {
			t.Fatalf("Get times = %v / %v", st.FirstSeen, st.LastSeen)
		}
		if st2 := MustGet(t, f.S, "orders:1"); st2 != st {
			t.Fatalf("Get changed the state: %+v then %+v", st, st2)
		}
	})

	t.Run("AttemptsSurviveRelease", func(t *testing.T) {
		f := newFixture(t)
		c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		for i := 2; i <= 5; i++ {
			if in := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.InFlight); in.Attempts != int64(i) {
				t.Fatalf("attempt %d counted as %d", i, in.Attempts)
			}
		}
		if err := f.S.Release(ctx, "k:1", c.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		st := MustGet(t, f.S, "k:1")
		if st.State != store.Absent || st.Attempts != 5 {
			t.Fatalf("Get after release = %+v, want absent with 5 attempts", st)
		}
		c2 := MustClaim(t, f.S, "k:1", FpB, f.LockTTL, store.Claimed)
		if c2.Attempts != 6 || c2.Token == c.Token {
			t.Fatalf("claim after release = %+v, want Attempts 6 and a new token", c2)
		}
		if st := MustGet(t, f.S, "k:1"); st.Fingerprint != FpB {
			t.Fatalf("in-flight fingerprint = %q, want the new claimer's", st.Fingerprint)
		}
		// The first owner cannot touch the new lock.
		if err := f.S.Release(ctx, "k:1", c.Token); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Release by the old owner = %v, want store.ErrNotOwner", err)
		}
	})

	t.Run("NotOwner", func(t *testing.T) {
		f := newFixture(t)
		if err := f.S.Finish(ctx, "k:absent", "", Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish with an empty token on absent key = %v, want store.ErrNotOwner", err)
		}
		if err := f.S.Release(ctx, "k:absent", "nobody"); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Release on absent key = %v, want store.ErrNotOwner", err)
		}
		if st := MustGet(t, f.S, "k:absent"); st != (store.KeyState{}) {
			t.Fatalf("failed Finish/Release created state: %+v", st)
		}
		c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		other := MustClaim(t, f.S, "k:2", FpA, f.LockTTL, store.Claimed)
		before := MustGet(t, f.S, "k:1")
		for _, tok := range []string{"", "wrong", other.Token, c.Token + "x", strings.ToUpper(c.Token)} {
			if tok == c.Token {
				continue
			}
			if err := f.S.Finish(ctx, "k:1", tok, Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
				t.Fatalf("Finish with token %q = %v, want store.ErrNotOwner", tok, err)
			}
			if err := f.S.Release(ctx, "k:1", tok); !errors.Is(err, store.ErrNotOwner) {
				t.Fatalf("Release with token %q = %v, want store.ErrNotOwner", tok, err)
			}
		}
		if after := MustGet(t, f.S, "k:1"); after != before {
			t.Fatalf("state changed by a non-owner: %+v -> %+v", before, after)
		}
		want := Outcome(200, "first")
		if err := f.S.Finish(ctx, "k:1", c.Token, want, time.Hour); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		// Once finished, the token owns nothing any more.
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(500, "second"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("second Finish = %v, want store.ErrNotOwner", err)
		}
		if err := f.S.Release(ctx, "k:1", c.Token); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Release after Finish = %v, want store.ErrNotOwner", err)
		}
		if fin := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Finished); !SameOutcome(fin.Outcome, want) {
			t.Fatalf("record overwritten: %+v", fin.Outcome)
		}
	})

	t.Run("ExpiredLockReclaimed", func(t *testing.T) {
		f := newFixture(t)
		first := MustClaim(t, f.S, "k:1", FpA, f.ShortTTL, store.Claimed)
		f.ExpireLock(t, "k:1")
		if st := MustGet(t, f.S, "k:1"); st.State != store.Absent || st.Attempts != 1 {
			t.Fatalf("Get after the lock expired = %+v, want absent with 1 attempt", st)
		}
		second := MustClaim(t, f.S, "k:1", FpB, f.LockTTL, store.Claimed)
		if second.Attempts != 2 || second.Token == first.Token {
			t.Fatalf("re-claim = %+v, want Attempts 2 and a new token", second)
		}
		if err := f.S.Release(ctx, "k:1", first.Token); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Release by the first owner = %v, want store.ErrNotOwner", err)
		}
		if err := f.S.Finish(ctx, "k:1", first.Token, Outcome(200, "late"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish by the first owner = %v, want store.ErrNotOwner", err)
		}
		if st := MustGet(t, f.S, "k:1"); st.State != store.InFlight || st.Fingerprint != FpB {
			t.Fatalf("the second owner's lock was disturbed: %+v", st)
		}
		want := Outcome(202, "second")
		if err := f.S.Finish(ctx, "k:1", second.Token, want, time.Hour); err != nil {
			t.Fatalf("Finish by the second owner: %v", err)
		}
		if fin := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Finished); !SameOutcome(fin.Outcome, want) || fin.Attempts != 3 {
			t.Fatalf("claim after = %+v", fin)
		}
	})

	t.Run("FinishAfterLockExpired", func(t *testing.T) {
		// The lock expired and nobody claimed the key since: the upstream
		// did accept this delivery, so its outcome is recorded.
		f := newFixture(t)
		first := MustClaim(t, f.S, "k:1", FpA, f.ShortTTL, store.Claimed)
		MustClaim(t, f.S, "k:1", FpA, f.ShortTTL, store.InFlight)
		f.ExpireLock(t, "k:1")
		want := Outcome(200, "late")
		if err := f.S.Finish(ctx, "k:1", first.Token, want, time.Hour); err != nil {
			t.Fatalf("Finish after the lock expired: %v", err)
		}
		st := MustGet(t, f.S, "k:1")
		if st.State != store.Finished || st.Attempts != 2 || st.Status != 200 || st.FirstSeen.IsZero() {
			t.Fatalf("Get after a lockless Finish = %+v, want finished with 2 attempts", st)
		}
		// The record stands: neither the same token nor another overwrites it.
		for _, tok := range []string{first.Token, "other"} {
			if err := f.S.Finish(ctx, "k:1", tok, Outcome(500, "again"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
				t.Fatalf("Finish with %q over a record = %v, want store.ErrNotOwner", tok, err)
			}
		}
		if fin := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Finished); !SameOutcome(fin.Outcome, want) || fin.Attempts != 3 {
			t.Fatalf("claim after a lockless Finish = %+v", fin)
		}
		f.CheckRetention(t, "k:1", time.Hour)
	})

	t.Run("FinishWithNoState", func(t *testing.T) {
		// The store lost everything about the key (a Redis restart without
		// persistence) while its delivery was in flight.
		f := newFixture(t)
		want := Outcome(201, "recorded")
		if err := f.S.Finish(ctx, "k:lost", "token-from-before", want, time.Hour); err != nil {
			t.Fatalf("Finish on a key the store forgot: %v", err)
		}
		st := MustGet(t, f.S, "k:lost")
		want0 := store.KeyState{State: store.Finished, Status: 201, Fingerprint: FpA}
		if st != want0 {
			t.Fatalf("Get = %+v, want %+v (no counter survived)", st, want0)
		}
		if fin := MustClaim(t, f.S, "k:lost", FpA, f.LockTTL, store.Finished); !SameOutcome(fin.Outcome, want) || fin.Attempts != 1 {
			t.Fatalf("claim = %+v", fin)
		}
		// The first delivery counted afterwards starts the counter.
		if st := MustGet(t, f.S, "k:lost"); st.Attempts != 1 || st.FirstSeen.Year() < 2020 || st.LastSeen.Before(st.FirstSeen) {
			t.Fatalf("Get after a claim = %+v, want 1 attempt seen now", st)
		}
	})

	t.Run("ResetTombstone", func(t *testing.T) {
		f := newFixture(t)
		old := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		if st, err := f.S.Delete(ctx, "k:1"); err != nil || st.State != store.InFlight {
			t.Fatalf("Delete in flight = %+v, %v", st, err)
		}
		// The delivery in flight at the reset cannot record its outcome.
		for _, tok := range []string{old.Token, "other"} {
			if err := f.S.Finish(ctx, "k:1", tok, Outcome(200, "pre-reset"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
				t.Fatalf("Finish with %q after the reset = %v, want store.ErrNotOwner", tok, err)
			}
		}
		if st := MustGet(t, f.S, "k:1"); st != (store.KeyState{}) {
			t.Fatalf("Get after the reset = %+v, want the zero store.KeyState", st)
		}
		// store.Claim ignores the tombstone; the new owner finishes over it.
		c := MustClaim(t, f.S, "k:1", FpB, f.LockTTL, store.Claimed)
		if c.Attempts != 1 {
			t.Fatalf("claim after the reset = %+v, want Attempts 1", c)
		}
		if err := f.S.Release(ctx, "k:1", c.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := f.S.Finish(ctx, "k:1", old.Token, Outcome(200, "pre-reset"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish by the pre-reset owner after a release = %v, want store.ErrNotOwner", err)
		}
		c = MustClaim(t, f.S, "k:1", FpB, f.LockTTL, store.Claimed)
		want := Outcome(202, "post-reset")
		if err := f.S.Finish(ctx, "k:1", c.Token, want, time.Hour); err != nil {
			t.Fatalf("Finish by the owner after the reset: %v", err)
		}
		if fin := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Finished); !SameOutcome(fin.Outcome, want) {
			t.Fatalf("claim = %+v", fin)
		}
		// Resetting a key that holds no lock leaves no tombstone.
		c = MustClaim(t, f.S, "k:2", FpA, f.LockTTL, store.Claimed)
		if err := f.S.Finish(ctx, "k:2", c.Token, want, time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := f.S.Delete(ctx, "k:2"); err != nil {
			t.Fatal(err)
		}
		if err := f.S.Finish(ctx, "k:2", "late", want, time.Hour); err != nil {
			t.Fatalf("Finish after resetting an unlocked key: %v", err)
		}
	})

	t.Run("ResetTombstoneExpires", func(t *testing.T) {
		f := newFixture(t)
		old := MustClaim(t, f.S, "k:1", FpA, f.ShortTTL, store.Claimed)
		if _, err := f.S.Delete(ctx, "k:1"); err != nil {
			t.Fatal(err)
		}
		if err := f.S.Finish(ctx, "k:1", old.Token, Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish while the tombstone lives = %v, want store.ErrNotOwner", err)
		}
		// Once the lock would have expired, a late Finish is the same as
		// one after a lock that expired unclaimed: it records.
		f.ExpireReset(t, "k:1")
		if err := f.S.Finish(ctx, "k:1", old.Token, Outcome(200, "x"), time.Hour); err != nil {
			t.Fatalf("Finish after the tombstone expired: %v", err)
		}
		MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Finished)
	})

	t.Run("Retention", func(t *testing.T) {
		f := newFixture(t)
		c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.InFlight)
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(200, "x"), time.Hour); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		f.CheckRetention(t, "k:1", time.Hour)
	})

	t.Run("GetAndDelete", func(t *testing.T) {
		f := newFixture(t)
		if st := MustGet(t, f.S, "k:1"); st != (store.KeyState{}) {
			t.Fatalf("Get on a new key = %+v, want the zero store.KeyState", st)
		}
		if st, err := f.S.Delete(ctx, "k:1"); err != nil || st != (store.KeyState{}) {
			t.Fatalf("Delete on a new key = %+v, %v", st, err)
		}
		c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		got := MustGet(t, f.S, "k:1")
		del, err := f.S.Delete(ctx, "k:1")
		if err != nil || del != got || del.State != store.InFlight {
			t.Fatalf("Delete in flight = %+v, %v; want %+v", del, err, got)
		}
		if st := MustGet(t, f.S, "k:1"); st != (store.KeyState{}) {
			t.Fatalf("Get after Delete = %+v", st)
		}
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish after Delete = %v, want store.ErrNotOwner", err)
		}
		c = MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		if c.Attempts != 1 {
			t.Fatalf("claim after Delete counted %d attempts, want 1", c.Attempts)
		}
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(409, "x"), time.Hour); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		del, err = f.S.Delete(ctx, "k:1")
		if err != nil || del.State != store.Finished || del.Status != 409 || del.Attempts != 1 || del.Fingerprint != FpA {
			t.Fatalf("Delete finished = %+v, %v", del, err)
		}
		if c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed); c.Attempts != 1 {
			t.Fatalf("claim after Delete = %+v", c)
		}
	})

	t.Run("KeysAreDistinct", func(t *testing.T) {
		f := newFixture(t)
		keys := []string{"a:1", "a:2", "b:1", "", "}", "}x", "%", "%}x", "{x}", "a:{1}", "a:}{", "ключ:☃", "a:" + strings.Repeat("z", 255)}
		for i, k := range keys {
			c := MustClaim(t, f.S, k, FpA, f.LockTTL, store.Claimed)
			if err := f.S.Finish(ctx, k, c.Token, Outcome(200+i, k), time.Hour); err != nil {
				t.Fatalf("Finish(%q): %v", k, err)
			}
		}
		for i, k := range keys {
			fin := MustClaim(t, f.S, k, FpA, f.LockTTL, store.Finished)
			if fin.Outcome.Status != 200+i || string(fin.Outcome.Body) != k || fin.Attempts != 2 {
				t.Fatalf("key %q came back as %+v", k, fin)
			}
		}
	})

	t.Run("OutcomeRoundTrip", func(t *testing.T) {
		f := newFixture(t)
		big := bytes.Repeat([]byte{0, 1, 2, 255}, 16<<10)
		cases := []store.Outcome{
			{Status: 200},
			{Status: 204, Fingerprint: FpB},
			{Status: 200, ContentType: "text/csv; header=present", Body: []byte("a,b\n"), Fingerprint: "not-a-sha256"},
			{Status: 400, ContentType: "application/json", Body: []byte(`{}`), Fingerprint: strings.ToUpper(FpA)},
			{Status: 999, ContentType: "application/octet-stream", Body: big, Fingerprint: FpA},
		}
		for i, want := range cases {
			key := fmt.Sprintf("rt:%d", i)
			c := MustClaim(t, f.S, key, want.Fingerprint, f.LockTTL, store.Claimed)
			body := append([]byte(nil), want.Body...)
			in := want
			in.Body = body
			if err := f.S.Finish(ctx, key, c.Token, in, time.Hour); err != nil {
				t.Fatalf("Finish(%+v): %v", want.Status, err)
			}
			for i := range body {
				body[i] = 'X' // the store must have kept its own copy
			}
			fin := MustClaim(t, f.S, key, FpA, f.LockTTL, store.Finished)
			if !SameOutcome(fin.Outcome, want) {
				t.Fatalf("case %d: got %d %q %d bytes %q", i, fin.Outcome.Status, fin.Outcome.ContentType, len(fin.Outcome.Body), fin.Outcome.Fingerprint)
			}
			if st := MustGet(t, f.S, key); st.Fingerprint != want.Fingerprint || st.Status != want.Status {
				t.Fatalf("case %d: Get = %+v", i, st)
			}
		}
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.S.Claim(ctx, "k:1", FpA, 0); err == nil || errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("store.Claim with a zero lock TTL = %v, want an error", err)
		}
		c := MustClaim(t, f.S, "k:1", FpA, f.LockTTL, store.Claimed)
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(200, "x"), 0); err == nil || errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish with zero retention = %v, want an error", err)
		}
		if err := f.S.Finish(ctx, "k:1", c.Token, Outcome(1000, "x"), time.Hour); err == nil || errors.Is(err, store.ErrNotOwner) {
			t.Fatalf("Finish with status 1000 = %v, want an error", err)
		}
		if st := MustGet(t, f.S, "k:1"); st.State != store.InFlight {
			t.Fatalf("a rejected Finish changed the key: %+v", st)
		}
	})

	t.Run("ConcurrentClaims", func(t *testing.T) {
		f := newFixture(t)
		const n = 200
		var claimed, inFlight atomic.Int64
		var maxAttempts atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c, err := f.S.Claim(ctx, "race:1", FpA, f.LockTTL)
				if err != nil {
					errs <- err
					return
				}
				switch c.State {
				case store.Claimed:
					claimed.Add(1)
				case store.InFlight:
					inFlight.Add(1)
				}
				for {
					m := maxAttempts.Load()
					if c.Attempts <= m || maxAttempts.CompareAndSwap(m, c.Attempts) {
						break
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Claim: %v", err)
		}
		if claimed.Load() != 1 || inFlight.Load() != n-1 || maxAttempts.Load() != n {
			t.Fatalf("claimed %d, in flight %d, max attempts %d; want 1, %d, %d", claimed.Load(), inFlight.Load(), maxAttempts.Load(), n-1, n)
		}
		if st := MustGet(t, f.S, "race:1"); st.Attempts != n {
			t.Fatalf("attempts = %d, want %d", st.Attempts, n)
		}
	})

	t.Run("Ping", func(t *testing.T) {
		f := newFixture(t)
		if err := f.S.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})
}
