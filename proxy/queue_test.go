package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/queue"
)

const queueRoute = `    delivery: queue
    workers: 2
    retry: { max_attempts: 3, initial: 10ms, max: 50ms }
    idempotency: { allow_unsigned_key: true }`

type queuedAnswer struct {
	Status, ID, Route, Key string
}

func decodeQueued(t *testing.T, r result) queuedAnswer {
	t.Helper()
	var a queuedAnswer
	if err := json.Unmarshal([]byte(r.body), &a); err != nil {
		t.Fatalf("202 body %q: %v", r.body, err)
	}
	return a
}

// waitUntil polls cond for up to eventually.Bound.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, what, cond)
}

func TestQueueRouteAcknowledgesThenDelivers(t *testing.T) {
	doortest.ForEach(t, testQueueRouteAcknowledgesThenDelivers)
}

func testQueueRouteAcknowledgesThenDelivers(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML(queueRoute), withQueue(queue.NewMemory()))
	body := []byte(`{"id":"evt_1","amount":100}`)

	first := h.post(t, "/webhook/order", "evt_1", body, func(r *http.Request) { r.Header.Set("X-Request-Id", "req-queued-1") })
	if first.status != http.StatusAccepted || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first delivery: %d %v %s", first.status, first.header, first.body)
	}
	a := decodeQueued(t, first)
	if a.Status != "queued" || a.Route != "orders" || a.Key != "evt_1" || a.ID == "" {
		t.Fatalf("202 body: %+v", a)
	}
	if first.header.Get("X-Request-Id") != "req-queued-1" {
		t.Errorf("X-Request-Id = %q", first.header.Get("X-Request-Id"))
	}
	waitUntil(t, "the upstream to get the event", func() bool { return h.upCalls.Load() == 1 })

	h.mu.Lock()
	up := h.upReqs[0]
	h.mu.Unlock()
	for name, want := range map[string]string{
		"Idempotency-Key": "evt_1", "X-Clawgate-Attempt": "1", "X-Request-Id": "req-queued-1",
		"Content-Type": "application/json", "X-Forwarded-For": "127.0.0.1",
	} {
		if got := up.Header.Get(name); got != want {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
		}
	}
	if up.Header.Get("Traceparent") == "" {
		t.Error("upstream got no traceparent")
	}

	// Once delivered, a copy gets the upstream's stored answer.
	waitUntil(t, "the key to be finished", func() bool {
		r := h.post(t, "/webhook/order", "evt_1", body)
		return r.status == http.StatusOK
	})
	again := h.post(t, "/webhook/order", "evt_1", body)
	if again.status != http.StatusOK || again.body != `{"ok":true}` || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("copy after delivery: %d %v %s", again.status, again.header, again.body)
	}
	if n := h.upCalls.Load(); n != 1 {
		t.Fatalf("upstream called %d times", n)
	}
	// Another payload under the delivered key: 422.
	if r := h.post(t, "/webhook/order", "evt_1", []byte(`{"id":"evt_1","amount":999}`)); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("other payload after delivery: %d %s", r.status, r.body)
	}
}

func TestQueueRouteCopiesWhileQueued(t *testing.T) {
	doortest.ForEach(t, testQueueRouteCopiesWhileQueued)
}

func testQueueRouteCopiesWhileQueued(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		<-release
		w.WriteHeader(http.StatusNoContent)
	}, withRouteYAML(queueRoute), withQueue(queue.NewMemory()))
	defer close(release)
	body := []byte(`{"id":"evt_2"}`)
	first := decodeQueued(t, h.post(t, "/webhook/order", "evt_2", body))
	for i := range 5 {
		r := h.post(t, "/webhook/order", "evt_2", body)
		if r.status != http.StatusAccepted || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("copy %d: %d %v %s", i, r.status, r.header, r.body)
		}
		if got := decodeQueued(t, r); got.ID != first.ID {
			t.Fatalf("copy %d names event %q, the first %q", i, got.ID, first.ID)
		}
	}
	if r := h.post(t, "/webhook/order", "evt_2", []byte(`{"id":"evt_2","x":1}`)); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("other payload while queued: %d %s", r.status, r.body)
	}
	waitUntil(t, "the one try", func() bool { return calls.Load() == 1 })
}

func TestQueueRouteFullIs503(t *testing.T) { doortest.ForEach(t, testQueueRouteFullIs503) }

func testQueueRouteFullIs503(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) { <-release },
		withConfig(`
listen: "127.0.0.1:0"
admin: { listen: "" }
dedupe: { lock_ttl: 5s }
queue: { max_depth: 2 }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    timeout: 2s
    delivery: queue
    workers: 1
    idempotency: { allow_unsigned_key: true }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: k1, secret: test-secret }]
`), withQueue(queue.NewMemory()))
	defer close(release)
	for i := range 2 {
		if r := h.post(t, "/webhook/order", "k"+strconv.Itoa(i), []byte(`{}`)); r.status != http.StatusAccepted {
			t.Fatalf("event %d: %d %s", i, r.status, r.body)
		}
	}
	r := h.post(t, "/webhook/order", "k2", []byte(`{}`))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("past max_depth: %d %v %s", r.status, r.header, r.body)
	}
	// A copy of a queued event is still acknowledged.
	if r := h.post(t, "/webhook/order", "k0", []byte(`{}`)); r.status != http.StatusAccepted {
		t.Fatalf("copy past max_depth: %d %s", r.status, r.body)
	}
}

// downQueue is a queue backend that never answers.
type downQueue struct{ queue.Backend }

func (downQueue) Enqueue(context.Context, queue.Entry, int) (queue.Ack, error) {
	return queue.Ack{}, queue.ErrUnavailable
}
func (downQueue) Prepare(context.Context, string, int) error { return nil }
func (downQueue) Shards(string) int                          { return 1 }
func (downQueue) Read(ctx context.Context, _ string, _ int, _ string, _ int, block time.Duration) ([]queue.Lease, error) {
	select {
	case <-ctx.Done():
	case <-time.After(block):
	}
	return nil, queue.ErrUnavailable
}
func (downQueue) Promote(context.Context, string, int, time.Time) (int, error) {
	return 0, queue.ErrUnavailable
}
func (downQueue) Reclaim(context.Context, string, int, string, time.Duration) ([]queue.Lease, error) {
	return nil, queue.ErrUnavailable
}
func (downQueue) Stats(context.Context, string) (queue.Stats, error) {
	return queue.Stats{}, queue.ErrUnavailable
}

func TestQueueRouteBackendDownIs503NeverAcknowledged(t *testing.T) {
	doortest.ForEach(t, testQueueRouteBackendDownIs503NeverAcknowledged)
}

func testQueueRouteBackendDownIs503NeverAcknowledged(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML(queueRoute), withQueue(downQueue{}))
	r := h.post(t, "/webhook/order", "evt_3", []byte(`{"id":"evt_3"}`))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
		t.Fatalf("queue down: %d %v %s", r.status, r.header, r.body)
	}
	if bytes.Contains([]byte(r.body), []byte("unavailable: ")) {
		t.Errorf("the cause leaked into the answer: %s", r.body)
	}
	if h.upCalls.Load() != 0 {
		t.Fatal("forwarded while the queue was down")
	}
}

func TestQueueRouteWithoutQueueIs503(t *testing.T) {
	doortest.ForEach(t, testQueueRouteWithoutQueueIs503)
}

func testQueueRouteWithoutQueueIs503(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML(queueRoute))
	if r := h.post(t, "/webhook/order", "evt_4", []byte(`{}`)); r.status != http.StatusServiceUnavailable {
		t.Fatalf("no queue: %d %s", r.status, r.body)
	}
}

func TestRequestEncodingRoundTrip(t *testing.T) {
	in := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order?x=1", nil)
	in.Header.Set("Content-Type", "application/json")
	in.Header.Add("X-Multi", "a")
	in.Header.Add("X-Multi", "b")
	in.RemoteAddr = "192.0.2.7:4242"
	body := []byte(`{"id":"evt_1"}`)
	req := proxy.NewRequest(in, "/hook?x=1", body, "evt_1", "req-1", "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01", false)
	got, err := proxy.DecodeRequest(req.AppendBinary(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != req.Method || got.URI != req.URI || got.Key != req.Key || got.RequestID != req.RequestID ||
		got.Traceparent != req.Traceparent || !bytes.Equal(got.Body, req.Body) || len(got.Header) != len(req.Header) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, req)
	}
	for i := range got.Header {
		if got.Header[i] != req.Header[i] {
			t.Fatalf("header %d: %q, want %q", i, got.Header[i], req.Header[i])
		}
	}
	if got.RouteRelative {
		t.Fatal("a full URI decodes as route-relative")
	}
	req.RouteRelative = true
	if got, err := proxy.DecodeRequest(req.AppendBinary(nil)); err != nil || !got.RouteRelative || got.URI != req.URI {
		t.Fatalf("route-relative round trip: %+v, %v", got, err)
	}
}

// QueuedBody reads back the body and Content-Type of a queued request,
// and refuses damaged bytes as DecodeRequest does.
func TestQueuedBody(t *testing.T) {
	in := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", nil)
	in.Header.Set("Content-Type", "application/json; charset=utf-8")
	body := []byte(`{"id":"evt_1","note":"<script>x</script>"}`)
	stored := proxy.NewRequest(in, "/hook", body, "evt_1", "r", "t", false).AppendBinary(nil)
	got, ct, err := proxy.QueuedBody(stored)
	if err != nil || !bytes.Equal(got, body) || ct != "application/json; charset=utf-8" {
		t.Fatalf("QueuedBody = %q, %q, %v", got, ct, err)
	}
	bare := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", nil)
	bare.Header.Del("Content-Type")
	if got, ct, err := proxy.QueuedBody(proxy.NewRequest(bare, "/hook", nil, "k", "r", "t", false).AppendBinary(nil)); err != nil || len(got) != 0 || ct != "" {
		t.Fatalf("QueuedBody without a body or Content-Type = %q, %q, %v", got, ct, err)
	}
	if _, _, err := proxy.QueuedBody([]byte("500")); !errors.Is(err, proxy.ErrBadRequestEncoding) {
		t.Fatalf("QueuedBody of damaged bytes: %v", err)
	}
}

func TestDecodeRequestRejectsDamage(t *testing.T) {
	in := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", nil)
	good := proxy.NewRequest(in, "/hook", []byte("body"), "k", "r", "t", false).AppendBinary(nil)
	for name, b := range map[string][]byte{
		"empty":        nil,
		"version":      append([]byte{9}, good[1:]...),
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"header count": {1, 0, 0, 0, 0, 0, 3},
	} {
		if _, err := proxy.DecodeRequest(b); !errors.Is(err, proxy.ErrBadRequestEncoding) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	in := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", nil)
	in.Header.Set("Content-Type", "application/json")
	f.Add(proxy.NewRequest(in, "/hook", []byte(`{"id":1}`), "k", "r", "t", false).AppendBinary(nil))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := proxy.DecodeRequest(b)
		if err != nil {
			return
		}
		// What decodes encodes to bytes that decode to the same request
		// (lengths may have been written in a longer varint form).
		again := r.AppendBinary(nil)
		r2, err := proxy.DecodeRequest(again)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if !bytes.Equal(r2.AppendBinary(nil), again) {
			t.Fatalf("re-encoding is not stable:\n%x\n%x", again, r2.AppendBinary(nil))
		}
	})
}

// A reload that moves a queue route's upstream (another host, another
// base path) sends the events already queued to the new upstream under
// its own base path: the queue stores the path relative to the route.
// (Issue: they went to the new host with the old base path.)
func TestQueueRouteReloadMovesQueuedEventsToTheNewUpstream(t *testing.T) {
	doortest.ForEach(t, testQueueRouteReloadMovesQueuedEventsToTheNewUpstream)
}

func testQueueRouteReloadMovesQueuedEventsToTheNewUpstream(t *testing.T) {
	old := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
	route := `    delivery: queue
    workers: 2
    retry: { max_attempts: 5, initial: 200ms, max: 200ms }
    idempotency: { allow_unsigned_key: true }`
	y := strings.Replace(baseConfig, "upstream: %UPSTREAM%", "upstream: %UPSTREAM%/base/", 1)
	h := newHarness(t, old, withConfig(y), withRouteYAML(route), withQueue(queue.NewMemory()))
	body := []byte(`{"id":"evt_move","amount":1}`)
	if r := h.post(t, "/webhook/order?x=1", "evt_move", body); r.status != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", r.status, r.body)
	}
	waitUntil(t, "the first try on the old upstream", func() bool { return h.upCalls.Load() >= 1 })
	h.mu.Lock()
	first := h.upReqs[0].URL.RequestURI()
	h.mu.Unlock()
	if first != "/base/webhook/order?x=1" {
		t.Fatalf("old upstream got %q", first)
	}

	got := make(chan string, 10)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RequestURI()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer moved.Close()
	y2 := strings.ReplaceAll(strings.Replace(baseConfig, "upstream: %UPSTREAM%", "upstream: "+moved.URL+"/nb", 1), "%EXTRA%", route)
	cfg, err := config.Parse([]byte(y2), "test.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	h.gw.Reload(cfg)
	select {
	case uri := <-got:
		if uri != "/nb/webhook/order?x=1" {
			t.Fatalf("the new upstream got %q, want /nb/webhook/order?x=1", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued event never reached the new upstream")
	}
}
