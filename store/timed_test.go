package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// countObserver counts observations per operation.
type countObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countObserver) observer(op string) Observer { return opObserver{c, op} }

func (c *countObserver) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

type opObserver struct {
	c  *countObserver
	op string
}

func (o opObserver) Observe(float64) {
	o.c.mu.Lock()
	o.c.n[o.op]++
	o.c.mu.Unlock()
}

// failStore fails every call.
type failStore struct{}

var errFail = errors.New("store: unavailable: test")

func (failStore) Claim(context.Context, string, string, time.Duration) (Claim, error) {
	return Claim{}, errFail
}
func (failStore) Finish(context.Context, string, string, Outcome, time.Duration) error {
	return errFail
}
func (failStore) Release(context.Context, string, string) error    { return errFail }
func (failStore) Get(context.Context, string) (KeyState, error)    { return KeyState{}, errFail }
func (failStore) Delete(context.Context, string) (KeyState, error) { return KeyState{}, errFail }
func (failStore) Ping(context.Context) error                       { return errFail }
func (failStore) Close() error                                     { return nil }

// okStore answers every call without error.
type okStore struct{ failStore }

func (okStore) Claim(context.Context, string, string, time.Duration) (Claim, error) {
	return Claim{State: Claimed, Token: "token"}, nil
}
func (okStore) Finish(context.Context, string, string, Outcome, time.Duration) error { return nil }
func (okStore) Release(context.Context, string, string) error                        { return nil }
func (okStore) Get(context.Context, string) (KeyState, error)                        { return KeyState{}, nil }
func (okStore) Delete(context.Context, string) (KeyState, error)                     { return KeyState{}, nil }
func (okStore) Ping(context.Context) error                                           { return nil }

// Every call is observed under its own operation, failed ones included,
// and its error is passed on unchanged.
func TestTimedObservesEachOperation(t *testing.T) {
	ctx := context.Background()
	for _, inner := range []Store{okStore{}, failStore{}} {
		c := &countObserver{n: map[string]int{}}
		s := NewTimed(inner, c.observer)
		_, claimErr := s.Claim(ctx, "r:k", fpA, time.Second)
		s.Finish(ctx, "r:k", "token", outcome(200, "ok"), time.Hour)
		s.Release(ctx, "r:k", "token")
		s.Get(ctx, "r:k")
		s.Get(ctx, "r:k")
		s.Delete(ctx, "r:k")
		pingErr := s.Ping(ctx)
		for op, want := range map[string]int{"claim": 1, "finish": 1, "release": 1, "get": 2, "delete": 1, "ping": 1} {
			if got := c.count(op); got != want {
				t.Errorf("%T: %s observed %d times, want %d", inner, op, got, want)
			}
		}
		if _, fails := inner.(failStore); fails && (claimErr != errFail || pingErr != errFail) {
			t.Errorf("errors changed: %v, %v", claimErr, pingErr)
		}
		if s.Unwrap() != inner {
			t.Errorf("Unwrap is not the wrapped store")
		}
	}
}

// nopObserver discards observations.
type nopObserver struct{}

func (nopObserver) Observe(float64) {}

// The decorator itself allocates nothing per call.
func TestTimedAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	s := NewTimed(failStore{}, func(string) Observer { return nopObserver{} })
	if n := testing.AllocsPerRun(100, func() {
		s.Claim(ctx, "r:k", fpA, time.Second)
		s.Finish(ctx, "r:k", "token", Outcome{}, time.Hour)
		s.Release(ctx, "r:k", "token")
		s.Get(ctx, "r:k")
		s.Delete(ctx, "r:k")
		s.Ping(ctx)
	}); n != 0 {
		t.Errorf("%v allocations per round of calls, want 0", n)
	}
}
