// Package control shapes what reaches a route's upstream, shared by every
// instance: whether the route is paused, its circuit breaker, and its
// pace.
//
// A route's pause flag and breaker live in one small record per route
// (Record) that a Store keeps: in the process (Memory) or in Redis
// (Redis), where every instance sees it. The rules that change it (when
// the breaker opens, which try probes, when it closes) are written once,
// in Gate, as compare-and-swap steps over the record, so both stores
// behave the same. Pace is a GCRA rate shared the same way.
package control

import (
	"context"
	"errors"
	"time"
)

// Record is a route's shared control state. The zero Record is a route
// that is running, with its breaker closed.
type Record struct {
	// Version counts the record's changes; Store.Swap compares it.
	Version int64
	// PausedAt is when an operator paused the route (Unix ms); 0: running.
	PausedAt int64
	// Failures counts the failed tries in a row, over every instance.
	Failures int64
	// OpenUntil is when the open breaker lets a probe through (Unix ms);
	// 0: closed.
	OpenUntil int64
	// ProbeUntil is when the probe under way, if any, is given up (Unix
	// ms): until then no other try goes; 0: no probe.
	ProbeUntil int64
	// SyncSeen and QueueSeen are when an instance last ran the route as a
	// sync route and as a queue route (Unix ms, refreshed about once a
	// minute; 0: never): the records of that mode may hold the route's
	// finished keys for its retention after.
	SyncSeen, QueueSeen int64
}

// Store keeps every route's Record. Implemented by Memory and Redis;
// package controltest holds the conformance suite both run.
type Store interface {
	// Load returns route's record (the zero Record when it has none).
	Load(ctx context.Context, route string) (Record, error)
	// Swap stores next as route's record if the stored one still has
	// old.Version, with Version old.Version+1; false (nothing changed)
	// when another change came first.
	Swap(ctx context.Context, route string, old, next Record) (bool, error)
	// Take asks for up to n tries of route under pace p, shared by every
	// user of the store: it returns how many may go now (0 to n) and,
	// when fewer than n, how long until the next one may.
	Take(ctx context.Context, route string, p Pace, n int) (int, time.Duration, error)
}

// Pace is a route's bound on tries: at most Rate per Per, evenly spaced.
// The zero Pace is no bound.
type Pace struct {
	Rate int
	Per  time.Duration
}

// Limited reports whether p bounds anything.
func (p Pace) Limited() bool { return p.Rate > 0 && p.Per > 0 }

// Breaker is a route's circuit breaker settings. The zero Breaker never
// opens.
type Breaker struct {
	// Failures is how many failed tries in a row open it.
	Failures int
	// Cooldown is how long it stays open before one try probes.
	Cooldown time.Duration
}

// Enabled reports whether b can open.
func (b Breaker) Enabled() bool { return b.Failures > 0 && b.Cooldown > 0 }

// ErrUnavailable: the store did not answer. Callers fail closed: no try
// goes out while the state is unknown.
var ErrUnavailable = errors.New("control: store unavailable")

// ErrCorrupt: the store holds a record this build cannot read.
var ErrCorrupt = errors.New("control: corrupt record")

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
