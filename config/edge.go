package config

import (
	"fmt"
	"math"
)

// RateLimit is a route's rate_limit: how many deliveries per second the
// route accepts from each client, refilled continuously, with Burst
// deliveries allowed at once (a token bucket per client, like Nginx's
// limit_req with a zone keyed by $binary_remote_addr). The client is the
// address allow_ips checks (after trusted_proxies); IPv6 clients are
// counted by their /64. A client whose bucket is empty gets 429 with
// Retry-After before its body is read or its signature checked; a token
// is taken only once the signature verified, so requests that fail it
// never spend the bucket of good deliveries.
type RateLimit struct {
	// RPS is the sustained rate in deliveries per second; it may be a
	// fraction (0.5: one every two seconds). 0 (the default): no limit.
	// Must not be negative.
	RPS float64 `yaml:"rps"`
	// Burst is how many deliveries may arrive at once above the rate. 0
	// (the default) with rps above 0 becomes max(1, ceil(rps)) (after
	// loading it holds that value). Must not be negative, and needs rps.
	Burst int `yaml:"burst"`
	// Clients bounds the buckets the route keeps, one per client: past
	// it, the client seen least recently is forgotten and starts again
	// with a full bucket. 0 (the default) with RPS above 0 becomes
	// DefaultRateLimitClients; after Parse it holds that value. Must not
	// be negative, and needs RPS.
	Clients int `yaml:"clients"`
}

// DefaultRateLimitClients is rate_limit.clients when it is not written:
// about 2 MB of buckets per limited route at most.
const DefaultRateLimitClients = 10000

// Limited reports whether the route has a rate limit.
func (r RateLimit) Limited() bool { return r.RPS > 0 }

// checkEdge validates route i's allow_ips and rate_limit, compiling
// allow_ips into AllowNets and filling rate_limit.burst's default.
func (b *builder) checkEdge(i int) {
	r := &b.cfg.Routes[i]
	r.AllowNets = nil
	for j, s := range r.AllowIPs {
		p, err := parseTrustedProxy(s)
		if err != nil {
			b.routeError(i, []any{"allow_ips", j}, fmt.Sprintf("allow_ips[%d]", j), "%q %v", clip(s), err)
			continue
		}
		r.AllowNets = append(r.AllowNets, p)
	}

	rl := &r.RateLimit
	rpsOK := true
	switch {
	case math.IsNaN(rl.RPS) || math.IsInf(rl.RPS, 0):
		b.routeError(i, []any{"rate_limit", "rps"}, "rate_limit.rps", "must be a number of deliveries per second, such as 10 or 0.5, got %v", rl.RPS)
		rpsOK = false
	case rl.RPS < 0:
		b.routeError(i, []any{"rate_limit", "rps"}, "rate_limit.rps", "must not be negative, got %v (0 means no limit)", rl.RPS)
		rpsOK = false
	}
	switch {
	case rl.Burst < 0:
		b.routeError(i, []any{"rate_limit", "burst"}, "rate_limit.burst", "must not be negative, got %d (0 means max(1, rps) rounded up)", rl.Burst)
	case rl.Burst > 0 && rl.RPS == 0:
		b.routeError(i, []any{"rate_limit", "burst"}, "rate_limit.burst", "is set but rate_limit.rps is not, so nothing is limited; set rps (deliveries per second), or remove burst")
	case rl.Burst == 0 && rpsOK && rl.RPS > 0:
		rl.Burst = defaultBurst(rl.RPS)
	}
	switch {
	case rl.Clients < 0:
		b.routeError(i, []any{"rate_limit", "clients"}, "rate_limit.clients", "must not be negative, got %d (0 means %d)", rl.Clients, DefaultRateLimitClients)
	case rl.Clients > 0 && rl.RPS == 0:
		b.routeError(i, []any{"rate_limit", "clients"}, "rate_limit.clients", "is set but rate_limit.rps is not, so nothing is limited; set rps (deliveries per second), or remove clients")
	case rl.Clients == 0 && rpsOK && rl.RPS > 0:
		rl.Clients = DefaultRateLimitClients
	}
}

// defaultBurst is rate_limit.burst when only rps is written: max(1,
// ceil(rps)), so one second's worth of deliveries may arrive at once.
func defaultBurst(rps float64) int {
	if rps >= math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(math.Ceil(rps)))
}
