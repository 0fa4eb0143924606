package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/server"
)

// TestTLSListenerSpeaksHTTP2: with tls.cert_file and key_file the delivery
// listener serves HTTPS, and HTTP/2 to clients that offer it.
func TestTLSListenerSpeaksHTTP2(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "cert.pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, "key.pem"), "PRIVATE KEY", mustPKCS8(t, key))

	up := &http.Server{Handler: echoHandler(discardLogger())}
	uln, _ := net.Listen("tcp", "127.0.0.1:0")
	go up.Serve(uln)
	defer up.Close()
	y := strings.NewReplacer("%UP%", "http://"+uln.Addr().String()).Replace(`
listen: "127.0.0.1:0"
tls: { cert_file: cert.pem, key_file: key.pem }
admin: { listen: "" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UP%
    verify: { scheme: hmac, header: X-Signature, secrets: [{ id: k, secret: tls-secret }] }
`)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o600)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := server.Start(cfg, server.Options{Logger: discardLogger(), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Shutdown(time.Second)

	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	body := []byte(`{"id":"evt_tls"}`)
	m := hmac.New(sha256.New, []byte("tls-secret"))
	m.Write(body)
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, "https://"+inst.Addr().String()+"/webhook/order", bytes.NewReader(body))
		req.Header.Set("X-Signature", hex.EncodeToString(m.Sum(nil)))
		req.Header.Set("Idempotency-Key", "evt_tls")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("delivery %d: %d over %s, want 200 over HTTP/2", i, resp.StatusCode, resp.Proto)
		}
		if replayed := resp.Header.Get("Idempotent-Replayed") == "true"; replayed != (i == 1) {
			t.Fatalf("delivery %d: replayed=%v", i, replayed)
		}
	}
}
