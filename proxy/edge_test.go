package proxy_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/proxy"
)

// edgeClock is a settable clock for the rate limit.
type edgeClock struct{ ns atomic.Int64 }

func newEdgeClock() *edgeClock {
	c := &edgeClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *edgeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *edgeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (h *harness) useEdgeClock(c *edgeClock) { proxy.SetClock(h.gw, c.Now) }
func edgeXFF(v string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("X-Forwarded-For", v) }
}

// keys hands out distinct idempotency keys, so every delivery is forwarded.
var edgeKeys atomic.Int64

func edgeKey() string { return "evt_" + strconv.FormatInt(edgeKeys.Add(1), 10) }

// edgeBadSignature replaces the delivery's signature with one over another body.
func edgeBadSignature(r *http.Request) { r.Header.Set("X-Signature", sign([]byte("other body"))) }

// refused returns webhook_refused_total of route orders for reason.
func (h *harness) edgeRefused(reason string) float64 {
	h.t.Helper()
	return h.metric("webhook_refused_total", map[string]string{"route": "orders", "reason": reason})
}

func TestAllowIPsAdmitsAListedClient(t *testing.T) {
	doortest.ForEach(t, testAllowIPsAdmitsAListedClient)
}

func testAllowIPsAdmitsAListedClient(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    allow_ips: [192.0.2.0/24, 127.0.0.1]"))
	if r := h.post(t, "/webhook/order", "evt_ok", event); r.status != 200 {
		t.Fatalf("listed client: %d %s", r.status, r.body)
	}
	if h.upCalls.Load() != 1 || h.edgeRefused("ip_not_allowed") != 0 {
		t.Fatalf("upstream calls %d, refused %v", h.upCalls.Load(), h.edgeRefused("ip_not_allowed"))
	}
}

func TestAllowIPsRefusesOthersBeforeAnyWork(t *testing.T) {
	doortest.ForEach(t, testAllowIPsRefusesOthersBeforeAnyWork)
}

func testAllowIPsRefusesOthersBeforeAnyWork(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    allow_ips: [192.0.2.0/24, \"2001:db8::/32\"]"))
	big := bytes.Repeat([]byte("x"), 4096) // over max_body (1KiB): 413 if it were read
	for _, c := range []struct {
		name   string
		body   []byte
		mutate []func(*http.Request)
	}{
		{"valid signature", event, nil},
		{"bad signature", event, []func(*http.Request){edgeBadSignature}},
		{"body over max_body", big, nil},
		{"own X-Forwarded-For of a listed address", event, []func(*http.Request){edgeXFF("192.0.2.10")}},
	} {
		r := h.post(t, "/webhook/order", "evt_ip", c.body, c.mutate...)
		if r.status != http.StatusForbidden || r.body != "{\"error\":\"client address not allowed\",\"route\":\"orders\"}\n" {
			t.Fatalf("%s: %d %q, want 403", c.name, r.status, r.body)
		}
		if r.header.Get("X-Request-Id") == "" || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: headers %v", c.name, r.header)
		}
	}
	if n := h.upCalls.Load(); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
	if v := h.metric("webhook_signature_failures_total", nil) + h.metric("webhook_signature_verified_total", nil); v != 0 {
		t.Fatalf("signatures checked %v times", v)
	}
	if v := h.metric("idempotency_cache_misses_total", nil) + h.metric("idempotency_cache_hits_total", nil); v != 0 {
		t.Fatal("a refused delivery reached the local window")
	}
	if v := h.edgeRefused("ip_not_allowed"); v != 4 {
		t.Fatalf("webhook_refused_total{ip_not_allowed} = %v, want 4", v)
	}
	if v := h.metric("webhook_requests_total", map[string]string{"route": "orders", "code": "403"}); v != 4 {
		t.Fatalf("webhook_requests_total{403} = %v", v)
	}
	for _, l := range h.logs.Lines() {
		if l["msg"] != "delivery" {
			continue
		}
		if l["outcome"] != "rejected" || l["status"] != float64(403) || l["error"] != "client address not allowed: client 127.0.0.1" {
			t.Fatalf("access line %v", l)
		}
	}
}

// TestForwardedForIsHonouredOnlyFromTrustedProxies: behind a trusted proxy
// the client is the right-most X-Forwarded-For entry that is not a trusted
// proxy; anything left of it, and the header of an untrusted peer, is the
// client's own and ignored.
func TestForwardedForIsHonouredOnlyFromTrustedProxies(t *testing.T) {
	doortest.ForEach(t, testForwardedForIsHonouredOnlyFromTrustedProxies)
}

func testForwardedForIsHonouredOnlyFromTrustedProxies(t *testing.T) {
	route := withRouteYAML("    allow_ips: [203.0.113.0/24]")
	trusted := newHarness(t, nil, route, withConfig("trusted_proxies: [127.0.0.1, 10.0.0.0/8]\n"+baseConfig))
	for _, c := range []struct {
		xff  string
		want int
	}{
		{"203.0.113.7", 200},
		{"203.0.113.7, 10.1.2.3", 200},               // a second trusted proxy in front
		{"203.0.113.7, 198.51.100.1", 403},           // the client forged a listed address
		{"198.51.100.1, 203.0.113.7, 10.1.2.3", 200}, // forged entry left of the client
		{"unknown", 403},                             // not an address
		{"", 403},                                    // no header: the proxy itself
		{"203.0.113.7, unknown, 10.1.2.3", 403},      // the walk stops at what it cannot read
		{"[::ffff:203.0.113.9]:4711", 200},           // IPv4-mapped, with a port
		{"2001:db8::7", 403},                         // not listed
		{"10.9.9.9, 10.1.2.3", 403},                  // all trusted: the left-most, not listed
		{"198.51.100.1,203.0.113.8 , 10.0.0.1", 200}, // spacing as proxies write it
		{"203.0.113.7, 198.51.100.1, 10.0.0.1", 403}, // untrusted hop right of the listed one
		{"203.0.113.7, 10.0.0.1, 198.51.100.1", 403}, // as above, after a trusted hop
		{"198.51.100.1, 10.0.0.1, 203.0.113.7", 200}, // the right-most is listed
		{"203.0.113.300", 403},                       // not an address
		{"198.51.100.1, 203.0.113.7:80, 127.0.0.1", 200},
	} {
		var mutate []func(*http.Request)
		if c.xff != "" {
			mutate = append(mutate, edgeXFF(c.xff))
		}
		if r := trusted.post(t, "/webhook/order", edgeKey(), event, mutate...); r.status != c.want {
			t.Errorf("X-Forwarded-For %q from a trusted peer: %d, want %d", c.xff, r.status, c.want)
		}
	}

	untrusted := newHarness(t, nil, route)
	if r := untrusted.post(t, "/webhook/order", "evt_spoof", event, edgeXFF("203.0.113.7")); r.status != 403 {
		t.Fatalf("X-Forwarded-For from an untrusted peer was believed: %d", r.status)
	}
	self := newHarness(t, nil, withRouteYAML("    allow_ips: [127.0.0.1]"))
	if r := self.post(t, "/webhook/order", "evt_spoof", event, edgeXFF("198.51.100.1")); r.status != 200 {
		t.Fatalf("an untrusted peer's own X-Forwarded-For refused it: %d", r.status)
	}
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	doortest.ForEach(t, testRateLimitAnswers429WithRetryAfter)
}

func testRateLimitAnswers429WithRetryAfter(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    rate_limit: { rps: 1, burst: 2 }"))
	clock := newEdgeClock()
	h.useEdgeClock(clock)
	for i := 0; i < 2; i++ {
		if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
			t.Fatalf("delivery %d within the burst: %d %s", i, r.status, r.body)
		}
	}
	r := h.post(t, "/webhook/order", edgeKey(), event)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" ||
		r.body != "{\"error\":\"rate limit exceeded\",\"route\":\"orders\"}\n" {
		t.Fatalf("past the burst: %d Retry-After %q %q", r.status, r.header.Get("Retry-After"), r.body)
	}
	// A bad signature past the limit is refused as limited: no signature work.
	if r := h.post(t, "/webhook/order", edgeKey(), event, edgeBadSignature); r.status != http.StatusTooManyRequests {
		t.Fatalf("bad signature past the limit: %d, want 429", r.status)
	}
	if v := h.metric("webhook_signature_failures_total", nil); v != 0 {
		t.Fatalf("signature checked past the limit: %v failures", v)
	}
	clock.Advance(time.Second)
	if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
		t.Fatalf("after one token's time: %d", r.status)
	}
	if n := h.upCalls.Load(); n != 3 {
		t.Fatalf("upstream calls %d, want 3", n)
	}
	if v := h.edgeRefused("rate_limited"); v != 2 {
		t.Fatalf("webhook_refused_total{rate_limited} = %v, want 2", v)
	}
	if v := h.edgeRefused("ip_not_allowed"); v != 0 {
		t.Fatalf("webhook_refused_total{ip_not_allowed} = %v", v)
	}
	var got []string
	for _, l := range h.logs.Lines() {
		if l["msg"] == "delivery" {
			got = append(got, l["outcome"].(string))
			if l["outcome"] == "rejected" && l["status"] != float64(429) {
				t.Fatalf("access line %v", l)
			}
		}
	}
	if strings.Join(got, ",") != "forwarded,forwarded,rejected,rejected,forwarded" {
		t.Fatalf("access line outcomes %v", got)
	}
}

func TestRateLimitRetryAfterFollowsTheReservation(t *testing.T) {
	doortest.ForEach(t, testRateLimitRetryAfterFollowsTheReservation)
}

func testRateLimitRetryAfterFollowsTheReservation(t *testing.T) {
	// One every four seconds; burst defaults to 1.
	h := newHarness(t, nil, withRouteYAML("    rate_limit: { rps: 0.25 }"))
	clock := newEdgeClock()
	h.useEdgeClock(clock)
	if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
		t.Fatalf("first: %d", r.status)
	}
	for _, want := range []string{"4", "3", "2", "1"} {
		r := h.post(t, "/webhook/order", edgeKey(), event)
		if r.status != 429 || r.header.Get("Retry-After") != want {
			t.Fatalf("status %d Retry-After %q, want 429 and %s", r.status, r.header.Get("Retry-After"), want)
		}
		clock.Advance(time.Second)
	}
	if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
		t.Fatalf("after the wait: %d", r.status)
	}

	// A wait under a second is still Retry-After: 1.
	fast := newHarness(t, nil, withRouteYAML("    rate_limit: { rps: 10, burst: 1 }"))
	fast.useEdgeClock(newEdgeClock())
	fast.post(t, "/webhook/order", edgeKey(), event)
	if r := fast.post(t, "/webhook/order", edgeKey(), event); r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("status %d Retry-After %q, want 429 and 1", r.status, r.header.Get("Retry-After"))
	}
}

func TestAllowIPsIsCheckedBeforeTheRateLimit(t *testing.T) {
	doortest.ForEach(t, testAllowIPsIsCheckedBeforeTheRateLimit)
}

func testAllowIPsIsCheckedBeforeTheRateLimit(t *testing.T) {
	h := newHarness(t, nil,
		withConfig("trusted_proxies: [127.0.0.1]\n"+baseConfig),
		withRouteYAML("    allow_ips: [203.0.113.7]\n    rate_limit: { rps: 1, burst: 1 }"))
	h.useEdgeClock(newEdgeClock())
	for i := 0; i < 3; i++ {
		if r := h.post(t, "/webhook/order", edgeKey(), event, edgeXFF("198.51.100.1")); r.status != 403 {
			t.Fatalf("unlisted client: %d, want 403", r.status)
		}
	}
	// The refused deliveries took no token.
	if r := h.post(t, "/webhook/order", edgeKey(), event, edgeXFF("203.0.113.7")); r.status != 200 {
		t.Fatalf("listed client: %d", r.status)
	}
	if r := h.post(t, "/webhook/order", edgeKey(), event, edgeXFF("203.0.113.7")); r.status != 429 {
		t.Fatalf("listed client past the limit: %d", r.status)
	}
	if h.edgeRefused("ip_not_allowed") != 3 || h.edgeRefused("rate_limited") != 1 {
		t.Fatalf("refused: ip_not_allowed %v, rate_limited %v", h.edgeRefused("ip_not_allowed"), h.edgeRefused("rate_limited"))
	}
}

const twoRoutes = `
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    rate_limit: { rps: 1 }
    idempotency: { required: false }
    verify: { scheme: none }
  - name: refunds
    match: { path: /webhook/refund }
    upstream: %UPSTREAM%
    verify: { scheme: none }
%EXTRA%
`

// TestRateLimitIsPerRouteAndRestartsOnReload: each route has its own
// buckets; a reload starts a new, full bucket.
func TestRateLimitIsPerRouteAndRestartsOnReload(t *testing.T) {
	doortest.ForEach(t, testRateLimitIsPerRouteAndRestartsOnReload)
}

func testRateLimitIsPerRouteAndRestartsOnReload(t *testing.T) {
	h := newHarness(t, nil, withConfig(twoRoutes),
		withRouteYAML("    rate_limit: { rps: 1 }\n    idempotency: { required: false }"))
	h.useEdgeClock(newEdgeClock())
	for _, path := range []string{"/webhook/order", "/webhook/refund"} {
		if r := h.post(t, path, "", event); r.status != 200 {
			t.Fatalf("%s: %d", path, r.status)
		}
		if r := h.post(t, path, "", event); r.status != 429 {
			t.Fatalf("%s past its limit: %d", path, r.status)
		}
	}
	for _, route := range []string{"orders", "refunds"} {
		if v := h.metric("webhook_refused_total", map[string]string{"route": route, "reason": "rate_limited"}); v != 1 {
			t.Fatalf("%s refused %v, want 1", route, v)
		}
	}

	h.gw.Reload(h.gw.Config())
	if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
		t.Fatalf("orders after a reload: %d, want a full bucket", r.status)
	}
}

func TestRefusalSeriesExistAtZero(t *testing.T) { doortest.ForEach(t, testRefusalSeriesExistAtZero) }

func testRefusalSeriesExistAtZero(t *testing.T) {
	h := newHarness(t, nil, withConfig(twoRoutes), withRouteYAML("    idempotency: { required: false }"))
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "webhook_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("series %v is not 0", m.GetLabel())
			}
			seen[labelValue(m, "route")+" "+labelValue(m, "reason")] = true
		}
	}
	for _, want := range []string{"orders ip_not_allowed", "orders rate_limited", "refunds ip_not_allowed", "refunds rate_limited"} {
		if !seen[want] {
			t.Errorf("no webhook_refused_total series for %s (have %v)", want, seen)
		}
	}
}

// TestRateLimitIsNotSpentByRefusedSignatures: six unsigned requests spent
// the route's bucket and the provider's correctly signed delivery got 429:
// turning rate_limit on let anyone lock the provider out. A token is taken
// only once the signature verified.
func TestRateLimitIsNotSpentByRefusedSignatures(t *testing.T) {
	doortest.ForEach(t, testRateLimitIsNotSpentByRefusedSignatures)
}

func testRateLimitIsNotSpentByRefusedSignatures(t *testing.T) {
	h := newHarness(t, nil, withRouteYAML("    rate_limit: { rps: 1, burst: 2 }"))
	h.useEdgeClock(newEdgeClock())
	unsigned := func(r *http.Request) { r.Header.Del("X-Signature") }
	for i := 0; i < 6; i++ {
		if r := h.post(t, "/webhook/order", edgeKey(), event, unsigned); r.status != http.StatusUnauthorized {
			t.Fatalf("unsigned request %d: %d, want 401", i+1, r.status)
		}
	}
	for i := 0; i < 2; i++ {
		if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != 200 {
			t.Fatalf("signed delivery %d after six unsigned requests: %d %s, want 200", i+1, r.status, r.body)
		}
	}
	// The good deliveries spent the bucket: the next is limited, signed or not.
	if r := h.post(t, "/webhook/order", edgeKey(), event); r.status != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d, want 429", r.status)
	}
	if r := h.post(t, "/webhook/order", edgeKey(), event, unsigned); r.status != http.StatusTooManyRequests {
		t.Fatalf("unsigned past the burst: %d, want 429 before any signature work", r.status)
	}
	if v := h.metric("webhook_signature_failures_total", nil); v != 6 {
		t.Fatalf("signature failures %v, want 6", v)
	}
}

// TestRateLimitIsPerClient: each client (after trusted_proxies; an IPv6
// client by its /64) has its own bucket, and the route keeps at most
// rate_limit.clients of them, forgetting the least recently seen.
func TestRateLimitIsPerClient(t *testing.T) { doortest.ForEach(t, testRateLimitIsPerClient) }

func testRateLimitIsPerClient(t *testing.T) {
	h := newHarness(t, nil, withConfig("trusted_proxies: [127.0.0.1]\n"+baseConfig),
		withRouteYAML("    rate_limit: { rps: 1, burst: 1, clients: 3 }"))
	h.useEdgeClock(newEdgeClock())
	for _, c := range []struct {
		client string
		want   int
	}{
		{"198.51.100.1", 200},
		{"198.51.100.1", 429},
		{"198.51.100.2", 200}, // another client: its own bucket
		{"2001:db8::1", 200},
		{"2001:db8::2", 429},     // the same /64
		{"198.51.100.1", 429},    // still empty; seen last now
		{"2001:db8:0:1::1", 200}, // a fourth client: 198.51.100.2, seen least recently, is forgotten
		{"198.51.100.2", 200},    // forgotten: a full bucket again
		{"198.51.100.1", 429},    // kept
	} {
		if r := h.post(t, "/webhook/order", edgeKey(), event, edgeXFF(c.client)); r.status != c.want {
			t.Fatalf("client %s: %d, want %d", c.client, r.status, c.want)
		}
	}
}
