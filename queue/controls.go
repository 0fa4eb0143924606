package queue

import (
	"context"
	"time"

	"github.com/clawgate/clawgate/control"
)

// Controls is the shared state that shapes what reaches a route's
// upstream: pause, breaker, pace (control.Gate). Every method fails
// closed: on an error no try goes.
type Controls interface {
	Paused(ctx context.Context, route string) (time.Time, error)
	Admit(ctx context.Context, route string, b control.Breaker) (control.Admission, error)
	Report(ctx context.Context, route string, b control.Breaker, ok, probe bool) error
	Abandon(ctx context.Context, route string) error
	Open(ctx context.Context, route string) (bool, error)
	Take(ctx context.Context, route string, p control.Pace, n int) (int, time.Duration, error)
}

var _ Controls = (*control.Gate)(nil)

// PaceRecorder is a Recorder that also observes how long tries waited
// for the route's pace (metrics.Metrics is one).
type PaceRecorder interface {
	PaceWait(route string, seconds float64)
}

// pausedPoll is how often a paused route (or one whose breaker is open)
// looks again, at most.
const pausedPoll = 250 * time.Millisecond

// admit asks the route's controls how many of n tries may start now: 0
// while the route is paused, its breaker open or its pace spent (wait
// says how long until asking again is worth it); 1 for the breaker's
// probe (probe true: report it, or abandon it when nothing was read).
func (rn *runner) admit(n int) (allowed int, probe bool, wait time.Duration, err error) {
	c := rn.m.o.Controls
	if c == nil {
		return n, false, 0, nil
	}
	ctx, name := rn.read, rn.cfg.Name
	paused, err := c.Paused(ctx, name)
	if err != nil {
		return 0, false, pausedPoll, err
	}
	if !paused.IsZero() {
		return 0, false, pausedPoll, nil
	}
	a, err := c.Admit(ctx, name, rn.cfg.Breaker)
	if err != nil {
		return 0, false, pausedPoll, err
	}
	if !a.Allow {
		return 0, false, min(a.Wait, pausedPoll), nil
	}
	if a.Probe {
		n = 1
	}
	got, w, err := c.Take(ctx, name, rn.cfg.Pace, n)
	if err == nil && got < n {
		if pr, ok := rn.m.o.Metrics.(PaceRecorder); ok {
			pr.PaceWait(name, w.Seconds())
		}
	}
	if err != nil || got == 0 {
		if a.Probe {
			rn.abandon()
		}
		return 0, false, min(max(w, time.Millisecond), pausedPoll), err
	}
	return got, a.Probe, 0, nil
}

// pausedNow reports whether the route is paused (or its pause state
// cannot be read).
func (rn *runner) pausedNow() bool {
	c := rn.m.o.Controls
	if c == nil {
		return false
	}
	paused, err := c.Paused(rn.read, rn.cfg.Name)
	return err != nil || !paused.IsZero()
}

// handBack gives entries read but not to be tried back at once.
func (rn *runner) handBack(leases []Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rn.m.o.Backend.HandBack(ctx, rn.m.o.Consumer, leases, rn.cfg.LockTTL); err != nil {
		rn.backendError("hand back", err)
	}
}

// blocked reports whether no try of the route may start now (paused, or
// the breaker not closed), without taking the breaker's probe: entries
// taken over from another instance wait meanwhile.
func (rn *runner) blocked() bool {
	c := rn.m.o.Controls
	if c == nil {
		return false
	}
	if rn.pausedNow() {
		return true
	}
	if !rn.cfg.Breaker.Enabled() {
		return false
	}
	open, err := c.Open(rn.read, rn.cfg.Name)
	return err != nil || open
}

// pace waits for one try of the route under its pace (entries taken
// over from another instance); false when the route stops first or the
// controls fail.
func (rn *runner) pace() bool {
	c := rn.m.o.Controls
	if c == nil || !rn.cfg.Pace.Limited() {
		return true
	}
	for rn.read.Err() == nil {
		got, wait, err := c.Take(rn.read, rn.cfg.Name, rn.cfg.Pace, 1)
		if err != nil {
			rn.backendError("pace", err)
			return false
		}
		if got == 1 {
			return true
		}
		sleep(rn.read, wait)
	}
	return false
}

// report tells the breaker how a try ended.
func (rn *runner) report(res Result, probe bool) {
	c := rn.m.o.Controls
	if c == nil || !rn.cfg.Breaker.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Report(ctx, rn.cfg.Name, rn.cfg.Breaker, !control.Failed(res.Status), probe); err != nil {
		rn.backendError("breaker", err)
	}
}

// abandon gives the breaker's probe back (nothing was tried).
func (rn *runner) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rn.m.o.Controls.Abandon(ctx, rn.cfg.Name); err != nil {
		rn.backendError("breaker", err)
	}
}
