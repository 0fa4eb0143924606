package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// A key's history counts in the memory store's byte budget as it grows,
// also when it grows on a finished key (its copies replayed), and the
// budget holds.
func TestMemoryHistoryCountsInTheBudget(t *testing.T) {
	ctx := store.WithNote(context.Background(), store.Note{RequestID: "0123456789abcdef0123456789abcdef", Client: "203.0.113.7"})
	const budget = 64 << 10
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxBytes: budget})
	m.SetHistory(ledger.HistoryOptions{Cap: 50, Instance: "gw-1"})
	c, err := m.Claim(ctx, "orders:k0", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, "orders:k0", c.Token, store.Outcome{Status: 200, Fingerprint: "fp"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	before := m.Bytes()
	for range 10 {
		if c, err := m.Claim(ctx, "orders:k0", "fp", time.Minute); err != nil || c.State != store.Finished {
			t.Fatalf("replay = %+v, %v", c, err)
		}
	}
	if after := m.Bytes(); after <= before {
		t.Fatalf("ten more entries on a finished key: %d bytes, then %d", before, after)
	}
	for i := range 500 {
		key := fmt.Sprintf("orders:k%d", i+1)
		c, err := m.Claim(ctx, key, "fp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, key, c.Token, store.Outcome{Status: 200, Fingerprint: "fp"}, time.Hour); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			m.Claim(ctx, key, "fp", time.Minute)
		}
		if b := m.Bytes(); b > budget {
			t.Fatalf("after %d keys: %d bytes over the %d budget", i+1, b, budget)
		}
	}
}
