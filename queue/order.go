package queue

import (
	"math"
	"strconv"
	"time"

	"github.com/clawgate/clawgate/store"
)

// OrderRecorder is a Recorder that also counts the order gate's work
// (metrics.Metrics is one): events of an ordered route enqueued without
// an order value, events skipped (reason "stale"), and the events waiting
// behind an earlier one of the same value.
type OrderRecorder interface {
	QueueUnordered(route string)
	QueueSkipped(route, reason string)
	SetOrderWaiting(route string, n int64)
}

// SkipStale is the reason an event older than one already delivered for
// its order value is skipped.
const SkipStale = "stale"

// SkippedBody is the answer a skipped event's key is finished with, and
// later copies of it get (status 200).
const SkippedBody = `{"status":"skipped","reason":"stale"}`

// SkippedOutcome is the stored answer of an event skipped as stale.
func SkippedOutcome(fingerprint string) store.Outcome {
	return store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(SkippedBody), Fingerprint: fingerprint}
}

// StaleValue reads an order.stale value: a number as JSON writes it
// (such as Stripe's created, Unix seconds) or an RFC 3339 time (read as
// Unix seconds with a fraction), as a decimal number the ledgers compare.
// ok false for anything else: the event is then never skipped.
func StaleValue(raw string) (string, bool) {
	if raw == "" {
		return "", false
	}
	if v, err := strconv.ParseFloat(raw, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	if t, err := time.Parse(time.RFC3339Nano, raw); err == nil {
		v := float64(t.Unix()) + float64(t.Nanosecond())/1e9
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}
