package config

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/verify"
)

// testEnv is the environment the tests load configs with. Its values must
// never appear in an error message.
var testEnv = map[string]string{
	"ORDERS_SECRET":     "orders-secret-value-0123456789",
	"ORDERS_SECRET_OLD": "orders-old-secret-value-0123456789",
	"ADMIN_TOKEN":       "admin-token-value-0123456789",
	"REDIS_PASSWORD":    "redis-password-value-0123456789",
	"ALERT_URL":         "https://hooks.example.com/services/T0/B0/alert-credential-0123456789",
	"BAD_ALERT_URL":     "ftp://alert:bad-alert-credential-0123456789@example.com/x",
	"SVIX_SECRET":       "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"RELATIVE_URL":      "/relative-alert-credential-0123456789",
	"PD_ROUTING_KEY":    "pagerduty-routing-key-0123456789",
	"KAFKA_PASSWORD":    "kafka-password-value-0123456789",
}

func getenv(name string) string { return testEnv[name] }

// errFakeVerify and errFakeKey are wrapped by the fakes' errors.
var (
	errFakeVerify = errors.New("fake verify error")
	errFakeKey    = errors.New("fake key error")
)

type fakeVerifier struct{ scheme string }

func (fakeVerifier) Verify(http.Header, []byte, time.Time) (string, error) { return "", nil }

// fakeDigestVerifier is a fakeVerifier that is also a
// verify.SignedDigester, as the real schemes that bind the body are.
type fakeDigestVerifier struct{ fakeVerifier }

func (fakeDigestVerifier) SignedDigest(http.Header, []byte) ([32]byte, bool) { return [32]byte{}, true }

// fakeNew stands in for verify.New: it knows the schemes, requires a
// secret (a key for jwt) whose variable is set, and warns about inline
// secrets. The schemes that bind the body (jwt only with body_hash_claim)
// return a SignedDigester.
func fakeNew(c verify.Config, env verify.Env) (verify.Verifier, []string, error) {
	switch c.Scheme {
	case "":
		return nil, nil, fmt.Errorf("verify: scheme is required: %w", errFakeVerify)
	case "none":
		return fakeVerifier{"none"}, nil, nil
	case "hmac", "github", "stripe", "standard-webhooks", "shopify", "slack":
		if len(c.Secrets) == 0 {
			return nil, nil, fmt.Errorf("verify: no secret: %w", errFakeVerify)
		}
	case "jwt":
		if c.JWT.JWKSURL != "" || c.JWT.JWKSRefresh != 0 || c.JWT.JWKSMinRefresh != 0 {
			// The jwks_url settings are checked by the real verify.New,
			// which fetches nothing.
			return verify.New(c, env)
		}
		if len(c.JWT.Keys) == 0 {
			return nil, nil, fmt.Errorf("verify: jwt: no key: %w", errFakeVerify)
		}
	default:
		return nil, nil, fmt.Errorf("verify: unknown scheme %q: %w", c.Scheme, errFakeVerify)
	}
	var warnings []string
	for i, s := range c.Secrets {
		switch {
		case s.Secret != "":
			warnings = append(warnings, fmt.Sprintf("secrets[%d] is inline", i))
		case s.SecretEnv != "" && env.Getenv(s.SecretEnv) == "":
			return nil, nil, fmt.Errorf("verify: secrets[%d]: %s is unset or empty: %w", i, s.SecretEnv, errFakeVerify)
		}
	}
	if c.Scheme != "jwt" || c.JWT.BodyHashClaim != "" {
		return fakeDigestVerifier{fakeVerifier{c.Scheme}}, warnings, nil
	}
	return fakeVerifier{c.Scheme}, warnings, nil
}

// fakeParseKey stands in for idkey.ParseKey.
func fakeParseKey(sources []string) (*idkey.KeySpec, error) {
	k := &idkey.KeySpec{}
	for _, s := range sources {
		kind, name, _ := strings.Cut(s, ":")
		switch kind {
		case "header":
			name = http.CanonicalHeaderKey(name)
		case "json", "form", "query":
		case "template":
			parts, err := fakeTemplate(name)
			if err != nil {
				return nil, fmt.Errorf("dedupe: %w: %w", err, errFakeKey)
			}
			k.Sources = append(k.Sources, idkey.Source{Kind: kind, Name: name, Parts: parts})
			continue
		case "body":
			if name != "sha256" {
				return nil, fmt.Errorf("dedupe: unknown key source %q: %w", s, errFakeKey)
			}
		default:
			return nil, fmt.Errorf("dedupe: unknown key source %q: %w", s, errFakeKey)
		}
		k.Sources = append(k.Sources, idkey.Source{Kind: kind, Name: name})
	}
	return k, nil
}

// fakeTemplate splits a template such as "{json:type}:{header:X-Id}" into
// its placeholders and literal parts.
func fakeTemplate(text string) ([]idkey.Source, error) {
	var parts []idkey.Source
	for text != "" {
		open := strings.IndexByte(text, '{')
		if open < 0 {
			parts = append(parts, idkey.Source{Kind: idkey.KindLiteral, Name: text})
			break
		}
		if open > 0 {
			parts = append(parts, idkey.Source{Kind: idkey.KindLiteral, Name: text[:open]})
		}
		end := strings.IndexByte(text, '}')
		if end < open {
			return nil, fmt.Errorf("unclosed placeholder in template %q", text)
		}
		kind, name, _ := strings.Cut(text[open+1:end], ":")
		if kind == "header" {
			name = http.CanonicalHeaderKey(name)
		}
		parts = append(parts, idkey.Source{Kind: kind, Name: name})
		text = text[end+1:]
	}
	return parts, nil
}

func fakeSignedHeaders(scheme string) []string {
	switch scheme {
	case "standard-webhooks":
		return []string{"webhook-id", "webhook-timestamp"}
	case "slack":
		return []string{"X-Slack-Request-Timestamp"}
	}
	return nil
}

// useFakes replaces verify and dedupe with the fakes for the test.
func useFakes(t *testing.T) {
	t.Helper()
	nv, pk, sh := newVerifier, parseKey, signedHeaders
	newVerifier, parseKey, signedHeaders = fakeNew, fakeParseKey, fakeSignedHeaders
	t.Cleanup(func() { newVerifier, parseKey, signedHeaders = nv, pk, sh })
}

// realDeps fails the test, instead of crashing the binary, when verify or
// dedupe still panic (not implemented yet).
func realDeps(t testing.TB) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("verify or dedupe is not usable yet: %v", r)
		}
	}()
	if _, err := idkey.ParseKey([]string{"header:Idempotency-Key"}); err != nil {
		t.Fatalf("idkey.ParseKey: %v", err)
	}
	if _, _, err := verify.New(verify.Config{Scheme: "none"}, verify.Env{}); err != nil {
		t.Fatalf("verify.New: %v", err)
	}
	verify.SignedHeaders("github")
}

// assertNoEnvSecrets fails when text contains a value of testEnv: values
// read from the environment must never be repeated.
func assertNoEnvSecrets(t *testing.T, text string) {
	t.Helper()
	for name, v := range testEnv {
		if strings.Contains(text, v) {
			t.Errorf("message contains the value of %s:\n%s", name, text)
		}
	}
}

// assertNoSecrets is assertNoEnvSecrets, and also fails on the secrets
// written into the test files (an inline secret, an alert URL's and an
// upstream's credentials).
func assertNoSecrets(t *testing.T, text string) {
	t.Helper()
	assertNoEnvSecrets(t, text)
	for _, v := range []string{"inline-secret-value", "bad-alert-credential", "upstream-password", "token=1"} {
		if strings.Contains(text, v) {
			t.Errorf("message contains secret %q:\n%s", v, text)
		}
	}
}
