package ledger

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// The key record's vocabulary, shared by every queue transport (package
// queue names each of these too).

// AckState is what Enqueue did with an entry.
type AckState int

const (
	// Enqueued: the event is stored and ready; answer the ack status.
	Enqueued AckState = iota
	// Pending: a copy of an event already queued, being delivered,
	// retrying (Ack.Dead false) or dead-lettered (Ack.Dead true).
	Pending
	// Delivered: the key is finished; Ack.Outcome is the upstream's answer.
	Delivered
	// Full: the route holds max_depth undelivered events; nothing stored.
	Full
	// InFlight: another copy of the key is being stored right now (Kafka:
	// its record is being produced), or a sync route's copy holds the
	// key's lock (Claim: the route is, or was on another instance, a sync
	// route) while it is forwarded; answer 409 with Retry-After, as for
	// a copy in flight on a sync route.
	InFlight
)

// SettleKind is how a try ended.
type SettleKind int

const (
	SettleDelivered SettleKind = iota
	SettleRetry
	SettleDead
)

// Settlement is what Settle records.
type Settlement struct {
	Kind SettleKind
	// Outcome is the upstream's answer (SettleDelivered), kept for
	// Retention and replayed to later copies.
	Outcome   store.Outcome
	Retention time.Duration
	// Due is when the retry becomes ready (SettleRetry).
	Due time.Time
	// Reason, Status and Error describe a dead-lettered event
	// (SettleDead): reason "exhausted" or "rejected:<status>", the last
	// upstream status (0 when it did not answer) and the last error.
	Reason string
	Status int
	Error  string
	At     time.Time

	// NewToken (SettleRetry, Ledger only) becomes the key's token; the
	// begun position and owner are cleared. The queue backends that keep
	// the retry beside the key mint it themselves.
	NewToken string
	// DLQPos (SettleDead, Ledger only) locates the event's record in the
	// DLQ topic.
	DLQPos string
	// Attempts (SettleDead, Ledger only) is the event's tries in all. The
	// ledgers do not store it: they list the tries they counted
	// (Begun.Total).
	Attempts int64
	// OrderHold (SettleDead, ordered events): the dead event keeps its
	// place at the head of its order value (order.on_dead: hold), so the
	// later events of the value wait until it is replayed and delivered,
	// or purged. false: the next event of the value goes.
	OrderHold bool
}

// OrderArgs are the settle scripts' two order arguments: hold ("1" when
// OrderHold) and keep (the retention in ms that the value's last
// delivered stale value is kept for; "" when none).
func (s Settlement) OrderArgs() (hold, keep string) {
	hold = "0"
	if s.OrderHold {
		hold = "1"
	}
	if s.Retention > 0 {
		keep = strconv.FormatInt(ledgerTTL(s.Retention), 10)
	}
	return hold, keep
}

// Settled is what Settle found.
type Settled int

const (
	// Recorded: the settlement is recorded.
	Recorded Settled = iota
	// NotOwner: another consumer took the entry over (this one stalled or
	// was thought dead); nothing changed, the new owner delivers it.
	NotOwner
	// Stale: the key moved on meanwhile (an operator reset it); the entry
	// was dropped and nothing recorded.
	Stale
)

// Stats is a route's queue as the gauges show it, over every shard.
type Stats struct {
	// Depth counts undelivered events: ready, being delivered and waiting
	// to retry (the DLQ excluded).
	Depth int64
	// DLQ counts dead-lettered events.
	DLQ int64
	// DLQBytes is the size of the dead-lettered events' payloads (memory
	// and Redis; 0 on Kafka, whose dead-lettered events live in a topic).
	DLQBytes int64
	// Oldest is when the oldest undelivered event was first seen; zero
	// when Depth is 0.
	Oldest time.Time
	// Waiting counts the events parked behind an earlier event of the
	// same order value (ordered routes; see Reservation.Order).
	Waiting int64
}

// DeadEntry is one event in a DLQ listing.
type DeadEntry struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Status    int       `json:"status"`
	Attempts  int64     `json:"attempts"`
	Error     string    `json:"error,omitempty"`
	FirstSeen time.Time `json:"first_seen"`
	DiedAt    time.Time `json:"died_at"`
}

// KeyState is a queue route's key as the admin API shows it.
type KeyState struct {
	// State is "absent" (also a sync copy's released lock or reset
	// tombstone: the counters of a released lock are still shown),
	// "in_flight" (a sync copy's lock), "queued" (ready, being delivered
	// or waiting to retry), "dead_lettered" or "finished".
	State       string
	EventID     string
	Copies      int64
	Attempts    int64 // tries of the event so far
	FirstSeen   time.Time
	LastSeen    time.Time
	Status      int // finished: the upstream's status
	Fingerprint string
	// Outcome is a finished key's stored answer, replayed to its copies;
	// zero in the other states.
	Outcome store.Outcome `json:"-"`
}

// Key states reported by KeyState.State.
const (
	StateAbsent       = "absent"
	StateQueued       = "queued"
	StateDeadLettered = "dead_lettered"
	StateFinished     = "finished"
	// StateInFlight: a sync route's copy holds the key's lock (Claim)
	// while it is forwarded.
	StateInFlight = "in_flight"
)

// RefuseNew as Enqueue's maxDepth stores no new event (Full) while still
// answering copies of known keys: a route whose DLQ reached its bound.
const RefuseNew = -1

var (
	// ErrNotFound: no such event in the route's DLQ.
	ErrNotFound = errors.New("queue: no such dead-lettered event")
	// ErrUnavailable: the backend did not answer.
	ErrUnavailable = errors.New("queue: unavailable")
	// ErrNotOwner: Begin found the entry taken over by another consumer
	// (or by a later takeover); the caller must not forward it.
	ErrNotOwner = errors.New("queue: the entry was taken over by another consumer")
	// ErrCorrupt: stored queue data could not be read.
	ErrCorrupt = errors.New("queue: corrupt data")
)

// ErrBadCursor: a DLQ listing cursor this queue never returned.
var ErrBadCursor = errors.New("queue: bad cursor")

// ScriptRunner runs one Lua script (EVALSHA, loading it when Redis does
// not know it).
type ScriptRunner func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd
