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
		return ret(newJWT(c, env))
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
// (inline secret, expired secret) are returned for the config's log.
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

// SignedHeaders lists the request headers the scheme's signature covers
// (e.g. webhook-id for standard-webhooks); nil when only the body is signed.
func SignedHeaders(scheme string) []string {
	switch scheme {
	case "standard-webhooks":
		return []string{"webhook-id", "svix-id", "webhook-timestamp", "svix-timestamp"}
	case "slack":
		return []string{"X-Slack-Request-Timestamp"}
	}
	return nil
}

// none is the explicit "no verification" scheme.
type none struct{}

// Verify implements Verifier: every delivery passes, with secret ID "".
func (none) Verify(http.Header, []byte, time.Time) (string, error) { return "", nil }

func (none) signer([]byte) (Signer, error) { return none{}, nil }

// Sign implements Signer: nothing to add.
func (none) Sign(http.Header, []byte, time.Time) error { return nil }
