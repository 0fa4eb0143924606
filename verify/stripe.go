package verify

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripe verifies Stripe-Signature: "t=<unix>,v1=<hex>[,v1=<hex>...]". The
// MAC is HMAC-SHA256 of "{t}.{body}" keyed with the whole secret string,
// whsec_ prefix included (it is not decoded). Only v1 signatures count; v0
// and unknown schemes are ignored so that nothing can be downgraded. The
// timestamp must lie within the tolerance, in both directions.
type stripe struct {
	keys []*macKey
	tol  time.Duration
}

const stripeHeader = "Stripe-Signature"

func newStripe(c Config, env Env) (*stripe, []string, error) {
	keys, tol, warnings, err := timestampedSHA256Keys(c, env)
	if err != nil {
		return nil, nil, err
	}
	return &stripe{keys: keys, tol: tol}, warnings, nil
}

// Verify implements Verifier.
func (v *stripe) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	hv := header(h, stripeHeader)
	if hv == "" {
		return "", fail("stripe", ErrMissing, "Stripe-Signature header missing")
	}
	var c candidates
	p, err := parseStripeHeader(hv, &c)
	if err != nil {
		return "", err
	}
	if err := checkTimestamp("stripe", p.ts, now, v.tol); err != nil {
		return "", err
	}
	if c.n == 0 {
		if p.otherSignatures && !p.badV1 {
			return "", fail("stripe", ErrMismatch, "no v1 signature (other schemes do not count)")
		}
		return "", fail("stripe", ErrMalformed, "no valid v1 signature")
	}
	return verifyMACs("stripe", v.keys, now, &c, body, p.ts, ".")
}

// SignedDigest implements SignedDigester: the digest of "{t}.{body}", with
// t read from Stripe-Signature exactly as Verify reads it. The v1 (and any
// other) signatures in the header are not part of it.
func (v *stripe) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	hv := header(h, stripeHeader)
	if hv == "" {
		return [32]byte{}, false
	}
	p, err := parseStripeHeader(hv, nil)
	if err != nil || p.ts == "" {
		return [32]byte{}, false
	}
	return signedDigest(body, p.ts, "."), true
}

// stripeFields is what parseStripeHeader found.
type stripeFields struct {
	ts              string // the t= value ("" when absent)
	badV1           bool   // some v1 value is not valid hex
	otherSignatures bool   // items other than t and v1 (v0, unknown schemes)
}

// parseStripeHeader splits "t=<unix>,v1=<hex>[,...]" and adds each v1
// signature to c (when c is not nil).
func parseStripeHeader(hv string, c *candidates) (stripeFields, error) {
	var (
		p          stripeFields
		haveTS     bool
		rest, item = hv, ""
		more       = true
	)
	for more {
		item, rest, more = strings.Cut(rest, ",")
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || strings.Contains(val, "=") {
			return p, fail("stripe", ErrMalformed, "header item is not key=value")
		}
		switch k {
		case "t":
			if haveTS {
				return p, fail("stripe", ErrMalformed, "timestamp given twice")
			}
			p.ts, haveTS = val, true
		case "v1":
			if c == nil {
				continue
			}
			if c.full() {
				return p, fail("stripe", ErrMalformed, "too many signatures")
			}
			if !c.addHex(val) {
				p.badV1 = true
			}
		default:
			p.otherSignatures = true
		}
	}
	if !haveTS {
		return p, fail("stripe", ErrMalformed, "timestamp (t=) missing")
	}
	return p, nil
}

func (v *stripe) signer(signKey []byte) (Signer, error) {
	return &stripeSigner{v: v, override: overrideKey(v.keys, signKey)}, nil
}

type stripeSigner struct {
	v        *stripe
	override *macKey
}

// Sign implements Signer: Stripe-Signature with t=now and one v1.
func (s *stripeSigner) Sign(h http.Header, body []byte, now time.Time) error {
	k := s.override
	if k == nil {
		var err error
		if k, err = firstActive("stripe", s.v.keys, now); err != nil {
			return err
		}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(stripeHeader, "t="+ts+",v1="+hex.EncodeToString(k.sign(body, ts, ".")))
	return nil
}
