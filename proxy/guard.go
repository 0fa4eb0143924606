package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
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

// sigClaim is a delivery's claim on its signed request.
type sigClaim struct {
	key     string // "route|sig:HEX"
	keyHash string // hex SHA-256 of the delivery's scoped key
	token   string // lock owner token; "" when nothing is held
}

var errSignatureReplayed = fail(http.StatusUnprocessableEntity, metrics.OutcomeConflict,
	"this signed request was already accepted under another idempotency key", nil)

// claimSignature claims d's signed request. It returns Claimed when the
// delivery may go on (the request is new, or was accepted under this same
// key), InFlight with the lock's remaining time when another copy of it is
// being forwarded, Finished when it was accepted under another key, or the
// store's error.
func (g *Gateway) claimSignature(d *delivery) (store.State, time.Duration, error) {
	digest, ok := d.rt.digester.SignedDigest(d.r.Header, d.body)
	if !ok {
		// Verify passed, so this cannot happen; fail closed all the same.
		return 0, 0, fail(http.StatusUnauthorized, metrics.OutcomeUnauthorized, "unauthorized",
			errors.New("proxy: signed request without a digest"))
	}
	kh := sha256.Sum256([]byte(d.scoped))
	d.sig = sigClaim{key: d.rt.Name + "|sig:" + hex.EncodeToString(digest[:]), keyHash: hex.EncodeToString(kh[:])}
	claim, err := g.store.Claim(d.r.Context(), d.sig.key, d.sig.keyHash, d.t.cfg.Dedupe.LockTTL)
	if err != nil {
		return 0, 0, err
	}
	switch claim.State {
	case store.Claimed:
		d.sig.token = claim.Token
		return store.Claimed, 0, nil
	case store.InFlight:
		return store.InFlight, claim.RetryAfter, nil
	case store.Finished:
		if claim.Outcome.Fingerprint == d.sig.keyHash {
			return store.Claimed, 0, nil
		}
		return store.Finished, 0, nil
	}
	return 0, 0, fmt.Errorf("proxy: signature claim returned state %v", claim.State)
}

// signatureReplayed answers a signed request already accepted under another
// key: 422, counted; in shadow mode counted and forwarded anyway.
func (g *Gateway) signatureReplayed(d *delivery) error {
	d.rt.m.SignatureReplay()
	d.rt.m.Duplicate("store", metrics.OutcomeConflict)
	if d.rt.Dedupe.Mode == "shadow" {
		return g.forward(d, "")
	}
	return errSignatureReplayed
}

// settleSignature records the signed request as accepted under d's key once
// the key is finished, or releases it so the provider's retry can go
// through. A failure is logged: the guard then forgets this one signature.
func (g *Gateway) settleSignature(d *delivery) {
	if d.sig.token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.r.Context()), 2*time.Second)
	defer cancel()
	var err error
	if d.keyDone {
		err = g.store.Finish(ctx, d.sig.key, d.sig.token,
			store.Outcome{Status: http.StatusOK, Fingerprint: d.sig.keyHash}, d.rt.Retention)
	} else {
		err = g.store.Release(ctx, d.sig.key, d.sig.token)
	}
	if err != nil && !errors.Is(err, store.ErrNotOwner) {
		g.storeError("signature", d, err)
	}
}
