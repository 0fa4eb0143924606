package store

import (
	"context"
	"fmt"
	"time"
)

// Observer receives one duration in seconds (a prometheus.Observer is one).
type Observer interface {
	Observe(seconds float64)
}

// Timed is a Store that times every call of the Store it wraps, failed
// calls included, and reports each duration to the observer of its
// operation. It adds no allocation: the observers are bound once, by
// NewTimed. Only the Store methods are passed on; a caller that needs
// another method of the wrapped store (Redis's SubscribeResets) asks the
// wrapped store itself.
type Timed struct {
	s                                         Store
	claim, finish, release, get, delete, ping Observer
}

// NewTimed wraps s. observer is called once for each operation name
// (claim, finish, release, get, delete, ping) and returns the observer its
// calls are reported to.
func NewTimed(s Store, observer func(op string) Observer) *Timed {
	return &Timed{
		s:       s,
		claim:   observer("claim"),
		finish:  observer("finish"),
		release: observer("release"),
		get:     observer("get"),
		delete:  observer("delete"),
		ping:    observer("ping"),
	}
}

// Unwrap returns the wrapped store.
func (t *Timed) Unwrap() Store { return t.s }

func since(o Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

// Claim times s.Claim as "claim".
func (t *Timed) Claim(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Claim, error) {
	start := time.Now()
	c, err := t.s.Claim(ctx, key, fingerprint, lockTTL)
	since(t.claim, start)
	return c, err
}

// Finish times s.Finish as "finish".
func (t *Timed) Finish(ctx context.Context, key, token string, out Outcome, retention time.Duration) error {
	start := time.Now()
	err := t.s.Finish(ctx, key, token, out, retention)
	since(t.finish, start)
	return err
}

// Release times s.Release as "release".
func (t *Timed) Release(ctx context.Context, key, token string) error {
	start := time.Now()
	err := t.s.Release(ctx, key, token)
	since(t.release, start)
	return err
}

// Get times s.Get as "get".
func (t *Timed) Get(ctx context.Context, key string) (KeyState, error) {
	start := time.Now()
	st, err := t.s.Get(ctx, key)
	since(t.get, start)
	return st, err
}

// Peek times s.Peek as "get"; a store that cannot peek (not a Peeker)
// reports ErrUnavailable.
func (t *Timed) Peek(ctx context.Context, key string) (State, Outcome, error) {
	p, ok := t.s.(Peeker)
	if !ok {
		return Absent, Outcome{}, fmt.Errorf("%w: the store cannot read a record without claiming it", ErrUnavailable)
	}
	start := time.Now()
	st, out, err := p.Peek(ctx, key)
	since(t.get, start)
	return st, out, err
}

// Delete times s.Delete as "delete".
func (t *Timed) Delete(ctx context.Context, key string) (KeyState, error) {
	start := time.Now()
	st, err := t.s.Delete(ctx, key)
	since(t.delete, start)
	return st, err
}

// Ping times s.Ping as "ping".
func (t *Timed) Ping(ctx context.Context) error {
	start := time.Now()
	err := t.s.Ping(ctx)
	since(t.ping, start)
	return err
}

// Close closes the wrapped store; it is not timed.
func (t *Timed) Close() error { return t.s.Close() }
