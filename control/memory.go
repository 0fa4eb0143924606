package control

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Memory keeps the records in this process: the state of one instance,
// lost when it stops.
type Memory struct {
	// Now is the pace's clock; nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	recs   map[string]Record
	limits map[string]*memLimit
}

type memLimit struct {
	p   Pace
	lim *rate.Limiter
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{recs: map[string]Record{}, limits: map[string]*memLimit{}}
}

// Load implements Store.
func (m *Memory) Load(_ context.Context, route string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[route], nil
}

// Swap implements Store.
func (m *Memory) Swap(_ context.Context, route string, old, next Record) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[route].Version != old.Version {
		return false, nil
	}
	next.Version = old.Version + 1
	m.recs[route] = next
	return true, nil
}

// Take implements Store: a token bucket of one, refilled at p's rate.
func (m *Memory) Take(_ context.Context, route string, p Pace, n int) (int, time.Duration, error) {
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.limits[route]
	if l == nil || l.p != p {
		l = &memLimit{p: p, lim: rate.NewLimiter(rate.Limit(float64(p.Rate)/p.Per.Seconds()), 1)}
		l.lim.SetLimitAt(now, l.lim.Limit())
		m.limits[route] = l
	}
	got := 0
	for got < n && l.lim.AllowN(now, 1) {
		got++
	}
	if got == n {
		return got, 0, nil
	}
	r := l.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return got, wait, nil
}
