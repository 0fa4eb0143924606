package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// now is the injected clock of every test.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testEnv resolves secret_env from vars and files from dir, at now.
func testEnv(t testing.TB, vars map[string]string) Env {
	t.Helper()
	return Env{
		Getenv: func(k string) string { return vars[k] },
		Dir:    t.TempDir(),
		Now:    now,
	}
}

// mac computes an HMAC independently of the package's own code.
func mac(newHash func() hash.Hash, key []byte, parts ...string) []byte {
	m := hmac.New(newHash, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func hexMAC(key string, parts ...string) string {
	return hex.EncodeToString(mac(sha256.New, []byte(key), parts...))
}

func b64MAC(key []byte, parts ...string) string {
	return base64.StdEncoding.EncodeToString(mac(sha256.New, key, parts...))
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// mustNew compiles c or fails the test.
func mustNew(t testing.TB, c Config, env Env) Verifier {
	t.Helper()
	v, _, err := New(c, env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// wantReason checks err against the expected reason ("" = success).
func wantReason(t testing.TB, id string, err error, want string, wantID string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Verify: unexpected error %v", err)
		}
		if id != wantID {
			t.Fatalf("Verify: secret id %q, want %q", id, wantID)
		}
		return
	}
	if err == nil {
		t.Fatalf("Verify passed (id %q), want %s", id, want)
	}
	if got := Reason(err); got != want {
		t.Fatalf("Verify: reason %s (%v), want %s", got, err, want)
	}
	if id != "" {
		t.Fatalf("Verify failed but returned secret id %q", id)
	}
}

// noLeak fails when err's text contains any of the given secrets.
func noLeak(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("error text leaks a secret or signature: %v", err)
		}
	}
}

func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func flipByte(b []byte, i int) []byte {
	out := append([]byte(nil), b...)
	out[i%len(out)] ^= 0x01
	return out
}

// flipHexChar changes one hex digit of s at position i (keeps it hex).
func flipHexChar(s string, i int) string {
	b := []byte(s)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

// flipB64Char changes one base64 character of s at position i.
func flipB64Char(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func isReason(err error, r error) bool { return errors.Is(err, r) }

// body1K is a 1 KiB JSON body.
var body1K = func() []byte {
	b := []byte(`{"id":"evt_1","type":"order.paid","data":{"note":"`)
	for len(b) < 1024-3 {
		b = append(b, 'x')
	}
	return append(b, `"}}`...)
}()

// pretty and minified are the same JSON document, serialised twice.
var (
	minified = []byte(`{"id":"evt_42","type":"order.paid","amount":1999}`)
	pretty   = []byte("{\n  \"id\": \"evt_42\",\n  \"type\": \"order.paid\",\n  \"amount\": 1999\n}")
)
