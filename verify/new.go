package verify

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// scheme is what each scheme's constructor returns.
type scheme interface {
	Verifier
	signer(signKey []byte) (Signer, error)
}

// Scheme names, the values of verify.scheme.
const (
	SchemeHMAC             = "hmac"
	SchemeGitHub           = "github"
	SchemeStripe           = "stripe"
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeShopify          = "shopify"
	SchemeSlack            = "slack"
	SchemeJWT              = "jwt"
	SchemeToken            = "token"
	SchemeEd25519          = "ed25519"
	SchemeECDSAP256        = "ecdsa-p256"
	SchemeNone             = "none"
)

// schemeInfo is everything the gateway knows about one scheme. Adding a
// scheme is adding its entry to schemes (and its file with its verifier
// and signer): config validation, the replay guard, the replay window
// check and simulate all read this table.
type schemeInfo struct {
	build func(Config, Env) (scheme, []string, error)
	// signedHeaders: see SignedHeaders.
	signedHeaders []string
	// signsBody: see SignsBody; nil means always.
	signsBody func(Config) bool
	// replayWindow: see ReplayWindow; nil means none.
	replayWindow func(Config) (time.Duration, string, string)
	// templateHeaders: the headers the config's template names are
	// signed too (see SignedHeadersOf).
	templateHeaders bool
}

// schemes is the one registry of signature schemes, in the order error
// messages list them.
var schemes = []struct {
	name string
	schemeInfo
}{
	{SchemeHMAC, schemeInfo{build: buildHMAC, replayWindow: templateWindow, signsBody: templateSignsBody("{body}"),
		templateHeaders: true}},
	{SchemeGitHub, schemeInfo{build: wrap(newGitHub)}},
	{SchemeStripe, schemeInfo{build: wrap(newStripe), replayWindow: toleranceWindow}},
	{SchemeStandardWebhooks, schemeInfo{build: wrap(newStandardWebhooks), replayWindow: toleranceWindow,
		signedHeaders: []string{"webhook-id", "webhook-timestamp"}}},
	{SchemeShopify, schemeInfo{build: wrap(newShopify)}},
	{SchemeSlack, schemeInfo{build: wrap(newSlack), replayWindow: toleranceWindow,
		signedHeaders: []string{"X-Slack-Request-Timestamp"}}},
	{SchemeJWT, schemeInfo{build: buildJWT, replayWindow: jwtWindow,
		signsBody: func(c Config) bool { return c.JWT.BodyHashClaim != "" }}},
	{SchemeToken, schemeInfo{build: wrap(newToken), signsBody: func(Config) bool { return false }}},
	{SchemeEd25519, schemeInfo{build: wrap(newTemplateEd25519), replayWindow: templateWindow, signsBody: templateSignsBody(""),
		templateHeaders: true}},
	{SchemeECDSAP256, schemeInfo{build: wrap(newTemplateECDSA), replayWindow: templateWindow, signsBody: templateSignsBody(""),
		templateHeaders: true}},
	{SchemeNone, schemeInfo{
		build:     func(Config, Env) (scheme, []string, error) { return none{}, nil, nil },
		signsBody: func(Config) bool { return false }}},
}

// lookup returns the registry entry of name.
func lookup(name string) (schemeInfo, bool) {
	for _, s := range schemes {
		if s.name == name {
			return s.schemeInfo, true
		}
	}
	return schemeInfo{}, false
}

// SchemeNames lists the valid values of verify.scheme.
func SchemeNames() []string {
	out := make([]string, len(schemes))
	for i, s := range schemes {
		out[i] = s.name
	}
	return out
}

// Checks reports whether scheme verifies anything: every scheme but none.
func Checks(scheme string) bool { return scheme != SchemeNone }

func build(c Config, env Env) (scheme, []string, error) {
	if c.Scheme == "" {
		return nil, nil, fmt.Errorf(`verify: scheme is required (write "none" to disable verification)`)
	}
	info, ok := lookup(c.Scheme)
	if !ok {
		return nil, nil, fmt.Errorf("verify: unknown scheme %q (valid: %s)", c.Scheme, strings.Join(SchemeNames(), ", "))
	}
	return info.build(c, env)
}

// wrap adapts a scheme's constructor to the registry.
func wrap[S scheme](f func(Config, Env) (S, []string, error)) func(Config, Env) (scheme, []string, error) {
	return func(c Config, env Env) (scheme, []string, error) { return ret(f(c, env)) }
}

// buildJWT returns the jwt verifier; with body_hash_claim it also digests
// the body for the replay guard.
func buildJWT(c Config, env Env) (scheme, []string, error) {
	v, warnings, err := newJWT(c, env)
	if err != nil {
		return nil, nil, err
	}
	if v.cfg.BodyHashClaim != "" {
		return jwtBodyBound{v}, warnings, nil
	}
	return v, warnings, nil
}

// toleranceWindow is the replay window of the timestamped schemes.
func toleranceWindow(c Config) (time.Duration, string, string) {
	w := c.Tolerance
	if w == 0 {
		w = defaultTolerance
	}
	return w, "tolerance", "the signature tolerance"
}

// jwtWindow is how long a jwt stays acceptable beyond its own exp.
func jwtWindow(c Config) (time.Duration, string, string) {
	j := c.JWT
	switch {
	case j.MaxAge > 0:
		return j.MaxAge + j.Leeway, "jwt.max_age", "jwt.max_age + jwt.leeway"
	case j.Leeway > 0:
		return j.Leeway, "jwt.leeway", "jwt.leeway"
	}
	return 0, "", ""
}

// ReplayWindow is how long a captured delivery that verified under c stays
// acceptable (0 when the scheme puts no bound on it), with the field that
// sets it and a phrase naming it: a key must be remembered at least that
// long, or the capture could be replayed once its key is forgotten.
func ReplayWindow(c Config) (window time.Duration, field, what string) {
	info, ok := lookup(c.Scheme)
	if !ok || info.replayWindow == nil {
		return 0, "", ""
	}
	return info.replayWindow(c)
}

// ret converts a constructor's concrete result, keeping a nil interface on
// error.
func ret[S scheme](s S, warnings []string, err error) (scheme, []string, error) {
	if err != nil {
		return nil, nil, err
	}
	return s, warnings, nil
}

// New compiles c: it resolves secrets (env, file, inline), loads keys, and
// rejects an empty or unknown scheme, a block with no active secret, an unset
// secret variable, and (jwt) "none" or a key of the wrong family. A
// jwt.jwks_url is checked but not fetched: the verifier fetches it once
// started (see Starter), so loading a config never touches the network; an
// error about a jwks_url setting is a *FieldError naming it. Warnings
// are returned for the config's log: an inline, short, expired or
// group-readable secret; (jwt) no body_hash_claim, no max_age, JWKS keys
// skipped. Each names the secret's field, id and variable or file, never
// its value.
func New(c Config, env Env) (v Verifier, warnings []string, err error) {
	s, warnings, err := build(c, env)
	if err != nil {
		return nil, nil, err
	}
	return s, warnings, nil
}

// NewSigner returns a Signer for c. For jwt, signKey is a PEM private key
// (or nil to sign HS* with the first active secret).
//
// signKey per scheme; nil always means "the first active configured secret
// at signing time", where the scheme allows it:
//   - hmac, github, stripe, shopify, slack: the secret itself, as it would be
//     written in the config (stripe: the whole whsec_ string).
//   - standard-webhooks: "whsk_" + base64 of an Ed25519 private key (64
//     bytes, or the 32-byte seed) or a PEM PKCS #8 Ed25519 private key, which
//     sign v1a; or a "whsec_" secret, which signs v1. nil signs v1 with the
//     first active whsec_ secret.
//   - jwt with HS*: the raw HMAC secret. jwt with RS*, PS*, ES* or EdDSA: a
//     PEM private key ("PRIVATE KEY", "RSA PRIVATE KEY" or "EC PRIVATE KEY"),
//     required.
//   - none: ignored; the Signer adds nothing.
func NewSigner(c Config, env Env, signKey []byte) (Signer, error) {
	s, _, err := build(c, env)
	if err != nil {
		return nil, err
	}
	return s.signer(signKey)
}

// SignedHeaders lists the request headers whose value the scheme's
// signature binds on every delivery that verifies: when such a header is
// present and not empty, Verify refuses the delivery unless the value it
// signed is exactly that header's value (surrounding spaces and tabs
// trimmed). nil when no header is bound this way.
//
// For standard-webhooks these are webhook-id and webhook-timestamp only. A
// delivery with any webhook-* header is verified on the webhook-* headers
// alone, so svix-id and svix-timestamp may carry anything beside a valid
// webhook-* signature: they are not bound. (A key of "header:webhook-id"
// then "header:svix-id" is still always the signed id: svix-id is only read
// when webhook-id is absent, and then the svix-* headers are the ones
// verified.)
func SignedHeaders(scheme string) []string {
	info, _ := lookup(scheme)
	return info.signedHeaders
}

// SignsBody reports whether a delivery that verifies under c has the raw
// body it was signed with: every scheme but none and token; jwt only when
// jwt.body_hash_claim is set; hmac with a template, ed25519 and ecdsa-p256
// only when the template has {body}.
func SignsBody(c Config) bool {
	info, ok := lookup(c.Scheme)
	if !ok {
		return false
	}
	return info.signsBody == nil || info.signsBody(c)
}

// none is the explicit "no verification" scheme.
type none struct{}

// Verify implements Verifier: every delivery passes, with secret ID "".
func (none) Verify(http.Header, []byte, time.Time) (string, error) { return "", nil }

func (none) signer([]byte) (Signer, error) { return none{}, nil }

// Sign implements Signer: nothing to add.
func (none) Sign(http.Header, []byte, time.Time) error { return nil }

// templateOf returns the parsed template of c (tplDefault when c has none),
// or nil when it does not parse.
func templateOf(c Config, tplDefault string) *template {
	src := c.Template
	if src == "" {
		src = tplDefault
	}
	if src == "" {
		return nil
	}
	t, err := parseTemplate(src)
	if err != nil {
		return nil
	}
	return t
}

// templateSignsBody is SignsBody for the template schemes: the template
// includes {body}. ({sorted_form} signs the form's fields but not the raw
// body's bytes: fields can be reordered without breaking the signature.)
func templateSignsBody(tplDefault string) func(Config) bool {
	return func(c Config) bool {
		t := templateOf(c, tplDefault)
		return t != nil && t.hasKind(partBody)
	}
}

// templateWindow is the replay window of a template scheme: the tolerance
// when it reads a timestamp, none otherwise.
func templateWindow(c Config) (time.Duration, string, string) {
	f, err := parseFormat(c.Format)
	if c.Timestamp == "" && (err != nil || !f.hasTimestamp()) {
		return 0, "", ""
	}
	return toleranceWindow(c)
}

// SignedHeadersOf is SignedHeaders for one verify block: the headers its
// scheme always signs, and for hmac, ed25519 and ecdsa-p256 the headers
// its template names ({header:NAME}), canonicalised. Verify refuses a
// delivery unless each of them is present, not empty, and exactly the
// value signed (surrounding spaces and tabs trimmed).
func SignedHeadersOf(c Config) []string {
	info, ok := lookup(c.Scheme)
	if !ok {
		return nil
	}
	out := append([]string(nil), info.signedHeaders...)
	if info.templateHeaders {
		if t := templateOf(c, ""); t != nil {
			out = append(out, t.headers()...)
		}
	}
	return out
}

// UsesURL reports whether c signs the URL the provider calls ({url}), which
// the route's public_url must then give.
func UsesURL(c Config) bool { return usesPart(c, partURL) }

// UsesMethod reports whether c signs the request method ({method}).
func UsesMethod(c Config) bool { return usesPart(c, partMethod) }

func usesPart(c Config, kind int) bool {
	info, ok := lookup(c.Scheme)
	if !ok || !info.templateHeaders {
		return false
	}
	t := templateOf(c, "")
	return t != nil && t.hasKind(kind)
}
