package verify

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// slack verifies X-Slack-Signature: "v0=" and the hex HMAC-SHA256 of
// "v0:{X-Slack-Request-Timestamp}:{body}", keyed with the signing secret
// (UTF-8). The timestamp must lie within the tolerance, both directions.
type slack struct {
	keys []*macKey
	tol  time.Duration
}

const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
)

func newSlack(c Config, env Env) (*slack, []string, error) {
	keys, tol, warnings, err := timestampedSHA256Keys(c, env)
	if err != nil {
		return nil, nil, err
	}
	return &slack{keys: keys, tol: tol}, warnings, nil
}

// Verify implements Verifier.
func (v *slack) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	sig := header(h, slackSignatureHeader)
	ts := header(h, slackTimestampHeader)
	if sig == "" || ts == "" {
		return "", fail("slack", ErrMissing, "X-Slack-Signature or X-Slack-Request-Timestamp header missing")
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return "", fail("slack", ErrMalformed, "signature is not v0=<hex>")
	}
	var c candidates
	if !c.addHex(hexSig) {
		return "", fail("slack", ErrMalformed, "signature is not valid hex")
	}
	if err := checkTimestamp("slack", ts, now, v.tol); err != nil {
		return "", err
	}
	return verifyMACs("slack", v.keys, now, &c, body, "v0:", ts, ":")
}

// SignedDigest implements SignedDigester: the digest of
// "v0:{X-Slack-Request-Timestamp}:{body}".
func (v *slack) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	ts := header(h, slackTimestampHeader)
	if ts == "" {
		return [32]byte{}, false
	}
	return signedDigest(body, "v0:", ts, ":"), true
}

func (v *slack) signer(signKey []byte) (Signer, error) {
	return &slackSigner{v: v, override: overrideKey(v.keys, signKey)}, nil
}

type slackSigner struct {
	v        *slack
	override *macKey
}

// Sign implements Signer.
func (s *slackSigner) Sign(h http.Header, body []byte, now time.Time) error {
	k := s.override
	if k == nil {
		var err error
		if k, err = firstActive("slack", s.v.keys, now); err != nil {
			return err
		}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	h.Set(slackTimestampHeader, ts)
	h.Set(slackSignatureHeader, "v0="+hex.EncodeToString(k.sign(body, "v0:", ts, ":")))
	return nil
}
