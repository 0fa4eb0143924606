package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"frobnicate"},
		{"check", "-nope"},
		{"check", "extra-arg"},
		{"simulate"},
		{"simulate", "-url", "ftp://x"},
		{"keys"},
		{"keys", "frob", "orders", "k"},
		{"keys", "get", "only-route"},
		{"keys", "get", "-nope", "orders", "k"},
		{"version", "extra"},
		{"--version", "extra"},
		{"demo", "-times", "1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if code, _, _ := runCmd(t, args...); code != 2 {
				t.Fatalf("exit %d, want 2", code)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(out, "clawgate ") || !strings.Contains(out, "go1.") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestCheckRepositoryConfig(t *testing.T) {
	code, out, errOut := runCmd(t, "check", "-config", "../../gateway.yaml")
	if code != 0 || out != "config ok: 1 route\n" {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "inline secret") {
		t.Fatalf("no inline-secret warning: %q", errOut)
	}
}

func TestCheckBadConfigExit1WithLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(p, []byte("listen: \":8080\"\nroutes:\n  - name: a\n    upstream: ftp://x\n    mtach: {}\n"), 0o600)
	code, out, errOut := runCmd(t, "check", "-config", p)
	if code != 1 || out != "" {
		t.Fatalf("exit %d out %q", code, out)
	}
	if !strings.Contains(errOut, "bad.yaml:5") || !strings.Contains(errOut, "mtach") {
		t.Fatalf("error does not name the field and line: %q", errOut)
	}
	if code, _, errOut := runCmd(t, "check", "-config", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("missing file: exit %d %q", code, errOut)
	}
}

func TestDemoHandlesTheIncident(t *testing.T) {
	code, out, errOut := runCmd(t, "demo")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"1        504     timeout",
		"2        200     forwarded",
		"17       200     replayed",
		"1 completed",
		"1 forwarded, 15 replayed",
		"webhook_duplicate_requests_total 15",
		"ok: points were deducted exactly once",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// startGateway runs `serve` in-process on a config pointing at an echo upstream.
func startGateway(t *testing.T, cfgText string) (gwURL, adminURL, cfgPath string) {
	t.Helper()
	up := &http.Server{Handler: echoHandler(discardLogger())}
	uln, _ := net.Listen("tcp", "127.0.0.1:0")
	go up.Serve(uln)
	t.Cleanup(func() { up.Close() })
	gw, adm := freePort(t), freePort(t)
	cfgText = strings.NewReplacer("%UPSTREAM%", "http://"+uln.Addr().String(), "%LISTEN%", gw, "%ADMIN%", adm).Replace(cfgText)
	cfgPath = filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	return "http://" + gw, "http://" + adm, cfgPath
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

const simConfig = `
listen: "%LISTEN%"
admin: { listen: "%ADMIN%" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    idempotency: { key: ["json:data.object.id", "header:Idempotency-Key"] }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: k1, secret: sim-secret }]
`

// buildBinary compiles clawgate once for the tests that need a real process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "clawgate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	eventually.True(t, url+" to answer", func() bool {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

func TestServeSimulateKeysReloadAndDrain(t *testing.T) {
	bin := buildBinary(t)
	gwURL, adminURL, cfgPath := startGateway(t, simConfig)
	var stderr lockedBuffer
	cmd := exec.Command(bin, "serve", "-config", cfgPath)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	waitReady(t, adminURL+"/healthz")

	// simulate: one forward, four replays.
	code, out, errOut := runCmd(t, "simulate", "-url", gwURL+"/webhook/order", "-route", "orders", "-times", "5", "-config", cfgPath)
	if code != 0 || !strings.Contains(out, "1 forwarded, 4 replayed") {
		t.Fatalf("simulate exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "simulate", "-url", gwURL+"/webhook/order", "-route", "nope", "-config", cfgPath); code != 2 || !strings.Contains(errOut, `no route "nope"`) {
		t.Fatalf("unknown route: %d %q", code, errOut)
	}

	// keys: an unknown key is absent; unknown route is a clear error.
	code, out, errOut = runCmd(t, "keys", "get", "-admin", adminURL, "orders", "never-seen")
	if code != 0 || !strings.Contains(out, `"state": "absent"`) {
		t.Fatalf("keys get: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "keys", "get", "-admin", adminURL, "nope", "k"); code != 1 || !strings.Contains(errOut, "unknown route") {
		t.Fatalf("keys unknown route: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "keys", "get", "-admin", "http://127.0.0.1:1", "orders", "k"); code != 1 || !strings.Contains(errOut, "cannot reach") {
		t.Fatalf("keys unreachable: %d %q", code, errOut)
	}

	// SIGHUP with a broken file keeps the running config.
	good, _ := os.ReadFile(cfgPath)
	os.WriteFile(cfgPath, []byte("routes: [ {name: x, bogus: 1} ]\n"), 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, &stderr, "config reload failed")
	os.WriteFile(cfgPath, good, 0o600)
	// The running config still serves: a new event goes through once.
	if code, out, _ := runCmd(t, "simulate", "-url", gwURL+"/webhook/order", "-times", "2", "-config", cfgPath); code != 0 {
		t.Fatalf("after a failed reload: %s", out)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, &stderr, "config reloaded")

	// SIGTERM drains and exits 0.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}

func waitLog(t *testing.T, b *lockedBuffer, want string) {
	t.Helper()
	eventually.Within(t, eventually.Bound, func() bool { return strings.Contains(b.String(), want) },
		func() string { return fmt.Sprintf("log never said %q:\n%s", want, b.String()) })
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lockedBuffer collects a child process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
