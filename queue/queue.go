// Package queue is the delivery queue of routes with `delivery: queue`: a
// delivery that verified is stored with its key claim in one atomic step
// (Enqueue) and acknowledged; workers forward it in the background, retry
// it with growing gaps, and park what never succeeds in a dead-letter
// queue (DLQ) that an operator lists, replays or purges.
//
// The life of one event, in every backend:
//
//	Enqueue    key absent: event stored, key "queued", entry ready
//	Read       a worker takes a ready entry (it now "owns" it)
//	Begin      the entry's token still matches the key's: try counted,
//	           request returned; else the leftover entry is dropped
//	Settle     only by the entry's owner, in one step:
//	           delivered  key "finished" with the upstream's answer, event gone
//	           retry      new token, entry waits in the retry set until due
//	           dead       key "dead_lettered", event kept in the DLQ
//	Promote    due retries become ready entries again
//	Reclaim    entries owned by an instance that died or stalled for the
//	           lock TTL are taken over by another (Kafka: the consumer
//	           group moves them with their partitions)
//
// Every accepted event is thus at every moment in exactly one place:
// ready (or being delivered), waiting to retry, dead-lettered, or
// delivered. Each move mints a new token, so a copy of an entry left
// behind by a crash or a reset can never be delivered again.
//
// Two backends implement Backend: Memory (one process; lost on restart)
// and Redis (Redis Streams shared by every instance; works on a single
// server, Sentinel and Cluster); package queue/kafka holds a third.
// Memory and Kafka keep each key's record and its transitions in a
// package ledger Ledger and only the events and their positions
// themselves. Manager runs the workers over any of them.
package queue

import (
	"context"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// Entry is one event handed to Enqueue.
type Entry struct {
	Route string
	// Key is the idempotency key (not scoped by route: the backend keeps
	// each route's keys apart).
	Key         string
	Fingerprint string
	// Payload is the outgoing request, encoded by the caller; the queue
	// never looks inside.
	Payload   []byte
	FirstSeen time.Time
	// Order is the event's order.by value on an ordered route ("" :
	// unordered): the events of one value are delivered one at a time, in
	// the order Enqueue stored them. Stale is its order.stale value, a
	// decimal number (StaleValue; "" : none). See package ledger's
	// order.go.
	Order, Stale string
}

// Ack is Enqueue's answer.
type Ack struct {
	State AckState
	// ID names the event (Enqueued, Pending).
	ID string
	// Fingerprint of the stored event (Pending) or of the delivery that
	// finished the key (Delivered, in Outcome): the caller compares it with
	// its own and answers 422 when they differ.
	Fingerprint string
	// Dead: the event is dead-lettered (Pending only).
	Dead bool
	// Outcome is the stored upstream answer (Delivered only).
	Outcome store.Outcome
	// Copies is how many deliveries of the key were seen, this one included.
	Copies int64
}

// Lease is a ready entry a consumer has read and now owns.
type Lease struct {
	Route string
	Shard int
	// Entry is the backend's id of this entry: a stream id on Redis, kept
	// through takeovers on memory and Redis; on Kafka it names one
	// hand-out of a record, and a takeover hands out a new one.
	Entry   string
	EventID string
	Token   string
	Key     string
	// Consumer is the consumer that read or took over the entry (set by
	// Read and Reclaim): Begin refuses with ErrNotOwner once another
	// consumer has taken the entry over.
	Consumer string
	// claim numbers the read or takeover that handed the lease out (Redis:
	// the entry's delivery count), so that Begin also refuses a stale lease
	// after a takeover by the same consumer.
	claim uint64
}

// Job is a begun lease: the event to forward now.
type Job struct {
	Lease
	Payload     []byte
	FirstSeen   time.Time
	Fingerprint string
	// Try counts this round's tries (reset by a DLQ replay), this one
	// included; Total counts every try of the event, across replays: it is
	// the X-Clawgate-Attempt header.
	Try, Total int64
	// Stale: the event is older (order.stale) than one already delivered
	// for its order value: it is settled as delivered with the skipped
	// answer (SkippedOutcome), not sent.
	Stale bool
}

// The key record's types and errors are owned by package ledger, which
// keeps every queued key; they are named here too so that callers of a
// queue backend need not import both.
type (
	AckState   = ledger.AckState
	Settled    = ledger.Settled
	SettleKind = ledger.SettleKind
	Settlement = ledger.Settlement
	Stats      = ledger.Stats
	DeadEntry  = ledger.DeadEntry
	KeyState   = ledger.KeyState
	// ScriptRunner sends one Lua script (see ledger.ScriptRunner).
	ScriptRunner = ledger.ScriptRunner
)

const (
	Enqueued  = ledger.Enqueued
	Pending   = ledger.Pending
	Delivered = ledger.Delivered
	Full      = ledger.Full
	InFlight  = ledger.InFlight

	SettleDelivered = ledger.SettleDelivered
	SettleRetry     = ledger.SettleRetry
	SettleDead      = ledger.SettleDead

	Recorded = ledger.Recorded
	NotOwner = ledger.NotOwner
	Stale    = ledger.Stale

	StateAbsent       = ledger.StateAbsent
	StateQueued       = ledger.StateQueued
	StateDeadLettered = ledger.StateDeadLettered
	StateFinished     = ledger.StateFinished

	// RefuseNew as Enqueue's maxDepth stores no new event (Full) while
	// still answering copies of known keys: a route whose DLQ reached its
	// bound.
	RefuseNew = ledger.RefuseNew
)

var (
	ErrNotFound    = ledger.ErrNotFound
	ErrUnavailable = ledger.ErrUnavailable
	ErrNotOwner    = ledger.ErrNotOwner
	ErrCorrupt     = ledger.ErrCorrupt
	ErrBadCursor   = ledger.ErrBadCursor
)

// Backend stores the queue. Every method is safe for concurrent use and
// each state change of one event is one atomic step.
type Backend interface {
	// Prepare readies route's queue split into shards (Redis: fixed once
	// set); the memory backend always has one shard.
	Prepare(ctx context.Context, route string, shards int) error
	// Shards is route's shard count.
	Shards(route string) int
	// Enqueue claims e's key and stores e as a ready entry, or reports
	// the key's state when it is already known; maxDepth bounds the
	// route's undelivered events. RefuseNew (any negative maxDepth)
	// answers Full to every new key, and still reports known ones.
	Enqueue(ctx context.Context, e Entry, maxDepth int) (Ack, error)
	// Read waits up to block for at most n ready entries of shard and
	// hands them to consumer.
	Read(ctx context.Context, route string, shard int, consumer string, n int, block time.Duration) ([]Lease, error)
	// Begin starts a try of l: ok false means the entry was a leftover
	// (its key moved on) and has been dropped. An error wrapping
	// ErrNotOwner means l.Consumer no longer holds the entry (it stalled
	// past the lock TTL and another consumer took the entry over): nothing
	// changed and the new owner tries it. Begin renews the lease, so the
	// lock TTL runs from the begin, not from the read. On Kafka a lease
	// whose partition moved to another instance answers ok false (the
	// record is read again there).
	Begin(ctx context.Context, l Lease) (j Job, ok bool, err error)
	// Settle records how the try of j by consumer ended, in one step, as
	// long as the try is still the entry's: Stale when its key moved on
	// (a reset, or a later round), NotOwner, changing nothing, once the
	// entry was taken over from consumer (it stalled or died). The memory
	// and Redis backends refuse it from the takeover (Reclaim) on; on
	// Kafka, where an entry moves with its partition at a group
	// rebalance, once the new owner has begun its try: a settle before
	// that is the try's outcome, and the new owner's Begin then drops the
	// record, so the event is still delivered once.
	Settle(ctx context.Context, consumer string, j Job, s Settlement) (Settled, error)
	// Promote makes the route's retries due at now ready and counts
	// them: never a retry before its due time, each retry once (the
	// counts of every call add up to the retries made ready). The memory
	// and Redis backends make every retry due at now ready in the call;
	// the Kafka backend learns of retries by reading its retry topics in
	// the background, so a retry becomes ready at one of the Promotes at
	// or after its due time, usually the first, and readable once the
	// main topic's consumer fetched it.
	Promote(ctx context.Context, route string, shard int, now time.Time) (int, error)
	// Reclaim hands consumer the entries of shard that another consumer
	// has held for at least idle (or handed back), the same event in the
	// same round. On Kafka they are only this instance's: records handed
	// back, or whose begin or settle failed; another instance's move with
	// their partitions at a group rebalance.
	Reclaim(ctx context.Context, route string, shard int, consumer string, idle time.Duration) ([]Lease, error)
	// HandBack gives up leases consumer will not settle, so that another
	// consumer's Reclaim with idle takes them at once (the same event of
	// the same round), without waiting for them to idle that long. On
	// Kafka the other consumer is one of the same instance: records move
	// to other instances with their partitions (at Close, or when the
	// group drops an instance). A hand-back of a lease consumer no longer
	// holds (another took it over) changes nothing.
	HandBack(ctx context.Context, consumer string, leases []Lease, idle time.Duration) error
	// Stats measures the route over its shards.
	Stats(ctx context.Context, route string) (Stats, error)
	// ListDLQ lists up to limit (below one: one) dead-lettered events
	// after cursor ("" for the first page); next is "" on the last page.
	// Paging from "" to the end lists every event dead-lettered for the
	// whole listing exactly once. The memory and Redis backends list in
	// the order the events died, oldest first; the Kafka backend in no
	// set order (its ledger's).
	ListDLQ(ctx context.Context, route, cursor string, limit int) (entries []DeadEntry, next string, err error)
	// Dead reports one dead-lettered event as ListDLQ lists it, with its
	// payload (a copy the caller may keep); ErrNotFound when it is not in
	// the route's DLQ (also once replayed or purged). It changes nothing.
	Dead(ctx context.Context, route, id string) (DeadEntry, []byte, error)
	// Replay moves a dead-lettered event back to the ready queue with its
	// round's tries reset; ErrNotFound when it is not in the DLQ.
	Replay(ctx context.Context, route, id string) error
	// Purge drops a dead-lettered event's body; its key stays dead-lettered
	// for retention so that provider retries are not delivered again.
	Purge(ctx context.Context, route, id string, retention time.Duration) error
	// Get reports a key's state.
	Get(ctx context.Context, route, key string) (KeyState, error)
	// Delete forgets a key and cancels its delivery: leftover entries are
	// dropped when read.
	Delete(ctx context.Context, route, key string) (KeyState, error)
}
