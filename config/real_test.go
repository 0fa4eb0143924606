package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// These tests load configs with the real verify and dedupe packages.

// TestGoodWithRealDeps: every good file loads with the real packages too,
// to the same values (verify's own warnings aside).
func TestGoodWithRealDeps(t *testing.T) {
	realDeps(t)
	files, _ := filepath.Glob("testdata/good/*.yaml")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg := parseGood(t, file)
			name := filepath.Base(file)
			if name == "warnings.yaml" {
				// The check warnings are config's; verify words its own.
				eq(t, "config warnings", configWarnings(cfg), warningsYAML)
				got := strings.Join(verifyWarnings(cfg), "\n")
				for _, want := range []string{`route "demo": verify: `, "inline secret", `route "pubsub": verify: `, "no part of the body is authenticated"} {
					if !strings.Contains(got, want) {
						t.Errorf("verify warnings do not mention %q:\n%s", want, got)
					}
				}
				return
			}
			goodChecks[name](t, cfg)
		})
	}
}

// TestBadWithRealDeps: errors of the real verify and dedupe are reported
// with the route's line and name.
func TestBadWithRealDeps(t *testing.T) {
	realDeps(t)
	tests := []struct {
		name, yaml string
		prefixes   []string // of each error line, in order
		mention    string   // every error line mentions it
	}{
		{"unset secret variable", `
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    verify:
      scheme: hmac
      header: X-Signature
      secrets: [{ id: a, secret_env: ORDERS_SECRET_UNSET }]
`, []string{"gateway.yaml:6: routes[0] (orders): verify: "}, "ORDERS_SECRET_UNSET"},
		{"missing and unknown scheme", `
routes:
  - name: a
    match: { path: /a }
    upstream: http://127.0.0.1:9000
  - name: b
    match: { path: /b }
    upstream: http://127.0.0.1:9000
    verify: { scheme: hmac-sha256 }
`, []string{"gateway.yaml:3: routes[0] (a): verify: ", "gateway.yaml:9: routes[1] (b): verify: "}, "scheme"},
		{"jwt none", `
routes:
  - name: plaid
    match: { path: /plaid }
    upstream: http://127.0.0.1:9000
    verify:
      scheme: jwt
      jwt: { algorithms: [none], keys: [{ id: k, secret_env: ORDERS_SECRET }] }
`, []string{"gateway.yaml:6: routes[0] (plaid): verify: "}, "none"},
		{"key the jwt signature does not cover", `
routes:
  - name: pubsub
    match: { path: /pubsub }
    upstream: http://127.0.0.1:9000
    idempotency: { key: ["json:message.messageId"] }
    verify:
      scheme: jwt
      jwt: { algorithms: [HS256], keys: [{ id: k, secret_env: ORDERS_SECRET }] }
`, []string{"gateway.yaml:6: routes[0] (pubsub): idempotency.key: "}, "allow_unsigned_key"},
		{"unknown key source", `
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    idempotency: { key: ["cookie:id"] }
    verify: { scheme: none }
`, []string{"gateway.yaml:6: routes[0] (orders): idempotency.key: "}, "cookie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "gateway.yaml", "", getenv)
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error = %v, want *Error", err)
			}
			lines := ce.Lines()
			if len(lines) != len(tt.prefixes) {
				t.Fatalf("errors:\n%s\nwant %d", err, len(tt.prefixes))
			}
			for i, l := range lines {
				if !strings.HasPrefix(l, tt.prefixes[i]) || !strings.Contains(l, tt.mention) {
					t.Errorf("error %q: want prefix %q and a mention of %q", l, tt.prefixes[i], tt.mention)
				}
				if strings.Contains(l, "verify: verify:") || strings.Contains(l, "key: dedupe:") {
					t.Errorf("error %q repeats its package name", l)
				}
			}
			assertNoSecrets(t, err.Error())
		})
	}
}

// TestRepositoryGatewayYAML: the repository's own gateway.yaml loads with
// no environment set, as the README promises.
func TestRepositoryGatewayYAML(t *testing.T) {
	realDeps(t)
	path := filepath.Join("..", "gateway.yaml")
	data, err := os.ReadFile(path) // the README's `make run` and `clawgate check` use it
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, path, "..", func(string) string { return "" })
	if err != nil {
		t.Fatalf("the repository's gateway.yaml does not load:\n%v", err)
	}
	if len(cfg.Routes) == 0 {
		t.Fatal("no routes")
	}
}
