package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a self-signed certificate and its key as PEM files.
func writeKeyPair(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

const tlsConfig = `
tls:
  cert_file: tls/cert.pem
  key_file: tls/key.pem
admin:
  listen: "0.0.0.0:9090"
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
`

// TestLoad reads a file from disk: relative TLS paths resolve against its
// directory, and variables come from the process environment.
func TestLoad(t *testing.T) {
	useFakes(t)
	dir := t.TempDir()
	writeKeyPair(t, filepath.Join(dir, "tls", "cert.pem"), filepath.Join(dir, "tls", "key.pem"))
	path := filepath.Join(dir, "gateway.yaml")
	write(t, path, tlsConfig)
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "load-test-token")

	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	eq(t, "path", cfg.Path, path)
	eq(t, "dir", cfg.Dir, dir)
	eq(t, "tls", cfg.TLS, TLS{CertFile: filepath.Join(dir, "tls", "cert.pem"), KeyFile: filepath.Join(dir, "tls", "key.pem")})
	eq(t, "admin token", cfg.Admin.Token, "load-test-token")
}

func TestLoadErrors(t *testing.T) {
	useFakes(t)
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
		if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "config: open ") {
			t.Fatalf("error = %v, want a wrapped fs.ErrNotExist", err)
		}
	})
	t.Run("names the file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "gw.yaml")
		write(t, path, "routes: []\n")
		_, err := Load(path)
		if want := path + ":1: routes: at least one route is required"; err == nil || err.Error() != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
	})
	t.Run("mismatched key pair", func(t *testing.T) {
		dir := t.TempDir()
		writeKeyPair(t, filepath.Join(dir, "tls", "cert.pem"), filepath.Join(dir, "other.pem"))
		writeKeyPair(t, filepath.Join(dir, "unused.pem"), filepath.Join(dir, "tls", "key.pem"))
		path := filepath.Join(dir, "gateway.yaml")
		write(t, path, tlsConfig)
		t.Setenv("CLAWGATE_ADMIN_TOKEN", "x")
		_, err := Load(path)
		want := path + ":2: tls: cannot use " + filepath.Join(dir, "tls", "cert.pem") + " and " + filepath.Join(dir, "tls", "key.pem") +
			" as a key pair: tls: private key does not match public key"
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant %s", err, want)
		}
	})
	t.Run("tls file is a directory", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "tls", "key.pem"), "")
		if err := os.Mkdir(filepath.Join(dir, "tls", "cert.pem"), 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "gateway.yaml")
		write(t, path, tlsConfig)
		t.Setenv("CLAWGATE_ADMIN_TOKEN", "x")
		_, err := Load(path)
		want := path + ":3: tls.cert_file: " + filepath.Join(dir, "tls", "cert.pem") + " is not a regular file"
		if err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant %s", err, want)
		}
	})
}

// TestParseNilGetenv reads variables from the process environment.
func TestParseNilGetenv(t *testing.T) {
	useFakes(t)
	t.Setenv("CONFIG_TEST_TOKEN", "from-process-env")
	cfg, err := Parse([]byte(`
admin: { listen: "0.0.0.0:9090", token_env: CONFIG_TEST_TOKEN }
routes: [{ name: a, match: { path: /a }, upstream: "http://127.0.0.1:1", verify: { scheme: none } }]
`), "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "token", cfg.Admin.Token, "from-process-env")
	eq(t, "path", cfg.Path, "")
}
