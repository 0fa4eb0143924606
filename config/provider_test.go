package config

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/verify"
)

// providerRoute returns a route of provider name with what its preset needs
// the route to write (a secret or public key, public_url, an audience, a
// key file in dir).
func providerRoute(t *testing.T, name, dir string) string {
	t.Helper()
	r := "  - name: " + name + "\n    match: { path: /webhook/" + name + " }\n    upstream: http://127.0.0.1:9000\n    provider: " + name + "\n"
	p, _ := verify.LookupPreset(name)
	if verify.UsesURL(p.Verify) {
		r += "    public_url: https://hooks.example.com/webhook/" + name + "\n"
	}
	switch p.Verify.Scheme {
	case verify.SchemeStandardWebhooks:
		r += "    verify: { secrets: [{ id: s, secret_env: SVIX_SECRET }] }\n"
	case verify.SchemeEd25519:
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		r += "    verify: { secrets: [{ id: s, secret: " + hex.EncodeToString(pub) + " }] }\n"
	case verify.SchemeECDSAP256:
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		r += "    verify: { secrets: [{ id: s, secret: \"" + base64.StdEncoding.EncodeToString(der) + "\" }] }\n"
	case verify.SchemeJWT:
		if name == "plaid" {
			k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			b64 := func(n *big.Int) string { return base64.RawURLEncoding.EncodeToString(n.FillBytes(make([]byte, 32))) }
			jwks, _ := json.Marshal(map[string]any{"keys": []any{map[string]string{"kty": "EC", "crv": "P-256", "kid": "p1", "x": b64(k.X), "y": b64(k.Y)}}})
			if err := os.WriteFile(filepath.Join(dir, "plaid.jwks.json"), jwks, 0o600); err != nil {
				t.Fatal(err)
			}
			r += "    verify: { jwt: { jwks_file: plaid.jwks.json } }\n"
		} else {
			r += "    verify: { jwt: { audience: \"https://hooks.example.com/webhook/pubsub\" } }\n"
		}
	default:
		r += "    verify: { secrets: [{ id: s, secret_env: ORDERS_SECRET }] }\n"
	}
	return r
}

// guarded lists the presets whose key the signature does not cover, so
// that the route gets the replay guard; unsigned, those that accept it.
var (
	guardedPresets  = map[string]bool{"twilio": true, "mailgun": true}
	unsignedPresets = map[string]bool{"gitlab": true, "telegram": true, "google-pubsub": true}
)

// TestEveryProviderLoads: a route naming each preset, with only what the
// preset needs it to write, loads with the real verify and dedupe, gets
// the preset's verify block and key, and is protected as documented: no
// replay guard when the key is signed, the guard when it is not and the
// scheme digests, allow_unsigned_key (and its warning) when nothing can be
// signed.
func TestEveryProviderLoads(t *testing.T) {
	realDeps(t)
	for _, p := range verify.Presets() {
		t.Run(p.Name, func(t *testing.T) {
			dir := t.TempDir()
			doc := "routes:\n" + providerRoute(t, p.Name, dir)
			cfg, err := Parse([]byte(doc), "gateway.yaml", dir, getenv)
			if err != nil {
				t.Fatalf("does not load:\n%s\n%v", doc, err)
			}
			r := cfg.Routes[0]
			if r.Provider != p.Name || r.Verify.Scheme != p.Verify.Scheme || r.Verifier == nil {
				t.Fatalf("provider %q scheme %q", r.Provider, r.Verify.Scheme)
			}
			if !reflect.DeepEqual(r.Idempotency.Key, p.Key) {
				t.Errorf("key %v, want %v", r.Idempotency.Key, p.Key)
			}
			if r.ReplayGuard != guardedPresets[p.Name] {
				t.Errorf("replay guard %v", r.ReplayGuard)
			}
			if r.Idempotency.AllowUnsignedKey != unsignedPresets[p.Name] {
				t.Errorf("allow_unsigned_key %v", r.Idempotency.AllowUnsignedKey)
			}
			for _, w := range cfg.Warnings {
				if !unsignedPresets[p.Name] || !strings.Contains(w, "allow_unsigned_key is set") {
					if !(p.Name == "google-pubsub" && strings.Contains(w, "no part of the body is authenticated")) {
						t.Errorf("warning: %s", w)
					}
				}
			}
			if unsignedPresets[p.Name] && !strings.Contains(strings.Join(cfg.Warnings, "\n"), "allow_unsigned_key is set") {
				t.Error("no warning that the key is not signed")
			}
			if p.Verify.Tolerance != 0 && r.Verify.Tolerance != p.Verify.Tolerance {
				t.Errorf("tolerance %v, want %v", r.Verify.Tolerance, p.Verify.Tolerance)
			}
			if verify.UsesURL(r.Verify) && r.Verify.PublicURL != r.PublicURL {
				t.Errorf("verify sees public_url %q", r.Verify.PublicURL)
			}
		})
	}
}

// TestProviderWrittenFieldsWin: every field a route writes overrides the
// preset, the rest is filled in, and a provider's name is not case
// sensitive.
func TestProviderWrittenFieldsWin(t *testing.T) {
	realDeps(t)
	doc := `
routes:
  - name: meetings
    match: { path: /webhook/zoom }
    upstream: http://127.0.0.1:9000
    provider: Zoom
    idempotency: { key: ["json:payload.object.uuid"] }
    verify:
      tolerance: 2m
      secrets: [{ id: a, secret_env: ORDERS_SECRET }]
  - name: payments
    match: { path: /webhook/stripe }
    upstream: http://127.0.0.1:9000
    provider: stripe
    verify: &v
      secrets: [{ id: a, secret_env: ORDERS_SECRET }]
  - name: follows
    match: { path: /webhook/twitch }
    upstream: http://127.0.0.1:9000
    provider: twitch
    verify:
      <<: *v
      tolerance: 10m
`
	cfg, err := Parse([]byte(doc), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	zoom, stripe, twitch := cfg.Routes[0], cfg.Routes[1], cfg.Routes[2]
	eq(t, "zoom provider", zoom.Provider, "zoom")
	eq(t, "zoom tolerance", zoom.Verify.Tolerance, 2*time.Minute)
	eq(t, "zoom key", zoom.Idempotency.Key, []string{"json:payload.object.uuid"})
	eq(t, "zoom template", zoom.Verify.Template, "v0:{header:X-Zm-Request-Timestamp}:{body}")
	eq(t, "zoom header", zoom.Verify.Header, "X-Zm-Signature")
	eq(t, "stripe tolerance", stripe.Verify.Tolerance, 5*time.Minute)
	eq(t, "stripe key", stripe.Idempotency.Key, []string{"json:id"})
	// The merged secrets come from the anchor; the key header is signed
	// by the template, so the route needs no replay guard.
	eq(t, "twitch secrets", len(twitch.Verify.Secrets), 1)
	eq(t, "twitch guard", twitch.ReplayGuard, false)
	eq(t, "zoom guard", zoom.ReplayGuard, false)
}

// TestProviderPublicURLAndMethod: public_url and the route's one method
// reach the verifier of a URL-signed provider, and public_url on a route
// whose signature does not cover the URL draws a warning.
func TestProviderPublicURLAndMethod(t *testing.T) {
	realDeps(t)
	doc := `
routes:
  - name: crm
    match: { path: /webhook/hubspot, methods: [put] }
    upstream: http://127.0.0.1:9000
    provider: hubspot
    public_url: https://hooks.example.com/webhook/hubspot?portal=1
    verify: { secrets: [{ id: a, secret_env: ORDERS_SECRET }] }
  - name: payments
    match: { path: /webhook/stripe }
    upstream: http://127.0.0.1:9000
    provider: stripe
    public_url: https://hooks.example.com/webhook/stripe
    verify: { secrets: [{ id: a, secret_env: ORDERS_SECRET }] }
`
	cfg, err := Parse([]byte(doc), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "public url", cfg.Routes[0].Verify.PublicURL, "https://hooks.example.com/webhook/hubspot?portal=1")
	eq(t, "method", cfg.Routes[0].Verify.Method, "PUT")
	eq(t, "warnings", cfg.Warnings, []string{
		`gateway.yaml:13: route "payments": public_url is set, but the route's signature does not cover the URL: it is not used`,
	})
}

// TestTemplateWithoutProviderNeedsPublicURL: a hand-written template that
// signs {url} needs public_url as much as a preset does.
func TestTemplateWithoutProviderNeedsPublicURL(t *testing.T) {
	realDeps(t)
	doc := `
routes:
  - name: custom
    match: { path: /webhook/custom }
    upstream: http://127.0.0.1:9000
    idempotency: { key: ["json:id"] }
    verify:
      scheme: hmac
      header: X-Signature
      template: "{url}{body}"
      secrets: [{ id: a, secret_env: ORDERS_SECRET }]
`
	_, err := Parse([]byte(doc), "gateway.yaml", "", getenv)
	want := `gateway.yaml:3: routes[0] (custom): public_url: required: the route's verify.template signs the URL it calls ({url})`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v\nwant prefix %s", err, want)
	}
	assertNoSecrets(t, err.Error())
}

// TestProviderQueueRoutes: the provider is expanded before the route's
// other checks, so a queue route sees its provider's scheme and key: a key
// header the template signs (Twitch) is covered, a key only the replay
// guard protects (Twilio) gets the guard, as on a sync route, and Slack's
// handshake warning is given.
func TestProviderQueueRoutes(t *testing.T) {
	realDeps(t)
	doc := `
routes:
  - name: follows
    match: { path: /webhook/twitch }
    upstream: http://127.0.0.1:9000
    provider: twitch
    delivery: queue
    verify: { secrets: [{ id: a, secret_env: ORDERS_SECRET }] }
  - name: slack
    match: { path: /webhook/slack }
    upstream: http://127.0.0.1:9000
    provider: slack
    delivery: queue
    verify: { secrets: [{ id: a, secret_env: ORDERS_SECRET }] }
`
	cfg, err := Parse([]byte(doc), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "twitch guard", cfg.Routes[0].ReplayGuard, false)
	if w := strings.Join(cfg.Warnings, "\n"); !strings.Contains(w, `route "slack": delivery: Slack's url_verification handshake`) {
		t.Errorf("no Slack handshake warning:\n%s", w)
	}
	cfg, err = Parse([]byte(`
routes:
  - name: sms
    match: { path: /webhook/twilio }
    upstream: http://127.0.0.1:9000
    provider: twilio
    public_url: https://hooks.example.com/webhook/twilio
    delivery: queue
    verify: { secrets: [{ id: a, secret_env: ORDERS_SECRET }] }
`), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatalf("twilio queue route: %v", err)
	}
	eq(t, "twilio queue route guard", cfg.Routes[0].ReplayGuard, true)
}
