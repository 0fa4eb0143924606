package control

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Gate is one instance's way to a Store: it keeps each route's record for
// a short while (so that a running route with a closed breaker costs no
// round trip per try) and applies the rules that change it. Every
// instance that shares the store sees a change within Fresh.
type Gate struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Fresh is how long a loaded record is trusted before it is loaded
	// again; 0 means DefaultFresh, a negative value no trust at all (every
	// step reads the store).
	Fresh time.Duration
	// OnTransition, if set, is called when this instance opens or closes
	// a route's breaker (to is "open" or "closed").
	OnTransition func(route, to string)

	store Store
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	rec Record
	at  time.Time
}

// DefaultFresh is Gate.Fresh's default: how soon every instance sees a
// pause, a resume or a breaker that opened elsewhere.
const DefaultFresh = 250 * time.Millisecond

// maxSwaps bounds the compare-and-swap retries of one change; past it the
// change fails (another instance changes the record without pause).
const maxSwaps = 16

// NewGate returns a Gate over store.
func NewGate(store Store) *Gate { return &Gate{store: store, cache: map[string]cached{}} }

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *Gate) fresh() time.Duration {
	if g.Fresh > 0 {
		return g.Fresh
	}
	return DefaultFresh
}

// record returns route's record, from the cache while it is fresh.
func (g *Gate) record(ctx context.Context, route string) (Record, error) {
	now := g.now()
	g.mu.Lock()
	c, ok := g.cache[route]
	g.mu.Unlock()
	if ok && g.Fresh >= 0 && now.Sub(c.at) < g.fresh() {
		return c.rec, nil
	}
	return g.load(ctx, route)
}

// load reads route's record from the store and caches it.
func (g *Gate) load(ctx context.Context, route string) (Record, error) {
	rec, err := g.store.Load(ctx, route)
	if err != nil {
		return Record{}, fmt.Errorf("control: route %s: %w", route, err)
	}
	g.keep(route, rec)
	return rec, nil
}

func (g *Gate) keep(route string, rec Record) {
	g.mu.Lock()
	if c, ok := g.cache[route]; !ok || c.rec.Version <= rec.Version {
		g.cache[route] = cached{rec, g.now()}
	}
	g.mu.Unlock()
}

// change applies f to route's stored record until the swap holds (or f
// asks for nothing), and returns the record stored and whether f changed
// it.
func (g *Gate) change(ctx context.Context, route string, f func(r Record) (Record, bool)) (Record, bool, error) {
	for range maxSwaps {
		rec, err := g.load(ctx, route)
		if err != nil {
			return Record{}, false, err
		}
		next, ok := f(rec)
		if !ok {
			return rec, false, nil
		}
		next.Version = rec.Version
		swapped, err := g.store.Swap(ctx, route, rec, next)
		if err != nil {
			return Record{}, false, fmt.Errorf("control: route %s: %w", route, err)
		}
		if swapped {
			next.Version = rec.Version + 1
			g.keep(route, next)
			return next, true, nil
		}
	}
	return Record{}, false, fmt.Errorf("control: route %s: %w: the record kept changing under %d tries", route, ErrUnavailable, maxSwaps)
}

// Paused reports when route was paused (the zero time: it runs).
func (g *Gate) Paused(ctx context.Context, route string) (time.Time, error) {
	rec, err := g.record(ctx, route)
	if err != nil {
		return time.Time{}, err
	}
	return fromMs(rec.PausedAt), nil
}

// SetPaused pauses (or resumes) route for every instance; changed is
// false when it already was. It returns when the route was paused (zero
// once resumed).
func (g *Gate) SetPaused(ctx context.Context, route string, paused bool) (since time.Time, changed bool, err error) {
	now := g.now()
	rec, changed, err := g.change(ctx, route, func(r Record) (Record, bool) {
		if (r.PausedAt != 0) == paused {
			return r, false
		}
		r.PausedAt = 0
		if paused {
			r.PausedAt = ms(now)
		}
		return r, true
	})
	return fromMs(rec.PausedAt), changed, err
}

// Admission is Admit's answer.
type Admission struct {
	// Allow: the try may go. Probe: it is the breaker's probe, to be
	// reported with probe true (or abandoned).
	Allow, Probe bool
	// Wait is how long until a try may go again (not allowed).
	Wait time.Duration
}

// Admit asks whether a try of route may go to its upstream under b: yes
// while the breaker is closed; no while it is open, for the rest of the
// cooldown; once the cooldown is over, yes for exactly one try of all
// instances (the probe) and no for the others until the probe reports or
// a cooldown passes without its report.
func (g *Gate) Admit(ctx context.Context, route string, b Breaker) (Admission, error) {
	if !b.Enabled() {
		return Admission{Allow: true}, nil
	}
	rec, err := g.record(ctx, route)
	if err != nil {
		return Admission{}, err
	}
	if rec.OpenUntil == 0 {
		return Admission{Allow: true}, nil
	}
	now := ms(g.now())
	if wait := closedIn(rec, now); wait > 0 {
		return Admission{Wait: wait}, nil
	}
	var wait time.Duration
	_, probe, err := g.change(ctx, route, func(r Record) (Record, bool) {
		if r.OpenUntil == 0 {
			return r, false
		}
		if wait = closedIn(r, now); wait > 0 {
			return r, false
		}
		r.ProbeUntil = now + b.Cooldown.Milliseconds()
		return r, true
	})
	switch {
	case err != nil:
		return Admission{}, err
	case probe:
		return Admission{Allow: true, Probe: true}, nil
	case wait > 0:
		return Admission{Wait: wait}, nil
	}
	return Admission{Allow: true}, nil // closed meanwhile
}

// closedIn is how long an open breaker keeps every try out: the rest of
// the cooldown, or of the probe under way.
func closedIn(r Record, now int64) time.Duration {
	until := max(r.OpenUntil, r.ProbeUntil)
	if until > now {
		return time.Duration(until-now) * time.Millisecond
	}
	return 0
}

// Failed reports whether an answer of the upstream counts as a failure
// for the breaker: no answer (refused, timed out, cut), 5xx, 408 or 429.
func Failed(status int) bool {
	return status == 0 || status >= 500 || status == 408 || status == 429
}

// Report records how a try of route ended under b (ok: not Failed). A
// success closes the breaker and clears the count; a failure counts, and
// opens the breaker at b.Failures in a row, or opens it again when it was
// the probe. A success while the count is 0 and the breaker closed (the
// common case) writes nothing.
func (g *Gate) Report(ctx context.Context, route string, b Breaker, ok, probe bool) error {
	if !b.Enabled() {
		return nil
	}
	if ok && !probe {
		rec, err := g.record(ctx, route)
		if err != nil {
			return err
		}
		if rec.Failures == 0 && rec.OpenUntil == 0 {
			return nil
		}
	}
	now := ms(g.now())
	var to string
	_, _, err := g.change(ctx, route, func(r Record) (Record, bool) {
		to = ""
		old := r
		if ok {
			if r.OpenUntil != 0 {
				to = "closed"
			}
			r.Failures, r.OpenUntil, r.ProbeUntil = 0, 0, 0
		} else {
			r.Failures++
			switch {
			case r.OpenUntil != 0 && probe:
				r.OpenUntil, r.ProbeUntil = now+b.Cooldown.Milliseconds(), 0
				to = "open"
			case r.OpenUntil == 0 && r.Failures >= int64(b.Failures):
				r.OpenUntil = now + b.Cooldown.Milliseconds()
				to = "open"
			}
		}
		return r, r != old
	})
	if err == nil && to != "" && g.OnTransition != nil {
		g.OnTransition(route, to)
	}
	return err
}

// Open reports whether route's breaker is open or half open (no try but
// an admitted probe may go), from the cached record.
func (g *Gate) Open(ctx context.Context, route string) (bool, error) {
	rec, err := g.record(ctx, route)
	return rec.OpenUntil != 0, err
}

// Abandon gives up a probe that was admitted but not tried (nothing to
// deliver): another try may probe at once.
func (g *Gate) Abandon(ctx context.Context, route string) error {
	_, _, err := g.change(ctx, route, func(r Record) (Record, bool) {
		if r.ProbeUntil == 0 {
			return r, false
		}
		r.ProbeUntil = 0
		return r, true
	})
	return err
}

// State is a route's control state as the admin API and the gauges show
// it.
type State struct {
	// PausedAt is when the route was paused; zero when it runs.
	PausedAt time.Time
	// Breaker is "closed", "open" (no try goes until OpenUntil) or
	// "half_open" (the cooldown is over: one try probes).
	Breaker   string
	OpenUntil time.Time
	// Failures counts the failed tries in a row.
	Failures int64
}

// Breaker states reported by State.Breaker.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// State loads route's record afresh and reports it.
func (g *Gate) State(ctx context.Context, route string) (State, error) {
	rec, err := g.load(ctx, route)
	if err != nil {
		return State{}, err
	}
	st := State{PausedAt: fromMs(rec.PausedAt), Breaker: BreakerClosed, Failures: rec.Failures, OpenUntil: fromMs(rec.OpenUntil)}
	switch {
	case rec.OpenUntil == 0:
	case rec.OpenUntil > ms(g.now()):
		st.Breaker = BreakerOpen
	default:
		st.Breaker = BreakerHalfOpen
	}
	return st, nil
}

// Take asks for up to n tries of route under p (see Store.Take); with no
// pace all n go.
func (g *Gate) Take(ctx context.Context, route string, p Pace, n int) (int, time.Duration, error) {
	if !p.Limited() || n <= 0 {
		return n, 0, nil
	}
	got, wait, err := g.store.Take(ctx, route, p, n)
	if err != nil {
		return 0, 0, fmt.Errorf("control: route %s: pace: %w", route, err)
	}
	return got, wait, nil
}

// seenEvery is how often an instance records that it runs a route in
// its mode: Seen writes only when the stored time is older.
const seenEvery = time.Minute

// Seen records that this instance runs route as a queue route (queued)
// or as a sync route, now (a write only when the stored time is a minute
// old or more).
func (g *Gate) Seen(ctx context.Context, route string, queued bool) error {
	now := ms(g.now())
	if rec, err := g.record(ctx, route); err == nil {
		seen := rec.SyncSeen
		if queued {
			seen = rec.QueueSeen
		}
		if now-seen < seenEvery.Milliseconds() {
			return nil // recorded recently: no round trip
		}
	}
	_, _, err := g.change(ctx, route, func(r Record) (Record, bool) {
		seen := &r.SyncSeen
		if queued {
			seen = &r.QueueSeen
		}
		if now-*seen < seenEvery.Milliseconds() {
			return r, false
		}
		*seen = now
		return r, true
	})
	return err
}

// OtherMode reports whether route ran in the other mode than queued, on
// any instance sharing the store, recently enough that the other mode's
// records may hold finished keys of it: within retention (plus the
// minute Seen may lag) of the last time it was seen so. A route that
// runs as a queue route then also looks a new key up in the sync
// records, and the reverse, so that a retry of an event the other mode
// finished is not delivered again, whichever instance gets it and
// whether or not it restarted since.
func (g *Gate) OtherMode(ctx context.Context, route string, queued bool, retention time.Duration) (bool, error) {
	rec, err := g.record(ctx, route)
	if err != nil {
		return false, err
	}
	other := rec.QueueSeen
	if queued {
		other = rec.SyncSeen
	}
	return other != 0 && ms(g.now()) < other+(retention+seenEvery).Milliseconds(), nil
}

// Announce records that this instance is about to run route as a queue
// route (queued) or a sync route (Seen), and returns how long to wait
// before doing so: when the route ran in the other mode recently, the
// other instances must first learn of this one (they read the record
// again within Fresh), so that none of them misses the new mode's
// records; 0 otherwise.
func (g *Gate) Announce(ctx context.Context, route string, queued bool, retention time.Duration) (time.Duration, error) {
	if err := g.Seen(ctx, route, queued); err != nil {
		return 0, err
	}
	other, err := g.OtherMode(ctx, route, queued, retention)
	if err != nil || !other || g.Fresh < 0 {
		return 0, err
	}
	return g.fresh(), nil
}
