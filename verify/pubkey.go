package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The public-key template schemes: ed25519 (Discord) and ecdsa-p256
// (SendGrid's event webhook). The provider signs the template's content
// with its private key; the route lists the provider's public keys in
// secrets (secret, secret_env or secret_file, with id, not_before and
// not_after as for any secret, so that a key can be rotated).
//
//	ed25519:    64 hex digits, or the base64 of the 32-byte key, or a PEM
//	            "PUBLIC KEY"; the signature is the 64-byte Ed25519
//	            signature of the content (hex by default, or base64)
//	ecdsa-p256: the base64 of the DER SubjectPublicKeyInfo (as SendGrid
//	            shows it), or a PEM "PUBLIC KEY"; the signature is the
//	            ASN.1 DER ECDSA signature of the content's SHA-256, base64
//
// Both hold no secret, so an inline key draws no warning.

// resolvePublicKeys resolves secrets that hold public keys: as
// ResolveSecrets, without the warnings meant for secrets (inline, short,
// readable by others).
func resolvePublicKeys(cs []SecretConfig, env Env) ([]Secret, []string, error) {
	return resolveSecrets(cs, env, "key")
}

// decodeKeyText decodes a key written as hex (when hexLen matches), base64
// (standard or URL alphabet, padded or not) or PEM; der reports PEM.
func decodeKeyText(s string, hexLen int) (raw []byte, pemType string, ok bool) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		block, _ := pem.Decode([]byte(s))
		if block == nil {
			return nil, "", false
		}
		return block.Bytes, block.Type, true
	}
	if hexLen > 0 && len(s) == hexLen {
		if b, err := hex.DecodeString(s); err == nil {
			return b, "", true
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, "", true
		}
	}
	return nil, "", false
}

// ----- ed25519 -----

type templateEd25519 struct {
	sc   *signedContent
	keys []edKey
}

// pubKey is a configured secret with its public key parsed.
type pubKey[K any] struct {
	Secret
	pub K
}

type edKey = pubKey[ed25519.PublicKey]

// compilePublic compiles a public-key scheme's signed content and parses
// each of its secrets' public keys with parse; errors name the secret.
func compilePublic[K any](scheme string, c Config, env Env, parse func(string) (K, error)) (*signedContent, []pubKey[K], []string, error) {
	sc, err := compileContent(scheme, c, "", false)
	if err != nil {
		return nil, nil, nil, err
	}
	secrets, warnings, err := resolvePublicKeys(c.Secrets, env)
	if err != nil {
		return nil, nil, nil, err
	}
	keys := make([]pubKey[K], 0, len(secrets))
	for i, s := range secrets {
		pub, err := parse(string(s.Key))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("verify: %s: secrets[%d] (id %q): %w", scheme, i, s.ID, err)
		}
		keys = append(keys, pubKey[K]{Secret: s, pub: pub})
	}
	return sc, keys, warnings, nil
}

func newTemplateEd25519(c Config, env Env) (*templateEd25519, []string, error) {
	sc, keys, warnings, err := compilePublic(SchemeEd25519, c, env, parseEd25519Public)
	if err != nil {
		return nil, nil, err
	}
	return &templateEd25519{sc: sc, keys: keys}, warnings, nil
}

func parseEd25519Public(s string) (ed25519.PublicKey, error) {
	raw, typ, ok := decodeKeyText(s, 2*ed25519.PublicKeySize)
	switch {
	case !ok:
		return nil, fmt.Errorf("not an Ed25519 public key (64 hex digits, base64 of 32 bytes, or a PEM PUBLIC KEY)")
	case typ != "":
		k, err := x509.ParsePKIXPublicKey(raw)
		pub, isEd := k.(ed25519.PublicKey)
		if err != nil || !isEd {
			return nil, fmt.Errorf("the PEM block is not an Ed25519 PUBLIC KEY")
		}
		return pub, nil
	case len(raw) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("an Ed25519 public key is 32 bytes, this one %d", len(raw))
	}
	return ed25519.PublicKey(raw), nil
}

// Verify implements Verifier.
func (v *templateEd25519) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	var p sigParse
	var in tplInput
	if err := v.sc.read(h, body, now, &p, &in); err != nil {
		return "", err
	}
	var c candidates
	if bad := v.sc.decodeSignatures(&p, &in, &c); c.n == 0 {
		return "", v.sc.noCandidates(&p, bad)
	}
	var w *appendWriter
	defer func() {
		if w != nil {
			releaseContent(w)
		}
	}()
	active := false
	for i := range v.keys {
		k := &v.keys[i]
		if !k.Active(now) {
			continue
		}
		active = true
		if w == nil {
			w = v.sc.content(&in)
		}
		ok := false
		for j := 0; j < c.n; j++ {
			if ed25519.Verify(k.pub, w.b, c.get(j)) {
				ok = true
			}
		}
		if ok {
			return k.ID, nil
		}
	}
	if !active {
		return "", fail(SchemeEd25519, ErrNoActiveSecret, "no key is active")
	}
	return "", fail(SchemeEd25519, ErrMismatch, "no signature matches an active key")
}

// SignedDigest implements SignedDigester: the digest of the signed content.
func (v *templateEd25519) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	return v.sc.signedDigest(h, body)
}

// signer: signKey is required: a PEM "PRIVATE KEY" (PKCS #8 Ed25519), or
// the hex or base64 of the 32-byte seed or the 64-byte private key.
func (v *templateEd25519) signer(signKey []byte) (Signer, error) {
	if len(strings.TrimSpace(string(signKey))) == 0 {
		return nil, fmt.Errorf("verify: ed25519: signing needs the private key (the provider's is not the gateway's to hold): give a test Ed25519 private key whose public key the route lists")
	}
	raw, typ, ok := decodeKeyText(string(signKey), 2*ed25519.SeedSize)
	if !ok {
		return nil, fmt.Errorf("verify: ed25519: signing key: not PEM, hex or base64")
	}
	if typ != "" {
		k, err := x509.ParsePKCS8PrivateKey(raw)
		priv, isEd := k.(ed25519.PrivateKey)
		if err != nil || !isEd {
			return nil, fmt.Errorf("verify: ed25519: signing key: the PEM block is not a PKCS #8 Ed25519 private key")
		}
		return &edSigner{v: v, priv: priv}, nil
	}
	switch len(raw) {
	case ed25519.SeedSize:
		return &edSigner{v: v, priv: ed25519.NewKeyFromSeed(raw)}, nil
	case ed25519.PrivateKeySize:
		return &edSigner{v: v, priv: ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])}, nil
	}
	return nil, fmt.Errorf("verify: ed25519: signing key: want a 32-byte seed or a 64-byte private key, got %d bytes", len(raw))
}

type edSigner struct {
	v    *templateEd25519
	priv ed25519.PrivateKey
}

// Sign implements Signer.
func (s *edSigner) Sign(h http.Header, body []byte, now time.Time) error {
	in, ts, err := s.v.sc.prepareSign(h, body, now)
	if err != nil {
		return err
	}
	w := s.v.sc.content(in)
	sig := ed25519.Sign(s.priv, w.b)
	releaseContent(w)
	_, err = s.v.sc.setSignature(h, body, sig, ts)
	return err
}

// ----- ecdsa-p256 -----

type templateECDSA struct {
	sc   *signedContent
	keys []ecKey
}

type ecKey = pubKey[*ecdsa.PublicKey]

func newTemplateECDSA(c Config, env Env) (*templateECDSA, []string, error) {
	sc, keys, warnings, err := compilePublic(SchemeECDSAP256, c, env, parseP256Public)
	if err != nil {
		return nil, nil, err
	}
	return &templateECDSA{sc: sc, keys: keys}, warnings, nil
}

func parseP256Public(s string) (*ecdsa.PublicKey, error) {
	raw, _, ok := decodeKeyText(s, 0)
	if !ok {
		return nil, fmt.Errorf("not an ECDSA public key (base64 of the DER key, or a PEM PUBLIC KEY)")
	}
	k, err := x509.ParsePKIXPublicKey(raw)
	pub, isEC := k.(*ecdsa.PublicKey)
	if err != nil || !isEC || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("not an ECDSA P-256 public key")
	}
	return pub, nil
}

// maxDERSignature bounds an ASN.1 ECDSA P-256 signature (72 bytes at most).
const maxDERSignature = 80

// Verify implements Verifier.
func (v *templateECDSA) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	var p sigParse
	var in tplInput
	if err := v.sc.read(h, body, now, &p, &in); err != nil {
		return "", err
	}
	var sigs [maxCandidates][maxDERSignature]byte
	var lens [maxCandidates]int
	n := 0
	for i := 0; i < p.n; i++ {
		if m, ok := decodeInto(sigs[n][:], p.vals[i], v.sc.base64); ok {
			lens[n] = m
			n++
		}
	}
	if n == 0 {
		return "", v.sc.noCandidates(&p, p.n > 0)
	}
	st := digestStates.Get().(*digestState)
	st.h.Reset()
	st.buf = keepBuf(v.sc.tpl.writeTo(st.h, st.buf, &in))
	st.h.Sum(st.sum[:0])
	digest := st.sum
	digestStates.Put(st)
	active := false
	for i := range v.keys {
		k := &v.keys[i]
		if !k.Active(now) {
			continue
		}
		active = true
		ok := false
		for j := 0; j < n; j++ {
			if ecdsa.VerifyASN1(k.pub, digest[:], sigs[j][:lens[j]]) {
				ok = true
			}
		}
		if ok {
			return k.ID, nil
		}
	}
	if !active {
		return "", fail(SchemeECDSAP256, ErrNoActiveSecret, "no key is active")
	}
	return "", fail(SchemeECDSAP256, ErrMismatch, "no signature matches an active key")
}

// decodeInto decodes s (hex, or standard base64) into dst.
func decodeInto(dst []byte, s string, b64 bool) (int, bool) {
	if b64 {
		if base64.StdEncoding.DecodedLen(len(s)) > len(dst) || len(s) == 0 {
			return 0, false
		}
		var src [(maxDERSignature + 2) / 3 * 4]byte
		n := copy(src[:], s)
		m, err := base64.StdEncoding.Decode(dst, src[:n])
		return m, err == nil && m > 0
	}
	if len(s) == 0 || len(s)%2 != 0 || len(s)/2 > len(dst) {
		return 0, false
	}
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return 0, false
		}
		dst[i/2] = hi<<4 | lo
	}
	return len(s) / 2, true
}

// SignedDigest implements SignedDigester: the digest of the signed content.
func (v *templateECDSA) SignedDigest(h http.Header, body []byte) ([32]byte, bool) {
	return v.sc.signedDigest(h, body)
}

// signer: signKey is required: a PEM "PRIVATE KEY" (PKCS #8) or "EC
// PRIVATE KEY" on P-256.
func (v *templateECDSA) signer(signKey []byte) (Signer, error) {
	block, _ := pem.Decode(signKey)
	if block == nil {
		return nil, fmt.Errorf("verify: ecdsa-p256: signing needs the private key (the provider's is not the gateway's to hold): give a test P-256 private key (PEM) whose public key the route lists")
	}
	var k any
	var err error
	if block.Type == "EC PRIVATE KEY" {
		k, err = x509.ParseECPrivateKey(block.Bytes)
	} else {
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	priv, ok := k.(*ecdsa.PrivateKey)
	if err != nil || !ok || priv.Curve != elliptic.P256() {
		return nil, fmt.Errorf("verify: ecdsa-p256: signing key: not a P-256 private key")
	}
	return &ecSigner{v: v, priv: priv}, nil
}

type ecSigner struct {
	v    *templateECDSA
	priv *ecdsa.PrivateKey
}

// Sign implements Signer.
func (s *ecSigner) Sign(h http.Header, body []byte, now time.Time) error {
	in, ts, err := s.v.sc.prepareSign(h, body, now)
	if err != nil {
		return err
	}
	w := s.v.sc.content(in)
	digest := sha256.Sum256(w.b)
	releaseContent(w)
	sig, err := ecdsa.SignASN1(rand.Reader, s.priv, digest[:])
	if err != nil {
		return err
	}
	_, err = s.v.sc.setSignature(h, body, sig, ts)
	return err
}
