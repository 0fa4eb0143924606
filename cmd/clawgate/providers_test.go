package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// providersConfig has one route per scheme; simulate signs for each and the
// gateway verifies: signer and verifier agree through the whole stack.
const providersConfig = `
listen: "%LISTEN%"
admin: { listen: "%ADMIN%" }
routes:
  - name: svix
    match: { path: /svix }
    upstream: %UPSTREAM%
    idempotency: { key: ["header:webhook-id"] }
    verify: { scheme: standard-webhooks, secrets: [{ id: v1, secret_env: T_SVIX }] }
  - name: github
    match: { path: /github }
    upstream: %UPSTREAM%
    idempotency: { key: ["body:sha256"] }
    verify: { scheme: github, secrets: [{ id: gh, secret_env: T_GH }] }
  - name: stripe
    match: { path: /stripe }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:id"] }
    verify: { scheme: stripe, secrets: [{ id: new, secret_env: T_STRIPE }] }
  - name: shopify
    match: { path: /shopify }
    upstream: %UPSTREAM%
    idempotency: { key: ["body:sha256"] }
    verify: { scheme: shopify, secrets: [{ id: app, secret_env: T_SHOPIFY }] }
  - name: slack
    match: { path: /slack }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:event_id"] }
    verify: { scheme: slack, secrets: [{ id: s, secret_env: T_SLACK }] }
  - name: plaid
    match: { path: /plaid }
    upstream: %UPSTREAM%
    idempotency: { key: ["body:sha256"] }
    verify:
      scheme: jwt
      jwt: { header: Plaid-Verification, algorithms: [ES256], jwks_file: plaid.jwks.json, max_age: 5m, body_hash_claim: request_body_sha256 }
  - name: pubsub
    match: { path: /pubsub }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:message.messageId"], allow_unsigned_key: true }   # the OIDC token does not sign the body
    verify:
      scheme: jwt
      jwt: { algorithms: [RS256], keys: [{ id: g1, pem_file: google.pub.pem }], issuer: "https://accounts.google.com", audience: "https://gw.example" }
  - name: hs
    match: { path: /hs }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:id"], allow_unsigned_key: true }
    verify:
      scheme: jwt
      jwt: { algorithms: [HS256], keys: [{ id: h1, secret_env: T_HS }] }
`

func TestSimulateEveryProviderThroughServe(t *testing.T) {
	bin := buildBinary(t)
	gwURL, adminURL, cfgPath := startGateway(t, providersConfig)
	dir := filepath.Dir(cfgPath)

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwk := map[string]string{"kty": "EC", "crv": "P-256", "kid": "p1", "alg": "ES256",
		"x": b64(ec.X.FillBytes(make([]byte, 32))), "y": b64(ec.Y.FillBytes(make([]byte, 32)))}
	writeJWKS(t, filepath.Join(dir, "plaid.jwks.json"), jwk)
	writePEM(t, filepath.Join(dir, "plaid.key.pem"), "PRIVATE KEY", mustPKCS8(t, ec))

	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	pub, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	writePEM(t, filepath.Join(dir, "google.pub.pem"), "PUBLIC KEY", pub)
	writePEM(t, filepath.Join(dir, "google.key.pem"), "PRIVATE KEY", mustPKCS8(t, rk))

	env := map[string]string{
		"T_SVIX":    "whsec_" + base64.StdEncoding.EncodeToString([]byte("svix-test-secret-32-bytes-long!!")),
		"T_GH":      "gh-secret",
		"T_STRIPE":  "whsec_stripe",
		"T_SHOPIFY": "shopify-secret",
		"T_SLACK":   "slack-secret",
		"T_HS":      "hs256-secret-of-decent-length-0123456789",
	}
	for k, v := range env {
		t.Setenv(k, v) // for simulate, which loads the config in this process
	}
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Env = os.Environ()
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitReady(t, adminURL+"/healthz")

	for _, tc := range []struct{ route, path, key string }{
		{"svix", "/svix", ""}, {"github", "/github", ""}, {"stripe", "/stripe", ""},
		{"shopify", "/shopify", ""}, {"slack", "/slack", ""},
		{"plaid", "/plaid", "plaid.key.pem"}, {"pubsub", "/pubsub", "google.key.pem"}, {"hs", "/hs", ""},
	} {
		t.Run(tc.route, func(t *testing.T) {
			args := []string{"simulate", "-url", gwURL + tc.path, "-route", tc.route, "-times", "4", "-config", cfgPath}
			if tc.key != "" {
				args = append(args, "-sign-key", filepath.Join(dir, tc.key))
			}
			code, out, errOut := runCmd(t, args...)
			if code != 0 || !strings.Contains(out, "1 forwarded, 3 replayed") {
				t.Fatalf("exit %d\n%s\n%s\ngateway log:\n%s", code, out, errOut, stderr.String())
			}
		})
	}
	// Every route's signature matched under its secret id.
	resp, err := httpGet(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"v1", "gh", "new", "app", "s", "p1", "g1", "h1"} {
		if !strings.Contains(resp, `secret_id="`+id+`"`) {
			t.Errorf("no webhook_signature_verified_total for secret %q", id)
		}
	}
	if strings.Contains(resp, "webhook_signature_failures_total{") {
		for _, l := range strings.Split(resp, "\n") {
			if strings.HasPrefix(l, "webhook_signature_failures_total{") && !strings.HasSuffix(l, " 0") {
				t.Errorf("signature failure: %s", l)
			}
		}
	}
}

func mustPKCS8(t *testing.T, k any) []byte {
	b, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
