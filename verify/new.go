package verify

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// schemeNames lists the valid values of verify.scheme.
var schemeNames = []string{"hmac", "github", "stripe", "standard-webhooks", "shopify", "slack", "jwt", "none"}

// scheme is what each scheme's constructor returns.
type scheme interface {
	Verifier
	signer(signKey []byte) (Signer, error)
}

func build(c Config, env Env) (scheme, []string, error) {
	switch c.Scheme {
	case "":
		return nil, nil, fmt.Errorf(`verify: scheme is required (write "none" to disable verification)`)
	case "none":
		return none{}, nil, nil
	case "hmac":
		return ret(newHMAC(c, env))
	case "github":
		return ret(newGitHub(c, env))
	case "stripe":
		return ret(newStripe(c, env))
	case "standard-webhooks":
		return ret(newStandardWebhooks(c, env))
	case "shopify":
		return ret(newShopify(c, env))
	case "slack":
		return ret(newSlack(c, env))
	case "jwt":
		v, warnings, err := newJWT(c, env)
		if err != nil {
			return nil, nil, err
		}
		if v.cfg.BodyHashClaim != "" {
			return jwtBodyBound{v}, warnings, nil
		}
		return v, warnings, nil
	}
	return nil, nil, fmt.Errorf("verify: unknown scheme %q (valid: %s)", c.Scheme, strings.Join(schemeNames, ", "))
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
// secret variable, and (jwt) "none" or a key of the wrong family. Warnings
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
	switch scheme {
	case "standard-webhooks":
		return []string{"webhook-id", "webhook-timestamp"}
	case "slack":
		return []string{"X-Slack-Request-Timestamp"}
	}
	return nil
}

// SignsBody reports whether a delivery that verifies under c has the raw
// body it was signed with: every scheme but none, and jwt only when
// jwt.body_hash_claim is set.
func SignsBody(c Config) bool {
	switch c.Scheme {
	case "none", "":
		return false
	case "jwt":
		return c.JWT.BodyHashClaim != ""
	}
	return true
}

// none is the explicit "no verification" scheme.
type none struct{}

// Verify implements Verifier: every delivery passes, with secret ID "".
func (none) Verify(http.Header, []byte, time.Time) (string, error) { return "", nil }

func (none) signer([]byte) (Signer, error) { return none{}, nil }

// Sign implements Signer: nothing to add.
func (none) Sign(http.Header, []byte, time.Time) error { return nil }
