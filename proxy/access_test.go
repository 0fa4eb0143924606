package proxy_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
)

var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// A 401 line tells a scanner (no signature, a scanner's user agent, its own
// address) from a provider whose secret was rolled (a signature that does
// not match, the provider's user agent and address) without the body.
func TestUnauthorizedLineTellsAScannerFromAProvider(t *testing.T) {
	doortest.ForEach(t, testUnauthorizedLineTellsAScannerFromAProvider)
}

func testUnauthorizedLineTellsAScannerFromAProvider(t *testing.T) {
	h := newHarness(t, nil, withConfig("trusted_proxies: [127.0.0.0/8]\n"+baseConfig))
	scanner := h.post(t, "/webhook/order", "", []byte(`{}`), func(r *http.Request) {
		r.Header.Del("X-Signature")
		r.Header.Set("User-Agent", "zgrab/0.x")
		r.Header.Set("X-Forwarded-For", "203.0.113.66")
	})
	// The provider signs with the secret it rolled to, which the gateway
	// does not know yet.
	rolled := hmac.New(sha256.New, []byte("the-providers-new-secret"))
	rolled.Write(event)
	provider := h.post(t, "/webhook/order", "evt_rolled", event, func(r *http.Request) {
		r.Header.Set("X-Signature", "sha256="+hex.EncodeToString(rolled.Sum(nil)))
		r.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		r.Header.Set("X-Forwarded-For", "54.187.174.169")
	})
	if scanner.status != 401 || provider.status != 401 {
		t.Fatalf("statuses %d %d, want 401 401", scanner.status, provider.status)
	}
	for i, want := range []map[string]any{
		{"status": 401.0, "outcome": "unauthorized", "reason": "missing", "client": "203.0.113.66",
			"user_agent": "zgrab/0.x", "bytes_in": 2.0, "route": "orders"},
		{"status": 401.0, "outcome": "unauthorized", "reason": "mismatch", "client": "54.187.174.169",
			"user_agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)", "bytes_in": float64(len(event)), "key": ""},
	} {
		l := h.accessLine(t, i)
		for k, v := range want {
			if l[k] != v {
				t.Errorf("line %d: %s = %v, want %v\n%v", i, k, l[k], v, l)
			}
		}
		for _, absent := range []string{"secret_id", "upstream_status", "upstream_ms"} {
			if _, ok := l[absent]; ok {
				t.Errorf("line %d has %s: %v", i, absent, l)
			}
		}
		if id, _ := l["trace_id"].(string); !traceIDPattern.MatchString(id) {
			t.Errorf("line %d: trace_id %q", i, id)
		}
		if out, _ := l["bytes_out"].(float64); out <= 0 {
			t.Errorf("line %d: bytes_out %v, want the error body's length", i, l["bytes_out"])
		}
	}
}

// A forwarded delivery's line carries the upstream's address, status and
// time, the secret that verified it, both body sizes, the Host the caller
// sent and its protocol; a replay has no upstream fields; an unreachable
// upstream has its address and time but no status.
func TestAccessLineUpstreamAndSizes(t *testing.T) {
	doortest.ForEach(t, testAccessLineUpstreamAndSizes)
}

func testAccessLineUpstreamAndSizes(t *testing.T) {
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"queued":true}`))
	})
	h.post(t, "/webhook/order", "evt_sz", event)
	h.post(t, "/webhook/order", "evt_sz", event)
	l := h.accessLine(t, 0)
	upAddr := strings.TrimPrefix(h.up.URL, "http://")
	for k, v := range map[string]any{
		"host": strings.TrimPrefix(h.srv.URL, "http://"), "proto": "HTTP/1.1", "upstream": upAddr,
		"status": 202.0, "upstream_status": 202.0, "secret_id": "k1",
		"bytes_in": float64(len(event)), "bytes_out": float64(len(`{"queued":true}`)), "client": "127.0.0.1",
	} {
		if l[k] != v {
			t.Errorf("forwarded line: %s = %v, want %v", k, l[k], v)
		}
	}
	if ms, ok := l["upstream_ms"].(float64); !ok || ms < 0 {
		t.Errorf("forwarded line: upstream_ms %v", l["upstream_ms"])
	}
	l = h.accessLine(t, 1)
	if l["outcome"] != "replayed" || l["bytes_out"] != float64(len(`{"queued":true}`)) || l["secret_id"] != "k1" {
		t.Errorf("replayed line: %v", l)
	}
	for _, absent := range []string{"upstream", "upstream_status", "upstream_ms"} {
		if _, ok := l[absent]; ok {
			t.Errorf("replayed line has %s: %v", absent, l)
		}
	}
	if l["host"] == "" || l["proto"] != "HTTP/1.1" {
		t.Errorf("replayed line: host %v proto %v", l["host"], l["proto"])
	}

	h.up.Close()
	if r := h.post(t, "/webhook/order", "evt_down", event); r.status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", r.status)
	}
	l = h.accessLine(t, 2)
	if _, ok := l["upstream_status"]; ok {
		t.Errorf("unreachable line has upstream_status: %v", l)
	}
	if _, ok := l["upstream_ms"].(float64); !ok {
		t.Errorf("unreachable line lacks upstream_ms: %v", l)
	}
	if l["upstream"] != upAddr {
		t.Errorf("unreachable line: upstream %v, want %s", l["upstream"], upAddr)
	}
}

// client is the peer unless the peer is a trusted proxy; behind one it is
// the right-most X-Forwarded-For entry that is not itself trusted, so an
// entry the client wrote itself is not believed. The user agent is cut at
// 256 bytes.
func TestAccessLineClient(t *testing.T) { doortest.ForEach(t, testAccessLineClient) }

func testAccessLineClient(t *testing.T) {
	longUA := strings.Repeat("a", 250) + strings.Repeat("é", 10) // 270 bytes
	for _, tc := range []struct {
		name, yaml, xff, want string
	}{
		{"untrusted peer", baseConfig, "198.51.100.7", "127.0.0.1"},
		{"trusted peer", "trusted_proxies: [127.0.0.0/8]\n" + baseConfig, "198.51.100.7", "198.51.100.7"},
		{"forged entry", "trusted_proxies: [127.0.0.0/8]\n" + baseConfig, "6.6.6.6, 198.51.100.7", "198.51.100.7"},
		{"chain of proxies", "trusted_proxies: [127.0.0.0/8, 10.0.0.0/8]\n" + baseConfig, "198.51.100.7, 10.1.2.3", "198.51.100.7"},
		{"no header", "trusted_proxies: [127.0.0.0/8]\n" + baseConfig, "", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil, withConfig(tc.yaml))
			h.post(t, "/webhook/order", "evt_c", event, func(r *http.Request) {
				if tc.xff != "" {
					r.Header.Set("X-Forwarded-For", tc.xff)
				}
				r.Header.Set("User-Agent", longUA)
			})
			l := h.accessLine(t, 0)
			if l["client"] != tc.want {
				t.Errorf("client %v, want %s", l["client"], tc.want)
			}
			if ua, _ := l["user_agent"].(string); len(ua) > 256 || !strings.HasPrefix(longUA, ua) || len(ua) < 250 {
				t.Errorf("user_agent of %d bytes: %q", len(ua), ua)
			}
		})
	}
}

// webhook_in_flight_requests counts the deliveries being handled: one
// while the upstream holds it, none after.
func TestInFlightGauge(t *testing.T) { doortest.ForEach(t, testInFlightGauge) }

func testInFlightGauge(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := newHarness(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.Write([]byte(`{}`))
	})
	if v := h.metric("webhook_in_flight_requests", nil); v != 0 {
		t.Fatalf("in flight before: %v", v)
	}
	done := make(chan result, 1)
	go func() { done <- h.post(t, "/webhook/order", "evt_if", event) }()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream was not called within 5s")
	}
	if v := h.metric("webhook_in_flight_requests", nil); v != 1 {
		t.Errorf("in flight during: %v, want 1", v)
	}
	close(release)
	select {
	case r := <-done:
		if r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
	}
	// The answer is written before ServeHTTP returns; wait for it to.
	eventually.Within(t, 5*time.Second, func() bool { return h.metric("webhook_in_flight_requests", nil) == 0 },
		func() string { return "in flight still 1" })
}
