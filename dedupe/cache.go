package dedupe

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/clawgate/clawgate/store"
)

// Entry is a finished outcome held in the local window.
type Entry struct {
	Outcome store.Outcome
	// Attempts counts deliveries of the key seen by this instance: the
	// store's count when the entry was added, plus every local replay.
	Attempts atomic.Int64
}

// Cache is the in-process window: finished outcomes for Window (bounded by
// Size, least recently used evicted first) and the keys this instance is
// forwarding right now. Keys are route-scoped. Safe for concurrent use.
type Cache struct {
	done *expirable.LRU[string, *Entry]

	mu       sync.Mutex
	inFlight map[string]struct{}
}

// NewCache returns a window of at most size finished outcomes, each kept
// for window.
func NewCache(size int, window time.Duration) *Cache {
	return &Cache{
		done:     expirable.NewLRU[string, *Entry](size, nil, window),
		inFlight: make(map[string]struct{}),
	}
}

// Get returns the finished entry for key, if it is in the window.
func (c *Cache) Get(key string) (*Entry, bool) { return c.done.Get(key) }

// Add stores a finished outcome seen attempts times.
func (c *Cache) Add(key string, out store.Outcome, attempts int64) {
	e := &Entry{Outcome: out}
	e.Attempts.Store(attempts)
	c.done.Add(key, e)
}

// Remove forgets key's finished outcome (the operator's reset).
func (c *Cache) Remove(key string) { c.done.Remove(key) }

// Begin marks key as being forwarded by this instance. It returns false when
// another local copy already is.
func (c *Cache) Begin(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.inFlight[key]; busy {
		return false
	}
	c.inFlight[key] = struct{}{}
	return true
}

// End clears the mark set by a successful Begin.
func (c *Cache) End(key string) {
	c.mu.Lock()
	delete(c.inFlight, key)
	c.mu.Unlock()
}
