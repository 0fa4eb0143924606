package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
)

// logBuffer is a log destination the test reads while the server writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// instance is a server started from a config file in a temporary directory.
type instance struct {
	*Server
	t    *testing.T
	dir  string
	path string
	reg  *prometheus.Registry
	log  *logBuffer
	once sync.Once
}

// stop shuts the instance down once: by the test, or at its end.
func (in *instance) stop(grace time.Duration) { in.once.Do(func() { in.Shutdown(grace) }) }

// startFile writes y as gateway.yaml in a new directory (after files, if
// any, such as TLS certificates), loads it and starts a server on it.
func startFile(t *testing.T, y string, files func(dir string)) *instance {
	t.Helper()
	dir := t.TempDir()
	if files != nil {
		files(dir)
	}
	path := filepath.Join(dir, "gateway.yaml")
	// On the front door the test runs on (doorYAML).
	writeFile(t, path, doorYAML(t, y))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, dir: dir, path: path, reg: prometheus.NewRegistry(), log: &logBuffer{}}
	in.Server, err = Start(cfg, Options{
		Logger: slog.New(slog.NewJSONHandler(in.log, nil)), Registry: in.reg, Version: "1.2.3-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.stop(time.Second) })
	checkDoor(t, in.Server)
	return in
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rewrite replaces the config file with y, on the same front door.
func (in *instance) rewrite(y string) { writeFile(in.t, in.path, doorYAML(in.t, y)) }

func (in *instance) reloads(result string) float64 {
	return testutil.ToFloat64(in.metrics.ConfigReloads.WithLabelValues(result))
}

func (in *instance) routeNames() []string {
	var names []string
	for _, r := range in.gw.Config().Routes {
		names = append(names, r.Name)
	}
	return names
}

const baseYAML = `listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9
    verify: { scheme: none }
`

const twoRoutesYAML = baseYAML + `  - name: refunds
    match: { path: /webhook/refund }
    upstream: http://127.0.0.1:9
    verify: { scheme: none }
`

// A reload that fails returns the problems and keeps the running config;
// one that loads replaces it. Both are counted.
func TestReloadReturnsItsErrorAndKeepsTheRunningConfig(t *testing.T) {
	in := startFile(t, baseYAML, nil)

	in.rewrite(twoRoutesYAML + "    timeout: soon\n")
	err := in.Reload(in.path)
	var ce *config.Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0].Msg, "duration") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if got := in.routeNames(); len(got) != 1 {
		t.Errorf("routes after a failed reload: %v", got)
	}
	if in.reloads("error") != 1 || in.reloads("ok") != 0 {
		t.Errorf("reloads counted: error %v, ok %v", in.reloads("error"), in.reloads("ok"))
	}
	if !strings.Contains(in.log.String(), "config reload failed; keeping the running config") {
		t.Errorf("no error logged:\n%s", in.log)
	}

	in.rewrite(twoRoutesYAML)
	if err := in.Reload(in.path); err != nil {
		t.Fatal(err)
	}
	if got := in.routeNames(); strings.Join(got, ",") != "orders,refunds" {
		t.Errorf("routes after a reload: %v", got)
	}
	if in.reloads("ok") != 1 {
		t.Errorf("ok reloads: %v", in.reloads("ok"))
	}
}

// POST /admin/reload is SIGHUP over HTTP, behind the admin token: 200
// {"status":"reloaded"}, or 400 with one string per problem.
func TestAdminReload(t *testing.T) {
	t.Setenv("CLAWGATE_TEST_ADMIN_TOKEN", "reload-token-0123456789")
	y := strings.Replace(baseYAML, `admin: { listen: "127.0.0.1:0" }`,
		`admin: { listen: "127.0.0.1:0", token_env: CLAWGATE_TEST_ADMIN_TOKEN }`, 1)
	in := startFile(t, y, nil)
	url := "http://" + in.AdminAddr().String() + "/admin/reload"
	post := func(token string) (int, admin.ReloadResult) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		req.Header.Set(admin.Header, "1")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res admin.ReloadResult
		json.NewDecoder(resp.Body).Decode(&res)
		return resp.StatusCode, res
	}

	in.rewrite(strings.Replace(y, "routes:\n", "routes:\n  - name: refunds\n    match: { path: /webhook/refund }\n    upstream: http://127.0.0.1:9\n    verify: { scheme: none }\n", 1))
	if code, _ := post(""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", code)
	}
	if len(in.routeNames()) != 1 {
		t.Fatal("reloaded without the token")
	}
	if code, res := post("reload-token-0123456789"); code != http.StatusOK || res.Status != "reloaded" || res.Errors != nil {
		t.Fatalf("reload: %d %+v", code, res)
	}
	if len(in.routeNames()) != 2 {
		t.Fatalf("routes after the reload: %v", in.routeNames())
	}

	in.rewrite(y + "listen: twice\ndedupe: { window: soon }\n")
	code, res := post("reload-token-0123456789")
	if code != http.StatusBadRequest || res.Status != "failed" || len(res.Errors) != 2 {
		t.Fatalf("bad file: %d %+v", code, res)
	}
	for _, e := range res.Errors {
		if !strings.HasPrefix(e, in.path+":") {
			t.Errorf("problem %q does not name the file and line", e)
		}
	}
	if len(in.routeNames()) != 2 {
		t.Errorf("running config not kept: %v", in.routeNames())
	}
	if in.reloads("ok") != 1 || in.reloads("error") != 1 {
		t.Errorf("reloads counted: ok %v, error %v", in.reloads("ok"), in.reloads("error"))
	}
}

// Each setting that only a restart applies is named in its own log line;
// nothing is said when none changed.
func TestReloadNamesTheFieldsThatNeedARestart(t *testing.T) {
	in := startFile(t, baseYAML, nil)
	if err := in.Reload(in.path); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(in.log.String(), "next restart") {
		t.Fatalf("restart needed without a change:\n%s", in.log)
	}
	in.rewrite(strings.Replace(baseYAML, `admin: { listen: "127.0.0.1:0" }`,
		`admin: { listen: "127.0.0.1:1" }
store: { memory: { max_bytes: 1MiB }, on_error: forward }
dedupe: { window: 1s, retention: 96h }`, 1))
	if err := in.Reload(in.path); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(in.log.String(), "\n") {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(l), &rec) == nil && strings.Contains(rec.Msg, "next restart") {
			lines = append(lines, rec.Msg)
		}
	}
	want := []string{
		"config reload: admin.listen changed; it takes effect at the next restart",
		"config reload: store.memory.max_bytes changed; it takes effect at the next restart",
		"config reload: store.on_error changed; it takes effect at the next restart",
		"config reload: dedupe.window changed; it takes effect at the next restart",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("restart lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// What needs a restart keeps its running value; the rest is applied.
	cfg := in.gw.Config()
	if cfg.Store.OnError != config.OnErrorReject || cfg.Dedupe.Window != 10*time.Second || cfg.Dedupe.Retention != 96*time.Hour {
		t.Errorf("applied: on_error %s, window %v, retention %v", cfg.Store.OnError, cfg.Dedupe.Window, cfg.Dedupe.Retention)
	}
}

// writeCert writes a new self-signed certificate for 127.0.0.1, named
// name, and its key to certFile and keyFile.
func writeCert(t *testing.T, certFile, keyFile, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})))
}

// peerName connects to addr over TLS and returns the common name of the
// certificate the server presents.
func peerName(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // self-signed; only its name is read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// Reload re-reads the certificate files the tls block names (as
// cert-manager rewrites them): new connections get the new certificate.
// Files that do not load keep the old one and fail the reload. On each
// front door.
func TestReloadReplacesTheTLSCertificate(t *testing.T) {
	doortest.ForEach(t, testReloadReplacesTheTLSCertificate)
}

func testReloadReplacesTheTLSCertificate(t *testing.T) {
	y := strings.Replace(baseYAML, `listen: "127.0.0.1:0"`, `listen: "127.0.0.1:0"
tls: { cert_file: tls.crt, key_file: tls.key }`, 1)
	in := startFile(t, y, func(dir string) {
		writeCert(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), "first")
	})
	addr := in.Addr().String()
	if got := peerName(t, addr); got != "first" {
		t.Fatalf("certificate %q, want first", got)
	}

	writeCert(t, filepath.Join(in.dir, "tls.crt"), filepath.Join(in.dir, "tls.key"), "second")
	if err := in.Reload(in.path); err != nil {
		t.Fatal(err)
	}
	if got := peerName(t, addr); got != "second" {
		t.Fatalf("after the reload: certificate %q, want second", got)
	}
	if !strings.Contains(in.log.String(), "tls certificate replaced") {
		t.Errorf("no log line for the new certificate:\n%s", in.log)
	}

	writeFile(t, filepath.Join(in.dir, "tls.crt"), "not a certificate\n")
	if err := in.Reload(in.path); err == nil {
		t.Fatal("reload with a broken certificate succeeded")
	}
	if got := peerName(t, addr); got != "second" {
		t.Fatalf("after a failed reload: certificate %q, want second", got)
	}
	if in.reloads("error") != 1 || in.reloads("ok") != 1 {
		t.Errorf("reloads counted: ok %v, error %v", in.reloads("ok"), in.reloads("error"))
	}

	// A key pair that config validation accepted but the server cannot
	// load (the files changed in between) is refused the same way.
	before := in.reloads("error")
	writeCert(t, filepath.Join(in.dir, "tls.crt"), filepath.Join(in.dir, "tls.key"), "third")
	running := in.cfg.TLS
	in.cfg.TLS.CertFile = filepath.Join(in.dir, "missing.crt")
	err := in.Reload(in.path)
	in.cfg.TLS = running
	if err == nil || !strings.HasPrefix(err.Error(), "tls: ") {
		t.Fatalf("reload with unreadable running certificate files: %v", err)
	}
	if in.reloads("error") != before+1 {
		t.Errorf("not counted as an error")
	}
	if got := peerName(t, addr); got != "second" {
		t.Fatalf("after a failed certificate load: certificate %q, want second", got)
	}
}

// clawgate_build_info carries the version and Go version, and every store
// call is timed by operation (the delivery sent through each front door).
func TestBuildInfoAndStoreDuration(t *testing.T) { doortest.ForEach(t, testBuildInfoAndStoreDuration) }

func testBuildInfoAndStoreDuration(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	in := startFile(t, strings.Replace(baseYAML, "http://127.0.0.1:9", up.URL, 1), nil)

	req, _ := http.NewRequest(http.MethodPost, "http://"+in.Addr().String()+"/webhook/order", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "evt_1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("delivery: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + in.AdminAddr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	if v := testutil.ToFloat64(in.metrics.BuildInfo.WithLabelValues("1.2.3-test", runtime.Version())); v != 1 {
		t.Errorf("clawgate_build_info = %v", v)
	}
	if n := testutil.CollectAndCount(in.metrics.BuildInfo); n != 1 {
		t.Errorf("%d clawgate_build_info series, want 1", n)
	}
	counts := map[string]uint64{}
	mfs, err := in.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "webhook_store_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	for _, op := range []string{"claim", "finish", "ping"} {
		if counts[op] == 0 {
			t.Errorf("no %s timed: %v", op, counts)
		}
	}
	for _, op := range []string{"release", "get", "delete"} {
		if _, ok := counts[op]; !ok {
			t.Errorf("no %s series: %v", op, counts)
		}
	}
}
