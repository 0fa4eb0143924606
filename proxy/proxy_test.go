package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/alert"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

var event = []byte(`{"id":"evt_1","type":"order.paid","data":{"order_id":"ord_1"}}`)

func TestFiveIdenticalDeliveriesForwardOnce(t *testing.T) {
	doortest.ForEach(t, testFiveIdenticalDeliveriesForwardOnce)
}

func testFiveIdenticalDeliveriesForwardOnce(t *testing.T) {
	h := newHarness(t, nil)
	var first result
	for i := 1; i <= 5; i++ {
		r := h.post(t, "/webhook/order", "evt_1", event)
		if r.status != 200 {
			t.Fatalf("delivery %d: status %d, body %s", i, r.status, r.body)
		}
		replayed := r.header.Get("Idempotent-Replayed") == "true"
		if (i == 1) == replayed {
			t.Fatalf("delivery %d: Idempotent-Replayed=%v", i, replayed)
		}
		if i == 1 {
			first = r
		} else if r.body != first.body || r.header.Get("Content-Type") != first.header.Get("Content-Type") {
			t.Fatalf("replay %d differs: %q %q vs %q", i, r.body, r.header.Get("Content-Type"), first.body)
		}
	}
	if n := h.upCalls.Load(); n != 1 {
		t.Fatalf("upstream calls = %d, want 1", n)
	}
	if v := h.metric("webhook_duplicate_requests_total", map[string]string{"route": "orders", "layer": "cache", "outcome": "replayed"}); v != 4 {
		t.Fatalf("duplicates{cache,replayed} = %v, want 4", v)
	}
	if v := h.metric("idempotency_cache_hit_ratio", map[string]string{"route": "orders"}); v != 0.8 {
		t.Fatalf("hit ratio = %v, want 0.8", v)
	}
}

func TestConcurrentIdenticalDeliveriesForwardExactlyOnce(t *testing.T) {
	doortest.ForEach(t, testConcurrentIdenticalDeliveriesForwardExactlyOnce)
}

func testConcurrentIdenticalDeliveriesForwardExactlyOnce(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-release // hold the first copy so the others arrive while it is in flight
		io.WriteString(w, "done")
	})
	const n = 50
	var wg sync.WaitGroup
	results := make(chan result, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- h.post(t, "/webhook/order", "evt_c", event)
		}()
	}
	// Let the in-flight copy finish once every other copy has been answered.
	eventually.True(t, "every other copy to be answered 409", func() bool {
		return h.metric("webhook_requests_total", map[string]string{"code": "409"}) >= n-1
	})
	close(release)
	wg.Wait()
	close(results)
	ok, conflicts, replays := 0, 0, 0
	for r := range results {
		switch {
		case r.status == 409:
			conflicts++
			if r.header.Get("Retry-After") == "" {
				t.Error("409 without Retry-After")
			}
		case r.status == 200 && r.header.Get("Idempotent-Replayed") == "true":
			replays++
		case r.status == 200:
			ok++
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if ok != 1 || h.upCalls.Load() != 1 {
		t.Fatalf("forwarded answers=%d upstream calls=%d, want 1 and 1 (409s %d, replays %d)", ok, h.upCalls.Load(), conflicts, replays)
	}
}

func TestUpstream500ThenRetryIsForwarded(t *testing.T) {
	doortest.ForEach(t, testUpstream500ThenRetryIsForwarded)
}

func testUpstream500ThenRetryIsForwarded(t *testing.T) {
	var calls atomic.Int64
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "boom", 500)
			return
		}
		io.WriteString(w, "ok")
	})
	if r := h.post(t, "/webhook/order", "evt_500", event); r.status != 500 {
		t.Fatalf("first: %d, want the upstream's 500", r.status)
	}
	r := h.post(t, "/webhook/order", "evt_500", event)
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d replayed=%q, want a forwarded 200", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if r := h.post(t, "/webhook/order", "evt_500", event); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("third delivery was not replayed")
	}
	if h.upCalls.Load() != 2 {
		t.Fatalf("upstream calls %d, want 2", h.upCalls.Load())
	}
	if v := h.metric("webhook_lock_released_total", map[string]string{"reason": "upstream_status"}); v != 1 {
		t.Fatalf("lock released{upstream_status} = %v", v)
	}
}

func TestUpstreamTimeoutGives504AndRetryIsForwarded(t *testing.T) {
	doortest.ForEach(t, testUpstreamTimeoutGives504AndRetryIsForwarded)
}

func testUpstreamTimeoutGives504AndRetryIsForwarded(t *testing.T) {
	var calls atomic.Int64
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so net/http notices the gateway hanging up
		if calls.Add(1) == 1 {
			select {
			case <-r.Context().Done(): // the gateway gave up: abandon
			case <-time.After(10 * time.Second):
			}
			return
		}
		io.WriteString(w, "ok")
	}, withConfig(strings.Replace(baseConfig, "timeout: 2s", "timeout: 200ms", 1)))
	r := h.post(t, "/webhook/order", "evt_slow", event)
	if r.status != 504 || !strings.Contains(r.body, `"error"`) || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("first: %d %s, want a JSON 504 with X-Request-Id", r.status, r.body)
	}
	if r := h.post(t, "/webhook/order", "evt_slow", event); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d, want forwarded 200", r.status)
	}
	if v := h.metric("webhook_lock_released_total", map[string]string{"reason": "timeout"}); v != 1 {
		t.Fatalf("lock released{timeout} = %v", v)
	}
}

func TestUpstreamUnreachableGives502(t *testing.T) {
	doortest.ForEach(t, testUpstreamUnreachableGives502)
}

func testUpstreamUnreachableGives502(t *testing.T) {
	h := newHarness(t, nil)
	h.up.Close()
	r := h.post(t, "/webhook/order", "evt_down", event)
	if r.status != 502 {
		t.Fatalf("status %d, want 502", r.status)
	}
	if v := h.metric("webhook_lock_released_total", map[string]string{"reason": "unreachable"}); v != 1 {
		t.Fatalf("lock released{unreachable} = %v", v)
	}
}

func TestFinishAndReleaseByUpstreamStatus(t *testing.T) {
	doortest.ForEach(t, testFinishAndReleaseByUpstreamStatus)
}

func testFinishAndReleaseByUpstreamStatus(t *testing.T) {
	for _, tc := range []struct {
		status   int
		finished bool
	}{{200, true}, {201, true}, {204, true}, {400, true}, {404, true}, {422, true},
		{408, false}, {409, false}, {425, false}, {429, false}, {500, false}, {503, false}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) })
			h.post(t, "/webhook/order", "evt_s", event)
			r := h.post(t, "/webhook/order", "evt_s", event)
			replayed := r.header.Get("Idempotent-Replayed") == "true"
			if replayed != tc.finished || r.status != tc.status {
				t.Fatalf("second delivery: status %d replayed %v; want %d replayed %v", r.status, replayed, tc.status, tc.finished)
			}
		})
	}
}

func TestSameKeyOtherBodyGives422(t *testing.T) { doortest.ForEach(t, testSameKeyOtherBodyGives422) }

func testSameKeyOtherBodyGives422(t *testing.T) {
	h := newHarness(t, nil)
	h.post(t, "/webhook/order", "evt_x", event)
	r := h.post(t, "/webhook/order", "evt_x", []byte(`{"id":"evt_x","other":true}`))
	if r.status != 422 || !strings.Contains(r.body, `"route":"orders"`) {
		t.Fatalf("status %d body %s, want 422 JSON", r.status, r.body)
	}
	if h.upCalls.Load() != 1 {
		t.Fatalf("upstream calls %d", h.upCalls.Load())
	}
}

func TestRequestErrors(t *testing.T) { doortest.ForEach(t, testRequestErrors) }

func testRequestErrors(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name   string
		path   string
		key    string
		body   []byte
		mutate func(*http.Request)
		status int
	}{
		{"missing key", "/webhook/order", "", []byte(`{"no":"id"}`), nil, 400},
		{"key too long", "/webhook/order", strings.Repeat("k", 256), event, nil, 400},
		{"key with control character", "/webhook/order", "", event, func(r *http.Request) { r.Header["Idempotency-Key"] = []string{"a\tb"} }, 400},
		{"body too large", "/webhook/order", "evt_big", []byte(strings.Repeat("x", 1025)), nil, 413},
		{"body too large without length", "/webhook/order", "evt_big2", []byte(strings.Repeat("x", 2000)), func(r *http.Request) { r.ContentLength = -1 }, 413},
		{"no route", "/nope", "evt_1", event, nil, 404},
		{"wrong method", "/webhook/order", "evt_1", event, func(r *http.Request) { r.Method = http.MethodPut }, 405},
		{"bad signature", "/webhook/order", "evt_sig", event, func(r *http.Request) { r.Header.Set("X-Signature", "sha256=00") }, 401},
		{"no signature", "/webhook/order", "evt_sig", event, func(r *http.Request) { r.Header.Del("X-Signature") }, 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.post(t, tc.path, tc.key, tc.body, func(r *http.Request) {
				if tc.mutate != nil {
					tc.mutate(r)
				}
			})
			if r.status != tc.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.body, tc.status)
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || !strings.Contains(r.body, `"error"`) {
				t.Fatalf("not a JSON error: %q %s", r.header.Get("Content-Type"), r.body)
			}
			if r.header.Get("X-Request-Id") == "" {
				t.Fatal("no X-Request-Id")
			}
		})
	}
	if h.upCalls.Load() != 0 {
		t.Fatalf("upstream reached %d times by bad requests", h.upCalls.Load())
	}
	if r := h.post(t, "/webhook/order", "evt_1", event, func(r *http.Request) { r.Method = http.MethodPut }); r.header.Get("Allow") != "POST" {
		t.Fatalf("405 Allow = %q", r.header.Get("Allow"))
	}
}

func TestBadSignatureNeverReachesUpstreamNorCache(t *testing.T) {
	doortest.ForEach(t, testBadSignatureNeverReachesUpstreamNorCache)
}

func testBadSignatureNeverReachesUpstreamNorCache(t *testing.T) {
	h := newHarness(t, nil)
	bad := func(r *http.Request) { r.Header.Set("X-Signature", sign([]byte("other body"))) }
	for i := 0; i < 3; i++ {
		if r := h.post(t, "/webhook/order", "evt_sig", event, bad); r.status != 401 || r.body != "{\"error\":\"unauthorized\",\"route\":\"orders\"}\n" {
			t.Fatalf("bad signature: %d %q", r.status, r.body)
		}
	}
	if h.metric("idempotency_cache_misses_total", nil)+h.metric("idempotency_cache_hits_total", nil) != 0 {
		t.Fatal("a refused delivery touched the cache")
	}
	// The genuine delivery is forwarded, not replayed or refused as in flight.
	if r := h.post(t, "/webhook/order", "evt_sig", event); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("genuine delivery: %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if v := h.metric("webhook_signature_failures_total", map[string]string{"route": "orders", "reason": "mismatch"}); v != 3 {
		t.Fatalf("signature failures{mismatch} = %v", v)
	}
	if v := h.metric("webhook_signature_verified_total", map[string]string{"route": "orders", "secret_id": "k1"}); v != 1 {
		t.Fatalf("signature verified{k1} = %v", v)
	}
	lines401 := 0
	for _, l := range h.logs.Lines() {
		if l["status"] == float64(401) {
			lines401++
			if l["reason"] != "mismatch" {
				t.Fatalf("401 access line without reason: %v", l)
			}
		}
	}
	if lines401 != 3 {
		t.Fatalf("%d access lines for the three 401s", lines401)
	}
}

func TestShadowModeForwardsDuplicatesAndCountsThem(t *testing.T) {
	doortest.ForEach(t, testShadowModeForwardsDuplicatesAndCountsThem)
}

func testShadowModeForwardsDuplicatesAndCountsThem(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    dedupe: { mode: shadow }"))
	for i := 0; i < 3; i++ {
		if r := h.post(t, "/webhook/order", "evt_sh", event); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("delivery %d: %d replayed=%q", i, r.status, r.header.Get("Idempotent-Replayed"))
		}
	}
	if h.upCalls.Load() != 3 {
		t.Fatalf("upstream calls %d, want 3", h.upCalls.Load())
	}
	if v := h.metric("webhook_duplicate_requests_total", map[string]string{"route": "orders"}); v != 2 {
		t.Fatalf("duplicates counted %v, want 2", v)
	}
}

func TestOffModeForwardsEverything(t *testing.T) { doortest.ForEach(t, testOffModeForwardsEverything) }

func testOffModeForwardsEverything(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    dedupe: { mode: \"off\" }"))
	for i := 0; i < 3; i++ {
		h.post(t, "/webhook/order", "", event)
	}
	if h.upCalls.Load() != 3 || h.metric("webhook_duplicate_requests_total", nil) != 0 {
		t.Fatalf("upstream calls %d", h.upCalls.Load())
	}
}

func TestUnkeyedWhenKeyNotRequired(t *testing.T) { doortest.ForEach(t, testUnkeyedWhenKeyNotRequired) }

func testUnkeyedWhenKeyNotRequired(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    idempotency: { required: false }"))
	for i := 0; i < 2; i++ {
		if r := h.post(t, "/webhook/order", "", event); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	if h.upCalls.Load() != 2 {
		t.Fatalf("upstream calls %d", h.upCalls.Load())
	}
	if v := h.metric("webhook_processing_duration_seconds", map[string]string{"outcome": "unkeyed"}); v != 2 {
		t.Fatalf("unkeyed count %v", v)
	}
	if h.upReqs[0].Header.Get("Idempotency-Key") != "" || h.upReqs[0].Header.Get("X-Clawgate-Attempt") != "" {
		t.Fatal("unkeyed delivery sent a key upstream")
	}
}

func TestForwardedHeaders(t *testing.T) { doortest.ForEach(t, testForwardedHeaders) }

func testForwardedHeaders(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    idempotency: { key: [\"json:id\"] }"))
	h.post(t, "/webhook/order", "", event, func(r *http.Request) {
		r.Header.Set("Connection", "X-Hop")
		r.Header.Set("X-Hop", "secret-ish")
		r.Header.Set("Keep-Alive", "timeout=5")
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		r.Header.Set("X-Request-Id", "req-123")
		r.Header.Set("X-Custom", "kept")
		r.Header.Set("Idempotency-Key", "spoofed")
	})
	h.post(t, "/webhook/order", "", event) // replayed: the upstream sees one request
	if len(h.upReqs) != 1 {
		t.Fatalf("upstream saw %d requests", len(h.upReqs))
	}
	up := h.upReqs[0]
	want := map[string]string{
		"Idempotency-Key":    "evt_1",
		"X-Clawgate-Attempt": "1",
		"X-Request-Id":       "req-123",
		"X-Forwarded-For":    "127.0.0.1", // the client's own is replaced: it is not a trusted proxy
		"X-Forwarded-Proto":  "http",
		"X-Forwarded-Host":   strings.TrimPrefix(h.srv.URL, "http://"),
		"X-Custom":           "kept",
		"X-Hop":              "",
		"Keep-Alive":         "",
		"Content-Type":       "application/json",
	}
	for k, v := range want {
		if got := up.Header.Get(k); got != v {
			t.Errorf("upstream %s = %q, want %q", k, got, v)
		}
	}
	if tp := up.Header.Get("Traceparent"); len(tp) != 55 || !strings.HasPrefix(tp, "00-") {
		t.Errorf("traceparent %q", tp)
	}
	if up.Host != strings.TrimPrefix(h.up.URL, "http://") {
		t.Errorf("Host %q, want the upstream's", up.Host)
	}
}

func TestAttemptHeaderCountsDeliveries(t *testing.T) {
	doortest.ForEach(t, testAttemptHeaderCountsDeliveries)
}

func testAttemptHeaderCountsDeliveries(t *testing.T) {
	var calls atomic.Int64
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(503)
		}
	})
	for i := 0; i < 3; i++ {
		h.post(t, "/webhook/order", "evt_a", event)
	}
	for i, r := range h.upReqs {
		if got := r.Header.Get("X-Clawgate-Attempt"); got != fmt.Sprint(i+1) {
			t.Errorf("upstream request %d: attempt %q", i, got)
		}
	}
}

func TestAccessLogLines(t *testing.T) { doortest.ForEach(t, testAccessLogLines) }

func testAccessLogLines(t *testing.T) {
	h := newHarness(t, nil)
	h.post(t, "/webhook/order", "evt_log", event)
	h.post(t, "/webhook/order", "evt_log", event)
	h.post(t, "/webhook/order", "evt_log", event, func(r *http.Request) { r.Header.Set("X-Signature", "sha256=zz") })
	var outcomes []string
	for _, l := range h.logs.Lines() {
		if l["msg"] != "delivery" {
			continue
		}
		for _, f := range []string{"route", "key", "outcome", "status", "attempt", "duration_ms", "request_id"} {
			if _, ok := l[f]; !ok {
				t.Errorf("access line lacks %s: %v", f, l)
			}
		}
		outcomes = append(outcomes, l["outcome"].(string))
	}
	if got := strings.Join(outcomes, ","); got != "forwarded,replayed,unauthorized" {
		t.Fatalf("outcomes %s", got)
	}
	if strings.Contains(h.logs.b.String(), testSecret) || strings.Contains(h.logs.b.String(), "sha256=zz") {
		t.Fatal("a secret or raw signature reached the log")
	}
}

// failingStore is a store that cannot be reached: pure failure logic.
type failingStore struct{ store.Store }

func (failingStore) Claim(context.Context, string, string, time.Duration) (store.Claim, error) {
	return store.Claim{}, fmt.Errorf("dial: %w", store.ErrUnavailable)
}
func (failingStore) Ping(context.Context) error { return store.ErrUnavailable }

func TestStoreUnavailable(t *testing.T) { doortest.ForEach(t, testStoreUnavailable) }

func testStoreUnavailable(t *testing.T) {
	t.Run("reject", func(t *testing.T) {
		h := newHarness(t, nil, withStore(failingStore{}))
		r := h.post(t, "/webhook/order", "evt_s", event)
		if r.status != 503 || r.header.Get("Retry-After") == "" || h.upCalls.Load() != 0 {
			t.Fatalf("status %d Retry-After %q upstream %d", r.status, r.header.Get("Retry-After"), h.upCalls.Load())
		}
		if v := h.metric("webhook_store_errors_total", map[string]string{"op": "claim"}); v != 1 {
			t.Fatalf("store errors %v", v)
		}
		// The store's count is out of reach; the access line names this
		// instance's instead of 0.
		for _, l := range h.logs.Lines() {
			if l["msg"] == "delivery" && l["attempt"] != float64(1) {
				t.Fatalf("503 access line attempt %v, want 1", l["attempt"])
			}
		}
	})
	t.Run("forward", func(t *testing.T) {
		h := newHarness(t, nil, withStore(failingStore{}),
			withConfig(strings.Replace(baseConfig, "admin:", "store: { on_error: forward }\nadmin:", 1)))
		if r := h.post(t, "/webhook/order", "evt_s", event); r.status != 200 || h.upCalls.Load() != 1 {
			t.Fatalf("status %d upstream %d", r.status, h.upCalls.Load())
		}
	})
}

func TestReplayBodyOverLimitKeepsStatusOnly(t *testing.T) {
	doortest.ForEach(t, testReplayBodyOverLimitKeepsStatusOnly)
}

func testReplayBodyOverLimitKeepsStatusOnly(t *testing.T) {
	big := strings.Repeat("b", 2000)
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) },
		withConfig(strings.Replace(baseConfig, "lock_ttl: 5s", "lock_ttl: 5s, replay_body_limit: 1KiB", 1)))
	if r := h.post(t, "/webhook/order", "evt_b", event); r.body != big {
		t.Fatal("first answer not passed through")
	}
	r := h.post(t, "/webhook/order", "evt_b", event)
	if r.status != 200 || r.body != "" || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay %d %q", r.status, r.body)
	}
}

// Regression: fasthttp's HostClient retries PUT, GET and HEAD up to five
// times on a broken connection by default, which would forward one delivery
// several times.
func TestClientNeverRetriesABrokenDelivery(t *testing.T) {
	doortest.ForEach(t, testClientNeverRetriesABrokenDelivery)
}

func testClientNeverRetriesABrokenDelivery(t *testing.T) {
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		t.Run(method, func(t *testing.T) {
			h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
				c, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					c.Close() // hang up without an answer
				}
			}, withConfig(strings.Replace(baseConfig, "match: { path: /webhook/order }", "match: { path: /webhook/order, methods: [POST, PUT] }", 1)))
			r := h.post(t, "/webhook/order", "evt_put", event, func(r *http.Request) { r.Method = method })
			if r.status != 502 {
				t.Fatalf("status %d, want 502", r.status)
			}
			if n := h.upCalls.Load(); n != 1 {
				t.Fatalf("upstream saw the delivery %d times, want 1", n)
			}
		})
	}
}

func TestRetryAlertFiresOncePerKey(t *testing.T) { doortest.ForEach(t, testRetryAlertFiresOncePerKey) }

func testRetryAlertFiresOncePerKey(t *testing.T) {
	var posts atomic.Int64
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		posts.Add(1)
		w.WriteHeader(202)
	}))
	defer recv.Close()
	sender := alert.New(alert.Options{URL: recv.URL, MaxAttempts: 3})
	h := newHarness(t, nil, withAlerter(sender))
	for i := 0; i < 5; i++ {
		h.post(t, "/webhook/order", "evt_storm", event)
	}
	if err := sender.Close(context.Background()); err != nil { // drains the queue
		t.Fatal(err)
	}
	if posts.Load() != 1 {
		t.Fatalf("alert receiver got %d posts, want 1", posts.Load())
	}
	if got[0]["dedup_key"] != "clawgate:orders:evt_storm" || got[0]["event_action"] != "trigger" {
		t.Fatalf("alert body %v", got[0])
	}
	if v := h.metric("webhook_attempts_exceeded_total", map[string]string{"route": "orders"}); v != 1 {
		t.Fatalf("attempts exceeded %v, want 1", v)
	}
	warnings := 0
	for _, l := range h.logs.Lines() {
		if l["level"] == "WARN" && strings.Contains(l["msg"].(string), "max_attempts") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("%d warning lines, want 1", warnings)
	}
}

func TestHangingAlertReceiverDoesNotHoldDeliveries(t *testing.T) {
	doortest.ForEach(t, testHangingAlertReceiverDoesNotHoldDeliveries)
}

func testHangingAlertReceiverDoesNotHoldDeliveries(t *testing.T) {
	block := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer recv.Close()
	defer close(block)
	sender := alert.New(alert.Options{URL: recv.URL, MaxAttempts: 1, QueueSize: 2})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		sender.Close(ctx)
	}()
	h := newHarness(t, nil, withAlerter(sender), withConfig(strings.Replace(baseConfig, "admin:", "alerts: { max_attempts: 1 }\nadmin:", 1)))
	// Every key crosses max_attempts on its second delivery; the receiver
	// never answers, and every delivery is still answered.
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("evt_hang_%d", i)
		for j := 0; j < 2; j++ {
			if r := h.post(t, "/webhook/order", key, event); r.status != 200 {
				t.Fatalf("delivery %s/%d: %d", key, j, r.status)
			}
		}
	}
	if h.upCalls.Load() != 20 {
		t.Fatalf("upstream calls %d", h.upCalls.Load())
	}
}

// flakyFinishStore fails the first n Finish calls, as a Redis that times
// out under load would.
type flakyFinishStore struct {
	store.Store
	fails atomic.Int64
}

func (f *flakyFinishStore) Finish(ctx context.Context, key, token string, out store.Outcome, retention time.Duration) error {
	if f.fails.Add(-1) >= 0 {
		return fmt.Errorf("i/o timeout: %w", store.ErrUnavailable)
	}
	return f.Store.Finish(ctx, key, token, out, retention)
}

// Regression: a Finish that timed out left the lock with no record behind
// it, so once lock_ttl passed a retry was forwarded a second time.
func TestFinishIsRetriedWhenTheStoreHiccups(t *testing.T) {
	doortest.ForEach(t, testFinishIsRetriedWhenTheStoreHiccups)
}

func testFinishIsRetriedWhenTheStoreHiccups(t *testing.T) {
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	flaky := &flakyFinishStore{Store: mem}
	flaky.fails.Store(2)
	h := newHarness(t, nil, withStore(flaky))
	h.post(t, "/webhook/order", "evt_flaky", event)
	st, err := mem.Get(context.Background(), "orders:evt_flaky")
	if err != nil || st.State != store.Finished {
		t.Fatalf("key state %v %v, want finished", st.State, err)
	}
	if v := h.metric("webhook_store_errors_total", map[string]string{"op": "finish"}); v != 2 {
		t.Fatalf("store errors{finish} = %v, want 2", v)
	}
}

// At shutdown the locks of deliveries cut by the grace period are released,
// so the provider's retry (to another instance) need not wait out lock_ttl.
func TestReleaseHeldFreesLocksOfCutDeliveries(t *testing.T) {
	doortest.ForEach(t, testReleaseHeldFreesLocksOfCutDeliveries)
}

func testReleaseHeldFreesLocksOfCutDeliveries(t *testing.T) {
	hold := make(chan struct{})
	mem := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) { <-hold }, withStore(mem))
	answered := make(chan int)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/webhook/order", strings.NewReader(string(event)))
		req.Header.Set("X-Signature", sign(event))
		req.Header.Set("Idempotency-Key", "evt_cut")
		code := 0
		if resp, err := http.DefaultClient.Do(req); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		answered <- code
	}()
	var st store.KeyState
	eventually.Within(t, eventually.Bound, func() bool {
		st, _ = mem.Get(context.Background(), "orders:evt_cut")
		return st.State == store.InFlight
	}, func() string { return fmt.Sprintf("never in flight: %v", st.State) })
	if n := h.gw.ReleaseHeld(context.Background()); n != 1 {
		t.Fatalf("released %d locks, want 1", n)
	}
	if st, _ = mem.Get(context.Background(), "orders:evt_cut"); st.State == store.InFlight {
		t.Fatal("lock still held after ReleaseHeld")
	}
	close(hold)
	if code := <-answered; code != 200 {
		t.Fatalf("the cut delivery got %d", code)
	}
	// Its lock was released, but no other copy took the key meanwhile: the
	// upstream accepted this one, so its late answer is recorded and the
	// provider's retry is replayed rather than forwarded again.
	if st, _ = mem.Get(context.Background(), "orders:evt_cut"); st.State != store.Finished {
		t.Fatalf("key %v after the late answer, want finished", st.State)
	}
}
