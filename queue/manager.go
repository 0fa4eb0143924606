package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

// Sender forwards one try of a queued event to its route's upstream.
type Sender interface {
	// Send forwards payload (as given to Enqueue) as try attempt of the
	// event, within the route's timeout; ctx ends only at shutdown.
	Send(ctx context.Context, route string, payload []byte, attempt int64) Result
}

// Recorder receives the queue's metrics (metrics.Metrics); attempt
// outcomes are metrics.Attempt*.
type Recorder interface {
	QueueAttempt(route, outcome string)
	QueueDelay(route string, seconds float64)
	QueueReclaimed(route string, n int)
	DLQReplayed(route string, n int)
	DLQPurged(route string, n int)
	SetQueueStats(route string, depth, dlq int64, lagSeconds float64)
	ForgetQueueRoute(route string)
}

// Route is one queue route's settings.
type Route struct {
	Name string
	// Workers forward the route's events concurrently, per instance.
	Workers int
	Retry   Retry
	// MaxDepth bounds the route's undelivered events; past it Enqueue
	// answers Full.
	MaxDepth int
	// MaxDLQ and MaxDLQBytes bound the route's dead-lettered events, by
	// count and by payload bytes (0: no bound): while the DLQ holds as
	// many, Enqueue answers Full to new events (copies of known ones are
	// still answered). Events already queued that die meanwhile are kept,
	// so the DLQ can pass the bound by at most MaxDepth events.
	MaxDLQ      int
	MaxDLQBytes int64
	// Retention is how long a delivered (or purged) key is remembered.
	Retention time.Duration
	// LockTTL is how long an entry may be held by one instance before
	// another takes it over; the route's timeout is shorter.
	LockTTL time.Duration
	// Shards splits the route's queue over Redis Cluster slots.
	Shards int
	// Pace bounds the route's tries over every instance; Breaker stops
	// them while the upstream keeps failing (zero: neither).
	Pace    control.Pace
	Breaker control.Breaker
	// Ordered: the route has order.by; an event enqueued without an order
	// value is counted as unordered. OrderHold (order.on_dead: hold): a
	// dead-lettered event holds the later events of its value.
	Ordered, OrderHold bool
}

// Options configure a Manager.
type Options struct {
	Backend Backend
	Sender  Sender
	Metrics Recorder
	// Controls, if set, pauses routes, holds their tries while their
	// breaker is open, and paces them; nil: none of these.
	Controls Controls
	Log      *slog.Logger
	// OnDead is called for every event dead-lettered (alerting); may be
	// nil.
	OnDead func(route, key, id, reason string)
	// OnDrained is called when a route's DLQ is found empty (the alert may
	// fire again next time); may be nil.
	OnDrained func(route string)
	// Consumer names this instance in the consumer group; "" means
	// hostname-pid-random.
	Consumer string
	// ReplayRate bounds a replay of a whole DLQ, in events per second.
	ReplayRate float64
	// StatsEvery is how often the gauges are refreshed; 0 means 5s.
	StatsEvery time.Duration
	// PromoteEvery is how often due retries are made ready; 0 means 250ms.
	PromoteEvery time.Duration
	// Block bounds one wait for ready entries; 0 means 1s.
	Block time.Duration
	// Jitter returns a value in [0, 1) for the retry delays; nil means
	// math/rand.
	Jitter func() float64
}

// Manager runs the workers of every queue route on this instance and is
// the HTTP path's and the operators' way into the queue.
type Manager struct {
	o      Options
	log    *slog.Logger
	mu     sync.Mutex
	routes map[string]*runner
	closed bool
	jobs   map[string]*replayJob
}

// New returns a Manager with no routes; Apply starts them.
func New(o Options) *Manager {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = host + "-" + strconv.Itoa(os.Getpid()) + "-" + newToken()[:6]
	}
	if o.StatsEvery <= 0 {
		o.StatsEvery = 5 * time.Second
	}
	if o.PromoteEvery <= 0 {
		o.PromoteEvery = 250 * time.Millisecond
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.ReplayRate <= 0 {
		o.ReplayRate = 50
	}
	return &Manager{o: o, log: o.Log, routes: map[string]*runner{}, jobs: map[string]*replayJob{}}
}

// SetSender sets the Sender when it could not be given to New (the
// gateway that sends is built with the Manager); call it before Apply.
func (m *Manager) SetSender(s Sender) {
	m.mu.Lock()
	m.o.Sender = s
	m.mu.Unlock()
}

// Consumer is this instance's name in the consumer group.
func (m *Manager) Consumer() string { return m.o.Consumer }

// Apply makes the running routes those given: new routes are prepared
// and started, changed ones restarted with their new settings (the old
// workers finish what they hold), removed ones stopped the same way.
func (m *Manager) Apply(ctx context.Context, routes []Route) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("queue: manager closed")
	}
	want := map[string]Route{}
	for _, r := range routes {
		err := m.o.Backend.Prepare(ctx, r.Name, max(1, r.Shards))
		switch {
		case errors.Is(err, ErrUnavailable):
			// The workers wait for the backend; Enqueue answers 503 until
			// it is back.
			m.log.Warn("queue: backend unavailable; the route's workers start when it answers", "route", r.Name, "error", err)
		case err != nil:
			return fmt.Errorf("queue: route %s: %w", r.Name, err)
		}
		want[r.Name] = r
	}
	for name, rn := range m.routes {
		if nr, ok := want[name]; !ok || nr != rn.cfg {
			delete(m.routes, name)
			go func() {
				rn.stop(waitForTries)
				if !ok {
					// After its stats loop ended, so no late refresh
					// brings the removed route's gauges back.
					m.o.Metrics.ForgetQueueRoute(name)
				}
			}()
		}
	}
	for name, r := range want {
		if _, ok := m.routes[name]; !ok {
			m.routes[name] = m.start(r)
		}
	}
	return nil
}

// route returns the running route name, or nil.
func (m *Manager) route(name string) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.routes[name]
}

// ErrNoRoute: the route is not a queue route of this instance.
var ErrNoRoute = errors.New("queue: not a queue route")

// Enqueue stores e on its route's queue (see Backend.Enqueue).
func (m *Manager) Enqueue(ctx context.Context, e Entry) (Ack, error) {
	rn := m.route(e.Route)
	if rn == nil {
		return Ack{}, fmt.Errorf("%w: %q", ErrNoRoute, e.Route)
	}
	depth := rn.cfg.MaxDepth
	if rn.dlqFull.Load() {
		depth = RefuseNew
	}
	if !rn.cfg.Ordered {
		e.Order, e.Stale = "", ""
	}
	ack, err := m.o.Backend.Enqueue(ctx, e, depth)
	if err == nil && ack.State == Enqueued && rn.cfg.Ordered && e.Order == "" {
		if or, ok := m.o.Metrics.(OrderRecorder); ok {
			or.QueueUnordered(e.Route)
		}
	}
	return ack, err
}

// fillRecorder is a Recorder that also shows how full a route's DLQ is
// against its bound (metrics.Metrics is one).
type fillRecorder interface {
	SetDLQFill(route string, ratio float64)
}

// Close stops every route: no more reads, the workers get grace to finish
// what they hold, then their tries are cut and the entries handed back so
// another instance takes them at once. A grace of zero or less cuts them
// at once. Nothing is lost either way.
func (m *Manager) Close(grace time.Duration) {
	grace = max(grace, 0) // never waitForTries
	m.mu.Lock()
	m.closed = true
	rs := m.routes
	m.routes = map[string]*runner{}
	for _, j := range m.jobs {
		j.cancel()
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, rn := range rs {
		wg.Go(func() { rn.stop(grace) })
	}
	wg.Wait()
}

// runner is one route's workers on this instance.
type runner struct {
	m   *Manager
	cfg Route
	// read ends the loops that take new entries; work ends tries in flight.
	read, work         context.Context
	stopRead, stopWork context.CancelFunc
	slots              chan struct{} // one per worker
	kick               chan struct{} // asks for the gauges now
	loops, tries       sync.WaitGroup

	mu   sync.Mutex
	held map[string]Lease // entries read and not yet settled
	// errLogged limits the backend-error log lines to one per episode.
	errLogged atomic.Bool
	// dlqFull: the DLQ held its bound at the last stats refresh (at least
	// every StatsEvery, and at once after an event is dead-lettered,
	// replayed or purged here); new events are refused meanwhile.
	dlqFull atomic.Bool
}

func (m *Manager) start(r Route) *runner {
	rn := &runner{m: m, cfg: r, slots: make(chan struct{}, max(1, r.Workers)), kick: make(chan struct{}, 1), held: map[string]Lease{}}
	rn.read, rn.stopRead = context.WithCancel(context.Background())
	rn.work, rn.stopWork = context.WithCancel(context.Background())
	for s := range m.o.Backend.Shards(r.Name) {
		rn.loops.Go(func() { rn.readLoop(s) })
		rn.loops.Go(func() {
			rn.every(min(m.o.PromoteEvery, max(r.Retry.Initial/4, 5*time.Millisecond)), func() { rn.promote(s) })
		})
		rn.loops.Go(func() { rn.every(max(r.LockTTL/4, 10*time.Millisecond), func() { rn.reclaim(s) }) })
	}
	rn.loops.Go(rn.statsLoop)
	return rn
}

// waitForTries as stop's grace lets the tries in flight take as long as
// they take (the route's timeout bounds them): a reload that changes or
// removes a route.
const waitForTries time.Duration = -1 << 63

// stop ends the route: reads stop at once, tries in flight get grace
// (waitForTries: as long as they take; zero or less: none), then are cut
// and handed back.
func (rn *runner) stop(grace time.Duration) {
	rn.stopRead()
	rn.loops.Wait()
	done := make(chan struct{})
	go func() { rn.tries.Wait(); close(done) }()
	switch {
	case grace == waitForTries:
		<-done
	case grace > 0:
		t := time.NewTimer(grace)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	rn.stopWork()
	<-done
	rn.mu.Lock()
	left := make([]Lease, 0, len(rn.held))
	for _, l := range rn.held {
		left = append(left, l)
	}
	rn.mu.Unlock()
	if len(left) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := rn.m.o.Backend.HandBack(ctx, rn.m.o.Consumer, left, rn.cfg.LockTTL)
		cancel()
		rn.m.log.Info("queue: handed back entries cut by shutdown", "route", rn.cfg.Name, "entries", len(left), "error", err)
	}
}

func (rn *runner) every(d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-rn.read.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// backendError logs the first of a run of backend errors, and the
// recovery; a group lost by Redis is always logged, as an error.
func (rn *runner) backendError(op string, err error) {
	if err == nil {
		if rn.errLogged.CompareAndSwap(true, false) {
			rn.m.log.Info("queue: backend answers again", "route", rn.cfg.Name)
		}
		return
	}
	if rn.read.Err() != nil {
		return
	}
	if errors.Is(err, ErrGroupLost) {
		rn.m.log.Error(err.Error(), "route", rn.cfg.Name)
		return
	}
	if rn.errLogged.CompareAndSwap(false, true) {
		rn.m.log.Error("queue: backend failed; retrying", "route", rn.cfg.Name, "op", op, "error", err)
	}
}

// readLoop takes as many ready entries as there are free workers.
func (rn *runner) readLoop(shard int) {
	backoff := 50 * time.Millisecond
	for rn.read.Err() == nil {
		select {
		case rn.slots <- struct{}{}:
		case <-rn.read.Done():
			return
		}
		n := 1
		for n < cap(rn.slots) {
			select {
			case rn.slots <- struct{}{}:
				n++
				continue
			default:
			}
			break
		}
		allowed, probe, wait, cerr := rn.admit(n)
		if cerr != nil {
			rn.backendError("control", cerr)
		}
		for range n - allowed {
			<-rn.slots
		}
		if allowed == 0 {
			sleep(rn.read, wait)
			continue
		}
		n = allowed
		leases, err := rn.m.o.Backend.Read(rn.read, rn.cfg.Name, shard, rn.m.o.Consumer, n, rn.m.o.Block)
		rn.backendError("read", err)
		if len(leases) > 0 && rn.pausedNow() {
			// Paused while the read waited: the entries go back, for
			// whoever runs the route once it is resumed.
			rn.handBack(leases)
			leases = nil
		}
		if probe && len(leases) == 0 {
			rn.abandon()
		}
		for _, l := range leases {
			rn.launch(l, probe)
		}
		for range n - len(leases) {
			<-rn.slots
		}
		if err != nil {
			sleep(rn.read, backoff)
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// launch runs one try of l on a worker slot already taken; probe: it is
// the breaker's probe.
func (rn *runner) launch(l Lease, probe bool) {
	rn.mu.Lock()
	rn.held[l.Entry] = l
	rn.mu.Unlock()
	rn.tries.Go(func() {
		defer func() { <-rn.slots }()
		rn.try(l, probe)
	})
}

func (rn *runner) promote(shard int) {
	_, err := rn.m.o.Backend.Promote(rn.read, rn.cfg.Name, shard, time.Now())
	rn.backendError("promote", err)
}

// reclaim takes over the entries another instance has held for lock_ttl.
func (rn *runner) reclaim(shard int) {
	if rn.blocked() {
		// Paused, or the breaker open: the entries stay where they are
		// until the route runs again.
		return
	}
	leases, err := rn.m.o.Backend.Reclaim(rn.read, rn.cfg.Name, shard, rn.m.o.Consumer, rn.cfg.LockTTL)
	rn.backendError("reclaim", err)
	if len(leases) == 0 {
		return
	}
	rn.m.o.Metrics.QueueReclaimed(rn.cfg.Name, len(leases))
	rn.m.log.Warn("queue: took over entries held too long by a dead or stalled instance", "route", rn.cfg.Name, "entries", len(leases))
	for i, l := range leases {
		if !rn.pace() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = rn.m.o.Backend.HandBack(ctx, rn.m.o.Consumer, leases[i:], rn.cfg.LockTTL)
			cancel()
			return
		}
		select {
		case rn.slots <- struct{}{}:
			rn.launch(l, false)
		case <-rn.read.Done():
			// Not started: give them back for whoever runs next.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = rn.m.o.Backend.HandBack(ctx, rn.m.o.Consumer, leases[i:], rn.cfg.LockTTL)
			cancel()
			return
		}
	}
}

// statsLoop refreshes the gauges every StatsEvery, and at once when an
// event is dead-lettered, replayed or purged.
func (rn *runner) statsLoop() {
	t := time.NewTicker(rn.m.o.StatsEvery)
	defer t.Stop()
	for {
		rn.stats()
		select {
		case <-rn.read.Done():
			return
		case <-t.C:
		case <-rn.kick:
		}
	}
}

// refresh asks statsLoop for the gauges now.
func (rn *runner) refresh() {
	select {
	case rn.kick <- struct{}{}:
	default:
	}
}

func (rn *runner) stats() {
	st, err := rn.m.o.Backend.Stats(rn.read, rn.cfg.Name)
	if err != nil {
		rn.backendError("stats", err)
		return
	}
	lag := 0.0
	if !st.Oldest.IsZero() {
		lag = max(0, time.Since(st.Oldest).Seconds())
	}
	rn.dlqBound(st)
	rn.m.o.Metrics.SetQueueStats(rn.cfg.Name, st.Depth, st.DLQ, lag)
	if or, ok := rn.m.o.Metrics.(OrderRecorder); ok && rn.cfg.Ordered {
		or.SetOrderWaiting(rn.cfg.Name, st.Waiting)
	}
	if st.DLQ == 0 && rn.m.o.OnDrained != nil {
		rn.m.o.OnDrained(rn.cfg.Name)
	}
}

// try forwards one entry and records how it ended (for the breaker too).
func (rn *runner) try(l Lease, probe bool) {
	if probe {
		// A probe that ends without an answer to report (a leftover, an
		// entry taken over, a shutdown) is given back for the next try.
		defer func() {
			if probe {
				rn.abandon()
			}
		}()
	}
	b := rn.m.o.Backend
	name := rn.cfg.Name
	start := time.Now()
	j, ok, err := b.Begin(rn.work, l)
	if errors.Is(err, ErrNotOwner) {
		// This try stalled past lock_ttl before beginning and another
		// instance took the entry over: it delivers it, not this one.
		rn.forget(l)
		rn.m.o.Metrics.QueueAttempt(name, metrics.AttemptNotOwner)
		rn.m.log.Warn("queue: an entry was taken over before this instance began it; the new owner delivers it",
			"route", name, "key", l.Key, "id", l.EventID)
		return
	}
	rn.backendError("begin", err)
	if err != nil || !ok {
		// A failed Begin leaves the entry with this instance: it is taken
		// over after lock_ttl. A leftover was dropped, and so was the
		// entry of an ordered event parked behind an earlier one of its
		// value (it is handed back when its turn comes).
		rn.forget(l)
		return
	}
	if j.Stale {
		rn.skip(j, start)
		return
	}
	sent := time.Now()
	res := rn.m.o.Sender.Send(rn.work, name, j.Payload, j.Total)
	if rn.work.Err() != nil && res.Err != nil {
		// Cut by shutdown before the upstream answered: the entry goes
		// back (stop hands back what is still held). An answer that came
		// in anyway is recorded below, so it is not delivered again.
		return
	}
	rn.report(res, probe)
	probe = false
	now := time.Now()
	note := store.Note{Status: res.Status, UpstreamMS: now.Sub(sent).Milliseconds()}
	s := rn.cfg.Retry.decide(j, res, now, rn.m.o.Jitter())
	s.OrderHold = rn.cfg.OrderHold
	// Also for a dead letter: how long an ordered value whose last event
	// died keeps its greatest stale value.
	s.Retention = rn.cfg.Retention
	if s.Kind == SettleDelivered {
		s.Outcome = res.Outcome
		s.Outcome.Fingerprint = j.Fingerprint
		s.Retention = rn.cfg.Retention
		s.At = now
	}
	got, err := rn.settle(store.WithNote(context.Background(), note), j, s, start.Add(rn.cfg.LockTTL-time.Second))
	rn.forget(l)
	if err != nil {
		rn.m.log.Error("queue: could not record a try's result; the entry will be tried again after lock_ttl",
			"route", name, "key", l.Key, "id", l.EventID, "error", err)
		return
	}
	switch got {
	case NotOwner:
		rn.m.o.Metrics.QueueAttempt(name, metrics.AttemptNotOwner)
		return
	case Stale:
		return
	}
	switch s.Kind {
	case SettleDelivered:
		rn.m.o.Metrics.QueueAttempt(name, metrics.AttemptDelivered)
		rn.m.o.Metrics.QueueDelay(name, now.Sub(j.FirstSeen).Seconds())
	case SettleRetry:
		rn.m.o.Metrics.QueueAttempt(name, metrics.AttemptRetried)
	default:
		outcome := metrics.AttemptDeadLettered
		if s.Reason != "exhausted" {
			outcome = metrics.AttemptRejected
		}
		rn.m.o.Metrics.QueueAttempt(name, outcome)
		rn.refresh()
		rn.m.log.Warn("queue: event dead-lettered", "route", name, "key", l.Key, "id", l.EventID,
			"reason", s.Reason, "status", s.Status, "attempts", j.Total)
		if rn.m.o.OnDead != nil {
			rn.m.o.OnDead(name, l.Key, l.EventID, s.Reason)
		}
	}
}

// settle records s, retrying a backend that does not answer until
// deadline (just inside the lease), after which another instance may
// take the entry over.
func (rn *runner) settle(nctx context.Context, j Job, s Settlement, deadline time.Time) (Settled, error) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(nctx, 2*time.Second)
		got, err := rn.m.o.Backend.Settle(ctx, rn.m.o.Consumer, j, s)
		cancel()
		left := time.Until(deadline)
		if err == nil || !errors.Is(err, ErrUnavailable) || left <= 0 {
			return got, err
		}
		// The last wait is cut to end at the deadline, so that a store
		// back before it gets the result (a longer back-off would give up
		// and leave the entry to be tried again after lock_ttl).
		sleep(rn.work, min(wait, left))
		if rn.work.Err() != nil {
			return got, err
		}
		wait = min(2*wait, time.Second)
	}
}

// forget drops l from the held leases, unless this instance took the
// entry over again meanwhile (the later lease is still being tried).
func (rn *runner) forget(l Lease) {
	rn.mu.Lock()
	if rn.held[l.Entry] == l {
		delete(rn.held, l.Entry)
	}
	rn.mu.Unlock()
}

// dlqBound records whether st's DLQ holds the route's bound, logging when
// new events start and stop being refused, and shows how full it is.
func (rn *runner) dlqBound(st Stats) {
	c := rn.cfg
	fill := 0.0
	if c.MaxDLQ > 0 {
		fill = float64(st.DLQ) / float64(c.MaxDLQ)
	}
	if c.MaxDLQBytes > 0 {
		fill = max(fill, float64(st.DLQBytes)/float64(c.MaxDLQBytes))
	}
	if f, ok := rn.m.o.Metrics.(fillRecorder); ok {
		f.SetDLQFill(c.Name, fill)
	}
	full := (c.MaxDLQ > 0 || c.MaxDLQBytes > 0) && fill >= 1
	switch was := rn.dlqFull.Swap(full); {
	case full && !was:
		rn.m.log.Error("queue: the route's dead-letter queue is full; new events are answered 503 until it is replayed or purged",
			"route", c.Name, "dlq", st.DLQ, "max_dlq", c.MaxDLQ, "dlq_bytes", st.DLQBytes, "max_dlq_bytes", c.MaxDLQBytes)
	case !full && was:
		rn.m.log.Info("queue: the route's dead-letter queue is below its bound again; new events are queued", "route", c.Name, "dlq", st.DLQ, "dlq_bytes", st.DLQBytes)
	}
}

// skip settles an ordered event older (order.stale) than one already
// delivered for its value: finished with the skipped answer, not sent.
func (rn *runner) skip(j Job, start time.Time) {
	// A breaker probe that skips is given back by try (no answer to
	// report).
	now := time.Now()
	s := Settlement{Kind: SettleDelivered, Outcome: SkippedOutcome(j.Fingerprint), Retention: rn.cfg.Retention, At: now}
	got, err := rn.settle(context.Background(), j, s, start.Add(rn.cfg.LockTTL-time.Second))
	rn.forget(j.Lease)
	if err != nil {
		rn.m.log.Error("queue: could not record a stale event as skipped; it will be looked at again after lock_ttl",
			"route", rn.cfg.Name, "key", j.Key, "id", j.EventID, "error", err)
		return
	}
	if got != Recorded {
		return
	}
	if or, ok := rn.m.o.Metrics.(OrderRecorder); ok {
		or.QueueSkipped(rn.cfg.Name, SkipStale)
	}
	rn.m.log.Info("queue: event skipped: older than one already delivered for its order value",
		"route", rn.cfg.Name, "key", j.Key, "id", j.EventID)
}
