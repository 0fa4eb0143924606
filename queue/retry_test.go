package queue

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	r := Retry{MaxAttempts: 10, Initial: 100 * time.Millisecond, Max: time.Second}
	ms := time.Millisecond
	cases := []struct {
		n          int64
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{1, 0, 0.5, 100 * ms},
		{2, 0, 0.5, 200 * ms},
		{3, 0, 0.5, 400 * ms},
		{4, 0, 0.5, 800 * ms},
		{5, 0, 0.5, time.Second},
		{60, 0, 0.5, time.Second},
		{1, 0, 0, 80 * ms},
		{1, 0, 0.999999, 120 * ms},
		{5, 0, 0, 800 * ms},
		{5, 0, 0.999999, 1200 * ms},
		// A Retry-After is honoured within [delay, max].
		{1, 50 * ms, 0.5, 100 * ms},
		{1, 300 * ms, 0.5, 300 * ms},
		{1, 5 * time.Second, 0.5, time.Second},
		{4, 500 * ms, 0.5, 800 * ms},
		{4, 900 * ms, 0.5, 900 * ms},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n=%d retryAfter=%v jitter=%v", c.n, c.retryAfter, c.jitter), func(t *testing.T) {
			got := r.Delay(c.n, c.retryAfter, c.jitter)
			if diff := got - c.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("Delay = %v, want %v", got, c.want)
			}
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string { return "dial tcp 10.0.0.1:443: i/o timeout" }
func (timeoutError) Timeout() bool { return true }

func TestRetryDecide(t *testing.T) {
	r := Retry{MaxAttempts: 3, Initial: 100 * time.Millisecond, Max: time.Second}
	now := time.Unix(1_700_000_000, 0)
	refused := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	type want struct {
		kind   SettleKind
		reason string
		status int
		err    string
		due    time.Duration // after now (retry only)
	}
	cases := []struct {
		name string
		try  int64
		res  Result
		want want
	}{
		{"200", 1, Result{Status: 200}, want{kind: SettleDelivered}},
		{"204", 1, Result{Status: 204}, want{kind: SettleDelivered}},
		{"299 on the last try", 3, Result{Status: 299}, want{kind: SettleDelivered}},
		{"400", 1, Result{Status: 400}, want{SettleDead, "rejected:400", 400, "", 0}},
		{"404", 2, Result{Status: 404}, want{SettleDead, "rejected:404", 404, "", 0}},
		{"301", 1, Result{Status: 301}, want{SettleDead, "rejected:301", 301, "", 0}},
		{"101", 1, Result{Status: 101}, want{SettleDead, "rejected:101", 101, "", 0}},
		{"400 on the last try", 3, Result{Status: 400}, want{SettleDead, "rejected:400", 400, "", 0}},
		{"500", 1, Result{Status: 500}, want{kind: SettleRetry, due: 100 * time.Millisecond}},
		{"502", 2, Result{Status: 502}, want{kind: SettleRetry, due: 200 * time.Millisecond}},
		{"408", 1, Result{Status: 408}, want{kind: SettleRetry, due: 100 * time.Millisecond}},
		{"409", 1, Result{Status: 409}, want{kind: SettleRetry, due: 100 * time.Millisecond}},
		{"425", 1, Result{Status: 425}, want{kind: SettleRetry, due: 100 * time.Millisecond}},
		{"429 with Retry-After", 1, Result{Status: 429, RetryAfter: 700 * time.Millisecond}, want{kind: SettleRetry, due: 700 * time.Millisecond}},
		{"503 with a long Retry-After", 2, Result{Status: 503, RetryAfter: time.Hour}, want{kind: SettleRetry, due: time.Second}},
		{"transport error", 1, Result{Err: refused}, want{kind: SettleRetry, due: 100 * time.Millisecond}},
		{"500 at max attempts", 3, Result{Status: 500}, want{SettleDead, "exhausted", 500, "", 0}},
		{"429 past max attempts", 4, Result{Status: 429}, want{SettleDead, "exhausted", 429, "", 0}},
		{"transport error at max attempts", 3, Result{Err: refused}, want{SettleDead, "exhausted", 0, refused.Error(), 0}},
		{"timeout at max attempts", 3, Result{Err: timeoutError{}}, want{SettleDead, "exhausted", 0, "timeout", 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := r.decide(Job{Try: c.try, Total: c.try + 5}, c.res, now, 0.5)
			if s.Kind != c.want.kind {
				t.Fatalf("kind %d, want %d (%+v)", s.Kind, c.want.kind, s)
			}
			switch s.Kind {
			case SettleRetry:
				if got := s.Due.Sub(now); got != c.want.due {
					t.Fatalf("due after %v, want %v", got, c.want.due)
				}
			case SettleDead:
				if s.Reason != c.want.reason || s.Status != c.want.status || s.Error != c.want.err || !s.At.Equal(now) {
					t.Fatalf("dead %+v, want reason %q status %d error %q at now", s, c.want.reason, c.want.status, c.want.err)
				}
			}
		})
	}
}

func TestErrorTextIsShort(t *testing.T) {
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'x'
	}
	if got := errorText(errors.New(string(long))); len(got) != 200 {
		t.Fatalf("errorText kept %d bytes, want 200", len(got))
	}
	if got := errorText(fmt.Errorf("post: %w", timeoutError{})); got != "timeout" {
		t.Fatalf("errorText of a wrapped timeout = %q", got)
	}
}

// An upstream's Retry-After may lengthen the wait up to Max, never
// shorten it below the delay drawn without it.
func TestRetryAfterNeverShortensTheDelay(t *testing.T) {
	r := Retry{MaxAttempts: 10, Initial: 100 * time.Millisecond, Max: time.Second}
	for n := int64(1); n <= 8; n++ {
		for _, jitter := range []float64{0, 0.5, 0.9} {
			for _, ra := range []time.Duration{time.Millisecond, 500 * time.Millisecond, time.Second, time.Minute} {
				without := r.Delay(n, 0, jitter)
				if got := r.Delay(n, ra, jitter); got < without {
					t.Errorf("Delay(n=%d, Retry-After %v, jitter %v) = %v, shorter than %v without the Retry-After", n, ra, jitter, got, without)
				}
			}
		}
	}
}
