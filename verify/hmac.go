package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// bodyMAC verifies an HMAC of the raw body carried in one header: the
// generic hmac scheme, and github and shopify, which are fixed instances.
type bodyMAC struct {
	name   string
	header string // canonical form; the one the Signer sets
	// alts (canonical) are read before header, the first present one
	// carrying the signature (shopify: Shopify-Hmac-Sha256).
	alts   []string
	prefix string
	base64 bool
	keys   []*macKey
}

var hmacAlgorithms = map[string]func() hash.Hash{
	"sha1":   sha1.New,
	"sha256": sha256.New,
	"sha512": sha512.New,
}

// newHMAC compiles the generic scheme: header (required), algorithm
// (sha1, sha256 default, sha512), encoding (hex default, base64), prefix.
func newHMAC(c Config, env Env) (*bodyMAC, []string, error) {
	if strings.TrimSpace(c.Header) == "" {
		return nil, nil, fmt.Errorf("verify: hmac: header is required (the request header carrying the signature)")
	}
	alg := c.Algorithm
	if alg == "" {
		alg = "sha256"
	}
	newHash, ok := hmacAlgorithms[alg]
	if !ok {
		return nil, nil, fmt.Errorf("verify: hmac: unknown algorithm %q (valid: sha1, sha256, sha512)", c.Algorithm)
	}
	var b64 bool
	switch c.Encoding {
	case "", "hex":
	case "base64":
		b64 = true
	default:
		return nil, nil, fmt.Errorf("verify: hmac: unknown encoding %q (valid: hex, base64)", c.Encoding)
	}
	return newBodyMAC("hmac", c.Header, c.Prefix, b64, newHash, c, env)
}

func newBodyMAC(name, hdr, prefix string, b64 bool, newHash func() hash.Hash, c Config, env Env) (*bodyMAC, []string, error) {
	secrets, warnings, err := ResolveSecrets(c.Secrets, env)
	if err != nil {
		return nil, nil, err
	}
	v := &bodyMAC{
		name:   name,
		header: textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(hdr)),
		prefix: prefix,
		base64: b64,
	}
	for _, s := range secrets {
		v.keys = append(v.keys, newMACKey(s, s.Key, newHash))
	}
	return v, warnings, nil
}

// Verify implements Verifier.
func (v *bodyMAC) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	sig := ""
	for _, name := range v.alts {
		if sig = header(h, name); sig != "" {
			break
		}
	}
	if sig == "" {
		sig = header(h, v.header)
	}
	if sig == "" {
		return "", fail(v.name, ErrMissing, "signature header missing")
	}
	if !strings.HasPrefix(sig, v.prefix) {
		return "", fail(v.name, ErrMalformed, "signature prefix missing")
	}
	sig = sig[len(v.prefix):]
	var c candidates
	var ok bool
	if v.base64 {
		ok = c.addBase64(sig)
	} else {
		ok = c.addHex(sig)
	}
	if !ok {
		return "", fail(v.name, ErrMalformed, "signature is not valid "+v.encoding())
	}
	return verifyMACs(v.name, v.keys, now, &c, body)
}

// SignedDigest implements SignedDigester: the signature covers the body
// alone, so the digest is the body's SHA-256.
func (v *bodyMAC) SignedDigest(_ http.Header, body []byte) ([32]byte, bool) {
	return signedDigest(body), true
}

func (v *bodyMAC) encoding() string {
	if v.base64 {
		return "base64"
	}
	return "hex"
}

func (v *bodyMAC) signer(signKey []byte) (Signer, error) {
	return &bodyMACSigner{v: v, override: overrideKey(v.keys, signKey)}, nil
}

type bodyMACSigner struct {
	v        *bodyMAC
	override *macKey
}

// Sign implements Signer.
func (s *bodyMACSigner) Sign(h http.Header, body []byte, now time.Time) error {
	k := s.override
	if k == nil {
		var err error
		if k, err = firstActive(s.v.name, s.v.keys, now); err != nil {
			return err
		}
	}
	mac := k.sign(body)
	var enc string
	if s.v.base64 {
		enc = base64.StdEncoding.EncodeToString(mac)
	} else {
		enc = hex.EncodeToString(mac)
	}
	h.Set(s.v.header, s.v.prefix+enc)
	return nil
}

// overrideKey turns a signer's explicit key into a macKey with the same
// hash as the configured ones; nil when signKey is empty.
func overrideKey(keys []*macKey, signKey []byte) *macKey {
	if len(signKey) == 0 || len(keys) == 0 {
		return nil
	}
	return newMACKey(Secret{ID: "sign-key", Key: signKey}, signKey, keys[0].newHash)
}
