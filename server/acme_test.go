package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
)

// findTool finds a command on PATH or in $(go env GOPATH)/bin, where
// scripts/ensure-pebble.sh installs it; "" when it is in neither.
func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
		p := filepath.Join(dir, "bin", name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// writeTestCA writes a CA and a certificate it signs for 127.0.0.1 (the
// ACME directory's HTTPS), as PEM files in dir: ca.pem, cert.pem, key.pem.
func writeTestCA(t *testing.T, dir string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clawgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	for name, b := range map[string]*pem.Block{
		"ca.pem": {Type: "CERTIFICATE", Bytes: caDER}, "cert.pem": {Type: "CERTIFICATE", Bytes: der},
		"key.pem": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// pebble is a running Pebble: its directory URL, the client that trusts
// its HTTPS, and its management address (where its issuing root is).
type pebble struct {
	dir, mgmt string
	caFile    string // the test CA that signs the directory's HTTPS
	client    *http.Client
	log       *lockedLog
}

// lockedLog collects a child process's output.
type lockedLog struct{ syncBuf }

// startPebble runs Pebble on loopback ports, validating challenges for
// real at httpPort (HTTP-01) and tlsPort (TLS-ALPN-01) of whatever the
// names resolve to: pebble-challtestsrv answers every name with 127.0.0.1.
func startPebble(t *testing.T, httpPort, tlsPort string) *pebble {
	t.Helper()
	bin, dnsBin := findTool("pebble"), findTool("pebble-challtestsrv")
	if bin == "" || dnsBin == "" {
		t.Skip("pebble or pebble-challtestsrv is not installed: scripts/ensure-pebble.sh installs them (make test runs it)")
	}
	dir := t.TempDir()
	writeTestCA(t, dir)
	dnsAddr, dnsMgmt := freeAddr(t), freeAddr(t)
	dns := exec.Command(dnsBin, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "", "-dnsserver", dnsAddr,
		"-management", dnsMgmt, "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "")
	p := &pebble{log: &lockedLog{}}
	dns.Stdout, dns.Stderr = p.log, p.log
	if err := dns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Process.Kill(); dns.Wait() })

	listen, mgmt := freeAddr(t), freeAddr(t)
	conf, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": filepath.Join(dir, "cert.pem"), "privateKey": filepath.Join(dir, "key.pem"),
		"httpPort": mustAtoi(t, httpPort), "tlsPort": mustAtoi(t, tlsPort),
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
	}})
	confPath := filepath.Join(dir, "pebble.json")
	os.WriteFile(confPath, conf, 0o600)
	cmd := exec.Command(bin, "-config", confPath, "-dnsserver", dnsAddr)
	// No random nonce rejections or validation sleeps: the test is about
	// the gateway, not the client's retries.
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	roots := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	roots.AppendCertsFromPEM(caPEM)
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	p.dir, p.mgmt, p.caFile = "https://"+listen+"/dir", "https://"+mgmt, filepath.Join(dir, "ca.pem")
	var err error
	eventually.Within(t, 10*time.Second, func() bool {
		var resp *http.Response
		if resp, err = p.client.Get(p.dir); err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, func() string { return fmt.Sprintf("pebble did not answer: %v\n%s", err, p.log.String()) })
	return p
}

// root is Pebble's issuing root, which the certificates it issues chain to.
func (p *pebble) root(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := p.client.Get(p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatalf("pebble root: %s", data)
	}
	return pool
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// tls.acme end to end against Pebble on loopback: the gateway obtains its
// certificate at the first handshake for its domain (TLS-ALPN-01 on the
// delivery listener, validated by Pebble for real; HTTP-01 on http_listen
// when TLS-ALPN-01 cannot be reached), keeps it in cache_dir, and serves
// the delivery over HTTPS, on each front door.
func TestACMEPebble(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		for _, challenge := range []string{"tls-alpn-01", "http-01"} {
			t.Run(challenge, func(t *testing.T) { testACMEPebble(t, challenge) })
		}
	})
}

func testACMEPebble(t *testing.T, challenge string) {
	const domain = "hooks.clawgate.test"
	listen, httpListen := freeAddr(t), freeAddr(t)
	_, httpPort, _ := net.SplitHostPort(httpListen)
	_, tlsPort, _ := net.SplitHostPort(listen)
	if challenge == "http-01" {
		// Pebble validates TLS-ALPN-01 at a port nothing listens on: the
		// gateway falls back to HTTP-01.
		_, tlsPort, _ = net.SplitHostPort(freeAddr(t))
	}
	p := startPebble(t, httpPort, tlsPort)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) }))
	defer up.Close()
	dir := t.TempDir()
	y := doorYAML(t, fmt.Sprintf(`
listen: %q
admin: { listen: "" }
tls:
  acme:
    domains: [%s]
    email: ops@clawgate.test
    directory_url: %s
    ca_file: %s
    cache_dir: acme-cache
    http_listen: %q
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %s
    idempotency: { key: ["header:Idempotency-Key"], allow_unsigned_key: true }
    verify: { scheme: none }
`, listen, domain, p.dir, p.caFile, httpListen, up.URL))
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o600)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(time.Second)
	checkDoor(t, s)

	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: p.root(t), ServerName: domain},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, listen)
		},
	}}
	req, _ := http.NewRequest(http.MethodPost, "https://"+domain+"/webhook/order", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "evt_acme")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("HTTPS delivery: %v\ngateway:\n%s\npebble:\n%s", err, logs.String(), p.log.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` {
		t.Fatalf("status %d %q", resp.StatusCode, body)
	}
	if cs := resp.TLS; cs == nil || len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].DNSNames[0] != domain {
		t.Fatalf("certificate: %+v", cs)
	}
	// The certificate and the account key are cached on disk.
	if _, err := os.Stat(filepath.Join(dir, "acme-cache", domain)); err != nil {
		entries, _ := os.ReadDir(filepath.Join(dir, "acme-cache"))
		t.Fatalf("no cached certificate: %v (cache holds %v)", err, entries)
	}
	// Pebble validated the challenge this subtest is about: it logs its
	// HTTP-01 requests (and nothing for TLS-ALPN-01).
	plog := p.log.String()
	if httpTried := strings.Contains(plog, "Attempting to validate w/ HTTP"); httpTried != (challenge == "http-01") || !strings.Contains(plog, "set VALID by completed challenge") {
		t.Errorf("pebble did not validate with %s:\n%s", challenge, plog)
	}
	// HTTP-01's listener sends other requests to HTTPS.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r2, err := noRedirect.Get("http://" + httpListen + "/webhook/order")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusFound || !strings.HasPrefix(r2.Header.Get("Location"), "https://") {
		t.Errorf("plain HTTP: %d %q", r2.StatusCode, r2.Header.Get("Location"))
	}
}
