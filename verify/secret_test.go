package verify

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestResolveSecrets(t *testing.T) {
	t.Run("sources", func(t *testing.T) {
		env := testEnv(t, map[string]string{"ORDERS_SECRET": "from-env-0123456789"})
		writeFile(t, env.Dir, "secret.txt", "from-file-0123456789\n")
		got, warnings, err := ResolveSecrets([]SecretConfig{
			{SecretEnv: "ORDERS_SECRET"},
			{SecretFile: "secret.txt"},
			{ID: "demo", Secret: "inline-value-0123456789"},
		}, env)
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ id, key string }{{"0", "from-env-0123456789"}, {"1", "from-file-0123456789"}, {"demo", "inline-value-0123456789"}}
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
		env := testEnv(t, map[string]string{"NEW": "new-secret-0123456789", "OLD": "old-secret-0123456789"})
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
		for _, s := range SchemeNames() {
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
	// svix-* is verified only when no webhook-* header is present, so a
	// svix-id beside valid webhook-* headers is not bound.
	if got := SignedHeaders("standard-webhooks"); !slices.Equal(got, []string{"webhook-id", "webhook-timestamp"}) {
		t.Errorf("SignedHeaders(standard-webhooks) = %v", got)
	}
	if got := SignedHeaders("slack"); !slices.Equal(got, []string{"X-Slack-Request-Timestamp"}) {
		t.Errorf("SignedHeaders(slack) = %v", got)
	}
	for _, s := range []string{"github", "stripe", "shopify", "hmac", "jwt", "none"} {
		if h := SignedHeaders(s); h != nil {
			t.Errorf("SignedHeaders(%s) = %v, want nil", s, h)
		}
	}
}

func TestSignsBody(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want bool
	}{
		{Config{Scheme: "none"}, false},
		{Config{Scheme: "jwt"}, false},
		{Config{Scheme: "jwt", JWT: JWTConfig{BodyHashClaim: "request_body_sha256"}}, true},
		{Config{Scheme: "hmac"}, true},
		{Config{Scheme: "github"}, true},
		{Config{Scheme: "shopify"}, true},
		{Config{Scheme: "stripe"}, true},
		{Config{Scheme: "slack"}, true},
		{Config{Scheme: "standard-webhooks"}, true},
	} {
		if got := SignsBody(tc.c); got != tc.want {
			t.Errorf("SignsBody(%s, body_hash_claim %q) = %v, want %v", tc.c.Scheme, tc.c.JWT.BodyHashClaim, got, tc.want)
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

// TestSecretWarnings: short secrets and secret files others may read are
// warnings that name the secret and where it came from, never its value.
func TestSecretWarnings(t *testing.T) {
	env := testEnv(t, map[string]string{"SHORT": "short-value", "LONG": "long-enough-value-0123"})
	writeFile(t, env.Dir, "private.txt", "private-file-value-0123\n")
	open := writeFile(t, env.Dir, "open.txt", "open-file-value-0123\n")
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, env.Dir, "short.txt", "tiny\n")
	if err := os.Chmod(filepath.Join(env.Dir, "short.txt"), 0o640); err != nil {
		t.Fatal(err)
	}
	_, warnings, err := ResolveSecrets([]SecretConfig{
		{ID: "a", SecretEnv: "SHORT"},
		{ID: "b", SecretEnv: "LONG"},
		{ID: "c", SecretFile: "private.txt"},
		{ID: "d", SecretFile: "open.txt"},
		{ID: "e", SecretFile: "short.txt"},
	}, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`secrets[0] (id "a", secret_env SHORT) is only 11 bytes long; a short secret can be guessed: use at least 16 random bytes`,
		`secrets[3] (id "d"): secret_file ` + open + ` is readable by its group or others (mode 0644); restrict it to the gateway's user (chmod 600)`,
		`secrets[4] (id "e", secret_file ` + filepath.Join(env.Dir, "short.txt") + `) is only 4 bytes long; a short secret can be guessed: use at least 16 random bytes`,
		`secrets[4] (id "e"): secret_file ` + filepath.Join(env.Dir, "short.txt") + ` is readable by its group or others (mode 0640); restrict it to the gateway's user (chmod 600)`,
	}
	if !slices.Equal(warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
	for _, v := range []string{"short-value", "long-enough", "private-file", "open-file", "tiny"} {
		if strings.Contains(strings.Join(warnings, "\n"), v) {
			t.Errorf("a warning contains the secret %q", v)
		}
	}

	t.Run("jwt HMAC key", func(t *testing.T) {
		_, w, err := New(Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{ID: "k", SecretEnv: "SHORT"}},
			MaxAge: time.Minute, BodyHashClaim: "body_sha256"}}, env)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`jwt.keys[0] (id "k", secret_env SHORT) is only 11 bytes long; a short secret can be guessed: use at least 16 random bytes`}
		if !slices.Equal(w, want) {
			t.Errorf("warnings %q, want %q", w, want)
		}
	})
	t.Run("standard-webhooks key decodes short", func(t *testing.T) {
		env := testEnv(t, map[string]string{
			"SW_SHORT": "whsec_" + base64.StdEncoding.EncodeToString([]byte("8 bytes!")),
			"SW_OK":    "whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes ok")),
		})
		_, w, err := New(Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{ID: "s", SecretEnv: "SW_SHORT"}, {ID: "ok", SecretEnv: "SW_OK"}}}, env)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`secrets[0] (id "s", secret_env SW_SHORT) decodes to only 8 bytes long; a short secret can be guessed: use at least 16 random bytes`}
		if !slices.Equal(w, want) {
			t.Errorf("warnings %q, want %q", w, want)
		}
	})
}

// TestJWTWarnings: a jwt route that does not bind the body, or accepts a
// token until its exp, is warned about.
func TestJWTWarnings(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeFile(t, env.Dir, "rsa.pub", pemPublic(t, &k.rsa.PublicKey))
	const (
		noBody = "jwt.body_hash_claim is not set: no part of the body is authenticated, so anyone holding a valid token can send any body with it"
		noAge  = "jwt.max_age is not set: a token is accepted until its exp, however far away; set max_age to bound how long a captured token stays usable"
	)
	for _, tc := range []struct {
		maxAge time.Duration
		claim  string
		want   []string
	}{
		{0, "", []string{noBody, noAge}},
		{time.Minute, "", []string{noBody}},
		{0, "request_body_sha256", []string{noAge}},
		{time.Minute, "request_body_sha256", nil},
	} {
		_, w, err := New(Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "rsa.pub"}},
			MaxAge: tc.maxAge, BodyHashClaim: tc.claim}}, env)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w, tc.want) {
			t.Errorf("max_age %v, body_hash_claim %q: warnings %q, want %q", tc.maxAge, tc.claim, w, tc.want)
		}
	}
}
