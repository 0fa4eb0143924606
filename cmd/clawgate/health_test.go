package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// adminStub answers /healthz and /readyz like the admin listener, with the
// readiness status the test sets, and records what it was asked.
type adminStub struct {
	mu     sync.Mutex
	ready  int
	paths  []string
	tokens []string
}

func (a *adminStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.paths = append(a.paths, r.URL.Path)
	a.tokens = append(a.tokens, r.Header.Get("Authorization"))
	ready := a.ready
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/healthz":
		w.Write([]byte(`{"status":"ok"}`))
	case "/readyz":
		w.WriteHeader(ready)
		if ready == http.StatusOK {
			w.Write([]byte(`{"status":"ready"}`))
		} else {
			w.Write([]byte("{\"status\":\"not ready\",\n \"error\":\"store: dial tcp 10.0.0.9:6379: connection refused\"}\n"))
		}
	case "/moved":
		http.Redirect(w, r, "/healthz", http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

func (a *adminStub) asked() ([]string, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.paths...), append([]string(nil), a.tokens...)
}

// withHealthAdmin points the default URL of `clawgate health` at base.
func withHealthAdmin(t *testing.T, base string) {
	t.Helper()
	old := healthAdmin
	healthAdmin = base
	t.Cleanup(func() { healthAdmin = old })
}

func TestHealthReady200(t *testing.T) {
	stub := &adminStub{ready: http.StatusOK}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	withHealthAdmin(t, srv.URL)
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "")

	code, out, errOut := runCmd(t, "health")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "ok: GET "+srv.URL+"/readyz: 200 OK in ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout %q", out)
	}
	if paths, tokens := stub.asked(); len(paths) != 1 || paths[0] != "/readyz" || tokens[0] != "" {
		t.Fatalf("asked %v with tokens %q", paths, tokens)
	}
}

func TestHealthLiveProbesHealthz(t *testing.T) {
	// Not ready, but alive: -live only asks whether the process answers.
	stub := &adminStub{ready: http.StatusServiceUnavailable}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	withHealthAdmin(t, srv.URL)

	code, out, errOut := runCmd(t, "health", "-live")
	if code != 0 || !strings.HasPrefix(out, "ok: GET "+srv.URL+"/healthz: 200 OK") {
		t.Fatalf("exit %d: %q %q", code, out, errOut)
	}
	if paths, _ := stub.asked(); len(paths) != 1 || paths[0] != "/healthz" {
		t.Fatalf("asked %v", paths)
	}
}

func TestHealth503Exit1WithBody(t *testing.T) {
	stub := &adminStub{ready: http.StatusServiceUnavailable}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	t.Setenv("CLAWGATE_ADMIN_TOKEN", "s3cret")

	code, out, errOut := runCmd(t, "health", "-url", srv.URL+"/readyz")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	want := "unhealthy: GET " + srv.URL + "/readyz: 503 Service Unavailable in "
	if !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, `"error":"store: dial tcp 10.0.0.9:6379: connection refused"`) {
		t.Fatalf("stderr %q, want one line starting %q with the body", errOut, want)
	}
	// The token lets /readyz say why; it must never be printed.
	if _, tokens := stub.asked(); len(tokens) != 1 || tokens[0] != "Bearer s3cret" {
		t.Fatalf("tokens sent %q", tokens)
	}
	if strings.Contains(errOut, "s3cret") {
		t.Fatalf("token printed: %q", errOut)
	}
}

func TestHealthOtherAnswersExit1(t *testing.T) {
	srv := httptest.NewServer(&adminStub{ready: http.StatusOK})
	defer srv.Close()
	for _, path := range []string{"/moved", "/nope"} {
		code, out, errOut := runCmd(t, "health", "-url", srv.URL+path)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "unhealthy: GET "+srv.URL+path+": ") {
			t.Fatalf("%s: exit %d: %q %q", path, code, out, errOut)
		}
	}
}

func TestHealthUnreachableExit1(t *testing.T) {
	// A port nothing listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	withHealthAdmin(t, "http://"+addr)

	code, out, errOut := runCmd(t, "health")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if !strings.HasPrefix(errOut, "unhealthy: GET http://"+addr+"/readyz: ") ||
		!strings.Contains(errOut, "refused") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestHealthTimeoutExit1(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	start := time.Now()
	code, _, errOut := runCmd(t, "health", "-url", srv.URL+"/readyz", "-timeout", "200ms")
	if code != 1 || !strings.Contains(errOut, "Timeout") {
		t.Fatalf("exit %d: %q", code, errOut)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s with -timeout 200ms", took)
	}
}

func TestHealthUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"health", "-nope"},
		{"health", "extra"},
		{"health", "-url", "ftp://127.0.0.1:9090/readyz"},
		{"health", "-url", "127.0.0.1:9090/readyz"},
		{"health", "-url", "http:///readyz"},
		{"health", "-url", "http://127.0.0.1:9090/readyz", "-live"},
		{"health", "-timeout", "0s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if code, out, errOut := runCmd(t, args...); code != 2 || out != "" || errOut == "" {
				t.Fatalf("exit %d: %q %q", code, out, errOut)
			}
		})
	}
}

func TestHealthHelpExit0(t *testing.T) {
	code, out, errOut := runCmd(t, "health", "-h")
	if help := out + errOut; code != 0 || !strings.Contains(help, "-live") || !strings.Contains(help, "/readyz") {
		t.Fatalf("exit %d: %q", code, help)
	}
}
