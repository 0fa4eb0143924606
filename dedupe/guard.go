package dedupe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

// Guard is the life cycle of idempotency keys, the same for every path a
// delivery takes to the upstream: the local window in front of the shared
// store, the claim, and then the finish or the release of the lock, with
// the finish retried in the background while the store is briefly away and
// the locks still held released at shutdown. Safe for concurrent use.
//
// A delivery opens its key (Open: the window's answer, or the key marked in
// flight on this instance), claims it in the store (Claim), forwards the
// one copy, and settles it: Finish when the upstream took it, Release when
// the provider should retry. Done ends the local in-flight mark; it is
// called before the answer is written, so a caller that stops reading
// cannot hold the key.
type Guard struct {
	store   store.Store
	window  *Cache
	metrics *metrics.Metrics
	log     *slog.Logger

	// held maps scoped keys to their owner tokens, for the locks held
	// right now. A map under a mutex: a sync.Map boxes both strings, three
	// allocations per delivery.
	heldMu   sync.Mutex
	held     map[string]string
	pending  sync.WaitGroup // background finishes
	cut      atomic.Int64   // background finishes that gave up at Drain
	stop     chan struct{}  // closed by Drain: background finishes give up
	stopOnce sync.Once
}

// NewGuard returns a guard on st with a local window of size outcomes kept
// for window.
func NewGuard(st store.Store, size int, window time.Duration, m *metrics.Metrics, log *slog.Logger) *Guard {
	return &Guard{store: st, window: NewCache(size, window), metrics: m, log: log, stop: make(chan struct{}),
		held: map[string]string{}}
}

// Labels name a delivery in the guard's metrics and log lines.
type Labels struct {
	Route     string
	Key       string // as derived, without the route
	RequestID string
	Metrics   *metrics.RouteMetrics
}

// Verdict is what the guard says about a delivery of a key.
type Verdict int

const (
	// Proceed: forward this copy, then Finish or Release.
	Proceed Verdict = iota
	// Replay: the key is finished with this payload; answer Outcome.
	Replay
	// Conflict: the key is finished with another payload (422).
	Conflict
	// Busy: another copy is being forwarded; answer 409 after RetryAfter.
	Busy
	// Unavailable: the store did not answer (Err). The caller may answer
	// 503, or forward on the local window alone (ForwardLocally).
	Unavailable
	// Queued: the delivery queue holds the key (the route is, or was on
	// another instance, a queue route): its event EventID is queued,
	// retrying or dead-lettered (Dead). Answer as the queue route answers
	// a copy: its acknowledgement replayed, or 422 when Fingerprint, the
	// queued copy's, is not this copy's.
	Queued
)

// Admission is the guard's answer to Open or Claim.
type Admission struct {
	Verdict Verdict
	// Layer that answered: "cache" (the local window) or "store".
	Layer string
	// Outcome is the stored answer (Replay, Conflict).
	Outcome *store.Outcome
	// RetryAfter is how long the copy in flight may still hold the key (Busy).
	RetryAfter time.Duration
	// Attempts is the key's delivery count: the store's, or this
	// instance's when the store did not answer.
	Attempts int64
	// Err is the store's error (Unavailable).
	Err error
	// EventID, Fingerprint and Dead describe the queued event (Queued).
	EventID     string
	Fingerprint string
	Dead        bool
}

// Key is one delivery's hold on its idempotency key.
type Key struct {
	g       *Guard
	labels  Labels
	scoped  string // route:key
	fp      string
	gen     uint64 // the window's reset generation when the delivery began
	lockTTL time.Duration
	flight  *Flight
	// ownFlight is flight when Open marked the key in flight.
	ownFlight Flight
	// storeOnly: a Hold's key, claimed in the store alone (no local
	// window); op names its store errors ("claim" when empty).
	storeOnly bool
	op        string

	token    string    // the store lock's owner token; "" when not held
	deadline time.Time // when the lock expires at the latest
	local    bool      // forwarded on the local window alone
	finished bool
}

// Gen returns the window's reset generation, to be passed to Open by a
// delivery that begins now: an outcome is added to the window only when no
// operator's reset reached this instance since (a delivery in flight during
// a reset cannot put the forgotten outcome back).
func (g *Guard) Gen() uint64 { return g.window.Gen() }

// Open starts a delivery of scoped ("route:key") with payload fingerprint
// fp. The local window answers a finished key (Replay or Conflict) and a
// copy in flight on this instance (Busy) with no store round trip; both
// return a nil Key. Otherwise the key is marked in flight here and Open
// returns Proceed with a Key to Claim; the caller must call Done.
func (g *Guard) Open(scoped, fp string, gen uint64, lockTTL time.Duration, l Labels) (*Key, Admission) {
	if e, ok := g.window.Get(scoped); ok {
		l.Metrics.CacheHit()
		e.LastSeen.Store(time.Now().UnixNano())
		return nil, finishedAdmission("cache", &e.Outcome, fp, e.Attempts.Add(1))
	}
	l.Metrics.CacheMiss()
	// The key and its in-flight mark are one allocation.
	k := &Key{g: g, labels: l, scoped: scoped, fp: fp, gen: gen, lockTTL: lockTTL}
	flight, ok := g.window.BeginWith(scoped, &k.ownFlight)
	if !ok {
		return nil, Admission{Verdict: Busy, Layer: "cache", RetryAfter: time.Second, Attempts: flight.Attempts.Add(1)}
	}
	k.flight = flight
	return k, Admission{Verdict: Proceed}
}

// Cached answers a finished key from the local window alone (Replay or
// Conflict, Layer "cache"), marking nothing in flight: the path of queue
// routes, whose keys live in the queue. ok false when the window does not
// know the key.
func (g *Guard) Cached(scoped, fp string, l Labels) (Admission, bool) {
	e, ok := g.window.Get(scoped)
	if !ok {
		l.Metrics.CacheMiss()
		return Admission{}, false
	}
	l.Metrics.CacheHit()
	e.LastSeen.Store(time.Now().UnixNano())
	return finishedAdmission("cache", &e.Outcome, fp, e.Attempts.Add(1)), true
}

// Remember puts a finished key's outcome, learnt elsewhere (the queue),
// into the local window, unless an operator's reset reached this instance
// since gen.
func (g *Guard) Remember(scoped string, out store.Outcome, attempts int64, gen uint64) {
	g.window.Add(scoped, out, attempts, gen)
}

func finishedAdmission(layer string, out *store.Outcome, fp string, attempts int64) Admission {
	v := Conflict
	if out.Fingerprint == fp {
		v = Replay
	}
	return Admission{Verdict: v, Layer: layer, Outcome: out, Attempts: attempts}
}

// Claim claims the key in the store, in one atomic step: Proceed (this
// copy holds the lock now), Busy, Replay or Conflict from the store, or
// Unavailable. A ctx cancelled by the caller is returned as it is.
func (k *Key) Claim(ctx context.Context) Admission {
	k.deadline = time.Now().Add(k.lockTTL)
	c, err := k.g.store.Claim(ctx, k.scoped, k.fp, k.lockTTL)
	if err != nil {
		if ctx.Err() != nil {
			return Admission{Verdict: Unavailable, Err: ctx.Err()}
		}
		k.g.storeError(k.claimOp(), k.labels, err)
		a := Admission{Verdict: Unavailable, Layer: "store", Err: err}
		if k.flight != nil {
			// The store's count is out of reach: this instance's copies.
			a.Attempts = k.flight.Attempts.Add(1)
		}
		return a
	}
	if k.flight != nil {
		k.flight.Attempts.Store(c.Attempts)
	}
	switch c.State {
	case store.Claimed:
		k.token = c.Token
		k.g.hold(k.scoped, c.Token)
		return Admission{Verdict: Proceed, Layer: "store", Attempts: c.Attempts}
	case store.InFlight:
		return Admission{Verdict: Busy, Layer: "store", RetryAfter: c.RetryAfter, Attempts: c.Attempts}
	case store.Queued:
		return Admission{Verdict: Queued, Layer: "store", Attempts: c.Attempts,
			EventID: c.EventID, Fingerprint: c.Fingerprint, Dead: c.Dead}
	case store.Finished:
		a := finishedAdmission("store", &c.Outcome, k.fp, c.Attempts)
		if a.Verdict == Replay {
			k.finished = true
			if !k.storeOnly {
				k.g.window.Add(k.scoped, c.Outcome, c.Attempts, k.gen)
			}
		}
		return a
	}
	err = errors.New("dedupe: claim returned state " + c.State.String())
	k.g.storeError(k.claimOp(), k.labels, err)
	return Admission{Verdict: Unavailable, Layer: "store", Err: err}
}

func (k *Key) claimOp() string {
	if k.op == "" {
		return "claim"
	}
	return k.op
}

// ForwardLocally marks a key whose store did not answer as forwarded on
// the local window alone: a finished outcome goes to the window only.
func (k *Key) ForwardLocally() { k.local = true }

// Finished reports whether the key is finished in the store: by this
// delivery's Finish, or before it with the same payload (Replay).
func (k *Key) Finished() bool { return k.finished }

// Done ends the local in-flight mark, once; the key's state in the store
// is not changed. Every answer is written after it.
func (k *Key) Done() {
	if k != nil && k.flight != nil {
		k.g.window.End(k.scoped)
		k.flight = nil
	}
}

// Finish records the upstream's answer: in the store for retention (when
// this copy holds the lock) and in the local window. A failed store call is
// tried again at once a few times, and then, after the caller answered, in
// the background for as long as the lock can still be this delivery's (a
// Redis restart takes about a second). The finish script checks the token,
// so a repeat after a success that timed out changes nothing, and a lock
// that vanished with a Redis that lost its data is recorded all the same
// unless another copy holds the key.
//
// A copy forwarded on the local window alone (ForwardLocally) is recorded
// in the window only; one that holds no lock otherwise (a duplicate
// forwarded in shadow mode) is not recorded at all.
func (k *Key) Finish(ctx context.Context, out store.Outcome, attempts int64, retention time.Duration) {
	if k.token == "" {
		if k.local {
			k.g.window.Add(k.scoped, out, attempts, k.gen)
		}
		return
	}
	defer k.g.window.Add(k.scoped, out, attempts, k.gen)
	// From here on the lock must not be released at shutdown: the
	// upstream took the event.
	k.g.unhold(k.scoped)
	k.finished = true
	f := pendingFinish{k: k, out: out, retention: retention, deadline: k.deadline.Add(-finishMargin)}
	err := f.try(ctx)
	retried := false
	for n := 1; retryableFinish(err) && n < finishTries; n++ {
		time.Sleep(time.Duration(n) * 25 * time.Millisecond)
		err = f.try(ctx)
		retried = true
	}
	switch {
	case errors.Is(err, store.ErrNotOwner) && !retried:
		// The lock outlived lock_ttl and another copy holds or finished
		// the key (or an operator reset it): leave the store alone.
		k.labels.Metrics.LockReleased("expired")
	case errors.Is(err, store.ErrNotOwner):
		// An earlier try that timed out had in fact finished the key.
	case err != nil:
		k.g.finishLater(f)
	}
}

// Release drops the lock so the provider's next retry is forwarded; reason
// labels webhook_lock_released_total. It does nothing when this copy holds
// no lock.
func (k *Key) Release(ctx context.Context, reason string) {
	if k.token == "" {
		return
	}
	k.g.unhold(k.scoped)
	err := k.g.store.Release(ctx, k.scoped, k.token)
	k.token = ""
	switch {
	case errors.Is(err, store.ErrNotOwner):
		k.labels.Metrics.LockReleased("expired")
	case err != nil:
		k.g.storeError("release", k.labels, err)
	default:
		k.labels.Metrics.LockReleased(reason)
	}
}

// finishTries bounds the attempts at recording a finished key before the
// caller answers; later ones run in the background.
const finishTries = 4

// finishMargin is how long before the lock's expiry the background tries
// stop: the last one must reach the store while the lock (and a reset's
// tombstone, which lives as long) can still be there, whatever the store's
// own call deadline (500 ms for Redis). Route timeouts leave 3 s of
// lock_ttl, so this leaves the background at least 2 s.
const finishMargin = time.Second

func retryableFinish(err error) bool { return err != nil && !errors.Is(err, store.ErrNotOwner) }

// pendingFinish is a finished key not yet recorded in the store.
type pendingFinish struct {
	k         *Key
	out       store.Outcome
	retention time.Duration
	deadline  time.Time // when to stop trying: finishMargin before the lock's expiry
}

func (f *pendingFinish) try(ctx context.Context) error {
	err := f.k.g.store.Finish(ctx, f.k.scoped, f.k.token, f.out, f.retention)
	if retryableFinish(err) {
		f.k.g.storeError("finish", f.k.labels, err)
	}
	return err
}

// finishLater keeps trying f in the background, with growing pauses,
// until it is recorded, another copy turns out to hold the key, the lock's
// deadline passes, or Drain gives up on it.
func (g *Guard) finishLater(f pendingFinish) {
	g.pending.Add(1)
	m := f.k.labels.Metrics
	m.FinishDeferred("deferred")
	go func() {
		defer g.pending.Done()
		pause := 50 * time.Millisecond
		for {
			wait := min(pause, time.Until(f.deadline))
			if wait <= 0 {
				break
			}
			select {
			case <-g.stop:
				g.cut.Add(1)
				m.FinishDeferred("gave_up")
				g.logUnrecorded(f.k.labels, "the gateway stopped")
				return
			case <-time.After(wait):
			}
			err := f.try(context.Background())
			switch {
			case err == nil:
				m.FinishDeferred("recorded")
				return
			case errors.Is(err, store.ErrNotOwner):
				m.FinishDeferred("not_owner")
				return
			}
			pause = min(2*pause, time.Second)
		}
		m.FinishDeferred("gave_up")
		g.logUnrecorded(f.k.labels, "the lock's lifetime ran out")
	}()
}

func (g *Guard) logUnrecorded(l Labels, why string) {
	g.log.LogAttrs(context.Background(), slog.LevelError,
		"could not record a finished key before "+why+"; the next copy may be forwarded again",
		slog.String("route", l.Route), slog.String("key", l.Key), slog.String("request_id", l.RequestID))
}

// storeError counts and logs a failed store call.
func (g *Guard) storeError(op string, l Labels, err error) {
	g.metrics.StoreErrors.WithLabelValues(op).Inc()
	g.log.LogAttrs(context.Background(), slog.LevelError, "store error",
		slog.String("op", op), slog.String("route", l.Route), slog.String("key", l.Key),
		slog.String("request_id", l.RequestID), slog.String("error", err.Error()))
}

// Hold claims scoped in the store alone, without the local window: for
// keys that stand beside a delivery's own (the replay guard's signed
// request). The Key it returns (non-nil with Proceed, Replay or Conflict)
// is settled with Finish or Release like any other; Done is a no-op.
func (g *Guard) Hold(ctx context.Context, scoped, fp string, lockTTL time.Duration, op string, l Labels) (*Key, Admission) {
	k := &Key{g: g, labels: l, scoped: scoped, fp: fp, lockTTL: lockTTL, gen: g.Gen(), storeOnly: true, op: op}
	a := k.Claim(ctx)
	if a.Verdict != Proceed {
		return nil, a
	}
	return k, a
}

// SettleHeld finishes a Hold's key (recording fp's owner for retention)
// when finished is true, or releases it. A failure is returned, and
// logged under op unless it is store.ErrNotOwner (the lock ran out and
// another copy may hold it now).
func (k *Key) SettleHeld(ctx context.Context, finished bool, op string, retention time.Duration) error {
	if k == nil || k.token == "" {
		return nil
	}
	k.g.unhold(k.scoped)
	var err error
	if finished {
		err = k.g.store.Finish(ctx, k.scoped, k.token, store.Outcome{Status: 200, Fingerprint: k.fp}, retention)
	} else {
		err = k.g.store.Release(ctx, k.scoped, k.token)
	}
	k.token = ""
	if err != nil && !errors.Is(err, store.ErrNotOwner) {
		k.g.storeError(op, k.labels, err)
	}
	return err
}

// Forget removes scoped from this instance's local window and moves the
// reset generation on: the operator's reset (see the admin API).
func (g *Guard) Forget(scoped string) { g.window.Remove(scoped) }

// WindowState reports how many deliveries of a finished key this instance
// has seen while it was in its local window, and when it saw the last one
// (replays there cost no store round trip, so the store's count and
// last_seen do not include them).
func (g *Guard) WindowState(scoped string) (attempts int64, lastSeen time.Time, ok bool) {
	e, ok := g.window.Get(scoped)
	if !ok {
		return 0, time.Time{}, false
	}
	return e.Attempts.Load(), time.Unix(0, e.LastSeen.Load()), true
}

// ReleaseHeld releases every lock this instance still holds for a copy the
// upstream has not taken: called at shutdown for deliveries cut by the
// grace period, so their retries need not wait out lock_ttl. It returns
// how many it released.
func (g *Guard) ReleaseHeld(ctx context.Context) int {
	g.heldMu.Lock()
	locks := make([][2]string, 0, len(g.held))
	for k, token := range g.held {
		locks = append(locks, [2]string{k, token})
	}
	g.heldMu.Unlock()
	n := 0
	for _, l := range locks {
		if err := g.store.Release(ctx, l[0], l[1]); err == nil {
			n++
		}
		g.heldMu.Lock()
		if g.held[l[0]] == l[1] {
			delete(g.held, l[0])
		}
		g.heldMu.Unlock()
	}
	return n
}

// hold notes the lock on scoped this instance holds with token.
func (g *Guard) hold(scoped, token string) {
	g.heldMu.Lock()
	g.held[scoped] = token
	g.heldMu.Unlock()
}

// unhold forgets the lock on scoped.
func (g *Guard) unhold(scoped string) {
	g.heldMu.Lock()
	delete(g.held, scoped)
	g.heldMu.Unlock()
}

// Drain waits, until ctx is done, for the finished keys still being
// recorded in the background, then makes those that remain give up (each
// logs an error). It reports whether all were done in time: false only
// when a finish was really cut, not merely because ctx was already done
// (a grace period spent elsewhere) on an instance with nothing pending.
func (g *Guard) Drain(ctx context.Context) bool {
	done := make(chan struct{})
	go func() { g.pending.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	g.stopOnce.Do(func() { close(g.stop) })
	<-done
	return g.cut.Load() == 0
}
