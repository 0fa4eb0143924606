package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/metrics"
)

// The replay guard. A route whose idempotency key comes from something the
// signature does not cover (an Idempotency-Key header beside an HMAC over
// the body) could be fooled by one captured delivery sent again under fresh
// keys: each copy verifies and each key is new. On such a route the signed
// request itself is claimed in the store too, under "route|sig:DIGEST"
// (route names cannot hold '|', so it never meets a "route:key"), where
// DIGEST is the SHA-256 of exactly what the signature covers. Its record
// keeps a hash of the key it was accepted under, for the route's retention:
// the same signed request under the same key goes on to the key's replay as
// usual; under another key it is refused with 422.
//
// A queue route claims the signed request the same way, in the same store,
// and records it (finished, for the route's retention) before the event is
// enqueued (guardQueued): an event is never in the queue, let alone
// acknowledged, without its signed request remembered. The guard lives in
// the idempotency store, not in the queue, so it is the same on the memory,
// Redis and Kafka backends, and a route switched between sync and queue
// keeps its signed requests.

var errSignatureReplayed = fail(http.StatusUnprocessableEntity, metrics.OutcomeConflict,
	"this signed request was already accepted under another idempotency key", nil)

// claimSignature claims d's signed request. It returns answered false when
// the delivery may go on (the request is new: d.sig holds it until the
// caller settles it; or it was accepted under this same key); otherwise
// the delivery was answered, with err the answer when it is an error: 409
// while another copy of it is forwarded, 422 (counted) when it was accepted
// under another key, the store's failure, or, in shadow mode, forwarded.
//
// cctx and claim are the delivery's claim span and its context (nil with
// tracing off): the signature's claim is a span inside it, and an answer
// given here ends it.
func (g *Gateway) claimSignature(d *delivery, l dedupe.Labels, cctx context.Context, claim trace.Span) (answered bool, err error) {
	digest, ok := d.rt.digester.SignedDigest(d.in.header, d.body)
	if !ok {
		// Verify passed, so this cannot happen; fail closed all the same.
		err := fail(http.StatusUnauthorized, metrics.OutcomeUnauthorized, "unauthorized",
			errors.New("proxy: signed request without a digest"))
		endStep(claim, err)
		return true, err
	}
	kh := sha256.Sum256([]byte(d.scoped))
	key := d.rt.Name + "|sig:" + hex.EncodeToString(digest[:])
	_, ssp := g.step(d, cctx, spanClaimSignature, trace.SpanKindInternal)
	sig, adm := g.guard.Hold(d.in.context(), key, hex.EncodeToString(kh[:]), d.t.cfg.Dedupe.LockTTL, "claim", l)
	endClaim(ssp, adm)
	if adm.Verdict != dedupe.Proceed && adm.Verdict != dedupe.Replay {
		endClaim(claim, adm)
	}
	switch adm.Verdict {
	case dedupe.Proceed:
		d.sig = sig
	case dedupe.Replay: // accepted under this same key: the key's own state decides
	case dedupe.Busy:
		if d.rt.Queued() && d.rt.Dedupe.Mode == config.ModeShadow {
			return true, g.shadowCopy(d, "store", metrics.OutcomeInFlight)
		}
		return true, g.inFlightDuplicate(d, "store", adm.RetryAfter)
	case dedupe.Conflict:
		return true, g.signatureReplayed(d)
	default:
		if d.rt.Queued() {
			// Nothing is forwarded on the local window's protection
			// alone: the event is not acknowledged.
			return true, queueStoreDown(d, adm.Err)
		}
		return true, g.storeDown(d, adm)
	}
	return false, nil
}

// guardQueued is the replay guard of a queue route, run before the
// enqueue: the signed request is claimed and, when new, recorded as
// accepted under d's key. It returns answered false when the event may be
// enqueued (its signed request is now remembered under this key, or was
// already); otherwise the delivery was answered, with err the answer.
//
// The record is written before the enqueue, so an instance that dies
// between the two leaves a guarded request and no event; the sender's
// retry under the same key goes through. The other order could leave a
// queued event whose signed request nobody remembers. A copy refused
// after the record is written (the queue is full or down, or its key
// holds another payload) leaves its signed request tied to its key: the
// same request under another key is refused with 422 (fail closed).
func (g *Gateway) guardQueued(d *delivery, l dedupe.Labels) (answered bool, err error) {
	if answered, err := g.claimSignature(d, l, d.sctx, nil); answered {
		return true, err
	}
	if d.sig == nil {
		return false, nil // accepted under this key before: the queue decides
	}
	var ssp trace.Span
	_, ssp = g.step(d, d.sctx, spanSettleSig, trace.SpanKindInternal)
	err = d.sig.SettleHeld(context.WithoutCancel(d.in.context()), true, "signature", d.rt.Retention)
	endSettle(ssp, err == nil, "not_finished")
	d.sig = nil
	if err != nil {
		return true, queueStoreDown(d, err)
	}
	return false, nil
}

// queueStoreDown answers a queue route's delivery whose replay guard could
// not be read or written: 499 when the caller hung up, else 503 with
// Retry-After, never acknowledged (store.on_error: forward does not apply:
// the event is not queued unguarded).
func queueStoreDown(d *delivery, err error) error {
	return unavailable(d.in.context(), storeUnavailable, err)
}

// signatureReplayed answers a signed request already accepted under another
// key: 422, counted; in shadow mode counted and forwarded anyway (on a
// queue route: queued as a copy of its own, shadowCopy).
func (g *Gateway) signatureReplayed(d *delivery) error {
	d.rt.m.SignatureReplay()
	if d.rt.Queued() && d.rt.Dedupe.Mode == config.ModeShadow {
		return g.shadowCopy(d, "store", metrics.OutcomeConflict)
	}
	d.rt.m.Duplicate("store", metrics.OutcomeConflict)
	if d.rt.Dedupe.Mode == config.ModeShadow {
		return g.forwardGated(d, nil)
	}
	return errSignatureReplayed
}
