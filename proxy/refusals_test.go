package proxy_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
)

// Regression tests of what the gateway refuses (docs/security.md).

// TestUpstream101IsAnswered502NeverRelayed: an upstream that answers 101
// Switching Protocols to a request that asked for no upgrade gets the
// caller a 502; the 101 and what follows it never reach the caller, and
// the connection it came on is not reused for the next delivery.
func TestUpstream101IsAnswered502NeverRelayed(t *testing.T) {
	doortest.ForEach(t, testUpstream101IsAnswered502NeverRelayed)
}

func testUpstream101IsAnswered502NeverRelayed(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		c, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: tunnel\r\nConnection: Upgrade\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\ntunnelled")
		bw.Flush()
		// The connection stays open, speaking "tunnel": a delivery sent on
		// it would never be answered.
		<-release
	})
	r := h.post(t, "/webhook/order", "evt_101", event)
	if r.status != http.StatusBadGateway || strings.Contains(r.body, "tunnelled") {
		t.Fatalf("upstream 101: %d %q, want a 502 of the gateway's own", r.status, r.body)
	}
	if r := h.post(t, "/webhook/order", "evt_101_next", event); r.status != 200 || r.body != "ok" {
		t.Fatalf("the delivery after the 101: %d %q, want 200 from a fresh connection", r.status, r.body)
	}
}

// TestUpstreamDribblingPastTheTimeoutIs504: an upstream that starts its
// answer in time but sends its body slower than the route's timeout is a
// timeout (504, the lock released as "timeout"), not an unreachable
// upstream (502).
func TestUpstreamDribblingPastTheTimeoutIs504(t *testing.T) {
	doortest.ForEach(t, testUpstreamDribblingPastTheTimeoutIs504)
}

func testUpstreamDribblingPastTheTimeoutIs504(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		for range 100 {
			if _, err := io.WriteString(w, "x"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}, withConfig(strings.Replace(baseConfig, "timeout: 2s", "timeout: 300ms", 1)))
	r := h.post(t, "/webhook/order", "evt_dribble", event)
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("dribbling upstream: %d %s, want 504", r.status, r.body)
	}
	if v := h.metric("webhook_lock_released_total", map[string]string{"reason": "timeout"}); v != 1 {
		t.Fatalf("lock released{timeout} = %v, want 1", v)
	}
}

// TestDotSegmentWithParametersIsRefused: "..;" passed a prefix route and
// reached the upstream as "/api/..;/secret", which Tomcat, Jetty and
// Spring read as "/secret" (they drop a segment's ";" parameters). A
// segment that is "." or ".." before a ";", sent as is or escaped, is
// refused with 400 and never forwarded.
func TestDotSegmentWithParametersIsRefused(t *testing.T) {
	doortest.ForEach(t, testDotSegmentWithParametersIsRefused)
}

func testDotSegmentWithParametersIsRefused(t *testing.T) {
	cfg := `
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: p
    match: { path_prefix: /p/ }
    upstream: %UPSTREAM%/api
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`
	h := newHarness(t, nil, withConfig(cfg))
	for i, tc := range []struct {
		target string
		want   int
		path   string // for 200, the path the upstream saw
	}{
		{"/p/..;/secret", 400, ""},
		{"/p/x/..;/..;/secret", 400, ""},
		{"/p/%2e%2e;/secret", 400, ""},
		{"/p/%2E%2e;jsessionid=1/secret", 400, ""},
		{"/p/..%3b/secret", 400, ""},
		{"/p/.;/secret", 400, ""},
		{"/p/x/..;", 400, ""},
		{"/p/x;a=1/y", 200, "/api/p/x;a=1/y"}, // parameters on a name are the upstream's business
		{"/p/...;/y", 200, "/api/p/...;/y"},   // "..." is a name
		{"/p/a..;/y", 200, "/api/p/a..;/y"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"evt_dotparam_%d"}`, i)
			before := h.upCalls.Load()
			req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", tc.target, len(body), body)
			lines := statusLines(raw(t, h.srv.Addr, req, false))
			if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf(" %d ", tc.want)) {
				t.Fatalf("answered %q, want %d", lines, tc.want)
			}
			if tc.want != 200 {
				if h.upCalls.Load() != before {
					t.Fatal("forwarded although refused")
				}
				return
			}
			h.mu.Lock()
			got := h.upReqs[len(h.upReqs)-1].URL.EscapedPath()
			h.mu.Unlock()
			if got != tc.path {
				t.Fatalf("upstream saw %q, want %q", got, tc.path)
			}
		})
	}
}

// TestDeclaredLengthDoesNotReserveTheBody: a Content-Length costs the
// caller nothing to write, and the body buffer was sized by it before any
// of the body arrived: connections announcing max_body and sending a few
// kilobytes each pinned max_body for the read timeout. The buffer grows
// with the bytes that arrive.
func TestDeclaredLengthDoesNotReserveTheBody(t *testing.T) {
	doortest.ForEach(t, testDeclaredLengthDoesNotReserveTheBody)
}

func testDeclaredLengthDoesNotReserveTheBody(t *testing.T) {
	const (
		maxBody = 8 << 20
		conns   = 8
		sent    = 16 << 10 // past the fasthttp door's 8 KiB pre-read
	)
	h := newHarness(t, nil, withConfig(strings.Replace(baseConfig, "max_body: 1KiB", "max_body: 8MiB", 1)))
	before := heapInUse()
	head := fmt.Sprintf("POST /webhook/order HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n", maxBody)
	for range conns {
		c, err := net.Dial("tcp", h.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, head+strings.Repeat("a", sent)); err != nil {
			t.Fatal(err)
		}
	}
	// Every delivery is waiting for the rest of its body, its buffer made.
	n := 0
	eventually.Within(t, 10*time.Second, func() bool { n = readingBodies(); return n >= conns },
		func() string { return fmt.Sprintf("%d of %d deliveries reached the body read", n, conns) })
	grew := heapInUse() - before
	t.Logf("%d connections announcing %d bytes, %d sent each: the heap grew by %d bytes", conns, maxBody, sent, grew)
	if limit := int64(conns * maxBody / 4); grew > limit {
		t.Fatalf("the heap grew by %d bytes (over %d) for %d connections that sent %d bytes each: the declared length was reserved",
			grew, limit, conns, sent)
	}
}

// heapInUse is the bytes of live heap objects after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// readingBodies counts the goroutines blocked reading a delivery's body
// (past the point where its buffer is made).
func readingBodies() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*delivery).readBody") && strings.Contains(g, "(*Buffer).ReadFrom") {
			n++
		}
	}
	return n
}

// TestURLSignedRequestMustComeWithTheSignedTarget: a Twilio request signed
// for public_url "...?acct=1" but sent with "?acct=2&role=admin" verified
// (the signature covers public_url, not the request) and the upstream got
// the changed query. A URL-signed route refuses a request whose path or
// query is not public_url's with 401.
func TestURLSignedRequestMustComeWithTheSignedTarget(t *testing.T) {
	doortest.ForEach(t, testURLSignedRequestMustComeWithTheSignedTarget)
}

func testURLSignedRequestMustComeWithTheSignedTarget(t *testing.T) {
	const publicURL = "https://hooks.example.com/webhook/twilio?acct=1"
	cfg := `
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: sms
    match: { path_prefix: /webhook/twilio }
    upstream: %UPSTREAM%/api
    provider: twilio
    public_url: ` + publicURL + `
    verify: { secrets: [{ id: a, secret: twilio-token }] }
`
	h := newHarness(t, nil, withConfig(cfg))
	for i, tc := range []struct {
		target string
		want   int
	}{
		{"/webhook/twilio?acct=2&role=admin", 401},
		{"/webhook/twilio?acct=1&role=admin", 401},
		{"/webhook/twilio", 401},
		{"/webhook/twilio/admin?acct=1", 401},
		{"/webhook/twilio?acct=%31", 401}, // not the same bytes: the upstream may read it otherwise
		{"/webhook/twilio/x/..?acct=1", 401},
		{"/webhook/twilio?acct=1", 200},
	} {
		t.Run(tc.target, func(t *testing.T) {
			form := url.Values{"MessageSid": {fmt.Sprintf("SM%d", i)}, "From": {"+15005550006"}}
			body := form.Encode()
			before := h.upCalls.Load()
			req, err := http.NewRequest(http.MethodPost, h.srv.URL+tc.target, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", twilioSignature("twilio-token", publicURL, form))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want != 200 {
				if h.upCalls.Load() != before {
					t.Fatal("forwarded although refused")
				}
				return
			}
			h.mu.Lock()
			got := h.upReqs[len(h.upReqs)-1].URL.RequestURI()
			h.mu.Unlock()
			if got != "/api/webhook/twilio?acct=1" {
				t.Fatalf("upstream got %q", got)
			}
		})
	}
	if v := h.metric("webhook_signature_failures_total", map[string]string{"reason": "mismatch"}); v != 6 {
		t.Fatalf("signature failures{mismatch} = %v, want 6", v)
	}
}

// twilioSignature is Twilio's X-Twilio-Signature: HMAC-SHA1 over the URL,
// then each field's name and value, sorted by name, base64.
func twilioSignature(token, u string, form url.Values) string {
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	m := hmac.New(sha1.New, []byte(token))
	io.WriteString(m, u)
	for _, n := range names {
		for _, v := range form[n] {
			io.WriteString(m, n+v)
		}
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestOptionsStarIsTheGatewaysOwn404: "OPTIONS *" got net/http's own
// empty 200 on one front door and the gateway's answer on the other. Both
// answer the gateway's JSON 404 (no route).
func TestOptionsStarIsTheGatewaysOwn404(t *testing.T) {
	doortest.ForEach(t, testOptionsStarIsTheGatewaysOwn404)
}

func testOptionsStarIsTheGatewaysOwn404(t *testing.T) {
	h := newHarness(t, nil)
	resp := raw(t, h.srv.Addr, "OPTIONS * HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", false)
	if lines := statusLines(resp); len(lines) != 1 || !strings.HasPrefix(lines[0], "HTTP/1.1 404 ") ||
		!strings.HasSuffix(resp, "{\"error\":\"no route\",\"route\":\"unmatched\"}\n") {
		t.Fatalf("OPTIONS *: %q, want the gateway's JSON 404", resp)
	}
}

// TestExpectContinueOverMaxBodyIs413WithoutContinue: fasthttp sent 100
// Continue, then 413, for a declared length over max_body (net/http
// answered 413 at once). Both answer the gateway's JSON 413 without a
// 100 Continue, and close the connection.
func TestExpectContinueOverMaxBodyIs413WithoutContinue(t *testing.T) {
	doortest.ForEach(t, testExpectContinueOverMaxBodyIs413WithoutContinue)
}

func testExpectContinueOverMaxBodyIs413WithoutContinue(t *testing.T) {
	h := newHarness(t, nil)
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// No body follows: a client waiting for 100 Continue sends none.
	io.WriteString(c, "POST /webhook/order HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 4096\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the connection did not end after the answer: %v (read %q)", err, b)
	}
	resp := string(b)
	lines := statusLines(resp)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "HTTP/1.1 413 ") ||
		!strings.HasSuffix(resp, "{\"error\":\"body larger than max_body\",\"route\":\"orders\"}\n") {
		t.Fatalf("answered %q, want the gateway's JSON 413 alone", resp)
	}
	if v := h.metric("webhook_requests_total", map[string]string{"route": "orders", "code": "413"}); v != 1 {
		t.Fatalf("webhook_requests_total{413} = %v, want 1", v)
	}
}
