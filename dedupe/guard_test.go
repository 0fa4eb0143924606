package dedupe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

func newTestGuard(t *testing.T, st store.Store) (*Guard, Labels) {
	t.Helper()
	m := metrics.New(prometheus.NewRegistry())
	g := NewGuard(st, 100, time.Minute, m, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	return g, Labels{Route: "r", Key: "k", Metrics: m.Route("r")}
}

// The life of one key as every delivery path uses it: open, claim,
// finish; then the window and the store both answer the next copy.
func TestGuardLifeCycle(t *testing.T) {
	ctx := context.Background()
	mem := ledger.NewMemoryStore(store.MemoryOptions{})
	g, l := newTestGuard(t, mem)
	k, adm := g.Open("r:k", "fp", g.Gen(), time.Minute, l)
	if adm.Verdict != Proceed || k == nil {
		t.Fatalf("open: %+v", adm)
	}
	if _, adm := g.Open("r:k", "fp", g.Gen(), time.Minute, l); adm.Verdict != Busy || adm.Layer != "cache" {
		t.Fatalf("second local copy: %+v", adm)
	}
	if adm := k.Claim(ctx); adm.Verdict != Proceed || adm.Attempts != 1 {
		t.Fatalf("claim: %+v", adm)
	}
	k.Finish(ctx, store.Outcome{Status: 200, Fingerprint: "fp"}, 1, time.Hour)
	k.Done()
	if !k.Finished() {
		t.Fatal("not finished")
	}
	if _, adm := g.Open("r:k", "fp", g.Gen(), time.Minute, l); adm.Verdict != Replay || adm.Layer != "cache" {
		t.Fatalf("window: %+v", adm)
	}
	if _, adm := g.Open("r:k", "other", g.Gen(), time.Minute, l); adm.Verdict != Conflict {
		t.Fatalf("other payload: %+v", adm)
	}
	g.Forget("r:k")
	k2, _ := g.Open("r:k", "fp", g.Gen(), time.Minute, l)
	if adm := k2.Claim(ctx); adm.Verdict != Replay || adm.Layer != "store" {
		t.Fatalf("store: %+v", adm)
	}
}

// A released key lets the next copy through; a held lock is released at
// shutdown, a finished one is not.
func TestGuardReleaseAndReleaseHeld(t *testing.T) {
	ctx := context.Background()
	g, l := newTestGuard(t, ledger.NewMemoryStore(store.MemoryOptions{}))
	k, _ := g.Open("r:a", "fp", g.Gen(), time.Minute, l)
	k.Claim(ctx)
	k.Release(ctx, "upstream_status")
	k.Done()
	k, _ = g.Open("r:a", "fp", g.Gen(), time.Minute, l)
	if adm := k.Claim(ctx); adm.Verdict != Proceed || adm.Attempts != 2 {
		t.Fatalf("after release: %+v", adm)
	}
	k.Done()
	done, _ := g.Open("r:b", "fp", g.Gen(), time.Minute, l)
	done.Claim(ctx)
	done.Finish(ctx, store.Outcome{Status: 200, Fingerprint: "fp"}, 1, time.Hour)
	done.Done()
	if n := g.ReleaseHeld(ctx); n != 1 {
		t.Fatalf("released %d locks, want 1 (r:a only)", n)
	}
}

// downFinish fails Finish while down is set.
type downFinish struct {
	store.Store
	down atomic.Bool
}

func (d *downFinish) Finish(ctx context.Context, key, token string, out store.Outcome, retention time.Duration) error {
	if d.down.Load() {
		return fmt.Errorf("refused: %w", store.ErrUnavailable)
	}
	return d.Store.Finish(ctx, key, token, out, retention)
}

// Drain stops a finish that cannot land, and reports it.
func TestGuardDrainGivesUpOnAStoreThatStaysDown(t *testing.T) {
	ctx := context.Background()
	st := &downFinish{Store: ledger.NewMemoryStore(store.MemoryOptions{})}
	st.down.Store(true)
	g, l := newTestGuard(t, st)
	k, _ := g.Open("r:k", "fp", g.Gen(), time.Minute, l)
	k.Claim(ctx)
	k.Finish(ctx, store.Outcome{Status: 200, Fingerprint: "fp"}, 1, time.Hour) // goes to the background
	k.Done()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if g.Drain(short) {
		t.Fatal("Drain reported every finish recorded")
	}
}

// An idle instance whose grace period was spent elsewhere (the queue's
// shutdown) reports nothing cut: Drain is false only for a finish that
// was really still pending (issue: -grace shorter than the queue's
// shutdown logged "finished keys not yet recorded" on an idle instance).
func TestGuardDrainIdleWithGraceSpentReportsNothingCut(t *testing.T) {
	g, _ := newTestGuard(t, ledger.NewMemoryStore(store.MemoryOptions{}))
	spent, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 100 {
		if !g.Drain(spent) {
			t.Fatalf("run %d: Drain reported a finish cut with none pending", i)
		}
	}
}
