// Package verify checks webhook signatures over the raw request body.
//
// Each scheme lives in its own file and implements both Verifier (used by the
// gateway on every delivery) and Signer (used by `clawgate simulate` and the
// tests), so that signing and verifying can never drift apart. New compiles a
// route's verify block once, at config load time.
//
// Schemes: hmac (generic, over a signed-content template), github, stripe,
// standard-webhooks (and Svix), shopify, slack, jwt, token, ed25519,
// ecdsa-p256 and the explicit none. Presets (presets.go) name a provider's
// settings for these schemes, so that a route may say `provider: zoom`. Every active secret is tried
// against every signature a header carries, so a provider rotating its
// secret (two signatures, or two secrets with not_before/not_after windows)
// keeps verifying; Verify returns the ID of the secret that matched. The
// schemes whose signature binds the body also implement SignedDigester, a
// digest of exactly the signed bytes that the gateway can remember to
// refuse a signed request replayed under another idempotency key.
// Comparisons are constant-time, the HMAC schemes reuse pooled keyed hashes
// and do not allocate on the hot path, and a Verify error wraps one of the
// Err* reasons with generic context only: it never contains a secret or a
// signature.
//
// The jwt scheme may also take its keys from a jwks_url, fetched and kept
// fresh in the background (jwksurl.go): its verifier is then a Starter and
// an io.Closer, and whoever installs the route closes it when the route is
// replaced or the gateway stops.
package verify

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// Config is a route's `verify` block as written in gateway.yaml.
type Config struct {
	// Scheme names the signature scheme. Empty is a config error; "none" must
	// be written out to disable verification.
	Scheme string `yaml:"scheme"`
	// Header carries the signature (hmac, ed25519, ecdsa-p256; jwt uses
	// jwt.header). For standard-webhooks it names the header family the
	// Signer (and so clawgate simulate) sends, webhook-signature (zero
	// value) or svix-signature (Svix, Clerk, Resend); the verifier reads
	// either family.
	Header string `yaml:"header"`
	// Algorithm is the HMAC hash (hmac only): sha1, sha256 (zero value), sha512.
	Algorithm string `yaml:"algorithm"`
	// AlgorithmHeader names a request header that may choose the hash of
	// each delivery (hmac only), as Twilio's
	// X-Twilio-Webhooks-Signature-Settings does ("key=ID,algorithm=NAME"):
	// its first non-empty algorithm= item, HMAC_SHA1 or HMAC_SHA256 in any
	// case, selects sha1 or sha256. The header is not signed, so it only
	// chooses among what the route accepts: Algorithm (sha1 or sha256) and
	// the stronger of the two; a delivery naming a weaker hash, or any
	// other name, is refused. Without the header, or an algorithm= item in
	// it, Algorithm applies.
	AlgorithmHeader string `yaml:"algorithm_header"`
	// Encoding of the MAC (hmac only): hex (zero value) or base64.
	Encoding string `yaml:"encoding"`
	// Prefix precedes the encoded MAC in the header (hmac only), e.g. "sha256=".
	// It is shorthand for Format "PREFIX{signature}"; set one or the other.
	// Empty (the default): no prefix.
	Prefix string `yaml:"prefix"`
	// Template is the signed content (hmac, ed25519, ecdsa-p256): literal
	// text and placeholders, such as "v0:{timestamp}:{body}" or
	// "{url}{body}" (see verify/template.go). Zero (hmac): the body alone.
	Template string `yaml:"template"`
	// Format is how the signature sits in its header (hmac, ed25519,
	// ecdsa-p256): "{signature}" (zero value), "sha256={signature}",
	// "t={timestamp},v1={signature}", ... (see verify/format.go). A list format
	// accepts several signatures, for a secret being rotated.
	Format string `yaml:"format"`
	// Timestamp is where the signed timestamp is read when Format has no
	// {timestamp}: "header:NAME" or "json:PATH". It must be part of the
	// signed content. Zero: none (no {timestamp} in Format either), and
	// nothing bounds how long a captured delivery stays acceptable.
	Timestamp string `yaml:"timestamp"`
	// TimestampFormat is how the timestamp is written: unix (seconds, the
	// zero value), unix_ms or rfc3339.
	TimestampFormat string `yaml:"timestamp_format"`
	// Signature is where the signature is read when it is not in a header
	// (hmac only): "json:PATH" (Mailgun). Header must then be empty.
	Signature string `yaml:"signature"`
	// Tolerance bounds the signed timestamp's distance from now, both
	// directions (standard-webhooks, stripe, slack, and hmac, ed25519 and
	// ecdsa-p256 with a timestamp). Zero means 5m.
	Tolerance time.Duration `yaml:"tolerance"`
	// PublicURL is the URL the provider calls, which {url} stands for: the
	// route's public_url (the config sets it; it is not a verify field).
	PublicURL string `yaml:"-"`
	// Method is the method the provider calls with, which {method} stands
	// for: the config sets it from the route's match.methods when it lists
	// exactly one (it is not a verify field). Zero: POST.
	Method string `yaml:"-"`
	// Secrets are tried in order; every active one may match.
	Secrets []SecretConfig `yaml:"secrets"`
	// JWT configures the jwt scheme.
	JWT JWTConfig `yaml:"jwt"`
}

// SecretConfig is one signing secret. Exactly one of Secret, SecretEnv and
// SecretFile is set. New warns about a secret shorter than MinSecretLen
// bytes and about a SecretFile its group or others may read.
type SecretConfig struct {
	// ID labels the secret in webhook_signature_verified_total{secret_id}
	// and the access line's secret_id; unique in the route. Empty: the
	// secret's position in the list ("0", "1", ...).
	ID string `yaml:"id"`
	// Secret is an inline value (demos only; logged as a warning). Empty:
	// secret_env or secret_file holds the secret.
	Secret string `yaml:"secret"`
	// SecretEnv names an environment variable holding the secret; it must
	// be set and not empty. Empty: secret or secret_file holds the secret.
	SecretEnv string `yaml:"secret_env"`
	// SecretFile is a file holding the secret (trailing newline trimmed),
	// relative to the config file's directory. Empty: secret or secret_env
	// holds the secret.
	SecretFile string `yaml:"secret_file"`
	// NotBefore: the secret is not tried before this instant. Zero: always.
	NotBefore time.Time `yaml:"not_before"`
	// NotAfter: the secret is not tried after this instant. Zero: never expires.
	NotAfter time.Time `yaml:"not_after"`
}

// JWTConfig is the `verify.jwt` block.
type JWTConfig struct {
	// Header carries "Bearer <token>" or the bare token. Zero: Authorization.
	Header string `yaml:"header"`
	// Algorithms is the allow-list. "none" is always refused, and HMAC
	// (HS*) may not be mixed with public-key algorithms. Zero: RS256, ES256.
	Algorithms []string `yaml:"algorithms"`
	// Keys verify tokens; a token's kid selects one when present.
	Keys []JWTKeyConfig `yaml:"keys"`
	// JWKSFile is a JSON Web Key Set file, relative to the config's directory.
	// Its keys (kty RSA, EC, OKP) join Keys, each identified by its kid.
	// Empty: no key set file.
	JWKSFile string `yaml:"jwks_file"`
	// JWKSURL is a JSON Web Key Set fetched over https (plain http only for
	// a loopback host: localhost, 127.0.0.0/8, ::1). Its keys join Keys and
	// the jwks_file's: fetched when the verifier starts, again every
	// JWKSRefresh, and at once when a token names a kid no key has (at most
	// once per JWKSMinRefresh). A failed fetch keeps the keys of the last
	// good one. New does not fetch; see (*jwtVerifier).Start.
	JWKSURL string `yaml:"jwks_url"`
	// JWKSRefresh is the longest time between two fetches of JWKSURL; a
	// shorter Cache-Control max-age is honoured down to JWKSMinRefresh.
	// Zero: 1h.
	JWKSRefresh time.Duration `yaml:"jwks_refresh"`
	// JWKSMinRefresh is the shortest time between two fetches of JWKSURL:
	// the bound on fetches triggered by unknown kids and the floor of
	// max-age. At least 1s and at most JWKSRefresh. Zero: 1m.
	JWKSMinRefresh time.Duration `yaml:"jwks_min_refresh"`
	// Issuer, when set, must equal the iss claim. Empty: iss is not checked.
	Issuer string `yaml:"issuer"`
	// Audience, when set, must be in the aud claim. Empty: aud is not
	// checked.
	Audience string `yaml:"audience"`
	// Leeway applied to exp, nbf and iat. Zero: none.
	Leeway time.Duration `yaml:"leeway"`
	// MaxAge rejects tokens whose iat is older; iat is then required. Zero:
	// not checked, and exp is required instead (the gateway warns: a token
	// is then accepted until its exp).
	MaxAge time.Duration `yaml:"max_age"`
	// BodyHashClaim names a claim holding the lowercase hex SHA-256 of the
	// raw body (Plaid: request_body_sha256), which binds the token to the
	// body (the verifier is then a SignedDigester). Empty: the body is not
	// bound, and the gateway warns.
	BodyHashClaim string `yaml:"body_hash_claim"`
}

// JWTKeyConfig is one JWT verification key: a PEM public key file, or an
// HMAC secret (secret, secret_env, secret_file) for HS* algorithms.
type JWTKeyConfig struct {
	// ID is matched against a token's kid and labels the key in
	// webhook_signature_verified_total{secret_id}. A key without ID gets its
	// position and is tried for tokens whose kid names no other key.
	ID string `yaml:"id"`
	// PEMFile holds a public key ("PUBLIC KEY": RSA, ECDSA, Ed25519; "RSA
	// PUBLIC KEY"; or a "CERTIFICATE"), relative to the config's directory.
	// Empty: the key is an HMAC secret (secret, secret_env or secret_file).
	PEMFile string `yaml:"pem_file"`
	// Secret is an inline HMAC secret (demos only; logged as a warning).
	// Empty: not inline.
	Secret string `yaml:"secret"`
	// SecretEnv names an environment variable holding an HMAC secret.
	// Empty: none.
	SecretEnv string `yaml:"secret_env"`
	// SecretFile holds an HMAC secret (trailing newline trimmed), relative
	// to the config's directory. Empty: none.
	SecretFile string `yaml:"secret_file"`
	// NotBefore: the key is not tried before this instant. Zero: always.
	NotBefore time.Time `yaml:"not_before"`
	// NotAfter: the key is not tried after this instant. Zero: never expires.
	NotAfter time.Time `yaml:"not_after"`
}

// Env resolves what a Config refers to outside itself.
type Env struct {
	// Getenv looks up secret_env variables. Nil: os.Getenv.
	Getenv func(string) string
	// Dir is the directory relative file paths are resolved against.
	Dir string
	// Now is the load time, used to judge which secrets are active for
	// warnings. Zero: time.Now().
	Now time.Time
}

// Verifier checks one delivery. It must not retain or modify h or body.
type Verifier interface {
	// Verify returns the ID of the secret that matched, or an error wrapping
	// one of the Err* reasons below.
	Verify(h http.Header, body []byte, now time.Time) (secretID string, err error)
}

// SignedDigester is implemented by verifiers whose signature binds the
// signed bytes: hmac, github, shopify, stripe, slack, standard-webhooks (v1
// and v1a), ed25519, ecdsa-p256, and jwt when body_hash_claim is set (not
// token, which signs nothing). SignedDigest returns the SHA-256 of exactly
// the bytes the signature covers: the body for hmac, github, shopify and
// jwt; "{t}.{body}" for stripe; "v0:{timestamp}:{body}" for slack;
// "{id}.{timestamp}.{body}" for standard-webhooks; the expanded template
// for hmac with a template, ed25519 and ecdsa-p256 (which need not contain
// the body: Mailgun signs a timestamp and a token, Twilio the URL and the
// sorted form fields). Every copy of
// one signed request has the same digest, whatever else differs (extra
// signatures in a multi-signature header, the case of hex digits, headers
// the signature does not cover), and any change to a signed byte changes
// it. ok is false when h lacks what the signature covers (a timestamp or an
// id).
//
// It is meant to be called after Verify succeeded on the same h and body;
// on any other input it returns some digest or ok false, and never panics.
// It does not allocate.
type SignedDigester interface {
	SignedDigest(h http.Header, body []byte) (digest [32]byte, ok bool)
}

// Starter is implemented by verifiers that keep something up to date in
// the background: the jwt verifier (every jwt route's verifier has the
// method; it does work only with jwks_url). Start begins that work, logging
// to log (nil: slog.Default()); calling it is optional, since the first
// Verify starts it too, and it does nothing after Close. Such verifiers also
// implement io.Closer: Close stops the work and waits for it to end. A
// verifier keeps verifying after Close, with the keys it had.
type Starter interface {
	Start(log *slog.Logger)
}

// FieldError is an error of New about one field of the verify block.
// Field is its path below verify, such as "jwt.jwks_url", so that the
// config can point at the field's line; Err says what is wrong with it.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "verify: " + e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Signer adds to h the headers that make body verify under the scheme, with
// the first active secret. Used by `clawgate simulate` and tests.
type Signer interface {
	Sign(h http.Header, body []byte, now time.Time) error
}

// Failure reasons; each is a label value of webhook_signature_failures_total.
var (
	ErrMissing        = errors.New("missing")
	ErrMalformed      = errors.New("malformed")
	ErrMismatch       = errors.New("mismatch")
	ErrExpired        = errors.New("expired")
	ErrFuture         = errors.New("future")
	ErrNoActiveSecret = errors.New("no_active_secret")
)

// Reason maps a Verify error to its metric label ("mismatch" for anything
// unrecognised, so that a new failure never passes as success).
func Reason(err error) string {
	for _, e := range []error{ErrMissing, ErrMalformed, ErrMismatch, ErrExpired, ErrFuture, ErrNoActiveSecret} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ErrMismatch.Error()
}
