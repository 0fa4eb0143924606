package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verify"
)

// delivery is one request on its way through the steps.
type delivery struct {
	w       http.ResponseWriter
	r       *http.Request
	t       *table
	rt      *route
	start   time.Time
	reqID   string
	trace   string
	body    []byte
	key     string // derived key, "" when unkeyed
	scoped  string // route:key
	fp      string
	attempt int64
	// localOnly: the store is down and on_error is forward; the local
	// window is the only protection, so a finished outcome goes there.
	localOnly bool
	status    int
	outcome   string
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP runs contract section 3, steps 1 to 11, for one delivery.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := &delivery{w: w, r: r, t: g.tbl.Load(), start: time.Now()}
	d.reqID, d.trace = ids(r.Header.Get("X-Request-Id"), r.Header.Get("Traceparent"))

	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	err := g.deliver(d, buf)
	if buf.Cap() <= 1<<20 {
		bufPool.Put(buf)
	}
	g.done(d, err)
}

func (g *Gateway) deliver(d *delivery, buf *bytes.Buffer) error {
	// 1. Route.
	rt, err := d.t.match(d.r)
	d.rt = rt
	if err != nil {
		if rt != nil {
			d.w.Header().Set("Allow", rt.allow)
		}
		return err
	}

	// 2. Body, up to max_body.
	if err := readBody(d.r, buf, int64(rt.MaxBody)); err != nil {
		return err
	}
	d.body = buf.Bytes()

	// 3. Signature over the raw bytes.
	now := d.start
	if g.now != nil {
		now = g.now()
	}
	secretID, err := rt.Verifier.Verify(d.r.Header, d.body, now)
	if err != nil {
		rt.m.SignatureFailed(verify.Reason(err))
		return fail(http.StatusUnauthorized, metrics.OutcomeUnauthorized, "unauthorized", err)
	}
	if rt.Verify.Scheme != "none" {
		rt.m.SignatureVerified(secretID)
	}
	if rt.Dedupe.Mode == "off" {
		return g.forward(d, "")
	}

	// 4. Key and fingerprint.
	d.key, err = rt.Key.Derive(d.r, d.body)
	switch {
	case errors.Is(err, dedupe.ErrNoKey) && !rt.Idempotency.Required:
		d.outcome = metrics.OutcomeUnkeyed
		return g.forward(d, "")
	case errors.Is(err, dedupe.ErrNoKey):
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "missing idempotency key", err)
	case err != nil:
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "invalid idempotency key", err)
	}
	d.scoped = rt.Name + ":" + d.key
	d.fp = dedupe.Fingerprint(d.r.Method, d.r.URL.Path, d.body)

	// 5. Local window: a finished outcome costs no store round trip.
	if e, ok := g.cache.Get(d.scoped); ok {
		rt.m.CacheHit()
		d.attempt = e.Attempts.Add(1)
		g.checkAttempts(d)
		return g.finishedDuplicate(d, "cache", &e.Outcome)
	}
	rt.m.CacheMiss()
	if !g.cache.Begin(d.scoped) {
		return g.inFlightDuplicate(d, "cache", time.Second)
	}
	defer g.cache.End(d.scoped)

	// 6. Claim the key in the store, one atomic step.
	claim, err := g.store.Claim(d.r.Context(), d.scoped, d.fp, d.t.cfg.Dedupe.LockTTL)
	if err != nil && d.r.Context().Err() != nil {
		return d.r.Context().Err() // the caller hung up: 499, not a store failure
	}
	if err != nil {
		g.storeError("claim", d, err)
		if d.t.cfg.Store.OnError == "forward" {
			d.localOnly = true
			return g.forward(d, "")
		}
		se := fail(http.StatusServiceUnavailable, metrics.OutcomeRejected, "idempotency store unavailable", err)
		se.retryAfter = 1
		return se
	}
	d.attempt = claim.Attempts
	g.checkAttempts(d)
	switch claim.State {
	case store.Claimed:
		return g.forward(d, claim.Token)
	case store.InFlight:
		return g.inFlightDuplicate(d, "store", claim.RetryAfter)
	case store.Finished:
		if claim.Outcome.Fingerprint == d.fp {
			g.cache.Add(d.scoped, claim.Outcome, claim.Attempts)
		}
		return g.finishedDuplicate(d, "store", &claim.Outcome)
	}
	return fail(http.StatusServiceUnavailable, metrics.OutcomeRejected, "idempotency store unavailable",
		fmt.Errorf("proxy: claim returned state %v", claim.State))
}

// finishedDuplicate answers a delivery whose key layer (cache, store) knows
// as finished: the stored outcome is replayed (step 8), or 422 when the key
// came with another payload. In shadow mode (step 7) it is counted the same
// and forwarded anyway.
func (g *Gateway) finishedDuplicate(d *delivery, layer string, out *store.Outcome) error {
	same := out.Fingerprint == d.fp
	outcome := metrics.OutcomeConflict
	if same {
		outcome = metrics.OutcomeReplayed
	}
	d.rt.m.Duplicate(layer, outcome)
	switch {
	case d.rt.Dedupe.Mode == "shadow":
		return g.forward(d, "")
	case same:
		return g.replay(d, out)
	}
	return errKeyReused
}

// inFlightDuplicate answers a delivery whose key another copy is forwarding
// right now: 409 with Retry-After, or forwarded anyway in shadow mode.
func (g *Gateway) inFlightDuplicate(d *delivery, layer string, retry time.Duration) error {
	d.rt.m.Duplicate(layer, metrics.OutcomeInFlight)
	if d.rt.Dedupe.Mode == "shadow" {
		return g.forward(d, "")
	}
	se := fail(http.StatusConflict, metrics.OutcomeInFlight, "a delivery with this idempotency key is in progress", nil)
	se.retryAfter = max(1, int(math.Ceil(retry.Seconds())))
	return se
}

var errKeyReused = fail(http.StatusUnprocessableEntity, metrics.OutcomeConflict,
	"idempotency key reused with a different payload", nil)

// readBody reads the whole body into buf, refusing more than max bytes.
func readBody(r *http.Request, buf *bytes.Buffer, max int64) error {
	if r.ContentLength > max {
		return errTooLarge
	}
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, max+1))
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "could not read body", err)
	}
	if n > max {
		return errTooLarge
	}
	return nil
}

var errTooLarge = fail(http.StatusRequestEntityTooLarge, metrics.OutcomeRejected, "body larger than max_body", nil)

// replay answers with a stored outcome (step 8).
func (g *Gateway) replay(d *delivery, out *store.Outcome) error {
	h := d.w.Header()
	if out.ContentType != "" {
		h["Content-Type"] = []string{out.ContentType}
	}
	h["Idempotent-Replayed"] = replayedTrue
	h["X-Request-Id"] = []string{d.reqID}
	d.w.WriteHeader(out.Status)
	d.w.Write(out.Body)
	d.status, d.outcome = out.Status, metrics.OutcomeReplayed
	return nil
}

// replayedTrue is shared by every replay's header map; net/http only reads it.
var replayedTrue = []string{"true"}

// checkAttempts raises the retry alert the moment a key passes
// alerts.max_attempts: once, on the delivery that crosses the line.
func (g *Gateway) checkAttempts(d *delivery) {
	max := int64(d.t.cfg.Alerts.MaxAttempts)
	if max <= 0 || d.attempt != max+1 {
		return
	}
	d.rt.m.AttemptsExceeded()
	g.log.LogAttrs(d.r.Context(), slog.LevelWarn, "key delivered more often than alerts.max_attempts",
		slog.String("route", d.rt.Name), slog.String("key", d.key),
		slog.Int64("attempts", d.attempt), slog.Int("max_attempts", int(max)))
	if g.alerter != nil {
		g.alerter.Alert(d.rt.Name, d.key, d.attempt)
	}
}

func (g *Gateway) storeError(op string, d *delivery, err error) {
	g.metrics.StoreErrors.WithLabelValues(op).Inc()
	g.log.LogAttrs(context.Background(), slog.LevelError, "store error",
		slog.String("op", op), slog.String("route", d.rt.Name), slog.String("key", d.key),
		slog.String("request_id", d.reqID), slog.String("error", err.Error()))
}

// done is the single exit: it writes the gateway's own error answer if there
// is one, then counts the delivery and writes its one access line. The
// private cause of a failure goes to that line, never to the caller.
func (g *Gateway) done(d *delivery, err error) {
	name := "unmatched"
	if d.rt != nil {
		name = d.rt.Name
	}
	level := slog.LevelInfo
	var cause slog.Attr
	if err != nil {
		se := statusOf(err)
		writeError(d.w, se, name, d.reqID)
		d.status, d.outcome = se.status, se.outcome
		switch {
		case se.status == http.StatusUnauthorized:
			cause = slog.String("reason", verify.Reason(se.err))
		case se.err != nil:
			cause = slog.String("error", se.Error())
			if se.status >= 500 {
				level = slog.LevelWarn
			}
		}
	}
	end := time.Now()
	elapsed := end.Sub(d.start)
	if d.rt != nil {
		d.rt.m.Done(d.status, d.outcome, elapsed.Seconds())
	} else {
		g.metrics.Requests.WithLabelValues(name, strconv.Itoa(d.status)).Inc()
	}
	// The access line goes straight to the handler: slog.Logger would read
	// the clock and the call stack again for every delivery.
	h := g.log.Handler()
	if !h.Enabled(d.r.Context(), level) {
		return
	}
	r := slog.NewRecord(end, level, "delivery", 0)
	r.AddAttrs(
		slog.String("route", name),
		slog.String("key", d.key),
		slog.String("outcome", d.outcome),
		slog.Int("status", d.status),
		slog.Int64("attempt", d.attempt),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.String("method", d.r.Method),
		slog.String("path", d.r.URL.Path),
		slog.String("request_id", d.reqID),
		cause)
	h.Handle(d.r.Context(), r)
}

// ids returns the delivery's X-Request-Id and traceparent: the caller's
// when valid (a short printable request id, a W3C traceparent), else new
// ones. A new request id is the trace id, so log lines and traces join.
func ids(reqID, tp string) (string, string) {
	if !validTraceparent(tp) {
		tp = newTraceparent()
	}
	if !validRequestID(reqID) {
		reqID = tp[3:35]
	}
	return reqID, tp
}

func validRequestID(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

func validTraceparent(v string) bool {
	return len(v) == 55 && v[2] == '-' && v[35] == '-' && v[52] == '-' && isHex(v[:2]) && isHex(v[3:35]) &&
		isHex(v[36:52]) && isHex(v[53:]) && v[:2] != "ff" && v[3:35] != "00000000000000000000000000000000" &&
		v[36:52] != "0000000000000000"
}

// newTraceparent starts a trace: version 00, random trace and span ids,
// sampled.
func newTraceparent() string {
	var b [55]byte
	copy(b[:], "00-")
	b[35], b[52] = '-', '-'
	copy(b[53:], "01")
	hexRand(b[3:35])
	hexRand(b[36:52])
	return string(b[:])
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// hexRand fills dst with random hex digits.
func hexRand(dst []byte) {
	for i := 0; i < len(dst); i += 16 {
		x := rand.Uint64()
		for j := i; j < i+16 && j < len(dst); j++ {
			dst[j] = hexDigits[x&15]
			x >>= 4
		}
	}
}
