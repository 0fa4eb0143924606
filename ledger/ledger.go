// Package ledger keeps the record of each idempotency key of a queued
// route: whether its event is being enqueued, queued, dead-lettered or
// finished, which token and try are live, and the counters, with a
// memory implementation (one process) and a Redis one (single server,
// Sentinel, Cluster: a route's keys share one slot). Today the Kafka queue
// (queue.backend: kafka, in Memory or Redis) and the memory queue (in a
// Memory of its own) keep their keys here, and the Redis Streams queue
// keeps its key records in the same Redis schema through this package's
// Lua library (Script), so a queue transport keeps only its events and
// their positions. Memory also bounds the finished keys it remembers by a
// byte budget. Package ledgertest holds the conformance suite every
// implementation runs.
package ledger

import (
	"context"
	"time"

	"github.com/clawgate/clawgate/store"
)

// Ledger keeps the state of every key of a queue's routes: the events
// themselves live in the transport (Kafka's topics, the memory queue's
// lists), the ledger decides which record of an event is the live one. Each method is one atomic step (one Lua script
// on Redis), safe for concurrent use by every instance.
//
// A key record holds: state (enqueuing, queued, dead, finished), the
// event id, the live token, the fingerprint, the copies seen, the tries of
// this round and in all, first and last seen, the position of the main
// topic record that began the live token and its owner, and once finished
// the upstream's answer, once dead the dead-letter details. The route also
// has an age index (event id -> first seen, every undelivered event) for
// depth and lag, and a dead index (event id -> key) for the DLQ.
//
// Implemented by Memory (one process) and Redis (shared).
type Ledger interface {
	// Reserve claims an absent key for an event about to be produced:
	// state enqueuing with r's event id and token, expiring after r.Lease
	// unless confirmed. A known key has its copies counted and is
	// reported. Full (nothing changed) when the route's age index holds
	// r.MaxDepth events.
	Reserve(ctx context.Context, r Reservation) (Reserved, error)
	// Confirm makes a reservation permanent once its record was produced:
	// state queued, added to the age index. true also when a consumer
	// already adopted it (Begin), whatever became of the key since (a
	// retry, a delivery, a dead letter): tok is the reservation's token,
	// remembered apart from the live one. false when the reservation is
	// gone or was replaced (it expired, was aborted or deleted): the
	// record will be dropped by the fence.
	Confirm(ctx context.Context, route, key, tok string) (bool, error)
	// Abort removes a reservation whose record could not be produced; a
	// key whose token differs is left alone.
	Abort(ctx context.Context, route, key, tok string) error
	// Begin starts a try of the main-topic record at pos carrying (eid,
	// tok). It passes when the key has that event and either
	//   - tok is the live token, the key is queued (or enqueuing, which it
	//     adopts as Confirm would), and the token was not yet begun from
	//     another record position; a pending token is then cancelled (the
	//     live record won over a retry record still being settled); or
	//   - tok is the key's pending token (Intend, Dead): a retry or replay
	//     record read before its settlement was recorded; it becomes the
	//     live token (a dead-lettered key goes back to queued).
	// It then records pos and owner, counts the try and returns it. ok
	// false: a leftover (the key moved on, or this is a second copy of the
	// record); drop it.
	Begin(ctx context.Context, route, key, eid, tok, pos, owner string) (b Begun, ok bool, err error)
	// Intend records next as the key's pending token before owner's retry
	// record carrying it is produced, so that the record is adopted if it
	// is read before Settle records the retry. NotOwner or
	// Stale as for Settle (nothing changed).
	Intend(ctx context.Context, route, key, eid, tok, owner, next string) (Settled, error)
	// Settle records how owner's try of (eid, tok) ended. NotOwner
	// when another owner began the token since (nothing changed);
	// Stale when the key no longer has that token (nothing changed).
	// A retry whose record was already adopted (the key's token is
	// s.NewToken) is Recorded.
	Settle(ctx context.Context, route, key, eid, tok, owner string, s Settlement) (Settled, error)
	// Dead finds a dead-lettered event by id for a replay: its key and the
	// position of its DLQ record; next, when not empty, becomes the key's
	// pending token (the replayed record carries it). ErrNotFound
	// when the route has no such dead-lettered event (also once purged).
	Dead(ctx context.Context, route, eid, next string) (key, dlqPos string, err error)
	// DeadEntry reports one dead-lettered event as ListDead lists it,
	// with the position of its DLQ record, and changes nothing.
	// ErrNotFound when the route has no such dead-lettered event (also
	// once replayed or purged).
	DeadEntry(ctx context.Context, route, eid string) (DeadEntry, string, error)
	// Replay moves a dead-lettered event back to queued once its record
	// with tok was produced to the main topic: new token, this round's
	// tries reset, back in the age index, out of the dead index.
	// ErrNotFound (also when a consumer adopted the record first) when the event is no longer dead-lettered at
	// dlqPos (replayed or purged meanwhile; the produced record is then
	// a leftover).
	Replay(ctx context.Context, route, eid, dlqPos, tok string) error
	// Purge forgets a dead-lettered event: out of the dead index; its key
	// stays dead_lettered for retention so that provider retries are not
	// delivered again. ErrNotFound when it is not dead-lettered.
	Purge(ctx context.Context, route, eid string, retention time.Duration) error
	// ListDead lists up to limit (at least one) dead-lettered events
	// after cursor ("" first); next is "" on the last page. The cursor is
	// opaque and the order unspecified; as with SCAN, an event
	// dead-lettered for the whole listing is listed exactly once.
	// ErrBadCursor for a cursor no listing returned.
	ListDead(ctx context.Context, route, cursor string, limit int) ([]DeadEntry, string, error)
	// Get reports a key; Delete forgets it (out of both indexes) and
	// reports what it was.
	Get(ctx context.Context, route, key string) (KeyState, error)
	Delete(ctx context.Context, route, key string) (KeyState, error)
	// Stats is the route's depth (age index size), DLQ size (dead index
	// size) and oldest first-seen.
	Stats(ctx context.Context, route string) (Stats, error)
	// HandBacks hands back up to limit (0: all) ordered events whose turn
	// came while they were parked (order.go): each gets a new pending
	// token, which the transport's new entry or record carries and Begin
	// adopts. An event handed back before is handed back again (its
	// pending token unchanged) only once redo has passed since without its
	// Begin (the instance due to produce its record died first); redo 0:
	// never.
	HandBacks(ctx context.Context, route string, redo time.Duration, limit int) ([]HandBack, error)
}

// Reservation is Reserve's input.
type Reservation struct {
	Route, Key, Fingerprint string
	EventID, Token          string
	FirstSeen               time.Time
	// Lease bounds the enqueuing state: a reservation not confirmed by
	// then is gone (the producer died or took too long). Counting
	// further copies does not extend it.
	Lease time.Duration
	// MaxDepth bounds the route's undelivered events (0: no bound);
	// negative (RefuseNew): no new key is reserved (Full).
	MaxDepth int
	// Order is the event's order value on an ordered route ("" :
	// unordered): the events of one value are begun one at a time, in the
	// order their keys became queued (Confirm, or a Begin that adopts the
	// reservation), which is when the value's sequence is taken. Stale,
	// when not "", is the event's order.stale value (a decimal number): a
	// head whose Stale is below the greatest of its value's delivered
	// events is begun with Begun.Stale. See order.go.
	Order, Stale string
}

// Reserved is Reserve's answer. State is Enqueued when the key was
// reserved by this call; Pending (ID, Fingerprint, Dead) or
// Delivered (Outcome) for a known key; Full; or
// InFlight (ID, Fingerprint of the reserving copy) when another
// copy's reservation is still being produced. Copies counts this call,
// but Full counts nothing.
type Reserved struct {
	State       AckState
	ID          string
	Fingerprint string
	Dead        bool
	Outcome     store.Outcome
	Copies      int64
}

// Begun is a begun try.
type Begun struct {
	Fingerprint string
	FirstSeen   time.Time
	Try, Total  int64
	// PrevOwner is the owner that had begun this same record before and
	// never settled it ("" when none): the record is read again after
	// that owner died, stalled or lost its partition.
	PrevOwner string
	// Parked (ok false): the event is not its order value's head; its
	// record is settled as parked (drop it, no try counted) and the event
	// is handed back when it becomes the head.
	Parked bool
	// Stale (ok true): the event is older (order.stale) than one already
	// delivered for its value; settle it as delivered with the skipped
	// answer, without sending it.
	Stale bool
}
