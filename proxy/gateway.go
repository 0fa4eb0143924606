// Package proxy is the delivery path: it matches a route, reads and verifies
// the body, derives the idempotency key, answers duplicates from the local
// window or the store, and forwards exactly one copy of each event upstream.
//
// Where to look: ServeHTTP (deliver.go) runs a delivery's steps in order;
// forward.go sends the one copy and settles the key; errors.go is the
// funnel that maps every failure to its status code; route.go matches
// routes on the path with its dot segments resolved; trace.go makes each
// delivery's spans when tracing is on.
package proxy

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verify"
)

// Alerter is told, once per key, that a key was delivered more than
// alerts.max_attempts times. It must not block.
type Alerter interface {
	Alert(route, key string, attempts int64)
}

// Options wires a Gateway.
type Options struct {
	// Store holds shared key state. Required.
	Store store.Store
	// Metrics receives every series. Required.
	Metrics *metrics.Metrics
	// Logger receives access and warning lines. Nil: slog.Default().
	Logger *slog.Logger
	// AccessLog, when set, receives the access lines (one per delivery)
	// instead of Logger (log.access_file).
	AccessLog *slog.Logger
	// Alerter, when set, is told of keys past alerts.max_attempts.
	Alerter Alerter
	// Now is the clock signatures are checked against. Nil: the delivery's
	// arrival time.
	Now func() time.Time
	// WriteTimeout bounds the writing of each answer, from the moment it
	// starts: a caller that stops reading is cut off after it. Zero:
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Tracer makes each delivery's spans (trace.go). Nil: tracing is off
	// and no span is made.
	Tracer trace.Tracer
	// Queue stores the deliveries of `delivery: queue` routes. Nil: they
	// get 503.
	Queue Queue
	// QueueReadsSyncRecords: the queue's enqueue itself answers a key
	// finished (or in flight) on the sync path, as the Redis queue does on
	// a single server or Sentinel. False: for a route a reload turned
	// from sync into queue, the gateway reads the store's record before
	// each enqueue, for the old route's retention after the switch.
	QueueReadsSyncRecords bool
	// SharedKeys: the store keeps every key in the queue's own key
	// records (Redis with the Redis Streams or Kafka queue: package
	// ledger), so a route that switched mode needs no look into the other
	// mode's records: the claim answers a key the queue holds, the
	// enqueue one a sync copy holds. Only records of the earlier schema
	// remain apart: read with the store's Peek (schema 1's sync records)
	// on a queue route that ran as a sync route. The memory store and
	// the memory or Kafka queue share one ledger.Memory too; that store
	// keeps no earlier schema and reads nothing (it is no store.Peeker).
	SharedKeys bool
	// Breaker holds the sync routes' circuit breakers (control.Gate). Nil:
	// a route's breaker setting is ignored.
	Breaker Breaker
	// Modes records each route's delivery mode and tells whether it ran
	// in the other one recently (control.Gate over the store). Nil: this
	// process's memory only.
	Modes ModeHistory
}

// peeks reports whether s, or the store it times, is a store.Peeker.
func peeks(s store.Store) bool {
	if t, ok := s.(*store.Timed); ok {
		s = t.Unwrap()
	}
	_, ok := s.(store.Peeker)
	return ok
}

// DefaultWriteTimeout is Options.WriteTimeout's zero value.
const DefaultWriteTimeout = 30 * time.Second

// Gateway is the http.Handler of the delivery listener.
type Gateway struct {
	// notes gathers the history notes to write (history.go).
	notes   notes
	guard   *dedupe.Guard
	metrics *metrics.Metrics
	log     *slog.Logger
	access  *slog.Logger // the access lines' logger: Options.AccessLog, else log
	alerter Alerter
	now     func() time.Time
	tracer  trace.Tracer // nil: tracing off
	queue   Queue        // nil: no queue routes
	breaker Breaker      // nil: no breakers
	store   store.Store
	// readsSync: see Options.QueueReadsSyncRecords.
	readsSync bool
	// sharedKeys: see Options.SharedKeys. peeks: the store (under its
	// timing) can read a record without claiming it (store.Peeker).
	sharedKeys bool
	peeks      bool
	// modes: see Options.Modes. A route that ran in the other mode
	// recently has the copies its own records do not know looked up in
	// the other mode's records (syncRecord, queueRecord).
	modes ModeHistory

	writeTimeout time.Duration

	tbl atomic.Pointer[table]
}

// New returns a Gateway serving cfg. The local window's size and duration
// are fixed here; Reload swaps routes only.
func New(cfg *config.Config, o Options) *Gateway {
	g := &Gateway{
		metrics:      o.Metrics,
		log:          o.Logger,
		alerter:      o.Alerter,
		now:          o.Now,
		tracer:       o.Tracer,
		queue:        o.Queue,
		breaker:      o.Breaker,
		store:        o.Store,
		readsSync:    o.QueueReadsSyncRecords,
		sharedKeys:   o.SharedKeys,
		peeks:        peeks(o.Store),
		modes:        o.Modes,
		writeTimeout: o.WriteTimeout,
	}
	if g.writeTimeout <= 0 {
		g.writeTimeout = DefaultWriteTimeout
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.access = o.AccessLog
	if g.access == nil {
		g.access = g.log
	}
	if g.modes == nil {
		g.modes = control.NewGate(control.NewMemory())
	}
	g.guard = dedupe.NewGuard(o.Store, cfg.Dedupe.CacheSize, cfg.Dedupe.Window, o.Metrics, g.log)
	g.Reload(cfg)
	return g
}

// Reload swaps in a new config's routes; requests in flight finish on the
// routes they started with.
//
// Verifiers with background work (a JWKS URL's refresher) are started with
// the gateway's logger before the new routes serve, and the replaced
// routes' are stopped: requests still in flight on them keep verifying
// with the keys they had.
func (g *Gateway) Reload(cfg *config.Config) {
	t := newTable(cfg, g.metrics)
	for i := range cfg.Routes {
		if s, ok := cfg.Routes[i].Verifier.(verify.Starter); ok {
			s.Start(g.log.With("route", cfg.Routes[i].Name))
		}
	}
	g.announce(cfg)
	if old := g.tbl.Swap(t); old != nil {
		old.close()
	}
}

// Close stops the routes' background work (JWKS refreshers). Called at
// shutdown, after the last delivery.
func (g *Gateway) Close() {
	if t := g.tbl.Load(); t != nil {
		t.close()
	}
}

// Config returns the config being served.
func (g *Gateway) Config() *config.Config { return g.tbl.Load().cfg }

// Forget removes a route-scoped key ("route:key") from this instance's
// local window: the operator's reset (see the admin API).
func (g *Gateway) Forget(scopedKey string) { g.guard.Forget(scopedKey) }

// WindowState reports how many deliveries of a finished "route:key" this
// instance has seen while it was in its local window, and the last one's
// time (replays there cost no store round trip, so the store's count and
// last_seen do not include them).
func (g *Gateway) WindowState(scopedKey string) (attempts int64, lastSeen time.Time, ok bool) {
	return g.guard.WindowState(scopedKey)
}

// ReleaseHeld releases every lock this instance still holds for a copy the
// upstream has not taken: called at shutdown for requests cut by the grace
// period, so their retries need not wait out lock_ttl.
func (g *Gateway) ReleaseHeld(ctx context.Context) int { return g.guard.ReleaseHeld(ctx) }

// Drain waits, until ctx is done, for the finished keys still being
// recorded in the background (a store that was briefly unreachable), then
// makes those that remain give up (each logs an error). Called at shutdown
// after the listener stopped. It reports whether all were done in time.
func (g *Gateway) Drain(ctx context.Context) bool { return g.guard.Drain(ctx) }
