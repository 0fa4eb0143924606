package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
)

// raw sends bytes on a fresh loopback connection, optionally half-closes
// it, and returns everything the gateway wrote back until it closed the
// connection or went quiet for the read deadline.
func raw(t *testing.T, addr, req string, halfClose bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

func statusLines(resp string) []string {
	var out []string
	for _, l := range strings.Split(resp, "\r\n") {
		if strings.HasPrefix(l, "HTTP/1.") {
			out = append(out, l)
		}
	}
	return out
}

func signedRaw(method, target, key string, body []byte, extra string) string {
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: gw\r\nX-Signature: %s\r\nIdempotency-Key: %s\r\nContent-Length: %d\r\n%s\r\n%s",
		method, target, sign(body), key, len(body), extra, body)
}

// Regression: a body that ended early (the caller half-closed mid-body) was
// answered "200 OK" with an empty body, although nothing was forwarded: the
// provider took the event as delivered and it was lost.
func TestBodyEndingEarlyIsNeverAnswered2xx(t *testing.T) {
	doortest.ForEach(t, testBodyEndingEarlyIsNeverAnswered2xx)
}

func testBodyEndingEarlyIsNeverAnswered2xx(t *testing.T) {
	h := newHarness(t, nil)
	req := fmt.Sprintf("POST /webhook/order HTTP/1.1\r\nHost: gw\r\nX-Signature: %s\r\nIdempotency-Key: evt_short\r\nContent-Length: %d\r\n\r\n%s",
		sign(event), len(event)+50, event)
	resp := raw(t, h.srv.Addr, req, true)
	for _, l := range statusLines(resp) {
		if strings.Contains(l, " 2") {
			t.Fatalf("a short body was answered %q", l)
		}
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("upstream called %d times", h.upCalls.Load())
	}
}

// Regression: a body still incomplete when the read timeout fired was also
// answered "200 OK".
func TestBodyIncompleteAtReadTimeoutIsNeverAnswered2xx(t *testing.T) {
	doortest.ForEach(t, testBodyIncompleteAtReadTimeoutIsNeverAnswered2xx)
}

func testBodyIncompleteAtReadTimeoutIsNeverAnswered2xx(t *testing.T) {
	h := newHarness(t, nil, withLimits(func(l *proxy.Limits) { l.ReadTimeout = 300 * time.Millisecond }))
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /webhook/order HTTP/1.1\r\nHost: gw\r\nX-Signature: %s\r\nIdempotency-Key: evt_slow\r\nContent-Length: %d\r\n\r\n%s",
		sign(event), len(event)+50, event[:10])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(c) // the gateway answers or closes after its read timeout
	for _, l := range statusLines(string(b)) {
		if strings.Contains(l, " 2") {
			t.Fatalf("an incomplete body was answered %q", l)
		}
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("upstream called %d times", h.upCalls.Load())
	}
}

// Regression: dot segments escaped a prefix route's upstream base path.
// Matching used the decoded path and the raw path was forwarded, so
// "/h/pfx/../admin" reached the upstream at "/base/h/pfx/../admin".
func TestDotSegmentsNeverEscapeTheRoutesPath(t *testing.T) {
	doortest.ForEach(t, testDotSegmentsNeverEscapeTheRoutesPath)
}

func testDotSegmentsNeverEscapeTheRoutesPath(t *testing.T) {
	cfg := `
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: pfx
    match: { path_prefix: /h/pfx/ }
    upstream: %UPSTREAM%/base
    idempotency: { key: ["json:id"] }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: k1, secret: test-secret }]
`
	h := newHarness(t, nil, withConfig(cfg))
	addr := h.srv.Addr
	for i, tc := range []struct {
		target string
		want   string // status code, and for 200 the path the upstream saw
		path   string
	}{
		{"/h/pfx/../admin", "404", ""},
		{"/h/pfx/%2e%2e/admin", "404", ""},
		{"/h/pfx/%2E%2E/%2e%2e/admin", "404", ""},
		{"/h/pfx/x/../../admin", "404", ""},
		{"/h/pfx/..%2fadmin", "400", ""},
		{"/h/pfx/..%5cadmin", "400", ""},
		{"/h/pfx/../../../etc/passwd", "400", ""},
		{"/../h/pfx/a", "400", ""},
		{"/h/pfx/a/./b/../c", "200", "/base/h/pfx/a/c"},
		{"/h/other/../pfx/ok", "200", "/base/h/pfx/ok"},
		{"/h/pfx/.well-known/x", "200", "/base/h/pfx/.well-known/x"},
	} {
		body := []byte(fmt.Sprintf(`{"id":"evt_path_%d"}`, i))
		before := h.upCalls.Load()
		resp := raw(t, addr, signedRaw("POST", tc.target, "", body, "Connection: close\r\n"), false)
		lines := statusLines(resp)
		if len(lines) != 1 || !strings.Contains(lines[0], " "+tc.want+" ") {
			t.Errorf("%s: answered %q, want %s", tc.target, lines, tc.want)
			continue
		}
		if tc.want != "200" {
			if h.upCalls.Load() != before {
				t.Errorf("%s: forwarded although refused", tc.target)
			}
			continue
		}
		h.mu.Lock()
		got := h.upReqs[len(h.upReqs)-1].URL.Path
		h.mu.Unlock()
		if got != tc.path {
			t.Errorf("%s: upstream saw %q, want %q", tc.target, got, tc.path)
		}
	}
}

// Regression: a captured signed delivery was forwarded again and again
// under fresh Idempotency-Key headers, which the signature does not cover.
func TestSignedRequestReplayedUnderFreshKeyIsRefused(t *testing.T) {
	doortest.ForEach(t, testSignedRequestReplayedUnderFreshKeyIsRefused)
}

func testSignedRequestReplayedUnderFreshKeyIsRefused(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML(`    idempotency: { key: ["header:Idempotency-Key"] }`))
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	for _, key := range []string{"evt_b", "evt_c", "evt_d"} {
		r := h.post(t, "/webhook/order", key, event)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("replay under %s: %d %s", key, r.status, r.body)
		}
	}
	// The provider's own retry (same key, same signed request) is replayed.
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	// Another signed request under its own key goes through.
	if r := h.post(t, "/webhook/order", "evt_e", []byte(`{"id":"evt_e"}`)); r.status != 200 {
		t.Fatalf("new event: %d", r.status)
	}
	if n := h.upCalls.Load(); n != 2 {
		t.Fatalf("upstream saw %d deliveries, want 2", n)
	}
	if v := h.metric("webhook_signature_replays_total", map[string]string{"route": "orders"}); v != 3 {
		t.Fatalf("webhook_signature_replays_total = %v, want 3", v)
	}
}

// In shadow mode a replayed signature is counted and forwarded anyway, once.
func TestReplayGuardInShadowModeCountsAndForwards(t *testing.T) {
	doortest.ForEach(t, testReplayGuardInShadowModeCountsAndForwards)
}

func testReplayGuardInShadowModeCountsAndForwards(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    dedupe: { mode: shadow }\n    idempotency: { key: [\"header:Idempotency-Key\"] }"))
	for _, key := range []string{"evt_a", "evt_b"} {
		if r := h.post(t, "/webhook/order", key, event); r.status != 200 || r.body != `{"ok":true}` {
			t.Fatalf("%s: %d %q", key, r.status, r.body)
		}
	}
	if n := h.upCalls.Load(); n != 2 {
		t.Fatalf("upstream saw %d deliveries, want 2", n)
	}
	if v := h.metric("webhook_signature_replays_total", map[string]string{"route": "orders"}); v != 1 {
		t.Fatalf("webhook_signature_replays_total = %v, want 1", v)
	}
}

// A signed request whose delivery failed upstream is released, so the
// provider's retry under the same key goes through.
func TestReplayGuardReleasesFailedDeliveries(t *testing.T) {
	doortest.ForEach(t, testReplayGuardReleasesFailedDeliveries)
}

func testReplayGuardReleasesFailedDeliveries(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	}, withRouteYAML(`    idempotency: { key: ["header:Idempotency-Key"] }`))
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != 500 {
		t.Fatalf("first: %d", r.status)
	}
	fail.Store(false)
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != 200 {
		t.Fatalf("retry: %d", r.status)
	}
}

// Regression: no write deadline on the delivery listener, so a client that
// never read an 8 MB answer held it (and the key's in-flight mark) until
// it left.
func TestCallerThatStopsReadingIsCutOffAndDoesNotPinTheKey(t *testing.T) {
	doortest.ForEach(t, testCallerThatStopsReadingIsCutOffAndDoesNotPinTheKey)
}

func testCallerThatStopsReadingIsCutOffAndDoesNotPinTheKey(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, big)
	}, withWriteTimeout(200*time.Millisecond))
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, signedRaw("POST", "/webhook/order", "evt_big", event, ""))
	// Never read. The handler must end by itself: its access line appears.
	eventually.Within(t, eventually.Bound, func() bool { return accessLine(h, "evt_big") != nil },
		func() string { return "the handler is still writing to a caller that does not read" })
	// The key is finished, not pinned in flight: a retry is replayed.
	if r := h.post(t, "/webhook/order", "evt_big", event); r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
}

// Regression: a request with both Content-Length and Transfer-Encoding kept
// its connection open, and a request pipelined behind it was served.
func TestChunkedRequestClosesItsConnection(t *testing.T) {
	doortest.ForEach(t, testChunkedRequestClosesItsConnection)
}

func testChunkedRequestClosesItsConnection(t *testing.T) {
	h := newHarness(t, nil)
	chunk := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(event), event)
	req := fmt.Sprintf("POST /webhook/order HTTP/1.1\r\nHost: gw\r\nX-Signature: %s\r\nIdempotency-Key: evt_te\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n%s", sign(event), chunk) +
		signedRaw("POST", "/webhook/order", "evt_pipelined", []byte(`{"id":"p"}`), "")
	resp := raw(t, h.srv.Addr, req, false)
	if n := len(statusLines(resp)); n != 1 {
		t.Fatalf("%d answers on one connection, want 1:\n%s", n, resp)
	}
	if !strings.Contains(strings.ToLower(resp), "connection: close") {
		t.Fatalf("no Connection: close:\n%s", resp)
	}
	if h.upCalls.Load() > 1 {
		t.Fatalf("the pipelined request was forwarded too")
	}
}

// Regression: a client's X-Forwarded-For was kept and appended to, and
// X-Real-IP and Forwarded passed through: any client could name itself.
func TestForwardingHeadersFromClientsAreReplacedUnlessTrusted(t *testing.T) {
	doortest.ForEach(t, testForwardingHeadersFromClientsAreReplacedUnlessTrusted)
}

func testForwardingHeadersFromClientsAreReplacedUnlessTrusted(t *testing.T) {
	spoof := func(r *http.Request) {
		r.Header.Set("X-Forwarded-For", "6.6.6.6")
		r.Header.Set("X-Real-IP", "6.6.6.6")
		r.Header.Set("Forwarded", "for=6.6.6.6")
		r.Header.Set("X-Forwarded-Proto", "https")
	}
	for _, tc := range []struct {
		name, yaml         string
		xff, realIP, proto string
	}{
		{"untrusted", baseConfig, "127.0.0.1", "", "http"},
		{"trusted", "trusted_proxies: [127.0.0.0/8]\n" + baseConfig, "6.6.6.6, 127.0.0.1", "6.6.6.6", "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, withConfig(tc.yaml))
			if r := h.post(t, "/webhook/order", "evt_xff", event, spoof); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			h.mu.Lock()
			got := h.upReqs[0].Header
			h.mu.Unlock()
			if got.Get("X-Forwarded-For") != tc.xff || got.Get("X-Real-Ip") != tc.realIP || got.Get("X-Forwarded-Proto") != tc.proto {
				t.Fatalf("upstream saw X-Forwarded-For %q X-Real-IP %q X-Forwarded-Proto %q",
					got.Get("X-Forwarded-For"), got.Get("X-Real-Ip"), got.Get("X-Forwarded-Proto"))
			}
			if tc.name == "untrusted" && got.Get("Forwarded") != "" {
				t.Fatalf("Forwarded passed through: %q", got.Get("Forwarded"))
			}
		})
	}
}

// finishOutage makes Finish fail while down is set, like a Redis restart.
type finishOutage struct {
	store.Store
	down  atomic.Bool
	fails atomic.Int64
}

func (f *finishOutage) Finish(ctx context.Context, key, token string, out store.Outcome, retention time.Duration) error {
	if f.down.Load() {
		f.fails.Add(1)
		return fmt.Errorf("connection refused: %w", store.ErrUnavailable)
	}
	return f.Store.Finish(ctx, key, token, out, retention)
}

// Regression: Finish was retried for about 150 ms and then given up; a
// Redis restart takes longer, so after lock_ttl the provider's next copy
// was forwarded a second time.
func TestFinishIsRecordedAfterAStoreOutageLongerThanItsRetries(t *testing.T) {
	doortest.ForEach(t, testFinishIsRecordedAfterAStoreOutageLongerThanItsRetries)
}

func testFinishIsRecordedAfterAStoreOutageLongerThanItsRetries(t *testing.T) {
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	st := &finishOutage{Store: mem}
	st.down.Store(true)
	h := newHarness(t, nil, withStore(st))
	if r := h.post(t, "/webhook/order", "evt_outage", event); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	// The answer waited for the foreground tries; the outage lasts until
	// background tries failed too.
	eventually.True(t, "finish tries past the foreground ones to fail", func() bool { return st.fails.Load() >= 6 })
	st.down.Store(false)
	var ks store.KeyState
	eventually.Within(t, eventually.Bound, func() bool {
		ks, _ = mem.Get(context.Background(), "orders:evt_outage")
		return ks.State == store.Finished
	}, func() string { return fmt.Sprintf("key %v after the outage, want finished", ks.State) })
	if v := h.metric("webhook_finish_deferred_total", map[string]string{"result": "recorded"}); v != 1 {
		t.Fatalf("webhook_finish_deferred_total{result=recorded} = %v", v)
	}
}

// Regression: when Redis came back without its data the lock was gone, the
// finish found no owner and recorded nothing, and the next copy was
// forwarded again. Now the outcome is recorded when no other copy holds the
// key.
func TestFinishIsRecordedWhenTheStoreLostTheLock(t *testing.T) {
	doortest.ForEach(t, testFinishIsRecordedWhenTheStoreLostTheLock)
}

func testFinishIsRecordedWhenTheStoreLostTheLock(t *testing.T) {
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	st := &finishOutage{Store: mem}
	st.down.Store(true)
	h := newHarness(t, nil, withStore(st))
	if r := h.post(t, "/webhook/order", "evt_lost", event); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	// The store restarts empty: the lock is gone.
	fresh := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	st.Store = fresh
	st.down.Store(false)
	var ks store.KeyState
	eventually.Within(t, eventually.Bound, func() bool {
		ks, _ = fresh.Get(context.Background(), "orders:evt_lost")
		return ks.State == store.Finished
	}, func() string { return fmt.Sprintf("key %v in the restarted store, want finished", ks.State) })
}

// Regression (found by model checking the key protocol): a delivery in
// flight during an operator's reset put its pre-reset outcome into the
// local window afterwards, so the instance kept replaying the key the
// operator had just reset.
func TestResetDuringADeliveryIsNotUndone(t *testing.T) {
	doortest.ForEach(t, testResetDuringADeliveryIsNotUndone)
}

func testResetDuringADeliveryIsNotUndone(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release
		}
		w.WriteHeader(200)
	}, withStore(mem))
	answered := make(chan result)
	go func() { answered <- h.post(t, "/webhook/order", "evt_reset", event) }()
	eventually.True(t, "the delivery to reach the upstream", func() bool { return calls.Load() > 0 })
	// The operator's reset, as the admin API does it.
	if _, err := mem.Delete(context.Background(), "orders:evt_reset"); err != nil {
		t.Fatal(err)
	}
	h.gw.Forget("orders:evt_reset")
	close(release)
	if r := <-answered; r.status != 200 {
		t.Fatalf("in-flight delivery: %d", r.status)
	}
	r := h.post(t, "/webhook/order", "evt_reset", event)
	if r.header.Get("Idempotent-Replayed") == "true" || calls.Load() != 2 {
		t.Fatalf("after the reset the next delivery was replayed (upstream calls %d)", calls.Load())
	}
}

// The access line of a 409 and a 503 names the attempt when it is known,
// and a long path is cut.
func TestAccessLineAttemptAndLongPath(t *testing.T) {
	doortest.ForEach(t, testAccessLineAttemptAndLongPath)
}

func testAccessLineAttemptAndLongPath(t *testing.T) {
	block := make(chan struct{})
	var calls atomic.Int64
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-block
		w.WriteHeader(200)
	})
	first := make(chan result)
	go func() { first <- h.post(t, "/webhook/order", "evt_409", event) }()
	eventually.True(t, "the first copy to reach the upstream", func() bool { return calls.Load() > 0 })
	r := h.post(t, "/webhook/order", "evt_409", event)
	close(block)
	<-first
	if r.status != 409 {
		t.Fatalf("second copy: %d", r.status)
	}
	deliver(t, h.srv.URL+"/"+strings.Repeat("a", 5000), "", event)
	var saw409, sawLong bool
	for _, l := range h.logs.Lines() {
		if l["msg"] != "delivery" {
			continue
		}
		if l["status"] == float64(409) {
			saw409 = true
			if n, _ := l["attempt"].(float64); n < 2 {
				t.Errorf("409 access line attempt %v", l["attempt"])
			}
		}
		if l["status"] == float64(404) {
			sawLong = true
			if p, _ := l["path"].(string); len(p) > 300 {
				t.Errorf("404 path of %d bytes in the log", len(p))
			}
		}
	}
	if !saw409 || !sawLong {
		t.Fatalf("access lines missing: 409 %v, 404 %v", saw409, sawLong)
	}
}

// Regression: a forwarded answer carried no X-Request-Id (the gateway's own
// answers and replays did), so the one row a user greps for had none.
func TestEveryAnswerCarriesXRequestId(t *testing.T) {
	doortest.ForEach(t, testEveryAnswerCarriesXRequestId)
}

func testEveryAnswerCarriesXRequestId(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "the-upstream-must-not-win")
		w.WriteHeader(200)
	})
	mine := func(r *http.Request) { r.Header.Set("X-Request-Id", "req-42") }
	for _, what := range []string{"forwarded", "replayed"} {
		r := h.post(t, "/webhook/order", "evt_rid", event, mine)
		if got := r.header.Values("X-Request-Id"); len(got) != 1 || got[0] != "req-42" {
			t.Fatalf("%s answer: X-Request-Id %q, want [req-42]", what, got)
		}
	}
}

// stallingStore is a store whose claim waits until the request's context
// ends (a store that hangs), telling claimed when it starts waiting.
type stallingStore struct {
	store.Store
	claimed chan struct{}
}

func (s stallingStore) Claim(ctx context.Context, _, _ string, _ time.Duration) (store.Claim, error) {
	s.claimed <- struct{}{}
	<-ctx.Done()
	return store.Claim{}, fmt.Errorf("claim: %w", errors.Join(store.ErrUnavailable, ctx.Err()))
}

// A caller that hangs up while its delivery waits on the store is logged
// 499 (Nginx's "client closed request"), counted, never forwarded and
// gets nothing written: on both front doors, which must notice the
// hang-up while the delivery waits.
func TestCallerHangingUpWhileTheStoreWaitsIs499(t *testing.T) {
	doortest.ForEach(t, testCallerHangingUpWhileTheStoreWaitsIs499)
}

func testCallerHangingUpWhileTheStoreWaitsIs499(t *testing.T) {
	st := stallingStore{Store: ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100}), claimed: make(chan struct{}, 1)}
	h := newHarness(t, nil, withStore(st))
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, signedRaw("POST", "/webhook/order", "evt_gone", event, ""))
	select {
	case <-st.claimed:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery never reached the store")
	}
	c.Close()
	var line map[string]any
	eventually.Within(t, eventually.Bound, func() bool { line = accessLine(h, "evt_gone"); return line != nil },
		func() string { return "no access line: the delivery still waits on the store after its caller left" })
	if line["status"] != float64(499) || line["outcome"] != "error" {
		t.Fatalf("access line %v, want status 499, outcome error", line)
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("forwarded %d times", h.upCalls.Load())
	}
	if got := h.metric("webhook_requests_total", map[string]string{"route": "orders", "code": "499"}); got != 1 {
		t.Fatalf("webhook_requests_total{code=499} = %v", got)
	}
}

// Regression: the fasthttp front door took a request without a body (no
// Content-Length, not chunked) for a chunked one and closed the
// connection after every such answer.
func TestRequestWithoutABodyKeepsItsConnection(t *testing.T) {
	doortest.ForEach(t, testRequestWithoutABodyKeepsItsConnection)
}

func testRequestWithoutABodyKeepsItsConnection(t *testing.T) {
	h := newHarness(t, nil)
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ { // the second request goes on the same connection
		if _, err := io.WriteString(c, "GET /webhook/order HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Close {
			t.Fatalf("answer %d: %d, close %v; want 405 on a connection kept open", i+1, resp.StatusCode, resp.Close)
		}
	}
}

// Regression (found by FuzzFramingFastHTTP): a body that ended, with the
// caller's half-close, before the bytes its Content-Length declares was
// forwarded short by the fasthttp front door when it streamed the body
// (the body is past the smallest route's max_body), whose stream calls
// that end the end of the body. A short body is refused 400 on both
// doors, and nothing reaches the upstream.
func TestBodyShortOfItsContentLengthIsNeverForwarded(t *testing.T) {
	doortest.ForEach(t, testBodyShortOfItsContentLengthIsNeverForwarded)
}

func testBodyShortOfItsContentLengthIsNeverForwarded(t *testing.T) {
	// The tiny route makes the smallest max_body 16 bytes: fasthttp
	// streams every larger body.
	h := newHarness(t, nil, withConfig(`
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    max_body: 1KiB
    idempotency: { required: false }
    verify: { scheme: none }
  - name: tiny
    match: { path: /tiny }
    upstream: %UPSTREAM%
    max_body: 16
    idempotency: { required: false }
    verify: { scheme: none }
`))
	for _, sent := range []int{0, 50, 99} {
		t.Run(fmt.Sprint(sent), func(t *testing.T) {
			out := raw(t, h.srv.Addr, "POST /webhook/order HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n"+strings.Repeat("x", sent), true)
			if !strings.HasPrefix(out, "HTTP/1.1 400 ") {
				t.Errorf("%d of 100 bytes, then a half-close: answered %q, want 400", sent, firstLine(out))
			}
		})
	}
	if n := h.upCalls.Load(); n != 0 {
		t.Fatalf("a short body reached the upstream %d times", n)
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\r\n"); return l }

// A request pipelined behind a delivery that waits on its upstream (long
// enough for the fasthttp door's hang-up watch to start peeking at the
// connection) is left for the front door to read: both are answered, in
// order, on the one connection, and each reaches the upstream once.
func TestRequestPipelinedBehindAWaitingDeliveryIsServed(t *testing.T) {
	doortest.ForEach(t, testRequestPipelinedBehindAWaitingDeliveryIsServed)
}

func testRequestPipelinedBehindAWaitingDeliveryIsServed(t *testing.T) {
	arrived, gate := make(chan struct{}, 2), make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-gate
		io.WriteString(w, `{"ok":true}`)
	})
	defer close(gate)
	c, err := net.Dial("tcp", h.srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	peeks := proxy.HangUpPeeks()
	if _, err := io.WriteString(c, signedRaw("POST", "/webhook/order", "evt_first", event, "")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first delivery never reached the upstream")
	}
	// The second request arrives while the first still waits, and stays
	// unread in the socket for a while: the watch peeks at it then.
	if _, err := io.WriteString(c, signedRaw("POST", "/webhook/order", "evt_second", event, "")); err != nil {
		t.Fatal(err)
	}
	if doortest.Of(t) == config.ServerFastHTTP {
		// The fasthttp door's hang-up watch peeks at the socket and sees
		// the second request there: its peek ends, leaving the bytes.
		eventually.True(t, "the hang-up watch to peek at the pipelined request", func() bool { return proxy.HangUpPeeks() > peeks })
	}
	gate <- struct{}{}
	br := bufio.NewReader(c)
	for i, key := range []string{"evt_first", "evt_second"} {
		if i == 1 {
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the pipelined delivery never reached the upstream")
			}
			gate <- struct{}{}
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to %s: %v", key, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("answer to %s: %d, want 200", key, resp.StatusCode)
		}
	}
	if n := h.upCalls.Load(); n != 2 {
		t.Fatalf("the upstream received %d deliveries, want 2", n)
	}
}

// The idle and read-header timeouts hold on both doors: a keep-alive
// connection that sends nothing after its answer is closed, and so is one
// whose header never ends, without an answer and without reaching the
// upstream. (Short limits; the test waits for each close, at most 10 s,
// and times nothing.)
func TestIdleAndHeaderTimeoutsCloseTheConnection(t *testing.T) {
	doortest.ForEach(t, testIdleAndHeaderTimeoutsCloseTheConnection)
}

func testIdleAndHeaderTimeoutsCloseTheConnection(t *testing.T) {
	h := newHarness(t, nil, withLimits(func(l *proxy.Limits) {
		l.IdleTimeout, l.ReadHeaderTimeout = 200*time.Millisecond, 200*time.Millisecond
	}))
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", h.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}
	closed := func(br *bufio.Reader) (string, bool) {
		rest, err := io.ReadAll(br)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return string(rest), false
		}
		return string(rest), true
	}

	t.Run("idle", func(t *testing.T) {
		c, br := dial()
		io.WriteString(c, signedRaw("POST", "/webhook/order", "evt_idle", event, ""))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("answer: %d, close %v; want 200 on a kept connection", resp.StatusCode, resp.Close)
		}
		if rest, ok := closed(br); !ok || rest != "" {
			t.Fatalf("the idle connection: closed %v, then %q; want it closed without more bytes", ok, rest)
		}
	})
	t.Run("header", func(t *testing.T) {
		c, br := dial()
		io.WriteString(c, "POST /webhook/order HTTP/1.1\r\nHost: gw\r\nX-Slow: ") // the header never ends
		rest, ok := closed(br)
		if !ok {
			t.Fatal("a header that never ends kept its connection")
		}
		if strings.Contains(rest, " 200 ") {
			t.Fatalf("a header that never ends was answered %q", firstLine(rest))
		}
	})
	if n := h.upCalls.Load(); n != 1 {
		t.Fatalf("the upstream received %d deliveries, want 1 (the idle connection's)", n)
	}
}

// accessLine is the access line of the delivery of key, nil while there
// is none.
func accessLine(h *harness, key string) map[string]any {
	for _, l := range h.logs.Lines() {
		if l["msg"] == "delivery" && l["key"] == key {
			return l
		}
	}
	return nil
}
