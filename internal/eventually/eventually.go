// Package eventually waits in tests for a condition to hold, polling it,
// instead of sleeping for a guessed time: a test goes on as soon as the
// condition holds, and fails with a message saying what it waited for
// after a bound generous enough for a loaded machine running -race. The
// bound is a limit, never a measurement: no test asserts how long a wait
// took.
package eventually

import (
	"testing"
	"time"
)

// Bound is how long True waits.
const Bound = 10 * time.Second

// Poll checks cond until it holds or bound has passed, and reports whether
// it held. The pause between checks starts at a millisecond and grows to
// 20 ms, so a condition that holds at once costs little and a long wait
// does not spin. It does not touch a testing.T, so it may run on any
// goroutine (a simulated client's retries, a helper goroutine). Inside a
// testing/synctest bubble the pauses are the bubble's fake time.
func Poll(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	pause := time.Millisecond
	for !cond() {
		if !time.Now().Before(deadline) {
			return cond()
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}

// True waits (Poll) up to Bound for cond, and fails t with
// "timed out after <Bound> waiting for <what>" when it never held. Call it
// from the test's goroutine.
func True(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !Poll(Bound, cond) {
		tb.Fatalf("timed out after %v waiting for %s", Bound, what)
	}
}

// Within waits (Poll) up to bound for cond, and fails t with
// "not within <bound>: <msg()>" when it never held; msg is called then,
// so it can describe the state the wait ended in. Call it from the test's
// goroutine.
func Within(tb testing.TB, bound time.Duration, cond func() bool, msg func() string) {
	tb.Helper()
	if !Poll(bound, cond) {
		tb.Fatalf("not within %v: %s", bound, msg())
	}
}
