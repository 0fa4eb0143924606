package queue

import (
	"errors"
	"strconv"
	"time"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verdict"
)

// Retry is a route's retry schedule.
type Retry struct {
	// MaxAttempts counts every try, the first included.
	MaxAttempts int
	// Initial is the delay before the second try; each later delay
	// doubles, up to Max.
	Initial, Max time.Duration
}

// Result is how the upstream answered one try.
type Result struct {
	// Status is the upstream's status; 0 when it did not answer (Err set).
	Status int
	// Outcome is the answer as stored for replays (2xx only); its
	// Fingerprint is filled in by the queue.
	Outcome store.Outcome
	// RetryAfter is the upstream's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Err is why the upstream did not answer: timeout, refused, ...
	Err error
}

// Delay is the wait before try n+1 after try n failed:
// min(max, initial*2^(n-1)) times a factor in [0.8, 1.2] drawn from
// jitter (a value in [0, 1)). A Retry-After from the upstream is honoured
// within [delay, max].
func (r Retry) Delay(n int64, retryAfter time.Duration, jitter float64) time.Duration {
	d := r.Initial
	for i := int64(1); i < n && d < r.Max; i++ {
		d *= 2
	}
	d = min(d, r.Max)
	d = time.Duration(float64(d) * (0.8 + 0.4*jitter))
	if retryAfter > d {
		d = max(d, min(retryAfter, r.Max))
	}
	return d
}

// decide turns try j's result into its settlement.
func (r Retry) decide(j Job, res Result, now time.Time, jitter float64) Settlement {
	class := verdict.Classify(res.Status)
	switch {
	case res.Err == nil && class == verdict.Success:
		return Settlement{Kind: SettleDelivered}
	case res.Err == nil && class != verdict.Transient:
		// Refused, and Unexpected (1xx, 3xx): the same request gets the
		// same answer.
		return Settlement{Kind: SettleDead, Reason: "rejected:" + strconv.Itoa(res.Status), Status: res.Status, At: now}
	case j.Try >= int64(r.MaxAttempts):
		s := Settlement{Kind: SettleDead, Reason: "exhausted", Status: res.Status, At: now}
		if res.Err != nil {
			s.Error = errorText(res.Err)
		}
		return s
	}
	return Settlement{Kind: SettleRetry, Due: now.Add(r.Delay(j.Try, res.RetryAfter, jitter))}
}

// errorText is a short description of why the upstream did not answer,
// kept with a dead-lettered event.
func errorText(err error) string {
	var t interface{ Timeout() bool }
	if errors.As(err, &t) && t.Timeout() {
		return "timeout"
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
