package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/storetest"
)

// clock only moves when told to.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// memoryFixture is a memory store on a clock of its own.
func memoryFixture(wrap func(store.Store) store.Store) func(t *testing.T) *storetest.Fixture {
	return func(t *testing.T) *storetest.Fixture {
		c := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		m := store.NewMemory(store.MemoryOptions{Now: c.Now})
		s := wrap(m)
		const short = 50 * time.Millisecond
		return &storetest.Fixture{
			S:           s,
			LockTTL:     30 * time.Second,
			ShortTTL:    short,
			ExpireLock:  func(*testing.T, string) { c.Advance(short) },
			ExpireReset: func(*testing.T, string) { c.Advance(short) },
			CheckRetention: func(t *testing.T, key string, retention time.Duration) {
				t.Helper()
				c.Advance(retention - time.Nanosecond)
				if st := storetest.MustGet(t, s, key); st.State != store.Finished {
					t.Fatalf("just before retention: %+v, want finished", st)
				}
				c.Advance(time.Nanosecond)
				if st := storetest.MustGet(t, s, key); st != (store.KeyState{}) {
					t.Fatalf("after retention: %+v, want forgotten", st)
				}
				if cl := storetest.MustClaim(t, s, key, storetest.FpA, time.Second, store.Claimed); cl.Attempts != 1 {
					t.Fatalf("claim after retention counted %d attempts, want 1 (counter lives with the record)", cl.Attempts)
				}
			},
		}
	}
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, memoryFixture(func(s store.Store) store.Store { return s }))
}

// nop observes nothing.
type nop struct{}

func (nop) Observe(float64) {}

// The timed memory store behaves as the memory store does.
func TestTimedConformance(t *testing.T) {
	storetest.Run(t, memoryFixture(func(s store.Store) store.Store {
		return store.NewTimed(s, func(string) store.Observer { return nop{} })
	}))
}
