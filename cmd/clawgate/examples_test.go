package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/config"
)

// TestProviderExamplesInGatewayYAMLLoad uncomments every "#- name:" example
// route of the repository's gateway.yaml and loads it, so the examples stay
// true to the code.
func TestProviderExamplesInGatewayYAMLLoad(t *testing.T) {
	raw, err := os.ReadFile("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	var cur []string
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "#- name:"):
			if cur != nil {
				examples = append(examples, strings.Join(cur, "\n"))
			}
			cur = []string{"  - " + strings.TrimPrefix(line, "#- ")}
		case cur != nil && strings.HasPrefix(line, "#  "):
			cur = append(cur, "  "+strings.TrimPrefix(line, "#"))
		case cur != nil:
			examples = append(examples, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	if cur != nil {
		examples = append(examples, strings.Join(cur, "\n"))
	}
	if len(examples) < 7 {
		t.Fatalf("found %d provider examples, want one per provider", len(examples))
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "keys"), 0o700)
	writeJWKS(t, filepath.Join(dir, "keys", "plaid.jwks.json"), ecJWK(t))
	writeJWKS(t, filepath.Join(dir, "keys", "google.jwks.json"), rsaJWK(t))
	discordKey, _, _ := ed25519.GenerateKey(rand.Reader)
	env := map[string]string{
		"SVIX_SECRET":               "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		"GITHUB_WEBHOOK_SECRET":     "gh-secret-0123456789",
		"STRIPE_WEBHOOK_SECRET":     "whsec_new-0123456789",
		"STRIPE_WEBHOOK_SECRET_OLD": "whsec_old-0123456789",
		"SHOPIFY_CLIENT_SECRET":     "shp-secret-0123456789",
		"SLACK_SIGNING_SECRET":      "slack-secret-0123456789",
		"ZOOM_SECRET_TOKEN":         "zoom-secret-token-0123456789",
		"TWILIO_AUTH_TOKEN":         "twilio-auth-token-0123456789",
		"DISCORD_PUBLIC_KEY":        hex.EncodeToString(discordKey),
	}
	// The warnings an example documents, as parts of their text; any other
	// warning fails the test.
	expected := map[string][]string{
		"pubsub": {"no part of the body is authenticated", "allow_unsigned_key is set"},
	}
	// The examples keyed on an id the signature does not cover, which the
	// gateway guards against replays under fresh ids.
	// Twilio signs the sorted form fields, not the body's bytes.
	guarded := map[string]bool{"github": true, "shopify": true, "twilio": true}
	for _, ex := range examples {
		name := strings.Fields(ex)[2]
		t.Run(name, func(t *testing.T) {
			doc := "routes:\n" + ex + "\n"
			cfg, err := config.Parse([]byte(doc), "example.yaml", dir, func(k string) string { return env[k] })
			if err != nil {
				t.Fatalf("example route does not load:\n%s\n%v", doc, err)
			}
			if got := cfg.Routes[0].ReplayGuard; got != guarded[name] {
				t.Errorf("replay guard %v, want %v", got, guarded[name])
			}
			want := expected[name]
		warnings:
			for _, w := range cfg.Warnings {
				for _, part := range want {
					if strings.Contains(w, part) {
						continue warnings
					}
				}
				t.Errorf("warning: %s", w)
			}
			for _, part := range want {
				if !strings.Contains(strings.Join(cfg.Warnings, "\n"), part) {
					t.Errorf("no warning mentions %q", part)
				}
			}
		})
	}
}

func writeJWKS(t *testing.T, path string, key map[string]string) {
	b, _ := json.Marshal(map[string]any{"keys": []any{key}})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func ecJWK(t *testing.T) map[string]string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"kty": "EC", "crv": "P-256", "kid": "plaid-1", "alg": "ES256", "use": "sig",
		"x": b64(k.X.FillBytes(make([]byte, 32))), "y": b64(k.Y.FillBytes(make([]byte, 32)))}
}

func rsaJWK(t *testing.T) map[string]string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"kty": "RSA", "kid": "google-1", "alg": "RS256", "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}
