package verify

import (
	"strings"
	"testing"
	"time"
)

func TestResolveSecrets(t *testing.T) {
	t.Run("sources", func(t *testing.T) {
		env := testEnv(t, map[string]string{"ORDERS_SECRET": "from-env"})
		writeFile(t, env.Dir, "secret.txt", "from-file\n")
		got, warnings, err := ResolveSecrets([]SecretConfig{
			{SecretEnv: "ORDERS_SECRET"},
			{SecretFile: "secret.txt"},
			{ID: "demo", Secret: "inline-value"},
		}, env)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ id, key string }{{"0", "from-env"}, {"1", "from-file"}, {"demo", "inline-value"}}
		for i, w := range want {
			if got[i].ID != w.id || string(got[i].Key) != w.key {
				t.Errorf("secret %d = %q/%q, want %q/%q", i, got[i].ID, got[i].Key, w.id, w.key)
			}
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "route uses an inline secret") || !strings.Contains(warnings[0], "(demo only)") {
			t.Errorf("warnings = %q, want one inline-secret warning", warnings)
		}
		if strings.Contains(warnings[0], "inline-value") {
			t.Errorf("warning leaks the secret: %q", warnings[0])
		}
	})
	t.Run("absolute file and CRLF", func(t *testing.T) {
		env := testEnv(t, nil)
		p := writeFile(t, t.TempDir(), "s", "abc\r\n")
		got, _, err := ResolveSecrets([]SecretConfig{{SecretFile: p}}, env)
		if err != nil || string(got[0].Key) != "abc" {
			t.Fatalf("got %q, %v", got, err)
		}
	})

	errCases := []struct {
		name    string
		secrets []SecretConfig
		files   map[string]string
		vars    map[string]string
		want    []string // substrings of the error
		notWant []string
	}{
		{name: "no secrets", want: []string{"at least one secret"}},
		{name: "env unset", secrets: []SecretConfig{{SecretEnv: "MISSING_VAR"}}, want: []string{"MISSING_VAR", "unset or empty"}},
		{name: "env empty", secrets: []SecretConfig{{SecretEnv: "EMPTY"}}, vars: map[string]string{"EMPTY": ""}, want: []string{"EMPTY"}},
		{name: "file missing", secrets: []SecretConfig{{SecretFile: "nope.txt"}}, want: []string{"secret_file", "nope.txt"}},
		{name: "file empty", secrets: []SecretConfig{{SecretFile: "empty.txt"}}, files: map[string]string{"empty.txt": "\n"}, want: []string{"empty"}},
		{name: "no source", secrets: []SecretConfig{{ID: "x"}}, want: []string{"one of secret, secret_env or secret_file"}},
		{name: "two sources", secrets: []SecretConfig{{Secret: "hunter2", SecretEnv: "X"}}, want: []string{"only one"}, notWant: []string{"hunter2"}},
		{name: "duplicate id", secrets: []SecretConfig{{ID: "a", Secret: "s1"}, {ID: "a", Secret: "s2"}}, want: []string{`"a"`}},
		{name: "none active", secrets: []SecretConfig{{Secret: "s1", NotAfter: now.Add(-time.Hour)}}, want: []string{"no secret is active"}},
		{name: "not yet active", secrets: []SecretConfig{{Secret: "s1", NotBefore: now.Add(time.Hour)}}, want: []string{"no secret is active"}},
		{name: "window reversed", secrets: []SecretConfig{{Secret: "s1", NotBefore: now, NotAfter: now.Add(-time.Hour)}}, want: []string{"not_before"}},
		{name: "env value never printed", secrets: []SecretConfig{{SecretEnv: "A"}, {SecretEnv: "A", ID: "0"}}, vars: map[string]string{"A": "topsecretvalue"}, want: []string{"already used"}, notWant: []string{"topsecretvalue"}},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(t, tc.vars)
			for name, content := range tc.files {
				writeFile(t, env.Dir, name, content)
			}
			_, _, err := ResolveSecrets(tc.secrets, env)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q contains %q", err, w)
				}
			}
		})
	}

	t.Run("expired while another is active warns", func(t *testing.T) {
		env := testEnv(t, map[string]string{"NEW": "n", "OLD": "o"})
		got, warnings, err := ResolveSecrets([]SecretConfig{
			{ID: "new", SecretEnv: "NEW"},
			{ID: "old", SecretEnv: "OLD", NotAfter: now.Add(-time.Minute)},
		}, env)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || len(warnings) != 1 || !strings.Contains(warnings[0], `"old"`) || !strings.Contains(warnings[0], "expired") {
			t.Fatalf("secrets %d, warnings %q", len(got), warnings)
		}
	})
}

func TestSecretActive(t *testing.T) {
	s := Secret{NotBefore: now, NotAfter: now.Add(time.Hour)}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{now.Add(-time.Nanosecond), false},
		{now, true},
		{now.Add(time.Hour - time.Nanosecond), true},
		{now.Add(time.Hour), false},
	} {
		if got := s.Active(tc.at); got != tc.want {
			t.Errorf("Active(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	if !(Secret{}).Active(now) {
		t.Error("a secret without window must be active")
	}
}

func TestNew(t *testing.T) {
	env := testEnv(t, nil)
	t.Run("empty scheme", func(t *testing.T) {
		_, _, err := New(Config{}, env)
		if err == nil || err.Error() != `verify: scheme is required (write "none" to disable verification)` {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown scheme", func(t *testing.T) {
		_, _, err := New(Config{Scheme: "hmac-sha256"}, env)
		if err == nil {
			t.Fatal("want error")
		}
		for _, s := range schemeNames {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not list %q", err, s)
			}
		}
	})
	t.Run("none", func(t *testing.T) {
		v, w, err := New(Config{Scheme: "none"}, env)
		if err != nil || len(w) != 0 {
			t.Fatal(err, w)
		}
		id, err := v.Verify(nil, []byte("anything"), now)
		if id != "" || err != nil {
			t.Fatalf("none: %q, %v", id, err)
		}
		s, err := NewSigner(Config{Scheme: "none"}, env, nil)
		if err != nil || s.Sign(nil, nil, now) != nil {
			t.Fatal(err)
		}
	})
	t.Run("schemes with secrets need one", func(t *testing.T) {
		for _, s := range []string{"hmac", "github", "stripe", "standard-webhooks", "shopify", "slack"} {
			_, _, err := New(Config{Scheme: s, Header: "X-Sig"}, env)
			if err == nil {
				t.Errorf("%s without secrets compiled", s)
			}
		}
	})
	t.Run("negative tolerance", func(t *testing.T) {
		for _, s := range []string{"stripe", "standard-webhooks", "slack"} {
			_, _, err := New(Config{Scheme: s, Tolerance: -time.Second, Secrets: []SecretConfig{{Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}, env)
			if err == nil {
				t.Errorf("%s with negative tolerance compiled", s)
			}
		}
	})
	t.Run("NewSigner propagates config errors", func(t *testing.T) {
		if _, err := NewSigner(Config{Scheme: "bogus"}, env, nil); err == nil {
			t.Fatal("want error")
		}
	})
}

func TestSignedHeaders(t *testing.T) {
	got := SignedHeaders("standard-webhooks")
	for _, want := range []string{"webhook-id", "svix-id"} {
		found := false
		for _, g := range got {
			if strings.EqualFold(g, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("SignedHeaders(standard-webhooks) = %v, missing %s", got, want)
		}
	}
	for _, s := range []string{"github", "stripe", "shopify", "hmac", "jwt", "none"} {
		if h := SignedHeaders(s); h != nil {
			t.Errorf("SignedHeaders(%s) = %v, want nil", s, h)
		}
	}
}

func TestReason(t *testing.T) {
	if Reason(fail("x", ErrExpired, "ctx")) != "expired" {
		t.Fatal("wrapped reason not found")
	}
}

func TestKeyFilesMustBeRegular(t *testing.T) {
	for _, field := range []string{"secret_file", "pem_file", "jwks_file"} {
		t.Run(field, func(t *testing.T) {
			c := Config{Scheme: "hmac", Header: "X-Sig", Secrets: []SecretConfig{{ID: "a", SecretFile: "/dev/zero"}}}
			switch field {
			case "pem_file":
				c = Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{ID: "k", PEMFile: "/dev/zero"}}}}
			case "jwks_file":
				c = Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSFile: "/dev/zero"}}
			}
			_, _, err := New(c, Env{Dir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Fatalf("err = %v, want a refusal of /dev/zero", err)
			}
		})
	}
}
