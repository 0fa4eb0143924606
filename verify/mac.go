package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds what the HMAC schemes share: a pool of keyed hashes per
// secret, candidate signatures decoded without allocating, header lookup and
// timestamp checks.

const (
	// defaultTolerance bounds a signed timestamp's distance from now.
	defaultTolerance = 5 * time.Minute
	// maxCandidates bounds the signatures one header may carry.
	maxCandidates = 16
	// maxMACSize is the largest MAC or signature compared: SHA-512 and
	// Ed25519 both produce 64 bytes.
	maxMACSize = 64
)

// macKey is one secret with a pool of HMAC states keyed with it, so that the
// hot path neither re-keys nor allocates.
type macKey struct {
	Secret
	newHash func() hash.Hash
	pool    sync.Pool
}

type macState struct {
	h   hash.Hash
	sum [maxMACSize]byte
	buf []byte // the signed prefix (timestamp, id) before the body
}

func newMACKey(s Secret, key []byte, newHash func() hash.Hash) *macKey {
	k := &macKey{Secret: s, newHash: newHash}
	k.pool.New = func() any { return &macState{h: hmac.New(newHash, key)} }
	return k
}

// compute returns the MAC of prefix... followed by body, in st.sum. The
// caller must release st.
func (k *macKey) compute(body []byte, prefix ...string) (st *macState, mac []byte) {
	st = k.pool.Get().(*macState)
	st.h.Reset()
	if len(prefix) > 0 {
		st.buf = st.buf[:0]
		for _, p := range prefix {
			st.buf = append(st.buf, p...)
		}
		st.h.Write(st.buf)
	}
	st.h.Write(body)
	return st, st.h.Sum(st.sum[:0])
}

func (k *macKey) release(st *macState) { k.pool.Put(st) }

// matches computes the MAC once and compares it, in constant time, with
// every candidate.
func (k *macKey) matches(c *candidates, body []byte, prefix ...string) bool {
	st, mac := k.compute(body, prefix...)
	ok := c.match(mac)
	k.release(st)
	return ok
}

// sign returns a fresh copy of the MAC (signers only).
func (k *macKey) sign(body []byte, prefix ...string) []byte {
	st, mac := k.compute(body, prefix...)
	out := append([]byte(nil), mac...)
	k.release(st)
	return out
}

// verifyMACs tries every active key against the candidates.
func verifyMACs(name string, keys []*macKey, now time.Time, c *candidates, body []byte, prefix ...string) (string, error) {
	active := false
	for _, k := range keys {
		if !k.Active(now) {
			continue
		}
		active = true
		if k.matches(c, body, prefix...) {
			return k.ID, nil
		}
	}
	if !active {
		return "", fail(name, ErrNoActiveSecret, "no secret is active")
	}
	return "", fail(name, ErrMismatch, "no signature matches an active secret")
}

// firstActive returns the first key active at now (signers).
func firstActive(name string, keys []*macKey, now time.Time) (*macKey, error) {
	for _, k := range keys {
		if k.Active(now) {
			return k, nil
		}
	}
	return nil, fail(name, ErrNoActiveSecret, "no secret is active")
}

// candidates holds the decoded signatures of one header, on the stack.
type candidates struct {
	n   int
	len [maxCandidates]uint8
	buf [maxCandidates][maxMACSize]byte
}

// addHex decodes s (hex, either case) as one more candidate.
func (c *candidates) addHex(s string) bool { return addHexTo(c, s) }

// addBase64 decodes s (standard alphabet, padded) as one more candidate.
func (c *candidates) addBase64(s string) bool { return addBase64To(c, s) }

func addHexTo[T string | []byte](c *candidates, s T) bool {
	if c.n == maxCandidates || len(s) == 0 || len(s)%2 != 0 || len(s)/2 > maxMACSize {
		return false
	}
	dst := &c.buf[c.n]
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i/2] = hi<<4 | lo
	}
	c.len[c.n] = uint8(len(s) / 2)
	c.n++
	return true
}

func addBase64To[T string | []byte](c *candidates, s T) bool {
	const maxEncoded = (maxMACSize + 2) / 3 * 4
	if c.n == maxCandidates || len(s) == 0 || len(s) > maxEncoded {
		return false
	}
	var src [maxEncoded]byte
	var dst [maxEncoded / 4 * 3]byte
	n := copy(src[:], s)
	m, err := base64.StdEncoding.Decode(dst[:], src[:n])
	if err != nil || m == 0 || m > maxMACSize {
		return false
	}
	copy(c.buf[c.n][:], dst[:m])
	c.len[c.n] = uint8(m)
	c.n++
	return true
}

func (c *candidates) full() bool { return c.n == maxCandidates }

func (c *candidates) get(i int) []byte { return c.buf[i][:c.len[i]] }

// match compares mac with every candidate in constant time (per candidate)
// and does not stop at the first match.
func (c *candidates) match(mac []byte) bool {
	ok := false
	for i := 0; i < c.n; i++ {
		if hmac.Equal(mac, c.get(i)) {
			ok = true
		}
	}
	return ok
}

func unhex(b byte) (byte, bool) {
	switch {
	case '0' <= b && b <= '9':
		return b - '0', true
	case 'a' <= b && b <= 'f':
		return b - 'a' + 10, true
	case 'A' <= b && b <= 'F':
		return b - 'A' + 10, true
	}
	return 0, false
}

// header returns the first value of the header named canon (already in
// canonical form), falling back to a case-insensitive scan for maps that
// were built by hand. Surrounding spaces and tabs (HTTP's optional
// whitespace) are trimmed, and nothing else: a header read as an
// idempotency key is trimmed the same way, so the key is always derived
// from exactly the value that was signed.
func header(h http.Header, canon string) string {
	if v := h[canon]; len(v) > 0 {
		return strings.Trim(v[0], " \t")
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, canon) {
			return strings.Trim(v[0], " \t")
		}
	}
	return ""
}

// checkTimestamp parses ts (decimal Unix seconds, digits only) and checks it
// lies within tol of now in both directions.
func checkTimestamp(name, ts string, now time.Time, tol time.Duration) error {
	if len(ts) == 0 || len(ts) > 18 {
		return fail(name, ErrMalformed, "timestamp is not a Unix time")
	}
	for i := 0; i < len(ts); i++ {
		if ts[i] < '0' || ts[i] > '9' {
			return fail(name, ErrMalformed, "timestamp is not a Unix time")
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fail(name, ErrMalformed, "timestamp is not a Unix time")
	}
	d := now.Sub(time.Unix(sec, 0))
	switch {
	case d > tol:
		return fail(name, ErrExpired, "timestamp older than the tolerance")
	case d < -tol:
		return fail(name, ErrFuture, "timestamp further in the future than the tolerance")
	}
	return nil
}

// tolerance returns c.Tolerance or its default.
func tolerance(c Config) (time.Duration, error) {
	switch {
	case c.Tolerance < 0:
		return 0, fmt.Errorf("verify: tolerance must not be negative")
	case c.Tolerance == 0:
		return defaultTolerance, nil
	}
	return c.Tolerance, nil
}

// fail builds a Verify error: scheme, generic context and reason, never a
// header value or a secret.
func fail(name string, reason error, context string) error {
	return fmt.Errorf("verify: %s: %s: %w", name, context, reason)
}

// timestampedSHA256Keys compiles the secrets and tolerance of a scheme that
// signs "{timestamp}...{body}" with HMAC-SHA256 under the secret's raw bytes
// (stripe, slack).
func timestampedSHA256Keys(c Config, env Env) ([]*macKey, time.Duration, []string, error) {
	tol, err := tolerance(c)
	if err != nil {
		return nil, 0, nil, err
	}
	secrets, warnings, err := ResolveSecrets(c.Secrets, env)
	if err != nil {
		return nil, 0, nil, err
	}
	keys := make([]*macKey, 0, len(secrets))
	for _, s := range secrets {
		keys = append(keys, newMACKey(s, s.Key, sha256.New))
	}
	return keys, tol, warnings, nil
}
