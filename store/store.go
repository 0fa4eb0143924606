// Package store keeps the shared state of idempotency keys: the short lock
// held while one copy of an event is being forwarded, the finished outcome
// replayed to duplicates for the retention period, and the attempt counter.
//
// The implementations of Store live in package ledger, over the key record
// the delivery queue keeps too: ledger.MemoryStore (embedded, one process;
// configured by MemoryOptions) and ledger.RedisStore (shared by every
// gateway instance, on Redis). Keys passed in are already scoped by route
// ("route:key").
package store

import (
	"context"
	"errors"
	"time"
)

// Store is the shared idempotency state. Every method is safe for concurrent
// use. Errors other than ErrNotOwner mean the store could not answer
// (unreachable, timed out, corrupted record) and wrap ErrUnavailable or
// ErrCorrupt.
type Store interface {
	// Claim atomically counts one delivery of key and, if the key is neither
	// locked nor finished, locks it for lockTTL under a fresh owner token.
	Claim(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Claim, error)
	// Finish stores the outcome for retention and releases the lock when
	// token still owns it. It also stores the outcome when the key has no
	// lock at all, no finished record and no reset tombstone (see Delete):
	// the lock vanished (a Redis restart that lost its data, or it expired
	// with no other delivery claiming the key), and the upstream did accept
	// this delivery, so recording it keeps the next copy from being
	// forwarded again. An empty token never records. In every other case
	// (another token holds the lock, a record exists, a tombstone exists)
	// it returns ErrNotOwner and changes nothing.
	Finish(ctx context.Context, key, token string, out Outcome, retention time.Duration) error
	// Release drops the lock so the next delivery is forwarded, only if token
	// still owns it; otherwise ErrNotOwner.
	Release(ctx context.Context, key, token string) error
	// Get reports the key's state without changing it (admin API).
	Get(ctx context.Context, key string) (KeyState, error)
	// Delete forgets the key (lock, outcome and counter) and returns the
	// state it had. When the key was locked, it leaves a reset tombstone
	// for the lock's remaining TTL, so that the delivery in flight at the
	// reset cannot record its outcome from before the reset once its lock
	// is gone. Claim ignores tombstones; only Finish without a lock heeds
	// them.
	Delete(ctx context.Context, key string) (KeyState, error)
	// Ping reports whether the store answers (/readyz).
	Ping(ctx context.Context) error
	// Close releases resources.
	Close() error
}

// Peeker reads a key's state and, when finished, its stored answer,
// without counting a delivery or taking the lock (ledger.RedisStore, for
// records of the earlier schema; Timed): a queue route that was a sync
// route answers a retry of an event the sync path finished before the
// switch from it.
type Peeker interface {
	// Peek reports Absent, InFlight or Finished (with the outcome).
	Peek(ctx context.Context, key string) (State, Outcome, error)
}

// State of a key.
type State int

const (
	Absent   State = iota // never seen, or forgotten
	InFlight              // locked by a copy being forwarded
	Finished              // outcome stored
	Claimed               // (Claim only) this caller now holds the lock
	// Queued (Claim only): the delivery queue holds the key (the route
	// was, or is on another instance, a queue route): an event of it is
	// queued, retrying or dead-lettered (Claim.Dead). The copy is
	// answered as the queue route answers one, not forwarded.
	Queued
)

func (s State) String() string {
	switch s {
	case Absent:
		return "absent"
	case InFlight:
		return "in_flight"
	case Finished:
		return "finished"
	case Claimed:
		return "claimed"
	case Queued:
		return "queued"
	}
	return "unknown"
}

// Claim is the answer to Store.Claim.
type Claim struct {
	// State is Claimed, InFlight or Finished.
	State State
	// Token identifies the lock owner (Claimed only).
	Token string
	// Attempts is how many deliveries of the key the store has counted,
	// this one included.
	Attempts int64
	// RetryAfter is the lock's remaining TTL (InFlight only).
	RetryAfter time.Duration
	// Outcome is the stored outcome (Finished only).
	Outcome Outcome
	// EventID, Fingerprint and Dead describe the queued event (Queued
	// only): its id, the fingerprint of the copy that queued it, and
	// whether it is dead-lettered.
	EventID     string
	Fingerprint string
	Dead        bool
}

// Outcome is what the upstream answered for a finished key, replayed to
// duplicates.
type Outcome struct {
	Status      int
	ContentType string
	Body        []byte
	// Fingerprint is the hex SHA-256 of method, path and body of the
	// delivery that finished the key.
	Fingerprint string
}

// KeyState is a key as the admin API shows it.
type KeyState struct {
	State       State
	Attempts    int64
	FirstSeen   time.Time // zero when absent
	LastSeen    time.Time // zero when absent
	Status      int       // finished only
	Fingerprint string    // finished or in flight
}

var (
	// ErrNotOwner: Finish or Release changed nothing because the lock
	// belongs to another delivery, the key is already finished, or (Finish
	// without a lock) an operator reset the key while this delivery was in
	// flight; Release also when the lock is gone.
	ErrNotOwner = errors.New("store: lock not owned by this token")
	// ErrUnavailable: the store did not answer in time or at all.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrCorrupt: a stored record could not be decoded.
	ErrCorrupt = errors.New("store: corrupt record")
)
