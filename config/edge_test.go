package config

import (
	"net/netip"
	"testing"
)

func TestEdgeFieldsCompile(t *testing.T) {
	useFakes(t)
	const y = `
routes:
  - name: open
    match: { path: /open }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
  - name: listed
    match: { path: /listed }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
    allow_ips: [192.0.2.7, "192.0.2.77/24", "::ffff:198.51.100.0/120", "2001:db8::1/32"]
    rate_limit: { rps: 10, burst: 20, clients: 500 }
  - name: half
    match: { path: /half }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
    rate_limit: { rps: 0.5 }
  - name: fraction
    match: { path: /fraction }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
    rate_limit: { rps: 2.5 }
`
	cfg, err := Parse([]byte(y), "gateway.yaml", "", getenv)
	if err != nil {
		t.Fatal(err)
	}
	open := route(t, cfg, "open")
	eq(t, "open allow_nets", open.AllowNets, []netip.Prefix(nil))
	eq(t, "open rate_limit", open.RateLimit, RateLimit{})
	if open.RateLimit.Limited() {
		t.Error("a route without rate_limit is limited")
	}
	listed := route(t, cfg, "listed")
	eq(t, "listed allow_nets", listed.AllowNets, []netip.Prefix{
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("2001:db8::/32"),
	})
	eq(t, "listed rate_limit", listed.RateLimit, RateLimit{RPS: 10, Burst: 20, Clients: 500})
	// burst defaults to max(1, ceil(rps)).
	eq(t, "half rate_limit", route(t, cfg, "half").RateLimit, RateLimit{RPS: 0.5, Burst: 1, Clients: DefaultRateLimitClients})
	eq(t, "fraction rate_limit", route(t, cfg, "fraction").RateLimit, RateLimit{RPS: 2.5, Burst: 3, Clients: DefaultRateLimitClients})
}

func TestDefaultBurst(t *testing.T) {
	for rps, want := range map[float64]int{0.001: 1, 1: 1, 1.01: 2, 100: 100, 1e300: 1<<31 - 1} {
		if got := defaultBurst(rps); got != want {
			t.Errorf("defaultBurst(%v) = %d, want %d", rps, got, want)
		}
	}
}
