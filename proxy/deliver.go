package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/logging"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verify"
)

// delivery is one request on its way through the steps.
type delivery struct {
	in    inbound
	out   reply
	t     *table
	rt    *route
	start time.Time
	reqID string
	trace string
	path  string // in.path with dot segments resolved: matched, fingerprinted, forwarded
	body  []byte
	buf   *bytes.Buffer // holds body; back to bufPool at the delivery's end
	// limited reads the body, up to one byte past max_body.
	limited io.LimitedReader
	// bucket is the client's rate_limit bucket (edge.go), nil when the
	// route has none.
	bucket *rate.Limiter
	key    string // derived key, "" when unkeyed
	scoped string // route:key
	fp     string
	// attempt is the deliveries of the key counted so far (the store's
	// count, or this instance's when the store did not answer); 0 when the
	// delivery has no key.
	attempt int64
	// gen is the local window's reset generation when the delivery began.
	gen uint64
	// k is the delivery's hold on its key (nil when unkeyed or before the
	// window was asked); sig the replay guard's hold on its signed request.
	k, sig  *dedupe.Key
	status  int
	outcome string
	// se is the gateway's own error answer, nil when the delivery was
	// forwarded, replayed or queued.
	se *statusError

	// What the access line reports besides the above.
	bytesIn  int64  // body bytes read
	bytesOut int64  // answer body bytes written
	secretID string // the secret that verified the signature; "" when none did
	// upstreamStatus and upstreamTime: the upstream's answer, set once the
	// delivery was forwarded (forwarded true); upstreamStatus stays 0
	// when the upstream did not answer.
	forwarded      bool
	upstreamStatus int
	// admitted: the route's breaker let the delivery through (breaker.go);
	// probe: as its probe.
	admitted, probe bool
	upstreamTime    time.Duration

	// span is the delivery's server span and sctx the context holding it,
	// the parent of the steps' spans; both nil when tracing is off.
	span trace.Span
	sctx context.Context

	// strs backs the short strings the delivery makes (a new
	// traceparent, the route-scoped key, the fingerprint's hex digits):
	// one allocation for them all. A strings.Builder only appends, so a
	// string cut from it never changes.
	strs strings.Builder

	// req is the request forward sends upstream, its header in reqHdr
	// when that is large enough: the upstream reads them during Forward
	// only.
	req    Request
	reqHdr [24]string
	// outVals backs the net/http front door's answer header values.
	outVals [8]string
}

// strsSize is what a delivery's strs reserves at its first string: a
// traceparent (55 bytes), a fingerprint (64) and a route-scoped key of up
// to 73 bytes fit.
const strsSize = 192

// str returns b as a string cut from d.strs.
func (d *delivery) str(b []byte) string {
	if d.strs.Cap() == 0 {
		d.strs.Grow(strsSize)
	}
	n := d.strs.Len()
	d.strs.Write(b)
	return d.strs.String()[n:]
}

// scopedKey is idkey.Scoped(route, key), cut from d.strs.
func (d *delivery) scopedKey(route, key string) string {
	if d.strs.Cap() == 0 {
		d.strs.Grow(strsSize)
	}
	n := d.strs.Len()
	d.strs.WriteString(route)
	d.strs.WriteByte(':')
	d.strs.WriteString(key)
	return d.strs.String()[n:]
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody bounds the body buffers kept for reuse. A body of 1 MiB
// (the default max_body) ends in a buffer of 2 MiB (it grows by doubling
// as bytes arrive, and the read of the end needs room past them), so the
// bound is above that: with 1 MiB as the bound, every 1 MiB delivery
// allocated its buffer anew, about 4 MB of garbage each
// (BenchmarkScaleBody). The pool is emptied by the collector, so an idle
// gateway keeps none of them.
const maxPooledBody = 4 << 20

// serve runs a delivery's steps in order (route, body, signature, key,
// local window, store claim, then forward or answer the duplicate) on the
// request view a front door filled in d.in, and leaves the answer in
// d.out for the front door to write. The front door then calls end.
func (g *Gateway) serve(d *delivery) {
	g.metrics.InFlight.Inc()
	d.t, d.start, d.gen = g.tbl.Load(), time.Now(), g.guard.Gen()
	d.out.header = d.out.hdr[:0]
	tp := d.in.header.Get("Traceparent")
	if g.tracer != nil {
		tp = g.startTrace(d, tp)
	}
	d.reqID, d.trace = d.ids(d.in.header.Get("X-Request-Id"), tp)
	d.buf = bufPool.Get().(*bytes.Buffer)
	d.buf.Reset()
	if err := g.deliver(d, d.buf); err != nil {
		d.se = statusOf(err)
		d.status, d.outcome = d.se.status, d.se.outcome
		name := "unmatched"
		if d.rt != nil {
			name = d.rt.Name
		}
		d.out.status = d.se.status
		d.out.header, d.out.body = errorAnswer(d.out.header, d.se, name, d.reqID)
	}
	d.bytesOut = int64(len(d.out.body))
}

// forwardGated forwards a delivery that holds no key, through the
// route's breaker.
func (g *Gateway) forwardGated(d *delivery, k *dedupe.Key) error {
	if err := g.admitTry(d); err != nil {
		return err
	}
	defer g.abandonTry(d)
	return g.forward(d, k)
}

// end finishes a delivery once its answer is written (or dropped): it
// releases what the answer held, counts the delivery and writes its one
// access line.
func (g *Gateway) end(d *delivery) {
	if d.out.up != nil {
		d.out.up.Release()
	}
	if d.buf.Cap() <= maxPooledBody {
		bufPool.Put(d.buf)
	}
	d.buf, d.body = nil, nil
	g.done(d)
	g.metrics.InFlight.Dec()
}

func (g *Gateway) deliver(d *delivery, buf *bytes.Buffer) error {
	if d.in.refused != nil {
		return d.in.refused
	}
	if d.in.lengthless && d.in.method != http.MethodGet && d.in.method != http.MethodHead {
		return errNoLength
	}
	// 1. Route, on the path with its dot segments resolved.
	path, err := cleanPath(d.in.path, d.in.rawPath)
	if err != nil {
		return err
	}
	d.path = path
	rt, err := d.t.match(&d.in, path)
	d.rt = rt
	if err != nil {
		if rt != nil {
			d.out.header = append(d.out.header, "Allow", rt.allow)
		}
		return err
	}
	if err := g.admit(d); err != nil { // allow_ips, rate_limit (edge.go)
		return err
	}

	// 2. Body, up to max_body.
	err = d.readBody(buf, int64(rt.MaxBody))
	d.bytesIn = int64(buf.Len())
	if err != nil {
		return err
	}
	d.body = buf.Bytes()

	// 3. Signature over the raw bytes.
	now := d.start
	if g.now != nil {
		now = g.now()
	}
	_, vsp := g.step(d, d.sctx, spanVerify, trace.SpanKindInternal)
	var secretID string
	if rt.signed != nil {
		// A URL-signed provider's signature covers public_url, not this
		// request's target: the target must be public_url's, or the
		// upstream would get a path or query nobody signed.
		err = rt.signed.check(d.path, d.in.rawQuery)
	}
	if err == nil {
		secretID, err = rt.Verifier.Verify(d.in.header, d.body, now)
	}
	endVerify(vsp, rt.Verify.Scheme, secretID, err)
	if err != nil {
		rt.m.SignatureFailed(verify.Reason(err))
		g.noteUnauthorized(d, verify.Reason(err))
		return fail(http.StatusUnauthorized, metrics.OutcomeUnauthorized, "unauthorized", err)
	}
	if verify.Checks(rt.Verify.Scheme) {
		rt.m.SignatureVerified(secretID)
		d.secretID = secretID
	}
	// The rate limit's token: only a delivery that verified spends one.
	if err := g.charge(d); err != nil {
		return err
	}
	if rt.Dedupe.Mode == config.ModeOff {
		return g.forwardGated(d, nil)
	}

	// 4. Key and fingerprint.
	d.key, err = rt.Key.Derive(d.in.header, d.in.rawQuery, d.body)
	switch {
	case errors.Is(err, idkey.ErrNoKey) && !rt.Idempotency.Required:
		d.outcome = metrics.OutcomeUnkeyed
		return g.forwardGated(d, nil)
	case errors.Is(err, idkey.ErrNoKey):
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "missing idempotency key", err)
	case err != nil:
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "invalid idempotency key", err)
	}
	d.scoped = d.scopedKey(rt.Name, d.key)
	sum := idkey.FingerprintBytes(d.in.method, path, d.body)
	var fp [2 * sha256.Size]byte
	hex.Encode(fp[:], sum[:]) // idkey.Fingerprint's form
	d.fp = d.str(fp[:])
	if rt.Queued() {
		// 5-6 for a queue route: stored and acknowledged (queue.go).
		return g.queued(d)
	}

	// 5. Local window: a finished outcome costs no store round trip.
	// The claim span covers the window and the store (and the replay
	// guard's claim of the signed request, as its child).
	lockTTL := d.t.cfg.Dedupe.LockTTL
	labels := dedupe.Labels{Route: rt.Name, Key: d.key, RequestID: d.reqID, Metrics: rt.m}
	cctx, csp := g.step(d, d.sctx, spanClaim, trace.SpanKindInternal)
	k, adm := g.guard.Open(d.scoped, d.fp, d.gen, lockTTL, labels)
	if adm.Verdict != dedupe.Proceed {
		endClaim(csp, adm)
		return g.duplicate(d, adm)
	}
	d.k = k
	defer k.Done()
	// The breaker, before the key is claimed: while it is open the
	// provider is told to come back, and the key stays free.
	if err := g.admitTry(d); err != nil {
		endClaim(csp, adm)
		return err
	}
	defer g.abandonTry(d)

	// 6. Claim the key in the store, one atomic step.
	ctx := d.in.context()
	if rt.digester != nil {
		// The key comes from something the signature does not cover: the
		// signed request itself is claimed too, so that it cannot be
		// replayed under a fresh key (guard.go).
		if answered, err := g.claimSignature(d, labels, cctx, csp); answered {
			return err
		}
		defer func() {
			var ssp trace.Span
			if d.sig != nil {
				_, ssp = g.step(d, d.sctx, spanSettleSig, trace.SpanKindInternal)
			}
			finished := k.Finished()
			d.sig.SettleHeld(context.WithoutCancel(ctx), finished, "signature", rt.Retention)
			endSettle(ssp, finished, "not_finished")
		}()
	}
	adm = k.Claim(d.note(ctx))
	endClaim(csp, adm)
	if adm.Verdict == dedupe.Unavailable {
		return g.storeDown(d, adm)
	}
	if adm.Verdict != dedupe.Proceed {
		return g.duplicate(d, adm)
	}
	d.attempt = adm.Attempts
	g.checkAttempts(d)
	// A route a reload turned from queue into sync: a key new to the
	// store may be one the queue delivered or dead-lettered (queue.go),
	// unless the store keeps it in the queue's own record (its claim
	// answered it then).
	if !g.sharedKeys && g.otherMode(d) {
		if done, err := g.queueRecord(d, k); done {
			return err
		}
	}
	return g.forward(d, k)
}

// duplicate answers a delivery the window or the store knows as another
// copy: finished (replayed, or 422 for another payload) or in flight (409).
func (g *Gateway) duplicate(d *delivery, adm dedupe.Admission) error {
	g.noteWindow(d, adm)
	d.attempt = adm.Attempts
	if adm.Verdict == dedupe.Busy {
		if adm.Layer == "store" {
			g.checkAttempts(d)
		}
		return g.inFlightDuplicate(d, adm.Layer, adm.RetryAfter)
	}
	g.checkAttempts(d)
	if adm.Verdict == dedupe.Queued {
		return g.queuedDuplicate(d, adm)
	}
	return g.finishedDuplicate(d, adm.Layer, adm.Outcome)
}

// queuedDuplicate answers a copy of an event the queue holds (a route
// that is, or was on another instance, a queue route): acknowledged as
// the queue route acknowledges a copy, marked Idempotent-Replayed, or
// 422 for another payload; not forwarded. In shadow mode it is counted
// the same and forwarded anyway.
func (g *Gateway) queuedDuplicate(d *delivery, adm dedupe.Admission) error {
	same := adm.Fingerprint == d.fp
	d.rt.m.Duplicate(adm.Layer, finishedOutcome(same))
	switch {
	case d.rt.Dedupe.Mode == config.ModeShadow:
		return g.forwardGated(d, nil)
	case !same:
		return errKeyReused
	}
	return g.ackQueued(d, adm.EventID, true)
}

// storeDown answers a delivery whose store did not answer: 499 when the
// caller hung up meanwhile; else 503 with Retry-After, or, with on_error:
// forward, forwarded on the local window's protection alone.
func (g *Gateway) storeDown(d *delivery, adm dedupe.Admission) error {
	if err := d.in.context().Err(); err != nil {
		return err // the caller hung up: 499, not a store failure
	}
	d.attempt = adm.Attempts
	if d.t.cfg.Store.OnError == config.OnErrorForward {
		d.k.ForwardLocally()
		return g.forward(d, d.k)
	}
	return unavailable(d.in.context(), storeUnavailable, adm.Err)
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
	case d.rt.Dedupe.Mode == config.ModeShadow:
		return g.forwardGated(d, nil)
	case same:
		return g.replay(d, out)
	}
	return errKeyReused
}

// inFlightDuplicate answers a delivery whose key another copy is forwarding
// right now: 409 with Retry-After, or forwarded anyway in shadow mode.
func (g *Gateway) inFlightDuplicate(d *delivery, layer string, retry time.Duration) error {
	d.rt.m.Duplicate(layer, metrics.OutcomeInFlight)
	if d.rt.Dedupe.Mode == config.ModeShadow {
		return g.forwardGated(d, nil)
	}
	se := fail(http.StatusConflict, metrics.OutcomeInFlight, "a delivery with this idempotency key is in progress", nil)
	se.retryAfter = max(1, int(math.Ceil(retry.Seconds())))
	return se
}

var errKeyReused = fail(http.StatusUnprocessableEntity, metrics.OutcomeConflict,
	"idempotency key reused with a different payload", nil)

// bodyGrowAhead is how much of a declared length readBody reserves before
// the bytes arrive; past it, the buffer grows with what arrives.
const bodyGrowAhead = 16 << 10

// readBody reads the whole body into buf, refusing more than max bytes:
// a declared length past max is refused before any of the body is read.
// The buffer is not sized by the declared length, which costs the caller
// nothing to write: it grows with the bytes that arrive (at most about
// twice what was received, plus bodyGrowAhead), so a connection that
// announces max_body and sends a few bytes pins a few kilobytes for the
// read timeout, not max_body.
func (d *delivery) readBody(buf *bytes.Buffer, max int64) error {
	in := &d.in
	if in.contentLength > max {
		return errTooLarge
	}
	if in.contentLength > 0 {
		buf.Grow(int(min(in.contentLength, bodyGrowAhead)))
	}
	d.limited = io.LimitedReader{R: in.body, N: max + 1}
	n, err := buf.ReadFrom(&d.limited)
	if err != nil {
		// A body that ends early (the caller half-closed, or the read
		// timeout fired mid-body) is never answered 2xx: it was not
		// forwarded. The request's context cannot tell a hang-up from a
		// short body (net/http cancels it on any read error).
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fail(http.StatusRequestTimeout, metrics.OutcomeRejected, "request body not received in time", err)
		}
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "could not read body", err)
	}
	if n > max {
		return errTooLarge
	}
	if in.contentLength >= 0 && n < in.contentLength {
		// Fewer bytes than declared, then the end of the connection: a
		// front door's body reader may call that the end of the body
		// (fasthttp's stream does). It is a truncated body all the same.
		return fail(http.StatusBadRequest, metrics.OutcomeRejected, "could not read body", io.ErrUnexpectedEOF)
	}
	return nil
}

// errNoLength refuses an HTTP/1.0 request, other than GET or HEAD,
// without a Content-Length: HTTP/1.0 has no other framing of a request
// body, so it either has none or hides one behind a Transfer-Encoding
// (which net/http drops unseen and fasthttp refuses): both front doors
// refuse it the same way.
var errNoLength = fail(http.StatusBadRequest, metrics.OutcomeRejected, "HTTP/1.0 request without Content-Length", nil)

var errTooLarge = fail(http.StatusRequestEntityTooLarge, metrics.OutcomeRejected, "body larger than max_body", nil)

// replay answers with a stored outcome.
func (g *Gateway) replay(d *delivery, out *store.Outcome) error {
	h := d.out.header
	if out.ContentType != "" {
		h = append(h, "Content-Type", out.ContentType)
	}
	d.out.header = append(h, "Idempotent-Replayed", "true", "X-Request-Id", d.reqID)
	d.out.status, d.out.body = out.Status, out.Body
	d.status, d.outcome = out.Status, metrics.OutcomeReplayed
	return nil
}

// checkAttempts raises the retry alert the moment a key passes
// alerts.max_attempts: once, on the delivery that crosses the line.
func (g *Gateway) checkAttempts(d *delivery) {
	max := int64(d.t.cfg.Alerts.MaxAttempts)
	if max <= 0 || d.attempt != max+1 {
		return
	}
	d.rt.m.AttemptsExceeded()
	g.log.LogAttrs(context.Background(), slog.LevelWarn, "key delivered more often than alerts.max_attempts",
		slog.String("route", d.rt.Name), slog.String("key", d.key),
		slog.Int64("attempts", d.attempt), slog.Int("max_attempts", int(max)))
	if g.alerter != nil {
		g.alerter.Alert(d.rt.Name, d.key, d.attempt)
	}
}

// done counts a delivery and writes its one access line. The private
// cause of a failure goes to that line, never to the caller.
func (g *Gateway) done(d *delivery) {
	name := "unmatched"
	if d.rt != nil {
		name = d.rt.Name
	}
	level := slog.LevelInfo
	var cause slog.Attr
	if se := d.se; se != nil {
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
	h := g.access.Handler()
	ctx := context.Background()
	logged := h.Enabled(ctx, level)
	if !logged && d.span == nil {
		return
	}
	client := clientOf(d.t, &d.in)
	ua := clipUserAgent(d.in.header.Get("User-Agent"))
	if d.span != nil {
		endTrace(d, name, client, ua, d.se)
	}
	if !logged {
		return
	}
	// Attributes that do not apply are left empty: the handler skips them.
	var upStatus, upTime, upAddr, secret slog.Attr
	if d.forwarded {
		upAddr = slog.String("upstream", d.rt.upstreamAddr)
		upTime = slog.Float64("upstream_ms", float64(d.upstreamTime.Microseconds())/1000)
		if d.upstreamStatus != 0 {
			upStatus = slog.Int("upstream_status", d.upstreamStatus)
		}
	}
	if d.secretID != "" {
		secret = slog.String("secret_id", d.secretID)
	}
	attrs := [...]slog.Attr{
		slog.String("route", name),
		slog.String("key", d.key),
		slog.String("outcome", d.outcome),
		slog.Int("status", d.status),
		slog.Int64("attempt", d.attempt),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.String("method", d.in.method),
		slog.String("host", clipPath(d.in.host)),
		slog.String("path", clipPath(d.in.path)),
		slog.String("proto", d.in.proto),
		slog.String("request_id", d.reqID),
		slog.String("trace_id", traceID(d.trace)),
		slog.String("client", client),
		slog.String("user_agent", ua),
		slog.Int64("bytes_in", d.bytesIn),
		slog.Int64("bytes_out", d.bytesOut),
		upAddr,
		upStatus,
		upTime,
		secret,
		cause,
	}
	if lh, ok := h.(*logging.Handler); ok {
		// The gateway's own handler takes the attributes without a
		// record, which would allocate for more than five.
		lh.HandleAttrs(end, level, "delivery", attrs[:])
		return
	}
	r := slog.NewRecord(end, level, "delivery", 0)
	r.AddAttrs(attrs[:]...)
	h.Handle(ctx, r)
}

// maxLoggedPath bounds the path in an access line: a scanner's 8 KiB path
// must not make every log line of a 404 flood 8 KiB long.
const maxLoggedPath = 256

// clipPath shortens a path for the log, marking the cut.
func clipPath(p string) string {
	if len(p) <= maxLoggedPath {
		return p
	}
	return p[:maxLoggedPath] + "...(truncated)"
}

// ids returns the delivery's X-Request-Id and traceparent: the caller's
// when valid (a short printable request id, a W3C traceparent), else new
// ones. A new request id is the trace id, so log lines and traces join.
func (d *delivery) ids(reqID, tp string) (string, string) {
	if !validTraceparent(tp) {
		var b [55]byte
		newTraceparent(&b)
		tp = d.str(b[:])
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

// newTraceparent writes a new trace into b: version 00, random trace and span ids,
// sampled.
func newTraceparent(b *[55]byte) {
	copy(b[:], "00-")
	b[35], b[52] = '-', '-'
	copy(b[53:], "01")
	hexRand(b[3:35])
	hexRand(b[36:52])
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
