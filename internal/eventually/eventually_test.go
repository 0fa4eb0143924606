package eventually

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int64
	if !Poll(time.Hour, func() bool { return n.Add(1) == 3 }) {
		t.Fatal("Poll = false for a condition that holds on the third check")
	}
	if n.Load() != 3 {
		t.Fatalf("checked %d times, want 3", n.Load())
	}
}

func TestPollGivesUpAfterItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if Poll(time.Minute, func() bool { return false }) {
			t.Fatal("Poll = true for a condition that never holds")
		}
		if waited := time.Since(start); waited < time.Minute {
			t.Fatalf("gave up after %v of fake time, before its bound", waited)
		}
	})
}

// recTB records each failure instead of ending the test.
type recTB struct {
	testing.TB
	rec *[]string
}

func (r recTB) Helper() {}
func (r recTB) Fatalf(format string, args ...any) {
	*r.rec = append(*r.rec, fmt.Sprintf(format, args...))
}

func TestTrueAndWithinSayWhatTheyWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		tb := recTB{TB: t, rec: &got}
		True(tb, "the moon", func() bool { return false })
		Within(tb, time.Second, func() bool { return false }, func() string { return "the sun, still down" })
		want := []string{"timed out after 10s waiting for the moon", "not within 1s: the sun, still down"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("failures %q, want %q", got, want)
		}
	})
}
