package ledger

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/clawgate/clawgate/store"
)

// TestMemoryKeyRecordSize keeps Memory's key record structs in the
// allocator's size classes the estimate (memKeySize) counts them at, and
// free of padding.
func TestMemoryKeyRecordSize(t *testing.T) {
	for _, c := range []struct {
		name  string
		typ   reflect.Type
		class int
	}{
		{"memLedgerKey", reflect.TypeFor[memLedgerKey](), memKeyClass},
		{"memKeyExtra", reflect.TypeFor[memKeyExtra](), memKeyExtraClass},
		{"memDead", reflect.TypeFor[memDead](), memDeadClass},
		{"memKeyOrder", reflect.TypeFor[memKeyOrder](), memKeyOrderClass},
	} {
		t.Run(c.name, func(t *testing.T) {
			size := int(c.typ.Size())
			t.Logf("%s: %d bytes, size class %d", c.name, size, memAlloc(size))
			if got := memAlloc(size); got > c.class {
				t.Fatalf("%s takes %d bytes, size class %d, above the %d the estimate counts", c.name, size, got, c.class)
			}
			fields := 0
			for i := range c.typ.NumField() {
				fields += int(c.typ.Field(i).Type.Size())
			}
			// Only the last field's alignment may leave a tail.
			if size-fields >= 8 {
				t.Errorf("%s: %d bytes of padding: order its fields largest first", c.name, size-fields)
			}
		})
	}
}

// TestMemAlloc checks memAlloc against the runtime's own rounding of an
// allocation without pointers (the capacity append gives a new slice).
func TestMemAlloc(t *testing.T) {
	src := make([]byte, 200_000)
	check := func(n int) {
		t.Helper()
		if want := cap(append([]byte(nil), src[:n]...)); memAlloc(n) != want {
			t.Fatalf("memAlloc(%d) = %d, the runtime allocates %d", n, memAlloc(n), want)
		}
	}
	for n := 1; n <= 2048; n++ {
		check(n)
	}
	for _, c := range memClasses {
		check(int(c) - 1)
		check(int(c))
		check(int(c) + 1)
	}
	for n := 2048; n <= len(src); n += 997 {
		check(n)
	}
	if memAlloc(0) != 0 {
		t.Fatalf("memAlloc(0) = %d", memAlloc(0))
	}
}

// Regression: Finish and a Claim of a key already held counted the key
// under the caller's string, which the record then kept besides its own
// copy of the name (a scoped "route:key" string the gateway built, 48
// bytes more per finished key).
func TestMemoryFinishedKeyKeepsOneCopyOfItsName(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(store.MemoryOptions{})
	scoped := func() string { return string([]byte("orders:evt-1")) } // a new string each call
	c, err := s.Claim(ctx, scoped(), "fp", time.Minute)
	if err != nil || c.State != store.Claimed {
		t.Fatal(c, err)
	}
	if err := s.Finish(ctx, scoped(), c.Token, store.Outcome{Status: 200}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, scoped(), "fp", time.Minute); err != nil || c.State != store.Finished {
		t.Fatal(c, err)
	}
	r := s.m.routes["orders"]
	if len(r.keys) != 1 {
		t.Fatalf("%d keys", len(r.keys))
	}
	for name, k := range r.keys {
		if unsafe.StringData(k.name) != unsafe.StringData(name) {
			t.Fatalf("the record of %q keeps a name other than its map key's", name)
		}
	}
}

// Regression: when a sync lock's lease ran out behind a run of finished
// keys' lock entries, turning it idle compacted the lock list under
// expireLocks, which then took the list's first entry off: an index out of
// range when nothing was left (a panic holding the store's lock), or
// another live lock's entry dropped, which was then never turned idle.
func TestMemoryLockExpiryCompactingTheLockList(t *testing.T) {
	for _, behind := range []bool{false, true} {
		for dead := 0; dead <= 140; dead++ {
			t.Run(fmt.Sprintf("behind=%v/dead=%d", behind, dead), func(t *testing.T) {
				lockExpiryCase(t, behind, dead)
			})
		}
	}
}

// lockExpiryCase claims a lock for a minute, then claims and finishes dead
// keys (their lock entries, dead now, queue behind it), then (behind)
// claims a lock for an hour; a minute on, a claim sweeps.
func lockExpiryCase(t *testing.T, behind bool, dead int) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	s := NewMemoryStore(store.MemoryOptions{Now: func() time.Time { return now }})
	claim := func(key string, lease time.Duration) store.Claim {
		t.Helper()
		c, err := s.Claim(ctx, key, "fp", lease)
		if err != nil || c.State != store.Claimed {
			t.Fatal(c, err)
		}
		return c
	}
	claim("k:stuck", time.Minute)
	for i := range dead {
		key := "k:" + strconv.Itoa(i)
		if err := s.Finish(ctx, key, claim(key, time.Hour).Token, store.Outcome{Status: 200}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	want := 1 // k:new
	if behind {
		claim("k:live", time.Hour)
		want++
	}
	now = now.Add(time.Minute)
	claim("k:new", time.Hour)
	m := s.m
	if m.nlock != want {
		t.Fatalf("%d live locks counted, want %d", m.nlock, want)
	}
	live := 0
	for _, d := range m.locks {
		if d.k != nil && d.live() {
			live++
		}
	}
	if live != want {
		t.Fatalf("%d live entries in the lock list, want %d", live, want)
	}
	if got, want := m.done, MemoryRecount(s); got != want {
		t.Fatalf("Bytes %d, recounted %d", got, want)
	}
}
