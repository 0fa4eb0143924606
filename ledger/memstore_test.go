package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/ledger/ledgertest"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/storetest"
)

// The memory store's bounds (MaxKeys, MaxBytes, AttemptsTTL, ResetHold)
// on the ledger's Memory, through MemoryStore.

func TestMemoryEvictsOldestFirst(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	var evictions int
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 3, Now: clock.Now, OnEvict: func() { evictions++ }})
	finish := func(key string) {
		t.Helper()
		c := storetest.MustClaim(t, m, key, storetest.FpA, time.Minute, store.Claimed)
		if err := m.Finish(ctx, key, c.Token, storetest.Outcome(200, key), time.Hour); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Second)
	}
	for i := 1; i <= 3; i++ {
		finish(fmt.Sprintf("k:%d", i))
	}
	if evictions != 0 {
		t.Fatalf("evicted %d at capacity", evictions)
	}
	// A replay makes k:1 the most recently used; Get does not count.
	storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Finished)
	storetest.MustGet(t, m, "k:2")
	finish("k:4")
	finish("k:5")
	if evictions != 2 {
		t.Fatalf("OnEvict called %d times, want 2", evictions)
	}
	for key, want := range map[string]store.State{"k:1": store.Finished, "k:2": store.Absent, "k:3": store.Absent, "k:4": store.Finished, "k:5": store.Finished} {
		if st := storetest.MustGet(t, m, key); st.State != want {
			t.Fatalf("%s: %v, want %v", key, st.State, want)
		}
	}
	if m.Len() != 3 {
		t.Fatalf("Len = %d, want 3", m.Len())
	}
}

func TestMemoryNeverEvictsLiveLocks(t *testing.T) {
	clock := ledgertest.NewClock()
	var evictions int
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 2, Now: clock.Now, OnEvict: func() { evictions++ }})
	for i := 0; i < 10; i++ {
		storetest.MustClaim(t, m, fmt.Sprintf("k:%d", i), storetest.FpA, time.Minute, store.Claimed)
	}
	for i := 0; i < 10; i++ {
		if st := storetest.MustGet(t, m, fmt.Sprintf("k:%d", i)); st.State != store.InFlight {
			t.Fatalf("k:%d: %v, want in flight", i, st.State)
		}
	}
	if evictions != 0 {
		t.Fatalf("evicted %d live locks", evictions)
	}
	// Once the locks expire they turn into counters, bounded like records.
	clock.Add(time.Minute)
	for i := 0; i < 10; i++ {
		storetest.MustClaim(t, m, fmt.Sprintf("other:%d", i), storetest.FpA, time.Minute, store.Claimed)
	}
	if m.Len() > 10+2 {
		t.Fatalf("Len = %d after the locks expired, want at most 12", m.Len())
	}
	if evictions == 0 {
		t.Fatalf("expired locks' counters were not bounded by MaxKeys")
	}
}

func TestMemoryExpiredEntriesAreDropped(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	var evictions int
	m := ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now, OnEvict: func() { evictions++ }})
	for i := 0; i < 100; i++ {
		key := "k:" + strconv.Itoa(i)
		c := storetest.MustClaim(t, m, key, storetest.FpA, time.Minute, store.Claimed)
		if err := m.Finish(ctx, key, c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Hour)
	for i := 0; i < 100; i++ {
		storetest.MustClaim(t, m, "new:"+strconv.Itoa(i), storetest.FpA, time.Minute, store.Claimed)
	}
	if m.Len() != 100 {
		t.Fatalf("Len = %d, want the 100 expired records dropped", m.Len())
	}
	if evictions != 0 {
		t.Fatalf("expiry counted as %d evictions", evictions)
	}
}

func TestMemoryAttemptsTTL(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	m := ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now, AttemptsTTL: time.Hour})
	c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if err := m.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour - time.Nanosecond)
	if c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed); c.Attempts != 2 {
		t.Fatalf("within AttemptsTTL: attempts %d, want 2", c.Attempts)
	}
	// The counter lives an hour after the last claim, not the first.
	clock.Add(time.Hour - time.Nanosecond)
	if c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed); c.Attempts != 3 {
		t.Fatalf("lock expired, counter alive: attempts %d, want 3", c.Attempts)
	}
	clock.Add(time.Hour)
	if st := storetest.MustGet(t, m, "k:1"); st != (store.KeyState{}) {
		t.Fatalf("after AttemptsTTL: %+v, want forgotten", st)
	}
	if c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed); c.Attempts != 1 {
		t.Fatalf("after AttemptsTTL: attempts %d, want 1", c.Attempts)
	}

	// A negative AttemptsTTL keeps the counter only while the lock lives.
	m = ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now, AttemptsTTL: -1})
	c = storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if err := m.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	if st := storetest.MustGet(t, m, "k:1"); st != (store.KeyState{}) {
		t.Fatalf("released with a negative AttemptsTTL: %+v", st)
	}
	storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed)
	clock.Add(time.Minute)
	if c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed); c.Attempts != 1 {
		t.Fatalf("expired lock with a negative AttemptsTTL: attempts %d, want 1", c.Attempts)
	}
}

func TestMemoryTokensDifferAcrossInstances(t *testing.T) {
	a := ledger.NewMemoryStore(store.MemoryOptions{})
	b := ledger.NewMemoryStore(store.MemoryOptions{})
	ca := storetest.MustClaim(t, a, "k:1", storetest.FpA, time.Minute, store.Claimed)
	storetest.MustClaim(t, b, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if err := b.Release(context.Background(), "k:1", ca.Token); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("another instance's token released the lock: %v", err)
	}
}

// bytesPerKey finishes n keys with a 100-byte body and realistic keys
// (route + UUID) and returns the heap growth per key beyond the body, and
// the store's own estimate (Bytes) per key beyond the body.
func bytesPerKey(tb testing.TB, n int) (measured, estimated float64) {
	body := make([]byte, 100)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: n, MaxBytes: math.MaxInt64})
	buf := []byte("orders:")
	for i := 0; i < n; i++ {
		// The store keeps its own copy of the key; this buffer is reused.
		buf = fmt.Appendf(buf[:len("orders:")], "%08x-7c1e-4b7a-9d3f-%012x", i, i*7919)
		key := string(buf)
		c, err := m.Claim(ctx, key, storetest.FpA, time.Minute)
		if err != nil {
			tb.Fatal(err)
		}
		if err := m.Finish(ctx, key, c.Token, store.Outcome{Status: 200, ContentType: "application/json", Body: body, Fingerprint: storetest.FpA}, 24*time.Hour); err != nil {
			tb.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if m.Len() != n {
		tb.Fatalf("Len = %d", m.Len())
	}
	runtime.KeepAlive(m)
	return float64(after.HeapAlloc-before.HeapAlloc)/float64(n) - float64(len(body)),
		float64(m.Bytes())/float64(n) - float64(len(body))
}

// TestMemoryBytesPerKey keeps a finished key within 360 bytes beyond its
// body (the goal is 400; 321 measured at 200,000 keys), and checks that
// the store's estimate (Bytes, which MaxBytes bounds) does not count less
// than the heap the keys take. BenchmarkMemoryBytesPerKey measures the
// same over a million keys.
func TestMemoryBytesPerKey(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	perKey, estimate := bytesPerKey(t, n)
	t.Logf("memory store: %.0f bytes per finished key beyond a 100-byte body (estimated %.0f), %d keys of 43 bytes", perKey, estimate, n)
	if perKey > 360 {
		t.Fatalf("%.0f bytes per key, want at most 360", perKey)
	}
	if estimate < perKey {
		t.Fatalf("the estimate of %.0f bytes per key is below the measured %.0f: raise memKeyOverhead", estimate, perKey)
	}
}

// TestMemoryQueueKeyEstimate checks that the estimate of the keys a
// queue route finished (delivered and kept for their retention, counted
// against MaxBytes as the sync path's are) does not count less than the
// heap they take.
func TestMemoryQueueKeyEstimate(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	ctx := context.Background()
	body := make([]byte, 100)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := ledger.NewMemory(nil)
	m.MaxKeys, m.MaxBytes = n, math.MaxInt64
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("%08x-7c1e-4b7a-9d3f-%012x", i, i*7919)
		eid := fmt.Sprintf("evt_%08x%024x", i, i)
		tok := fmt.Sprintf("%032x", i)
		res := ledger.Reservation{Route: "orders", Key: key, Fingerprint: storetest.FpA, EventID: eid, Token: tok,
			FirstSeen: time.Now(), Lease: time.Minute}
		if r, err := m.Reserve(ctx, res); err != nil || r.State != ledger.Enqueued {
			t.Fatal(r, err)
		}
		if ok, err := m.Confirm(ctx, "orders", key, tok); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if _, ok, err := m.Begin(ctx, "orders", key, eid, tok, "p1", "w1"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		s := ledger.Settlement{Kind: ledger.SettleDelivered, Retention: time.Hour,
			Outcome: store.Outcome{Status: 200, ContentType: "application/json", Body: body, Fingerprint: storetest.FpA}}
		if st, err := m.Settle(ctx, "orders", key, eid, tok, "w1", s); st != ledger.Recorded || err != nil {
			t.Fatal(st, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if m.Len() != n {
		t.Fatalf("Len = %d", m.Len())
	}
	measured := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	estimate := float64(m.Bytes()) / float64(n)
	runtime.KeepAlive(m)
	t.Logf("memory queue: %.0f bytes per delivered key (estimated %.0f), %d keys", measured, estimate, n)
	if estimate < measured {
		t.Fatalf("the estimate of %.0f bytes per key is below the measured %.0f", estimate, measured)
	}
}

// BenchmarkMemoryBytesPerKey reports (as B/key) the heap a finished key
// costs beyond its 100-byte body, over 1,000,000 keys; run it with
// -bench MemoryBytesPerKey -benchtime 1x.
func BenchmarkMemoryBytesPerKey(b *testing.B) {
	for i := 0; i < b.N; i++ {
		measured, estimated := bytesPerKey(b, 1_000_000)
		b.ReportMetric(measured, "B/key")
		b.ReportMetric(estimated, "estimated-B/key")
	}
}

// Regression: each claim of a new key allocated its lock list anew (the
// finished key's entry taken off the front left it no room), a sixth
// allocation for a claim and finish beside the record, its name, the lock
// token, the fingerprint and the stored answer.
func TestMemoryClaimFinishAllocations(t *testing.T) {
	ctx := context.Background()
	m := ledger.NewMemoryStore(store.MemoryOptions{})
	const runs = 1000
	keys := make([]string, runs+1)
	for i := range keys {
		keys[i] = "orders:" + strconv.Itoa(i)
	}
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		c, err := m.Claim(ctx, keys[i], storetest.FpA, time.Minute)
		if err != nil || c.State != store.Claimed {
			t.Fatal(c, err)
		}
		if err := m.Finish(ctx, keys[i], c.Token, out, time.Hour); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs > 5 {
		t.Fatalf("%.0f allocations for a claim and finish, want at most 5", allocs)
	}
}

func BenchmarkMemoryClaimFinish(b *testing.B) {
	ctx := context.Background()
	m := ledger.NewMemoryStore(store.MemoryOptions{})
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "orders:" + strconv.Itoa(i)
	}
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := m.Claim(ctx, keys[i], storetest.FpA, time.Minute)
		if err != nil || c.State != store.Claimed {
			b.Fatal(c, err)
		}
		if err := m.Finish(ctx, keys[i], c.Token, out, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryClaimFinished(b *testing.B) {
	ctx := context.Background()
	m := ledger.NewMemoryStore(store.MemoryOptions{})
	c, _ := m.Claim(ctx, "orders:1", storetest.FpA, time.Minute)
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
	if err := m.Finish(ctx, "orders:1", c.Token, out, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := m.Claim(ctx, "orders:1", storetest.FpA, time.Minute)
		if err != nil || c.State != store.Finished {
			b.Fatal(c, err)
		}
	}
}

func TestMemoryResetTombstoneLivesForTheLocksRest(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	m := ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now})
	c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed)
	clock.Add(20 * time.Second)
	if _, err := m.Delete(ctx, "k:1"); err != nil {
		t.Fatal(err)
	}
	clock.Add(40*time.Second - time.Nanosecond)
	if err := m.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Finish just before the lock would have expired = %v, want store.ErrNotOwner", err)
	}
	clock.Add(time.Nanosecond)
	if err := m.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatalf("Finish once the lock would have expired: %v", err)
	}
}

// Regression: a reset of a finished key left no tombstone, so a finish
// still being retried for that key (its first try had landed, its answer
// had not) recorded the forgotten outcome again.
func TestMemoryResetOfAFinishedKeyHoldsForResetHold(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	m := ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now, ResetHold: 30 * time.Second})
	c := storetest.MustClaim(t, m, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if err := m.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Delete(ctx, "k:1"); err != nil {
		t.Fatal(err)
	}
	clock.Add(30*time.Second - time.Nanosecond)
	if err := m.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Finish retried within ResetHold of the reset = %v, want store.ErrNotOwner", err)
	}
	if st := storetest.MustGet(t, m, "k:1"); st.State != store.Absent {
		t.Fatalf("state %v after the reset, want absent", st.State)
	}
	clock.Add(time.Nanosecond)
	if err := m.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatalf("Finish after ResetHold: %v", err)
	}
}

func TestMemoryResetTombstonesArePurged(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	m := ledger.NewMemoryStore(store.MemoryOptions{Now: clock.Now})
	for round := 0; round < 10; round++ {
		for i := 0; i < 1000; i++ {
			key := fmt.Sprintf("k:%d:%d", round, i)
			storetest.MustClaim(t, m, key, storetest.FpA, time.Minute, store.Claimed)
			if _, err := m.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		clock.Add(time.Minute)
	}
	n := ledger.MemoryTombstones(m)
	if n > 2000 {
		t.Fatalf("%d tombstones kept, want the expired ones purged", n)
	}
	if m.Len() != 0 {
		t.Fatalf("Len = %d after deleting every key", m.Len())
	}
}

func TestMemoryBytesBudget(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	var evictions int
	body := strings.Repeat("b", 100)
	perKey := finishedSize(t, "k:00", body)
	budget := 10 * perKey
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxBytes: budget, Now: clock.Now, OnEvict: func() { evictions++ }})
	for i := 0; i < 50; i++ {
		key := fmt.Sprintf("k:%02d", i)
		c := storetest.MustClaim(t, m, key, storetest.FpA, time.Minute, store.Claimed)
		if err := m.Finish(ctx, key, c.Token, storetest.Outcome(200, body), time.Hour); err != nil {
			t.Fatal(err)
		}
		if b := m.Bytes(); b > budget {
			t.Fatalf("after %d keys: %d bytes, over the budget of %d", i+1, b, budget)
		}
		clock.Add(time.Second)
	}
	if m.Len() != 10 || evictions != 40 {
		t.Fatalf("Len %d, evictions %d; want 10 kept and 40 evicted", m.Len(), evictions)
	}
	// The most recent keys are kept.
	for i := 40; i < 50; i++ {
		if st := storetest.MustGet(t, m, fmt.Sprintf("k:%02d", i)); st.State != store.Finished {
			t.Fatalf("k:%02d: %v, want finished", i, st.State)
		}
	}
	// A bigger body evicts as many older keys as it needs.
	big := strings.Repeat("B", int(3*perKey))
	c := storetest.MustClaim(t, m, "k:big", storetest.FpA, time.Minute, store.Claimed)
	if err := m.Finish(ctx, "k:big", c.Token, storetest.Outcome(200, big), time.Hour); err != nil {
		t.Fatal(err)
	}
	if b := m.Bytes(); b > budget {
		t.Fatalf("%d bytes after a big record, over the budget of %d", b, budget)
	}
	if evictions < 44 || m.Len() > 7 {
		t.Fatalf("Len %d, evictions %d after a record of %d bytes", m.Len(), evictions, len(big))
	}
	if st := storetest.MustGet(t, m, "k:big"); st.State != store.Finished {
		t.Fatalf("the big record itself was evicted: %+v", st)
	}
	if m.Bytes() != ledger.MemoryRecount(m) {
		t.Fatalf("Bytes %d, recounted %d", m.Bytes(), ledger.MemoryRecount(m))
	}
}

func TestMemoryBytesBudgetNeverEvictsLiveLocks(t *testing.T) {
	clock := ledgertest.NewClock()
	var evictions int
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxBytes: 2 * ledger.MemKeyOverhead, Now: clock.Now, OnEvict: func() { evictions++ }})
	for i := 0; i < 10; i++ {
		storetest.MustClaim(t, m, fmt.Sprintf("k:%d", i), storetest.FpA, time.Minute, store.Claimed)
	}
	for i := 0; i < 10; i++ {
		if st := storetest.MustGet(t, m, fmt.Sprintf("k:%d", i)); st.State != store.InFlight {
			t.Fatalf("k:%d: %v, want in flight", i, st.State)
		}
	}
	if evictions != 0 {
		t.Fatalf("evicted %d live locks", evictions)
	}
	// Counted all the same, and evicted once their locks are gone.
	if m.Bytes() <= 2*ledger.MemKeyOverhead {
		t.Fatalf("Bytes %d does not count the live locks", m.Bytes())
	}
	clock.Add(time.Minute)
	for i := 0; i < 10; i++ {
		storetest.MustClaim(t, m, fmt.Sprintf("other:%d", i), storetest.FpA, time.Minute, store.Claimed)
	}
	if evictions == 0 {
		t.Fatalf("expired locks' counters were not bounded by MaxBytes")
	}
}

// TestMemoryBytesStayCounted runs a random mix of every operation and
// checks after each that Bytes matches a recount of what the store holds.
func TestMemoryBytesStayCounted(t *testing.T) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	rng := rand.New(rand.NewPCG(1, 2))
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 40, MaxBytes: 30 * (ledger.MemKeyOverhead + 64), AttemptsTTL: 10 * time.Second, Now: clock.Now})
	tokens := map[string]string{}
	fps := []string{storetest.FpA, "not-canonical", ""}
	for i := 0; i < 20_000; i++ {
		key := fmt.Sprintf("k:%d", rng.IntN(60))
		switch op := rng.IntN(10); {
		case op < 3:
			if c, err := m.Claim(ctx, key, fps[rng.IntN(len(fps))], time.Duration(1+rng.IntN(5))*time.Second); err == nil && c.State == store.Claimed {
				tokens[key] = c.Token
			}
		case op < 6:
			out := store.Outcome{Status: 200, ContentType: []string{"application/json", "x/custom"}[rng.IntN(2)],
				Body: make([]byte, rng.IntN(200)), Fingerprint: fps[rng.IntN(len(fps))]}
			tok := tokens[key]
			if rng.IntN(4) == 0 {
				tok = "stray"
			}
			_ = m.Finish(ctx, key, tok, out, time.Duration(1+rng.IntN(20))*time.Second)
		case op < 7:
			_ = m.Release(ctx, key, tokens[key])
		case op < 8:
			_, _ = m.Delete(ctx, key)
		default:
			clock.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		if got, want := m.Bytes(), ledger.MemoryRecount(m); got != want {
			t.Fatalf("step %d: Bytes %d, recounted %d", i, got, want)
		}
	}
}

// finishedSize is the estimated size (Bytes) of key finished with body.
func finishedSize(t *testing.T, key, body string) int64 {
	t.Helper()
	m := ledger.NewMemoryStore(store.MemoryOptions{})
	c := storetest.MustClaim(t, m, key, storetest.FpA, time.Minute, store.Claimed)
	if err := m.Finish(context.Background(), key, c.Token, storetest.Outcome(200, body), time.Hour); err != nil {
		t.Fatal(err)
	}
	return m.Bytes()
}

// memoryStoreFixture is a memory store on a clock of its own.
func memoryStoreFixture(wrap func(store.Store) store.Store) func(t *testing.T) *storetest.Fixture {
	return func(t *testing.T) *storetest.Fixture {
		c := ledgertest.NewClock()
		s := wrap(ledger.NewMemoryStore(store.MemoryOptions{Now: c.Now}))
		const short = 50 * time.Millisecond
		return &storetest.Fixture{
			S:           s,
			LockTTL:     30 * time.Second,
			ShortTTL:    short,
			ExpireLock:  func(*testing.T, string) { c.Add(short) },
			ExpireReset: func(*testing.T, string) { c.Add(short) },
			CheckRetention: func(t *testing.T, key string, retention time.Duration) {
				t.Helper()
				c.Add(retention - time.Nanosecond)
				if st := storetest.MustGet(t, s, key); st.State != store.Finished {
					t.Fatalf("just before retention: %+v, want finished", st)
				}
				c.Add(time.Nanosecond)
				if st := storetest.MustGet(t, s, key); st != (store.KeyState{}) {
					t.Fatalf("after retention: %+v, want forgotten", st)
				}
				if cl := storetest.MustClaim(t, s, key, storetest.FpA, time.Second, store.Claimed); cl.Attempts != 1 {
					t.Fatalf("claim after retention counted %d attempts, want 1 (counter lives with the record)", cl.Attempts)
				}
			},
		}
	}
}

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, memoryStoreFixture(func(s store.Store) store.Store { return s }))
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Observe(float64) {}

// The timed memory store behaves as the memory store does.
func TestMemoryStoreTimedConformance(t *testing.T) {
	storetest.Run(t, memoryStoreFixture(func(s store.Store) store.Store {
		return store.NewTimed(s, func(string) store.Observer { return nopObserver{} })
	}))
}

// On the memory store a key has one record whatever its route's mode:
// the queue sharing the store's Memory finds a key the sync path holds or
// finished, and the sync path one the queue holds.
func TestMemoryStoreSharesTheQueuesRecord(t *testing.T) {
	ctx := context.Background()
	s := ledger.NewMemoryStore(store.MemoryOptions{})
	l := s.Ledger()
	reserve := func(key string, want ledger.AckState) ledger.Reserved {
		t.Helper()
		r, err := l.Reserve(ctx, ledger.Reservation{Route: "orders", Key: key, EventID: "e-" + key, Token: "t-" + key,
			Fingerprint: storetest.FpA, FirstSeen: time.Now(), Lease: time.Minute})
		if err != nil || r.State != want {
			t.Fatalf("Reserve(%s) = %+v, %v; want state %v", key, r, err, want)
		}
		return r
	}
	c := storetest.MustClaim(t, s, "orders:k1", storetest.FpA, time.Minute, store.Claimed)
	reserve("k1", ledger.InFlight)
	if err := s.Finish(ctx, "orders:k1", c.Token, storetest.Outcome(201, "ok"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := reserve("k1", ledger.Delivered); r.Outcome.Status != 201 {
		t.Fatalf("the queue answered the sync path's outcome %+v", r.Outcome)
	}
	reserve("k2", ledger.Enqueued)
	if ok, err := l.Confirm(ctx, "orders", "k2", "t-k2"); err != nil || !ok {
		t.Fatalf("Confirm = %v, %v", ok, err)
	}
	if c := storetest.MustClaim(t, s, "orders:k2", storetest.FpA, time.Minute, store.Queued); c.EventID != "e-k2" {
		t.Fatalf("the sync path's claim of a queued key = %+v", c)
	}
}
