package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// standardWebhooks verifies the Standard Webhooks scheme (also Svix):
// webhook-id, webhook-timestamp and webhook-signature, or the same three
// named svix-*. The config's header says which family the Signer sends:
// webhook-signature (or empty) or svix-signature. The signed bytes are
// "{id}.{timestamp}.{body}". The signature header is a space-separated
// list of "v1,<base64 HMAC-SHA256>" and "v1a,<base64 Ed25519 signature>";
// other versions are ignored.
//
// A secret "whsec_<base64>" (or the bare base64) is a v1 HMAC key; a secret
// "whpk_<base64 of 32 bytes>" is a v1a Ed25519 public key. A route may mix
// both while it rotates.
type standardWebhooks struct {
	keys []swKey
	tol  time.Duration
	// sends is the header family the Signer sends: swHeaders[0]
	// (webhook-*), or swHeaders[1] (svix-*) when the config's header is
	// svix-signature. Verify reads either.
	sends int
}

type swKey struct {
	Secret
	mac *macKey           // v1
	pub ed25519.PublicKey // v1a
}

const (
	swPrefixSecret     = "whsec_"
	swPrefixPublicKey  = "whpk_"
	swPrefixPrivateKey = "whsk_"
)

var swHeaders = [2][3]string{
	{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
	{"Svix-Id", "Svix-Timestamp", "Svix-Signature"},
}

// swMessages recycles the "{id}.{ts}.{body}" buffer Ed25519 needs whole.
var swMessages = sync.Pool{New: func() any { return new([]byte) }}

func newStandardWebhooks(c Config, env Env) (*standardWebhooks, []string, error) {
	tol, err := tolerance(c)
	if err != nil {
		return nil, nil, err
	}
	secrets, warnings, err := ResolveSecrets(c.Secrets, env)
	if err != nil {
		return nil, nil, err
	}
	v := &standardWebhooks{tol: tol}
	switch hdr := strings.TrimSpace(c.Header); {
	case hdr == "" || strings.EqualFold(hdr, swHeaders[0][2]):
	case strings.EqualFold(hdr, swHeaders[1][2]):
		v.sends = 1
	default:
		return nil, nil, fmt.Errorf("verify: standard-webhooks: header must be webhook-signature or svix-signature (the names the Signer sends; either is verified), not %q", clipText(hdr))
	}
	for i, s := range secrets {
		k := swKey{Secret: s}
		str := string(s.Key)
		if pk, ok := strings.CutPrefix(str, swPrefixPublicKey); ok {
			raw, err := base64.StdEncoding.DecodeString(pk)
			if err != nil || len(raw) != ed25519.PublicKeySize {
				return nil, nil, fmt.Errorf("verify: standard-webhooks: secrets[%d] (id %q): a whpk_ key must be the base64 of a 32-byte Ed25519 public key", i, s.ID)
			}
			k.pub = ed25519.PublicKey(raw)
		} else {
			raw, err := swDecodeSecret(str)
			if err != nil {
				return nil, nil, fmt.Errorf("verify: standard-webhooks: secrets[%d] (id %q): %w", i, s.ID, err)
			}
			if len(raw) < MinSecretLen && len(s.Key) >= MinSecretLen {
				// ResolveSecrets judged the encoded text; the key is what
				// it decodes to.
				warnings = append(warnings, shortSecretWarning(fmt.Sprintf("secrets[%d]", i), s.ID, s.from, "decodes to only", len(raw)))
			}
			k.mac = newMACKey(s, raw, sha256.New)
		}
		v.keys = append(v.keys, k)
	}
	return v, warnings, nil
}

// swDecodeSecret decodes a v1 secret: base64 after an optional whsec_.
func swDecodeSecret(s string) ([]byte, error) {
	if strings.HasPrefix(s, swPrefixPrivateKey) {
		return nil, fmt.Errorf("a whsk_ private key does not belong in the gateway's config; give it the whpk_ public key")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, swPrefixSecret))
	if err != nil || len(raw) == 0 {
		return nil, fmt.Errorf("a v1 secret must be whsec_ followed by base64 (or a whpk_ public key for v1a)")
	}
	return raw, nil
}

// Verify implements Verifier.
func (v *standardWebhooks) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	id, ts, sig := swFields(h)
	if id == "" || ts == "" || sig == "" {
		return "", fail("standard-webhooks", ErrMissing, "webhook-id, webhook-timestamp or webhook-signature header missing")
	}
	if err := checkTimestamp("standard-webhooks", ts, now, v.tol); err != nil {
		return "", err
	}
	var v1, v1a candidates
	entries := 0
	for rest, entry, more := sig, "", true; more; {
		entry, rest, more = strings.Cut(rest, " ")
		version, s, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		entries++
		switch version {
		case "v1":
			if v1.full() {
				return "", fail("standard-webhooks", ErrMalformed, "too many signatures")
			}
			v1.addBase64(s)
		case "v1a":
			if v1a.full() {
				return "", fail("standard-webhooks", ErrMalformed, "too many signatures")
			}
			v1a.addBase64(s)
		}
	}
	if entries == 0 {
		return "", fail("standard-webhooks", ErrMalformed, "signature header has no version,signature entry")
	}
	var msg *[]byte
	defer func() {
		if msg != nil {
			swMessages.Put(msg)
		}
	}()
	active := false
	for i := range v.keys {
		k := &v.keys[i]
		if !k.Active(now) {
			continue
		}
		active = true
		if k.mac != nil {
			if v1.n > 0 && k.mac.matches(&v1, body, id, ".", ts, ".") {
				return k.ID, nil
			}
			continue
		}
		if v1a.n == 0 {
			continue
		}
		if msg == nil {
			msg = swMessages.Get().(*[]byte)
			*msg = swMessage((*msg)[:0], id, ts, body)
		}
		ok := false
		for j := 0; j < v1a.n; j++ {
			if ed25519.Verify(k.pub, *msg, v1a.get(j)) {
				ok = true
			}
		}
		if ok {
			return k.ID, nil
		}
	}
	if !active {
		return "", fail("standard-webhooks", ErrNoActiveSecret, "no secret is active")
	}
	return "", fail("standard-webhooks", ErrMismatch, "no signature matches an active secret")
}

// swFields returns the id, timestamp and signature of the first header
// family (webhook-*, then svix-*) of which any header is present. A
// delivery carrying any webhook-* header is therefore verified on its
// webhook-* headers alone, and its svix-* headers are not signed.
func swFields(h http.Header) (id, ts, sig string) {
	for _, names := range swHeaders {
		id, ts, sig = header(h, names[0]), header(h, names[1]), header(h, names[2])
		if id != "" || ts != "" || sig != "" {
			break
		}
	}
	return id, ts, sig
}

// SignedDigest implements SignedDigester: the digest of
// "{id}.{timestamp}.{body}", read from the same header family as Verify
// reads them. The signature header (any number of v1 and v1a entries) is
// not part of it.
func (v *standardWebhooks) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	id, ts, _ := swFields(h)
	if id == "" || ts == "" {
		return [32]byte{}, false
	}
	return signedDigest(body, id, ".", ts, "."), true
}

func swMessage(dst []byte, id, ts string, body []byte) []byte {
	dst = append(dst, id...)
	dst = append(dst, '.')
	dst = append(dst, ts...)
	dst = append(dst, '.')
	return append(dst, body...)
}

// signer: signKey empty signs v1 with the first active whsec_ secret;
// otherwise signKey is "whsk_" + base64 of an Ed25519 private key (64 bytes,
// or its 32-byte seed) or a PEM "PRIVATE KEY" (PKCS #8 Ed25519), which sign
// v1a, or a "whsec_" secret, which signs v1.
func (v *standardWebhooks) signer(signKey []byte) (Signer, error) {
	s := &swSigner{v: v}
	key := strings.TrimSpace(string(signKey))
	switch {
	case key == "":
	case strings.HasPrefix(key, swPrefixPrivateKey):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(key, swPrefixPrivateKey))
		switch {
		case err != nil:
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: whsk_ must be followed by base64")
		case len(raw) == ed25519.SeedSize:
			s.priv = ed25519.NewKeyFromSeed(raw)
		case len(raw) == ed25519.PrivateKeySize:
			s.priv = ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		default:
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: whsk_ must hold a 32- or 64-byte Ed25519 private key")
		}
	case strings.HasPrefix(key, "-----BEGIN"):
		block, _ := pem.Decode([]byte(key))
		if block == nil {
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: not a PEM block")
		}
		pk, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: not a PKCS #8 private key")
		}
		priv, ok := pk.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: v1a needs an Ed25519 key")
		}
		s.priv = priv
	default:
		raw, err := swDecodeSecret(key)
		if err != nil {
			return nil, fmt.Errorf("verify: standard-webhooks: signing key: %w", err)
		}
		s.mac = newMACKey(Secret{ID: "sign-key"}, raw, sha256.New)
	}
	return s, nil
}

type swSigner struct {
	v    *standardWebhooks
	priv ed25519.PrivateKey
	mac  *macKey
}

// Sign implements Signer. It sends the webhook-* headers, or the svix-*
// ones when the config's header is svix-signature (Svix, and Clerk and
// Resend, which send through it), and removes the other family's from h,
// so that the delivery carries one family, as the provider sends it. It
// keeps the id already in h (svix-id or webhook-id, the family it sends
// first); otherwise the id is "msg_" and 24 hex digits of the body's
// SHA-256, so that signing the same body twice yields the same event id.
func (s *swSigner) Sign(h http.Header, body []byte, now time.Time) error {
	send, other := swHeaders[s.v.sends], swHeaders[1-s.v.sends]
	id := header(h, send[0])
	if id == "" {
		id = header(h, other[0])
	}
	if id == "" {
		sum := sha256.Sum256(body)
		id = "msg_" + hex.EncodeToString(sum[:12])
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	var sig string
	switch {
	case s.priv != nil:
		sig = "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, swMessage(nil, id, ts, body)))
	default:
		k := s.mac
		if k == nil {
			for i := range s.v.keys {
				if c := &s.v.keys[i]; c.mac != nil && c.Active(now) {
					k = c.mac
					break
				}
			}
		}
		if k == nil {
			return fail("standard-webhooks", ErrNoActiveSecret, "no active whsec_ secret to sign v1 with (v1a needs a whsk_ signing key)")
		}
		sig = "v1," + base64.StdEncoding.EncodeToString(k.sign(body, id, ".", ts, "."))
	}
	for k := range h {
		for _, name := range other {
			if strings.EqualFold(k, name) {
				delete(h, k)
			}
		}
	}
	h.Set(send[0], id)
	h.Set(send[1], ts)
	h.Set(send[2], sig)
	return nil
}
