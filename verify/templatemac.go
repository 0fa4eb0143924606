package verify

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// templateMAC is the hmac scheme written with a template, a format, a
// timestamp or a signature field: an HMAC (sha1, sha256, sha512) of the
// signed content, keyed with each secret's UTF-8 bytes, hex or base64, read
// from a header in its format or from a JSON field of the body. With a
// timestamp, it must lie within the tolerance, in both directions. It
// allocates nothing per delivery.
type templateMAC struct {
	sc   *signedContent
	keys []*macKey
	// algHeader (canonical) is the algorithm_header, "" when there is none.
	// alg is then the configured hash, sha1 or sha256, and up holds the
	// keys with sha256 when alg is sha1 (nil otherwise).
	algHeader string
	alg       string
	up        []*macKey
}

// The hashes an algorithm_header may name, as Twilio names them.
const (
	settingsSHA1   = "HMAC_SHA1"
	settingsSHA256 = "HMAC_SHA256"
)

// usesTemplate reports whether an hmac block goes beyond the body MAC that
// bodyMAC verifies.
func usesTemplate(c Config) bool {
	return c.Template != "" || c.Format != "" || c.Timestamp != "" || c.Signature != "" || c.TimestampFormat != "" ||
		c.AlgorithmHeader != ""
}

// buildHMAC compiles the hmac scheme: the plain body MAC as before, or the
// templated one.
func buildHMAC(c Config, env Env) (scheme, []string, error) {
	if !usesTemplate(c) {
		return ret(newHMAC(c, env))
	}
	return ret(newTemplateMAC(c, env))
}

func newTemplateMAC(c Config, env Env) (*templateMAC, []string, error) {
	alg := c.Algorithm
	if alg == "" {
		alg = "sha256"
	}
	newHash, ok := hmacAlgorithms[alg]
	if !ok {
		return nil, nil, fmt.Errorf("verify: hmac: unknown algorithm %q (valid: sha1, sha256, sha512)", clipText(c.Algorithm))
	}
	sc, err := compileContent("hmac", c, "{body}", true)
	if err != nil {
		return nil, nil, err
	}
	secrets, warnings, err := ResolveSecrets(c.Secrets, env)
	if err != nil {
		return nil, nil, err
	}
	v := &templateMAC{sc: sc}
	if hdr := strings.TrimSpace(c.AlgorithmHeader); hdr != "" {
		switch {
		case !validHeaderName(hdr):
			return nil, nil, fmt.Errorf("verify: hmac: algorithm_header %q is not a header name", clipText(hdr))
		case alg != "sha1" && alg != "sha256":
			return nil, nil, fmt.Errorf("verify: hmac: algorithm_header chooses between sha1 and sha256, so algorithm must be one of them, not %q", clipText(alg))
		}
		v.algHeader, v.alg = textproto.CanonicalMIMEHeaderKey(hdr), alg
		if v.algHeader == sc.sigHeader {
			return nil, nil, fmt.Errorf("verify: hmac: algorithm_header must not be the signature's header")
		}
	}
	for _, s := range secrets {
		v.keys = append(v.keys, newMACKey(s, s.Key, newHash))
		if v.algHeader != "" && alg == "sha1" {
			v.up = append(v.up, newMACKey(s, s.Key, sha256.New))
		}
	}
	return v, warnings, nil
}

// keysFor returns the keys that verify a delivery with headers h: those of
// the configured hash, or of the one its algorithm_header names, which may
// be stronger but not weaker.
func (v *templateMAC) keysFor(h http.Header) ([]*macKey, error) {
	if v.algHeader == "" {
		return v.keys, nil
	}
	name := settingsAlgorithm(header(h, v.algHeader))
	switch {
	case name == "":
		return v.keys, nil
	case strings.EqualFold(name, settingsSHA256):
		if v.alg == "sha256" {
			return v.keys, nil
		}
		return v.up, nil
	case strings.EqualFold(name, settingsSHA1):
		if v.alg == "sha1" {
			return v.keys, nil
		}
		return nil, fail("hmac", ErrMismatch, "the algorithm header names a hash weaker than the route's algorithm")
	}
	return nil, fail("hmac", ErrMalformed, "the algorithm header names an algorithm other than "+settingsSHA1+" and "+settingsSHA256)
}

// settingsAlgorithm returns the value of the first algorithm= item of a
// comma-separated list of key=value items that has one, spaces around key
// and value trimmed; "" when none has. This is how Twilio's SDK
// (getSignatureAlgorithm) reads X-Twilio-Webhooks-Signature-Settings.
func settingsAlgorithm(hv string) string {
	for rest, more := hv, true; more; {
		var item string
		item, rest, more = strings.Cut(rest, ",")
		k, val, ok := strings.Cut(item, "=")
		if !ok || strings.Trim(k, " \t") != "algorithm" {
			continue
		}
		if val = strings.Trim(val, " \t"); val != "" {
			return val
		}
	}
	return ""
}

// Verify implements Verifier.
func (v *templateMAC) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	var p sigParse
	var in tplInput
	if err := v.sc.read(h, body, now, &p, &in); err != nil {
		return "", err
	}
	var c candidates
	if bad := v.sc.decodeSignatures(&p, &in, &c); c.n == 0 {
		return "", v.sc.noCandidates(&p, bad)
	}
	keys, err := v.keysFor(h)
	if err != nil {
		return "", err
	}
	active := false
	for _, k := range keys {
		if !k.Active(now) {
			continue
		}
		active = true
		st, mac := k.sumContent(v.sc, &in)
		ok := c.match(mac)
		k.release(st)
		if ok {
			return k.ID, nil
		}
	}
	if !active {
		return "", fail("hmac", ErrNoActiveSecret, "no secret is active")
	}
	return "", fail("hmac", ErrMismatch, "no signature matches an active secret")
}

// sumContent returns the MAC of in's signed content, in st.sum. The caller
// must release st.
func (k *macKey) sumContent(sc *signedContent, in *tplInput) (*macState, []byte) {
	st := k.pool.Get().(*macState)
	st.h.Reset()
	st.buf = keepBuf(sc.tpl.writeTo(st.h, st.buf, in))
	return st, st.h.Sum(st.sum[:0])
}

// SignedDigest implements SignedDigester: the digest of the signed content.
func (v *templateMAC) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	return v.sc.signedDigest(h, body)
}

func (v *templateMAC) signer(signKey []byte) (Signer, error) {
	return &templateMACSigner{v: v, override: overrideKey(v.keys, signKey)}, nil
}

type templateMACSigner struct {
	v        *templateMAC
	override *macKey
}

// Sign implements Signer: it adds the signed headers h lacks, the
// timestamp and the signature. It fails when the signature goes in the
// body; SignBody signs those.
func (s *templateMACSigner) Sign(h http.Header, body []byte, now time.Time) error {
	if s.v.sc.sigJSON != nil {
		return fmt.Errorf("verify: hmac: the signature goes in the body (signature: json:...); sign with SignBody")
	}
	_, err := s.SignBody(h, body, now)
	return err
}

// SignBody implements BodySigner.
func (s *templateMACSigner) SignBody(h http.Header, body []byte, now time.Time) ([]byte, error) {
	k := s.override
	if k == nil {
		var err error
		if k, err = firstActive("hmac", s.v.keys, now); err != nil {
			return nil, err
		}
	}
	in, ts, err := s.v.sc.prepareSign(h, body, now)
	if err != nil {
		return nil, err
	}
	if s.v.algHeader != "" {
		// Twilio announces a SharedKey's HMAC-SHA256 (and sends nothing
		// with the Auth Token's HMAC-SHA1).
		if s.v.alg == "sha256" {
			h.Set(s.v.algHeader, "algorithm="+settingsSHA256)
		} else {
			h.Del(s.v.algHeader)
		}
	}
	st, mac := k.sumContent(s.v.sc, in)
	sig := append([]byte(nil), mac...)
	k.release(st)
	return s.v.sc.setSignature(h, body, sig, ts)
}
