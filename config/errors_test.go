package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const okRoute = `
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
`

func TestProblemFormat(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "gw.yaml", Line: 3, Field: "listen", Msg: "bad"}, "gw.yaml:3: listen: bad"},
		{Problem{File: "gw.yaml", Field: "routes", Msg: "bad"}, "gw.yaml: routes: bad"},
		{Problem{File: "gw.yaml", Line: 1, Msg: "bad"}, "gw.yaml:1: bad"},
		{Problem{File: "gw.yaml", Msg: "bad"}, "gw.yaml: bad"},
	}
	for _, tt := range tests {
		if got := tt.p.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	e := &Error{Problems: []*Problem{&tests[0].p, &tests[3].p}}
	if got, want := e.Error(), "gw.yaml:3: listen: bad\ngw.yaml: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestErrorsWrap: the problems keep the errors they came from.
func TestErrorsWrap(t *testing.T) {
	useFakes(t)
	tests := []struct {
		name, yaml string
		target     error
	}{
		{"verify", strings.Replace(okRoute, "scheme: none", "scheme: nope", 1), errFakeVerify},
		{"key", strings.Replace(okRoute, "    verify:", "    idempotency: { key: [\"cookie:x\"] }\n    verify:", 1), errFakeKey},
		{"size", strings.Replace(okRoute, "    verify:", "    max_body: 1 parsec\n    verify:", 1), ErrBadSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "", "", getenv)
			if !errors.Is(err, tt.target) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tt.target)
			}
			var p *Problem
			if !errors.As(err, &p) || p.Line == 0 || p.Field == "" {
				t.Fatalf("errors.As *Problem: %#v", p)
			}
		})
	}
}

// TestAddYAMLError: decode errors that the schema check did not catch
// still come out one per line, with their line.
func TestAddYAMLError(t *testing.T) {
	ps := &problems{file: "gw.yaml"}
	addYAMLError(ps, &yaml.TypeError{Errors: []string{"line 4: cannot unmarshal !!str `x` into int", "line 9: field y not found in type config.Match"}})
	addYAMLError(ps, fmt.Errorf("yaml: line 2: did not find expected key"))
	addYAMLError(ps, fmt.Errorf("yaml: control characters are not allowed"))
	got := ps.err().(*Error).Lines()
	want := []string{
		"gw.yaml: invalid YAML: control characters are not allowed",
		"gw.yaml:2: invalid YAML: did not find expected key",
		"gw.yaml:4: invalid YAML: cannot unmarshal !!str `x` into int",
		"gw.yaml:9: invalid YAML: field y not found in type config.Match",
	}
	eq(t, "lines", got, want)
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true, "LocalHost": true, "fe80::1%lo": false, "::1%lo": true,
		"": false, "0.0.0.0": false, "::": false, "10.0.0.1": false, "example.com": false, "localhost.example.com": false, "[::1]": true, "localhost.": true, "::ffff:127.0.0.1": true,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestAdminListen: a listener off loopback needs a token; on loopback, or
// disabled, it does not.
func TestAdminListen(t *testing.T) {
	useFakes(t)
	tests := []struct {
		admin   string
		wantErr bool
	}{
		{`{ listen: "127.0.0.1:9090" }`, false},
		{`{ listen: "127.0.0.5:9090" }`, false},
		{`{ listen: "localhost:9090" }`, false},
		{`{ listen: "[::1]:9090" }`, false},
		{`{ listen: "" }`, false},
		{`{ listen: ":9090", token_env: ADMIN_TOKEN }`, false},
		{`{ listen: "0.0.0.0:9090", token_env: ADMIN_TOKEN }`, false},
		{`{ listen: ":9090" }`, true},
		{`{ listen: "0.0.0.0:9090" }`, true},
		{`{ listen: "[::]:9090" }`, true},
		{`{ listen: "10.1.2.3:9090" }`, true},
		{`{ listen: "0.0.0.0:9090", token_env: UNSET_TOKEN }`, true},
	}
	for _, tt := range tests {
		t.Run(tt.admin, func(t *testing.T) {
			_, err := Parse([]byte("admin: "+tt.admin+okRoute), "", "", getenv)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestSecretsNeverInErrors: values read from the environment or written
// inline never reach an error message, even when they are what is wrong.
func TestSecretsNeverInErrors(t *testing.T) {
	useFakes(t)
	for _, env := range []string{"BAD_ALERT_URL", "RELATIVE_URL"} {
		_, err := Parse([]byte("alerts: { webhook_url_env: "+env+" }"+okRoute), "", "", getenv)
		if err == nil {
			t.Fatalf("%s: no error", env)
		}
		assertNoSecrets(t, err.Error())
	}
}

// TestDefaultsNotShared: each Parse starts from fresh defaults.
func TestDefaultsNotShared(t *testing.T) {
	useFakes(t)
	a, err := Parse([]byte(okRoute), "", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	a.Store.Redis.Addrs[0] = "changed:1"
	a.Routes[0].Match.Methods[0] = "PUT"
	a.Routes[0].Idempotency.Key[0] = "changed"
	b, err := Parse([]byte(okRoute), "", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "addrs", b.Store.Redis.Addrs, []string{DefaultRedisAddr})
	eq(t, "methods", b.Routes[0].Match.Methods, []string{"POST"})
	eq(t, "key", b.Routes[0].Idempotency.Key, []string{DefaultKeySource})
}

// TestNullValuesKeepDefaults: "timeout:" with no value keeps the default.
func TestNullValuesKeepDefaults(t *testing.T) {
	useFakes(t)
	cfg, err := Parse([]byte(`
listen:
admin:
dedupe: { window: ~ }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    timeout:
    max_body: null
    verify: { scheme: none }
`), "", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "listen", cfg.Listen, DefaultListen)
	eq(t, "admin.listen", cfg.Admin.Listen, DefaultAdminListen)
	eq(t, "window", cfg.Dedupe.Window, DefaultWindow)
	eq(t, "timeout", cfg.Routes[0].Timeout, DefaultTimeout)
	eq(t, "max_body", cfg.Routes[0].MaxBody, DefaultMaxBody)
}
