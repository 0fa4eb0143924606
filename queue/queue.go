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
//	           lock TTL are taken over by another
//
// Every accepted event is thus at every moment in exactly one place:
// ready (or being delivered), waiting to retry, dead-lettered, or
// delivered. Each move mints a new token, so a copy of an entry left
// behind by a crash or a reset can never be delivered again.
//
// Two backends implement Backend: Memory (one process; lost on restart)
// and Redis (Redis Streams shared by every instance; works on a single
// server, Sentinel and Cluster). Manager runs the workers over either.
package queue

import (
	"context"
	"errors"
	"time"

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
}

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
	// its record is being produced), or (Redis with CheckSyncRecords) a
	// copy from before the route became a queue route is being forwarded
	// on the sync path; answer 409 with Retry-After, as for a copy in
	// flight on a sync route.
	InFlight
)

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
	// Entry is the backend's id of this entry (a stream id on Redis).
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
}

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
	// State is "absent", "queued" (ready, being delivered or waiting to
	// retry), "dead_lettered" or "finished".
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
	// lock TTL runs from the begin, not from the read.
	Begin(ctx context.Context, l Lease) (j Job, ok bool, err error)
	// Settle records how the try of j by consumer ended.
	Settle(ctx context.Context, consumer string, j Job, s Settlement) (Settled, error)
	// Promote makes the route's retries due at now ready.
	Promote(ctx context.Context, route string, shard int, now time.Time) (int, error)
	// Reclaim hands consumer the entries of shard that another consumer
	// has held for at least idle.
	Reclaim(ctx context.Context, route string, shard int, consumer string, idle time.Duration) ([]Lease, error)
	// HandBack gives up leases consumer will not settle, so that another
	// consumer takes them at once.
	HandBack(ctx context.Context, consumer string, leases []Lease, idle time.Duration) error
	// Stats measures the route over its shards.
	Stats(ctx context.Context, route string) (Stats, error)
	// ListDLQ lists up to limit dead-lettered events after cursor ("" for
	// the first page); next is "" on the last page.
	ListDLQ(ctx context.Context, route, cursor string, limit int) (entries []DeadEntry, next string, err error)
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
