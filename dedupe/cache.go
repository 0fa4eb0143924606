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
	// LastSeen is when this instance last saw a delivery of the key (unix
	// nanoseconds): when the entry was added, or its latest local replay.
	LastSeen atomic.Int64
}

// Flight is a key this instance is forwarding right now.
type Flight struct {
	// Attempts is the delivery count of the copy in flight (the store's,
	// once its claim returned), plus every local copy answered 409 since.
	Attempts atomic.Int64
}

// Cache is the in-process window: finished outcomes for Window (bounded by
// Size, least recently used evicted first) and the keys this instance is
// forwarding right now. Keys are route-scoped. Safe for concurrent use.
//
// An operator's reset (Remove) moves the reset generation on. A delivery
// notes the generation when it begins (Gen) and passes it to Add: an
// outcome that began before a reset is not added, so a delivery that was in
// flight during the reset cannot put the forgotten outcome back.
type Cache struct {
	done *expirable.LRU[string, *Entry]

	gen atomic.Uint64 // resets seen; written under mu, read freely

	mu       sync.Mutex
	inFlight map[string]*Flight
}

// NewCache returns a window of at most size finished outcomes, each kept
// for window.
func NewCache(size int, window time.Duration) *Cache {
	return &Cache{
		done:     expirable.NewLRU[string, *Entry](size, nil, window),
		inFlight: make(map[string]*Flight),
	}
}

// Get returns the finished entry for key, if it is in the window.
func (c *Cache) Get(key string) (*Entry, bool) { return c.done.Get(key) }

// Gen returns the reset generation, to be passed to Add by a delivery that
// begins now.
func (c *Cache) Gen() uint64 { return c.gen.Load() }

// Add stores a finished outcome seen attempts times, unless a reset reached
// this instance since gen was read: then it reports false and adds nothing.
func (c *Cache) Add(key string, out store.Outcome, attempts int64, gen uint64) bool {
	e := &Entry{Outcome: out}
	e.Attempts.Store(attempts)
	e.LastSeen.Store(time.Now().UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return false
	}
	c.done.Add(key, e)
	return true
}

// Remove forgets key's finished outcome (the operator's reset) and moves
// the reset generation on.
func (c *Cache) Remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	c.done.Remove(key)
}

// Begin marks key as being forwarded by this instance and returns its
// Flight. When another local copy already is, it returns that copy's Flight
// and false.
func (c *Cache) Begin(key string) (*Flight, bool) {
	return c.BeginWith(key, nil)
}

// BeginWith is Begin with the Flight to mark key with (nil: a new one),
// so that it can be part of a larger allocation.
func (c *Cache) BeginWith(key string, f *Flight) (*Flight, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if busy, ok := c.inFlight[key]; ok {
		return busy, false
	}
	if f == nil {
		f = &Flight{}
	}
	c.inFlight[key] = f
	return f, true
}

// End clears the mark set by a successful Begin.
func (c *Cache) End(key string) {
	c.mu.Lock()
	delete(c.inFlight, key)
	c.mu.Unlock()
}
