package queue

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// downUntil is a backend whose Settle fails as unreachable until a time.
type downUntil struct {
	Backend
	until time.Time
	calls int
}

func (d *downUntil) Settle(context.Context, string, Job, Settlement) (Settled, error) {
	d.calls++
	if time.Now().Before(d.until) {
		return 0, fmt.Errorf("queue: redis settle: %w: connection refused", ErrUnavailable)
	}
	return 0, nil
}

// Regression (make soak, queue mode): Redis was SIGKILLed 51 ms before the
// upstream's 2xx and answered again 2 s later, inside the lease, yet the
// settle's back-off had already given up (its next try fell after the
// deadline), so the delivered entry was tried again after lock_ttl and the
// upstream got a second copy. The settle now tries once more at the
// deadline.
func TestSettleRetriesUntilTheDeadlineWhenTheStoreComesBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		back     time.Duration // when the store answers again
		deadline time.Duration
		ok       bool
	}{
		{"back before the deadline, after the back-off's last full wait", 2 * time.Second, 2300 * time.Millisecond, true},
		{"back at once", 0, time.Second, true},
		{"back after the deadline", 3 * time.Second, 2300 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				b := &downUntil{until: start.Add(tc.back)}
				rn := &runner{m: &Manager{o: Options{Backend: b, Consumer: "c"}}, work: t.Context()}
				_, err := rn.settle(context.Background(), Job{}, Settlement{}, start.Add(tc.deadline))
				if (err == nil) != tc.ok {
					t.Fatalf("settle after %d tries: err %v, want ok=%v", b.calls, err, tc.ok)
				}
				if end := time.Since(start); end > tc.deadline {
					t.Fatalf("settle gave up %v after the deadline", end-tc.deadline)
				}
			})
		})
	}
}
