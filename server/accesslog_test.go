package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
)

// syncBuf is the application log the test reads while the gateway writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// accessLines reads the JSON lines of an access file.
func accessLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// log.access_file: the access lines (with host, proto and the upstream's
// address) go to the file and not to the application log, which keeps its
// own lines; a reload reopens the file after logrotate moved it.
func TestAccessFile(t *testing.T) { doortest.ForEach(t, testAccessFile) }

func testAccessFile(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	dir := t.TempDir()
	y := doorYAML(t, `
listen: "127.0.0.1:0"
admin: { listen: "" }
log: { access_file: access.log }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: `+up.URL+`
    idempotency: { key: ["header:Idempotency-Key"], allow_unsigned_key: true }
    verify: { scheme: none }
`)
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o600)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var app syncBuf
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(&app, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	checkDoor(t, s)
	stopped := false
	defer func() {
		if !stopped {
			s.Shutdown(time.Second)
		}
	}()
	post := func(key string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr().String()+"/webhook/order", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		req.Host = "hooks.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post("evt_1")
	logPath := filepath.Join(dir, "access.log")
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(cfgPath); err != nil {
		t.Fatal(err)
	}
	post("evt_2")
	s.Shutdown(time.Second)
	stopped = true

	for file, key := range map[string]string{logPath + ".1": "evt_1", logPath: "evt_2"} {
		lines := accessLines(t, file)
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines, want 1: %v", file, len(lines), lines)
		}
		l := lines[0]
		for k, v := range map[string]any{"msg": "delivery", "key": key, "host": "hooks.example.com", "proto": "HTTP/1.1",
			"upstream": strings.TrimPrefix(up.URL, "http://"), "status": 200.0, "outcome": "forwarded"} {
			if l[k] != v {
				t.Errorf("%s: %s = %v, want %v\n%v", file, k, l[k], v, l)
			}
		}
	}
	if a := app.String(); strings.Contains(a, `"msg":"delivery"`) || !strings.Contains(a, `"msg":"config reloaded"`) {
		t.Errorf("application log:\n%s", a)
	}
}

// An access file that cannot be opened fails Start, naming it.
func TestAccessFileUnopenable(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, "127.0.0.1:0")
	cfg.Log.AccessFile = filepath.Join(dir, "missing", "access.log")
	if _, err := Start(cfg, opts()); err == nil || !strings.Contains(err.Error(), "missing/access.log") {
		t.Fatalf("Start: %v", err)
	}
}
