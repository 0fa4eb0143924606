package verify

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwtVerifier verifies a JSON Web Token carried in a header ("Bearer <t>" or
// the bare token), with golang-jwt/v5. Only the allow-listed algorithms are
// accepted, and the key a token is checked with must be of the family its
// alg names (an HMAC token is never checked against public key bytes).
//
// Key selection: a token whose header has a kid is checked with the active
// key of that id; when no key has that id and the route has a jwks_url, the
// set is fetched again first (at most once per jwks_min_refresh, see
// jwksRemote); when still no key has it, with the active keys configured
// without an id (keys the operator did not name accept any kid), else it
// fails as a mismatch. A token without kid is checked with every active key.
// A key from a JWK Set that names its alg verifies only that algorithm.
//
// Claims: exp and nbf (with leeway) are always checked; iat may not lie in
// the future. exp is required unless max_age is set, in which case iat is
// required and may be at most max_age (plus leeway) old, so that a token
// never stays valid forever. issuer and audience, when configured, must
// match; body_hash_claim, when configured, must hold the lowercase hex
// SHA-256 of the raw body.
type jwtVerifier struct {
	header   string // canonical
	bearer   bool   // the header is Authorization: sign "Bearer <t>"
	algs     []string
	keys     []*jwtKey // from keys and jwks_file
	fixed    *keySet   // keys, when there is no jwks_url
	remote   *jwksRemote
	opts     []jwt.ParserOption
	cfg      JWTConfig
	hmacOnly bool
}

// keySet is the keys a token is checked against, replaced whole when a
// jwks_url fetch succeeds.
type keySet struct {
	keys      []*jwtKey
	anonymous bool // some key has no explicit id
}

func newKeySet(keys []*jwtKey) *keySet {
	s := &keySet{keys: keys}
	for _, k := range keys {
		if !k.explicit {
			s.anonymous = true
		}
	}
	return s
}

// anyActive reports whether some key of s is active at now.
func (s *keySet) anyActive(now time.Time) bool {
	for _, k := range s.keys {
		if k.active(now) {
			return true
		}
	}
	return false
}

// current returns the keys tokens are checked against now.
func (v *jwtVerifier) current() *keySet {
	if v.remote != nil {
		return v.remote.set.Load()
	}
	return v.fixed
}

// Start implements Starter: with a jwks_url, it fetches the key set at once
// and keeps it fresh in the background until Close, logging to log (nil:
// slog.Default()). Without a jwks_url it does nothing. Optional: the first
// Verify starts it too. New never fetches, so loading a config (clawgate
// check) never does.
func (v *jwtVerifier) Start(log *slog.Logger) {
	if v.remote != nil {
		v.remote.start(log)
	}
}

// Close implements io.Closer: it stops the background refresh of the
// jwks_url keys and waits for it to end (a fetch in flight is cancelled).
// Verify keeps working after Close with the keys it had, and no longer
// fetches. Safe to call more than once and concurrently with Verify;
// always nil.
func (v *jwtVerifier) Close() error {
	if v.remote != nil {
		v.remote.close()
	}
	return nil
}

// jwtBodyBound is the jwt verifier of a route with body_hash_claim: the
// token binds the body, so it is a SignedDigester too.
type jwtBodyBound struct{ *jwtVerifier }

// SignedDigest implements SignedDigester: the digest of the body, whose
// hash the token signs in body_hash_claim. The token itself is not part of
// it, so a provider re-signing the same body (a retry with a fresh token)
// gives the same digest.
func (v jwtBodyBound) SignedDigest(_ http.Header, body []byte) ([32]byte, bool) {
	return signedDigest(body), true
}

// jwtKey is one verification key: []byte (HS*), *rsa.PublicKey,
// *ecdsa.PublicKey or ed25519.PublicKey.
type jwtKey struct {
	id        string
	explicit  bool // id given in the config or as a JWKS kid
	key       any
	alg       string // a JWK's alg: the only algorithm it verifies; "": any that fits
	notBefore time.Time
	notAfter  time.Time
}

func (k *jwtKey) active(now time.Time) bool { return activeAt(k.notBefore, k.notAfter, now) }

// fits reports whether k may verify a token signed with alg.
func (k *jwtKey) fits(alg string) bool {
	return (k.alg == "" || k.alg == alg) && keyFits(k.key, alg)
}

const (
	// maxTokenSize bounds what is handed to the JWT parser.
	maxTokenSize = 16 << 10
	// minRSABits is the smallest RSA key accepted.
	minRSABits = 2048
	// jwtSignTTL is the lifetime of tokens the Signer issues.
	jwtSignTTL = 5 * time.Minute
)

// jwtFamilies maps each algorithm clawgate accepts to its key family.
var jwtFamilies = map[string]string{
	"HS256": "hmac", "HS384": "hmac", "HS512": "hmac",
	"RS256": "rsa", "RS384": "rsa", "RS512": "rsa",
	"PS256": "rsa", "PS384": "rsa", "PS512": "rsa",
	"ES256": "ecdsa", "ES384": "ecdsa", "ES512": "ecdsa",
	"EdDSA": "ed25519",
}

// defaultJWTAlgorithms is the allow-list when none is configured.
var defaultJWTAlgorithms = []string{"RS256", "ES256"}

func validJWTAlgorithms() string {
	return "HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA"
}

// keyFits reports whether key may verify a token signed with alg.
func keyFits(key any, alg string) bool {
	switch k := key.(type) {
	case []byte:
		return jwtFamilies[alg] == "hmac"
	case *rsa.PublicKey:
		return jwtFamilies[alg] == "rsa"
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

func keyKind(key any) string {
	switch k := key.(type) {
	case []byte:
		return "an HMAC secret"
	case *rsa.PublicKey:
		return "an RSA key"
	case *ecdsa.PublicKey:
		return "an ECDSA " + k.Curve.Params().Name + " key"
	case ed25519.PublicKey:
		return "an Ed25519 key"
	}
	return "an unsupported key"
}

func newJWT(c Config, env Env) (*jwtVerifier, []string, error) {
	jc := c.JWT
	if len(c.Secrets) > 0 {
		return nil, nil, errors.New("verify: jwt: put HMAC secrets under jwt.keys (secret_env, secret_file), not verify.secrets")
	}
	algs := jc.Algorithms
	if len(algs) == 0 {
		algs = defaultJWTAlgorithms
	}
	families := map[string]bool{}
	for _, a := range algs {
		if strings.EqualFold(strings.TrimSpace(a), "none") {
			return nil, nil, errors.New(`verify: jwt: algorithms must not contain "none": unsigned tokens are never accepted`)
		}
		f, ok := jwtFamilies[a]
		if !ok {
			return nil, nil, fmt.Errorf("verify: jwt: unknown algorithm %q (valid: %s)", a, validJWTAlgorithms())
		}
		families[f] = true
	}
	if families["hmac"] && len(families) > 1 {
		return nil, nil, errors.New("verify: jwt: algorithms mix HMAC (HS*) with public-key algorithms; use one kind per route (algorithm confusion)")
	}
	if jc.Leeway < 0 || jc.MaxAge < 0 {
		return nil, nil, errors.New("verify: jwt: leeway and max_age must not be negative")
	}
	remote, err := newJWKSRemote(jc, algs, families["hmac"])
	if err != nil {
		return nil, nil, err
	}
	v := &jwtVerifier{
		algs:     slices.Clone(algs),
		cfg:      jc,
		hmacOnly: families["hmac"],
	}
	hdr := strings.TrimSpace(jc.Header)
	if hdr == "" {
		hdr = "Authorization"
	}
	v.header = textproto.CanonicalMIMEHeaderKey(hdr)
	v.bearer = v.header == "Authorization"

	var warnings []string
	ids := map[string]string{}
	addKey := func(k *jwtKey, where string) error {
		if k.explicit {
			if prev, dup := ids[k.id]; dup {
				return fmt.Errorf("verify: jwt: %s: id %q is already used by %s", where, k.id, prev)
			}
			ids[k.id] = where
		}
		v.keys = append(v.keys, k)
		return nil
	}
	for i, kc := range jc.Keys {
		where := fmt.Sprintf("jwt.keys[%d]", i)
		k, w, err := loadJWTKey(where, strconv.Itoa(i), kc, env)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		if !slices.ContainsFunc(v.algs, func(a string) bool { return keyFits(k.key, a) }) {
			return nil, nil, fmt.Errorf("verify: jwt: %s is %s, which fits none of the algorithms %v", where, keyKind(k.key), v.algs)
		}
		if err := addKey(k, where); err != nil {
			return nil, nil, err
		}
	}
	if jc.JWKSFile != "" {
		keys, w, err := loadJWKS(env.path(jc.JWKSFile), v.algs)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
		for i, k := range keys {
			if !k.explicit {
				k.id = "jwks-" + strconv.Itoa(i)
			}
			if err := addKey(k, "jwks_file key "+strconv.Quote(k.id)); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(v.keys) == 0 && remote == nil {
		return nil, nil, errors.New("verify: jwt: no key: set jwt.keys (pem_file, secret_env, secret_file), jwt.jwks_file or jwt.jwks_url")
	}
	if len(v.keys) > 0 {
		w, err := checkActive("jwt key", len(v.keys), func(i int) (string, time.Time, time.Time) {
			return v.keys[i].id, v.keys[i].notBefore, v.keys[i].notAfter
		}, env.now())
		switch {
		case err != nil && remote == nil:
			return nil, nil, err
		case err != nil:
			warnings = append(warnings, "no jwt.keys or jwt.jwks_file key is active: only the jwks_url keys are tried")
		}
		warnings = append(warnings, w...)
	}
	v.fixed = newKeySet(v.keys)
	if remote != nil {
		remote.static = v.keys
		remote.set.Store(v.fixed)
		v.remote = remote
	}

	if jc.BodyHashClaim == "" {
		warnings = append(warnings, "jwt.body_hash_claim is not set: no part of the body is authenticated, so anyone holding a valid token can send any body with it")
	}
	if jc.MaxAge == 0 {
		warnings = append(warnings, "jwt.max_age is not set: a token is accepted until its exp, however far away; set max_age to bound how long a captured token stays usable")
	}

	v.opts = []jwt.ParserOption{jwt.WithValidMethods(v.algs), jwt.WithLeeway(jc.Leeway), jwt.WithIssuedAt()}
	if jc.MaxAge == 0 {
		v.opts = append(v.opts, jwt.WithExpirationRequired())
	}
	if jc.Issuer != "" {
		v.opts = append(v.opts, jwt.WithIssuer(jc.Issuer))
	}
	if jc.Audience != "" {
		v.opts = append(v.opts, jwt.WithAudience(jc.Audience))
	}
	return v, warnings, nil
}

// loadJWTKey loads one configured key: a PEM public key file or an HMAC
// secret. A key without id gets autoID (its position). An HMAC secret gets
// the warnings of a signing secret (inline, short, readable file).
func loadJWTKey(where, autoID string, kc JWTKeyConfig, env Env) (k *jwtKey, warnings []string, err error) {
	k = &jwtKey{id: kc.ID, explicit: kc.ID != "", notBefore: kc.NotBefore, notAfter: kc.NotAfter}
	if !k.explicit {
		k.id = autoID
	}
	if !kc.NotBefore.IsZero() && !kc.NotAfter.IsZero() && !kc.NotBefore.Before(kc.NotAfter) {
		return nil, nil, fmt.Errorf("verify: %s: not_before must be earlier than not_after", where)
	}
	if kc.PEMFile != "" {
		if kc.Secret != "" || kc.SecretEnv != "" || kc.SecretFile != "" {
			return nil, nil, fmt.Errorf("verify: %s: set only one of pem_file, secret, secret_env and secret_file", where)
		}
		path := env.path(kc.PEMFile)
		data, err := readKeyFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: %s: pem_file: cannot read %s: %w", where, path, unwrapPathErr(err))
		}
		if k.key, err = parsePublicKeyPEM(data); err != nil {
			return nil, nil, fmt.Errorf("verify: %s: pem_file %s: %w", where, path, err)
		}
		return k, nil, nil
	}
	if kc.Secret == "" && kc.SecretEnv == "" && kc.SecretFile == "" {
		return nil, nil, fmt.Errorf("verify: %s: no key source: set pem_file, secret_env, secret_file or secret", where)
	}
	v, err := resolveValue(where, kc.Secret, kc.SecretEnv, kc.SecretFile, env)
	if err != nil {
		return nil, nil, err
	}
	k.key = v.key
	return k, v.warnings(where, k.id), nil
}

// parsePublicKeyPEM reads the first PEM block that holds a public key:
// "PUBLIC KEY" (PKIX: RSA, ECDSA, Ed25519), "RSA PUBLIC KEY" (PKCS #1) or
// "CERTIFICATE" (its subject key, as Google publishes them).
func parsePublicKeyPEM(data []byte) (any, error) {
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM public key, RSA public key or certificate block found")
		}
		data = rest
		var key any
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE KEY":
			return nil, errors.New("holds a private key; the gateway needs only the public key (openssl pkey -pubout)")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot parse %s block: %w", block.Type, err)
		}
		return checkPublicKey(key)
	}
}

// checkPublicKey accepts the key types the jwt scheme supports.
func checkPublicKey(key any) (any, error) {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key has %d bits; at least %d are required", k.N.BitLen(), minRSABits)
		}
		return k, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return k, nil
		}
		return nil, errors.New("ECDSA key is not on P-256, P-384 or P-521")
	case ed25519.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("unsupported public key type %T", key)
}

// Verify implements Verifier.
func (v *jwtVerifier) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	tok := header(h, v.header)
	if len(tok) >= 6 && strings.EqualFold(tok[:6], "bearer") && (len(tok) == 6 || tok[6] == ' ') {
		tok = strings.TrimSpace(tok[6:])
	}
	if tok == "" {
		return "", fail("jwt", ErrMissing, "token header missing")
	}
	if len(tok) > maxTokenSize {
		return "", fail("jwt", ErrMalformed, "token too large")
	}
	set := v.current()
	if v.remote != nil {
		v.remote.start(nil)
		if !set.anyActive(now) {
			v.remote.refresh()
			set = v.current()
		}
	}
	if !set.anyActive(now) {
		return "", fail("jwt", ErrNoActiveSecret, "no key is active")
	}

	var (
		matched *jwtKey
		keyErr  error // the reason selectKey gave, if any
	)
	opts := append(v.opts[:len(v.opts):len(v.opts)], jwt.WithTimeFunc(func() time.Time { return now }))
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(opts...).ParseWithClaims(tok, claims, func(t *jwt.Token) (any, error) {
		matched, keyErr = v.selectKey(set, t, now)
		if keyErr != nil {
			return nil, keyErr
		}
		return matched.key, nil
	})
	if keyErr != nil {
		return "", keyErr
	}
	if err != nil {
		return "", jwtReason(err)
	}
	if matched == nil {
		return "", fail("jwt", ErrMismatch, "no key selected")
	}
	if v.cfg.MaxAge > 0 {
		iat, err := claims.GetIssuedAt()
		if err != nil || iat == nil {
			return "", fail("jwt", ErrMalformed, "iat claim missing (required by max_age)")
		}
		if now.Sub(iat.Time) > v.cfg.MaxAge+v.cfg.Leeway {
			return "", fail("jwt", ErrExpired, "iat older than max_age")
		}
	}
	if v.cfg.BodyHashClaim != "" {
		got, ok := claims[v.cfg.BodyHashClaim].(string)
		if !ok {
			return "", fail("jwt", ErrMalformed, "body hash claim missing")
		}
		sum := sha256.Sum256(body)
		var want [2 * sha256.Size]byte
		hex.Encode(want[:], sum[:])
		if subtle.ConstantTimeCompare([]byte(got), want[:]) != 1 {
			return "", fail("jwt", ErrMismatch, "body hash claim does not match the body")
		}
	}
	return matched.id, nil
}

// selectKey picks the key for t among set (see jwtVerifier). With several
// candidates it checks the signature itself so that it knows which key
// matched; the parser then checks it again with that key.
func (v *jwtVerifier) selectKey(set *keySet, t *jwt.Token, now time.Time) (*jwtKey, error) {
	alg := t.Method.Alg()
	kid, hasKid := "", false
	if raw, ok := t.Header["kid"]; ok {
		s, ok := raw.(string)
		if !ok {
			return nil, fail("jwt", ErrMalformed, "kid is not a string")
		}
		kid, hasKid = s, true
	}
	var cands []*jwtKey
	if hasKid {
		cands = set.withKid(cands, kid, now)
		if len(cands) == 0 && v.remote != nil {
			v.remote.refresh()
			set = v.current()
			cands = set.withKid(cands, kid, now)
		}
		if len(cands) == 0 && set.anonymous {
			for _, k := range set.keys {
				if !k.explicit && k.active(now) {
					cands = append(cands, k)
				}
			}
		}
		if len(cands) == 0 {
			return nil, fail("jwt", ErrMismatch, "no active key has the token's kid")
		}
	} else {
		for _, k := range set.keys {
			if k.active(now) {
				cands = append(cands, k)
			}
		}
	}
	cands = slices.DeleteFunc(cands, func(k *jwtKey) bool { return !k.fits(alg) })
	switch len(cands) {
	case 0:
		return nil, fail("jwt", ErrMismatch, "no active key fits the token's algorithm")
	case 1:
		return cands[0], nil
	}
	i := strings.LastIndexByte(t.Raw, '.')
	if i < 0 {
		return nil, fail("jwt", ErrMalformed, "token has no signature")
	}
	for _, k := range cands {
		if t.Method.Verify(t.Raw[:i], t.Signature, k.key) == nil {
			return k, nil
		}
	}
	return nil, fail("jwt", ErrMismatch, "signature matches no active key")
}

// withKid appends to cands the active keys of s whose explicit id is kid.
func (s *keySet) withKid(cands []*jwtKey, kid string, now time.Time) []*jwtKey {
	for _, k := range s.keys {
		if k.explicit && k.id == kid && k.active(now) {
			cands = append(cands, k)
		}
	}
	return cands
}

// jwtReason maps a golang-jwt error to a failure reason; the library's text
// is dropped (it is generic, but clawgate keeps one vocabulary).
func jwtReason(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenUnverifiable):
		return fail("jwt", ErrMalformed, "token cannot be parsed")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return fail("jwt", ErrMismatch, "signature invalid or algorithm not allowed")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer), errors.Is(err, jwt.ErrTokenInvalidAudience):
		return fail("jwt", ErrMismatch, "issuer or audience does not match")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrInvalidType):
		return fail("jwt", ErrMalformed, "required claim missing or of the wrong type")
	case errors.Is(err, jwt.ErrTokenExpired):
		return fail("jwt", ErrExpired, "token expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return fail("jwt", ErrFuture, "token not valid yet")
	}
	return fail("jwt", ErrMismatch, "token rejected")
}

// signer: for HS* algorithms signKey is the raw HMAC secret, or empty to
// sign with the first active key; for public-key algorithms it is a PEM
// private key ("PRIVATE KEY" PKCS #8, "RSA PRIVATE KEY" PKCS #1 or
// "EC PRIVATE KEY" SEC 1). The token carries the first allowed algorithm
// the key fits and the kid of the configured key with the same public key
// (else of the first active key), when that key has an id.
func (v *jwtVerifier) signer(signKey []byte) (Signer, error) {
	s := &jwtSigner{v: v}
	if v.hmacOnly {
		if len(signKey) > 0 {
			s.key = slices.Clone(signKey)
		}
		return s, nil
	}
	if len(signKey) == 0 {
		return nil, errors.New("verify: jwt: signing with a public-key algorithm needs a PEM private key")
	}
	priv, err := parsePrivateKeyPEM(signKey)
	if err != nil {
		return nil, fmt.Errorf("verify: jwt: signing key: %w", err)
	}
	pub := priv.Public()
	i := slices.IndexFunc(v.algs, func(a string) bool { return keyFits(pub, a) })
	if i < 0 {
		return nil, fmt.Errorf("verify: jwt: signing key is %s, which fits none of the algorithms %v", keyKind(pub), v.algs)
	}
	s.method = jwt.GetSigningMethod(v.algs[i])
	s.key = priv
	for _, k := range v.keys {
		if eq, ok := k.key.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(pub) {
			s.kid = k
			break
		}
	}
	return s, nil
}

func parsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key block found")
		}
		data = rest
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot parse %s block: %w", block.Type, err)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}

type jwtSigner struct {
	v      *jwtVerifier
	method jwt.SigningMethod // nil: HS*, first allowed algorithm
	key    any               // nil: first active configured key (HS*)
	kid    *jwtKey           // configured key matching a private key
}

// Sign implements Signer: a token with iat, exp (+5m), iss and aud when
// configured, and the body hash claim when configured.
func (s *jwtSigner) Sign(h http.Header, body []byte, now time.Time) error {
	method, key, kid := s.method, s.key, s.kid
	if method == nil {
		method = jwt.GetSigningMethod(s.v.algs[0])
	}
	if key == nil || kid == nil {
		var first *jwtKey
		for _, k := range s.v.keys {
			if k.active(now) && (key != nil || keyFits(k.key, method.Alg())) {
				first = k
				break
			}
		}
		switch {
		case first == nil && key == nil:
			return fail("jwt", ErrNoActiveSecret, "no key is active")
		case first == nil:
			// Only jwks_url keys, which the signer does not fetch: no kid.
		case key == nil:
			key, kid = first.key, first
		default:
			kid = first
		}
	}
	claims := jwt.MapClaims{
		"iat": now.Unix(),
		"exp": now.Add(jwtSignTTL).Unix(),
	}
	if s.v.cfg.Issuer != "" {
		claims["iss"] = s.v.cfg.Issuer
	}
	if s.v.cfg.Audience != "" {
		claims["aud"] = s.v.cfg.Audience
	}
	if s.v.cfg.BodyHashClaim != "" {
		sum := sha256.Sum256(body)
		claims[s.v.cfg.BodyHashClaim] = hex.EncodeToString(sum[:])
	}
	t := jwt.NewWithClaims(method, claims)
	if kid != nil && kid.explicit {
		t.Header["kid"] = kid.id
	}
	signed, err := t.SignedString(key)
	if err != nil {
		return fmt.Errorf("verify: jwt: cannot sign: %w", err)
	}
	if s.v.bearer {
		signed = "Bearer " + signed
	}
	h.Set(s.v.header, signed)
	return nil
}
