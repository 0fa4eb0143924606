package store

import "time"

// Defaults for MemoryOptions and RedisOptions.
const (
	// DefaultMaxKeys bounds the memory store when MemoryOptions.MaxKeys is 0.
	DefaultMaxKeys = 1_000_000
	// DefaultMaxBytes bounds the memory store's estimated size when
	// MemoryOptions.MaxBytes is 0.
	DefaultMaxBytes = 256 << 20
	// DefaultAttemptsTTL is how long a key that was delivered but never
	// finished (its lock released or expired) keeps its attempt counter and
	// first-seen time, when the options leave AttemptsTTL at 0.
	DefaultAttemptsTTL = 24 * time.Hour
)

// MemoryOptions configures the memory store (ledger.NewMemoryStore), the
// embedded Store: all state lives in one process (the ledger's Memory),
// is lost on restart and is not shared with other instances.
type MemoryOptions struct {
	// MaxKeys bounds the keys kept once their lock is gone: finished
	// records and the attempt counters of released keys (and of locks
	// whose TTL ran out). When a new one would exceed it, the least
	// recently used is evicted first. Keys holding a live lock are never
	// evicted. 0 means DefaultMaxKeys.
	MaxKeys int
	// MaxBytes bounds the store's estimated size (ledger.Memory.Bytes).
	// When a claim or a finished record would take it over MaxBytes, the
	// least recently used keys without a live lock are evicted first, as
	// for MaxKeys. Live locks and reset tombstones count but are never
	// evicted, and a record is never evicted to make room for itself. 0
	// means DefaultMaxBytes.
	MaxBytes int64
	// Now is the clock every TTL is judged on; nil means time.Now.
	Now func() time.Time
	// OnEvict, if set, is called once per key evicted for capacity
	// (MaxKeys or MaxBytes; not for expiry or Delete).
	OnEvict func()
	// AttemptsTTL is how long the attempt counter of a key that is neither
	// locked nor finished is kept after its last claim. 0 means
	// DefaultAttemptsTTL; a negative value keeps the counter only while the
	// lock lives. A finished key's counter always lives exactly as long as
	// its record.
	AttemptsTTL time.Duration
	// ResetHold is the shortest time the tombstone of a reset (every
	// Delete) lasts: while it does, Finish records nothing for the key
	// without owning its lock, so a delivery still trying to record its
	// outcome cannot undo the reset. Set it to the lock TTL (the longest
	// such a delivery keeps trying). 0: a tombstone is left only for a
	// deleted lock, for its remaining TTL.
	ResetHold time.Duration
}
