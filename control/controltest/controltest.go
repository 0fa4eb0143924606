// Package controltest is the conformance suite of control.Store: every
// implementation runs Run, and with it the rules of control.Gate over
// that store.
package controltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clawgate/clawgate/control"
)

// Run runs the suite; newStore returns an empty store for each case.
func Run(t *testing.T, newStore func(t *testing.T) control.Store) {
	ctx := context.Background()
	t.Run("EmptyRecord", func(t *testing.T) {
		s := newStore(t)
		rec, err := s.Load(ctx, "r")
		if err != nil || rec != (control.Record{}) {
			t.Fatalf("Load of a route never written = %+v, %v; want the zero Record", rec, err)
		}
	})
	t.Run("SwapComparesTheVersion", func(t *testing.T) {
		s := newStore(t)
		next := control.Record{PausedAt: 1, Failures: 2, OpenUntil: 3, ProbeUntil: 4, SyncSeen: 5, QueueSeen: 6}
		if ok, err := s.Swap(ctx, "r", control.Record{}, next); !ok || err != nil {
			t.Fatalf("first Swap = %v, %v", ok, err)
		}
		got, _ := s.Load(ctx, "r")
		if want := (control.Record{Version: 1, PausedAt: 1, Failures: 2, OpenUntil: 3, ProbeUntil: 4, SyncSeen: 5, QueueSeen: 6}); got != want {
			t.Fatalf("after Swap: %+v, want %+v", got, want)
		}
		if ok, err := s.Swap(ctx, "r", control.Record{}, control.Record{Failures: 9}); ok || err != nil {
			t.Fatalf("Swap with a stale version = %v, %v; want false", ok, err)
		}
		if again, _ := s.Load(ctx, "r"); again != got {
			t.Fatalf("a refused Swap changed the record: %+v", again)
		}
		if other, _ := s.Load(ctx, "other"); other != (control.Record{}) {
			t.Fatalf("another route's record: %+v", other)
		}
	})
	t.Run("ConcurrentChangesAreNotLost", func(t *testing.T) {
		s := newStore(t)
		const workers, each = 8, 25
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					for {
						rec, err := s.Load(ctx, "r")
						if err != nil {
							t.Error(err)
							return
						}
						next := rec
						next.Failures++
						if ok, err := s.Swap(ctx, "r", rec, next); err != nil {
							t.Error(err)
							return
						} else if ok {
							break
						}
					}
				}
			})
		}
		wg.Wait()
		if rec, _ := s.Load(ctx, "r"); rec.Failures != workers*each || rec.Version != workers*each {
			t.Fatalf("after %d increments: %+v", workers*each, rec)
		}
	})
	t.Run("PaceTakesOneThenWaits", func(t *testing.T) {
		s := newStore(t)
		p := control.Pace{Rate: 1, Per: time.Hour}
		got, wait, err := s.Take(ctx, "r", p, 5)
		if err != nil || got != 1 || wait < 59*time.Minute {
			t.Fatalf("first Take(5) at 1/h = %d, %v, %v; want 1 and about an hour to wait", got, wait, err)
		}
		if got, wait, err := s.Take(ctx, "r", p, 5); err != nil || got != 0 || wait < 59*time.Minute || wait > time.Hour+time.Second {
			t.Fatalf("second Take(5) = %d, %v, %v; want 0 and about an hour", got, wait, err)
		}
		if got, _, err := s.Take(ctx, "other", p, 1); err != nil || got != 1 {
			t.Fatalf("another route's pace = %d, %v; want its own", got, err)
		}
	})
	t.Run("Gate", func(t *testing.T) { runGate(t, newStore) })
}

// Clock is a settable clock for the Gate under test.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{t: time.UnixMilli(1_700_000_000_000)} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newGates returns two gates (two instances) over one store, on one
// clock, trusting their cache for no time at all (so every step reads the
// store, as after Fresh has passed), and the transitions they reported.
func newGates(t *testing.T, newStore func(t *testing.T) control.Store) (a, b *control.Gate, clock *Clock, transitions func() []string) {
	s := newStore(t)
	clock = NewClock()
	var mu sync.Mutex
	var seen []string
	mk := func() *control.Gate {
		g := control.NewGate(s)
		g.Now, g.Fresh = clock.Now, -1
		g.OnTransition = func(route, to string) { mu.Lock(); seen = append(seen, route+":"+to); mu.Unlock() }
		return g
	}
	return mk(), mk(), clock, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

func runGate(t *testing.T, newStore func(t *testing.T) control.Store) {
	ctx := context.Background()
	br := control.Breaker{Failures: 3, Cooldown: 30 * time.Second}
	admit := func(t *testing.T, g *control.Gate) control.Admission {
		t.Helper()
		a, err := g.Admit(ctx, "r", br)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	report := func(t *testing.T, g *control.Gate, ok, probe bool) {
		t.Helper()
		if err := g.Report(ctx, "r", br, ok, probe); err != nil {
			t.Fatal(err)
		}
	}
	state := func(t *testing.T, g *control.Gate) control.State {
		t.Helper()
		st, err := g.State(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("OpensAfterFailuresInARowOverInstances", func(t *testing.T) {
		a, b, clock, tr := newGates(t, newStore)
		report(t, a, false, false)
		report(t, b, false, false)
		report(t, a, true, false) // a success in between clears the count
		report(t, a, false, false)
		report(t, b, false, false)
		if st := state(t, a); st.Breaker != control.BreakerClosed || st.Failures != 2 {
			t.Fatalf("after 2 failures in a row: %+v", st)
		}
		report(t, b, false, false)
		if st := state(t, a); st.Breaker != control.BreakerOpen || !st.OpenUntil.Equal(clock.Now().Add(br.Cooldown)) {
			t.Fatalf("after 3 failures in a row: %+v, want open for the cooldown", st)
		}
		for _, g := range []*control.Gate{a, b} {
			if ad := admit(t, g); ad.Allow || ad.Wait != br.Cooldown {
				t.Fatalf("admit while open = %+v, want no and the cooldown to wait", ad)
			}
		}
		if got := tr(); len(got) != 1 || got[0] != "r:open" {
			t.Fatalf("transitions %v", got)
		}
	})
	t.Run("OneProbeAfterTheCooldown", func(t *testing.T) {
		a, b, clock, tr := newGates(t, newStore)
		for range 3 {
			report(t, a, false, false)
		}
		clock.Add(br.Cooldown - time.Second)
		if ad := admit(t, b); ad.Allow || ad.Wait != time.Second {
			t.Fatalf("admit a second before the cooldown ends = %+v", ad)
		}
		clock.Add(time.Second)
		if st := state(t, a); st.Breaker != control.BreakerHalfOpen {
			t.Fatalf("after the cooldown: %+v, want half_open", st)
		}
		// Of many instances asking at once, exactly one probes.
		var mu sync.Mutex
		probes := 0
		var wg sync.WaitGroup
		for i := range 8 {
			g := a
			if i%2 == 1 {
				g = b
			}
			wg.Go(func() {
				ad, err := g.Admit(ctx, "r", br)
				if err != nil {
					t.Error(err)
					return
				}
				if ad.Allow != ad.Probe {
					t.Errorf("half open, an admission that is not the probe: %+v", ad)
				}
				if ad.Probe {
					mu.Lock()
					probes++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if probes != 1 {
			t.Fatalf("%d probes admitted, want 1", probes)
		}
		// The probe fails: open again for a whole cooldown.
		report(t, b, false, true)
		if st := state(t, a); st.Breaker != control.BreakerOpen || !st.OpenUntil.Equal(clock.Now().Add(br.Cooldown)) {
			t.Fatalf("after a failed probe: %+v", st)
		}
		clock.Add(br.Cooldown)
		if ad := admit(t, a); !ad.Probe {
			t.Fatalf("after the second cooldown: %+v, want the probe", ad)
		}
		report(t, a, true, true)
		if st := state(t, b); st.Breaker != control.BreakerClosed || st.Failures != 0 {
			t.Fatalf("after a good probe: %+v, want closed", st)
		}
		if ad := admit(t, b); !ad.Allow || ad.Probe {
			t.Fatalf("admit once closed = %+v", ad)
		}
		if got := tr(); len(got) != 3 || got[0] != "r:open" || got[1] != "r:open" || got[2] != "r:closed" {
			t.Fatalf("transitions %v, want open, open, closed", got)
		}
	})
	t.Run("AProbeNeverReportedIsTakenOverAfterACooldown", func(t *testing.T) {
		a, b, clock, _ := newGates(t, newStore)
		for range 3 {
			report(t, a, false, false)
		}
		clock.Add(br.Cooldown)
		if ad := admit(t, a); !ad.Probe {
			t.Fatalf("%+v", ad)
		}
		// a died with its probe: b waits a cooldown, then probes.
		if ad := admit(t, b); ad.Allow || ad.Wait != br.Cooldown {
			t.Fatalf("while a probes: %+v", ad)
		}
		clock.Add(br.Cooldown)
		if ad := admit(t, b); !ad.Probe {
			t.Fatalf("after the probe's cooldown: %+v, want b to probe", ad)
		}
		// An abandoned probe (nothing to try) lets the next one go at once.
		if err := b.Abandon(ctx, "r"); err != nil {
			t.Fatal(err)
		}
		if ad := admit(t, a); !ad.Probe {
			t.Fatalf("after the probe was abandoned: %+v", ad)
		}
	})
	t.Run("ASuccessWritesNothingWhileClosed", func(t *testing.T) {
		a, _, _, _ := newGates(t, newStore)
		report(t, a, true, false)
		report(t, a, true, false)
		if st, err := a.State(ctx, "r"); err != nil || st.Breaker != control.BreakerClosed {
			t.Fatal(st, err)
		}
	})
	t.Run("ModeHistory", func(t *testing.T) {
		a, b, clock, _ := newGates(t, newStore)
		const retention = time.Hour
		if other, err := b.OtherMode(ctx, "r", true, retention); err != nil || other {
			t.Fatalf("a route never run = %v, %v; want no other mode", other, err)
		}
		if err := a.Seen(ctx, "r", false); err != nil {
			t.Fatal(err)
		}
		for _, g := range []*control.Gate{a, b} {
			if other, err := g.OtherMode(ctx, "r", true, retention); err != nil || !other {
				t.Fatalf("run as sync, asked as a queue route = %v, %v; want the sync records looked up", other, err)
			}
			if other, _ := g.OtherMode(ctx, "r", false, retention); other {
				t.Fatalf("run as sync, asked as a sync route: other mode")
			}
		}
		// The route becomes a queue route: the sync records count for the
		// retention (and the minute Seen may lag) after the last sync run.
		if err := b.Seen(ctx, "r", true); err != nil {
			t.Fatal(err)
		}
		clock.Add(retention + time.Minute - time.Millisecond)
		if other, _ := a.OtherMode(ctx, "r", true, retention); !other {
			t.Fatalf("just inside the retention after the switch: no other mode")
		}
		clock.Add(time.Millisecond)
		if other, _ := a.OtherMode(ctx, "r", true, retention); other {
			t.Fatalf("past the retention after the switch: still the other mode")
		}
	})
	t.Run("PauseAndResume", func(t *testing.T) {
		a, b, clock, _ := newGates(t, newStore)
		since, changed, err := a.SetPaused(ctx, "r", true)
		if err != nil || !changed || !since.Equal(clock.Now()) {
			t.Fatalf("pause = %v, %v, %v", since, changed, err)
		}
		clock.Add(time.Minute)
		if again, changed, err := b.SetPaused(ctx, "r", true); err != nil || changed || !again.Equal(since) {
			t.Fatalf("pause again = %v, %v, %v; want unchanged since %v", again, changed, err, since)
		}
		if p, err := b.Paused(ctx, "r"); err != nil || !p.Equal(since) {
			t.Fatalf("the other instance sees %v, %v", p, err)
		}
		if _, changed, err := b.SetPaused(ctx, "r", false); err != nil || !changed {
			t.Fatalf("resume = %v, %v", changed, err)
		}
		if p, err := a.Paused(ctx, "r"); err != nil || !p.IsZero() {
			t.Fatalf("after resume: %v, %v", p, err)
		}
		if _, changed, err := a.SetPaused(ctx, "r", false); err != nil || changed {
			t.Fatalf("resume of a running route = %v, %v; want unchanged", changed, err)
		}
	})
}
