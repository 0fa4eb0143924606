package proxy

import (
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/metrics"
)

// Edge controls: a route's allow_ips and rate_limit, the checks Nginx's
// allow/deny and limit_req make. They run right after the route is
// matched, before the body is read and before any signature work, so a
// refused delivery costs no body read, no verification and no store round
// trip, and nothing of it is stored or forwarded. The rate limit's token
// is taken later, once the signature verified (charge): requests that
// fail their signature never spend the bucket of good deliveries.

// msgRateLimited is the message of a 429; each answer gets its own
// Retry-After.
const msgRateLimited = "rate limit exceeded"

// limiter is a route's rate_limit: a token bucket per client, the least
// recently seen forgotten past rate_limit.clients. It lives as long as
// the loaded config: a reload (SIGHUP) starts every client again with a
// full bucket.
type limiter struct {
	limit   rate.Limit
	burst   int
	buckets *lru.Cache[netip.Addr, *rate.Limiter]
}

// newLimiter returns the limiter of a route's rate_limit, or nil when the
// route has none.
func newLimiter(rl config.RateLimit) *limiter {
	if !rl.Limited() {
		return nil
	}
	n := rl.Clients
	if n <= 0 {
		n = config.DefaultRateLimitClients
	}
	c, _ := lru.New[netip.Addr, *rate.Limiter](n) // n > 0: no error
	return &limiter{limit: rate.Limit(rl.RPS), burst: rl.Burst, buckets: c}
}

// bucket returns client's bucket, a full one when the client is new (or
// was forgotten). IPv6 clients share the bucket of their /64, the block
// one subscriber gets; an address that could not be read (invalid) has
// one bucket for all.
func (l *limiter) bucket(client netip.Addr) *rate.Limiter {
	if client.Is6() {
		client = netip.PrefixFrom(client, 64).Masked().Addr()
	}
	if b, ok := l.buckets.Get(client); ok {
		return b
	}
	b := rate.NewLimiter(l.limit, l.burst)
	if prev, ok, _ := l.buckets.PeekOrAdd(client, b); ok {
		return prev
	}
	return b
}

// admit applies the matched route's edge controls to d: 403 when the
// client's address is not in allow_ips, then 429 with Retry-After when the
// client's rate_limit bucket has no token left. Nothing is taken from the
// bucket here: charge does, once the signature verified. A delivery
// refused by allow_ips does not touch the rate limit. Both refusals are
// counted in webhook_refused_total and logged with outcome rejected.
func (g *Gateway) admit(d *delivery) error {
	rt := d.rt
	if len(rt.AllowNets) == 0 && rt.limiter == nil {
		return nil
	}
	client := d.t.clientAddr(&d.in)
	if len(rt.AllowNets) > 0 && !allowed(rt.AllowNets, client) {
		rt.m.Refused(metrics.RefusedIPNotAllowed)
		return fail(http.StatusForbidden, metrics.OutcomeRejected, "client address not allowed",
			errors.New("client "+describeAddr(client)))
	}
	if rt.limiter == nil {
		return nil
	}
	d.bucket = rt.limiter.bucket(client)
	now := g.edgeNow(d)
	if d.bucket.TokensAt(now) >= 1 {
		return nil
	}
	// Empty: how long until a token comes is what take tells.
	wait, ok := take(d.bucket, now)
	if ok {
		return nil // a token came in between: charge takes one
	}
	return g.rateLimited(d, wait)
}

// charge takes the token of a delivery whose signature verified from its
// client's bucket (set by admit; nil when the route has no rate_limit):
// 429 when another delivery of the client took the last one meanwhile.
func (g *Gateway) charge(d *delivery) error {
	if d.bucket == nil {
		return nil
	}
	if wait, ok := take(d.bucket, g.edgeNow(d)); !ok {
		return g.rateLimited(d, wait)
	}
	return nil
}

// rateLimited is the 429 of a client past its route's rate_limit.
func (g *Gateway) rateLimited(d *delivery, wait time.Duration) error {
	d.rt.m.Refused(metrics.RefusedRateLimited)
	se := fail(http.StatusTooManyRequests, metrics.OutcomeRejected, msgRateLimited, nil)
	se.retryAfter = retryAfterSeconds(wait)
	return se
}

// edgeNow is the time the rate limit is read at: the delivery's start,
// or the injected clock.
func (g *Gateway) edgeNow(d *delivery) time.Time {
	if g.now != nil {
		return g.now()
	}
	return d.start
}

// take takes one token from lim at now. When none is left it takes
// nothing and returns how long until one will be: a reservation, which
// tells the wait, cancelled at once.
func take(lim *rate.Limiter, now time.Time) (time.Duration, bool) {
	if lim.AllowN(now, 1) {
		return 0, true // no allocation on the way through
	}
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		// Only when the burst is below 1, which config never builds.
		return time.Second, false
	}
	wait := res.DelayFrom(now)
	if wait <= 0 {
		return 0, true
	}
	res.CancelAt(now)
	return wait, false
}

// retryAfterSeconds is a Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	s := math.Ceil(wait.Seconds())
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return max(1, int(s))
}

// allowed reports whether one of nets contains addr. An invalid addr is in
// none of them.
func allowed(nets []netip.Prefix, addr netip.Addr) bool {
	for _, p := range nets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// clientAddr returns the address of the client that sent r, the one
// allow_ips is checked against:
//   - the peer's address, when the peer is not in trusted_proxies (its
//     X-Forwarded-For is ignored: a client can write anything there);
//   - when it is, X-Forwarded-For is walked from the right (the entry the
//     trusted peer appended) towards the left, skipping the entries that
//     are themselves trusted proxies; the first that is not is the client.
//     Entries to its left were written before the request reached a proxy
//     the operator trusts, so the client could have forged them. When every
//     entry is a trusted proxy, the left-most is the client; when there is
//     no entry, the peer.
//
// Several X-Forwarded-For header lines are read as one list, in order.
// Empty entries are skipped; an entry may carry a port ("192.0.2.7:4711",
// "[2001:db8::1]:4711"). An entry that is not an IP address ("unknown", a
// host name) ends the walk as the client, and is returned as the invalid
// Addr, which no allow_ips entry contains. IPv4-mapped IPv6 addresses are
// returned in their IPv4 form, without zones.
func (t *table) clientAddr(in *inbound) netip.Addr {
	ap, err := netip.ParseAddrPort(in.remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	client := ap.Addr().Unmap().WithZone("")
	if !t.trustedAddr(client) {
		return client
	}
	values := in.header["X-Forwarded-For"]
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for v != "" {
			entry := v
			if j := strings.LastIndexByte(v, ','); j >= 0 {
				entry, v = v[j+1:], v[:j]
			} else {
				v = ""
			}
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			a := parseForwardedAddr(entry)
			if !a.IsValid() || !t.trustedAddr(a) {
				return a
			}
			client = a
		}
	}
	return client
}

// trustedAddr reports whether a is in trusted_proxies.
func (t *table) trustedAddr(a netip.Addr) bool {
	return allowed(t.trustedNets, a)
}

// parseForwardedAddr parses one X-Forwarded-For entry: an IP address, with
// or without a port or brackets. It returns the invalid Addr for anything
// else.
func parseForwardedAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		switch {
		case err2 == nil:
			a = ap.Addr()
		case len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']':
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}
			}
		default:
			return netip.Addr{}
		}
	}
	return a.Unmap().WithZone("")
}

// describeAddr names a client address in the access line.
func describeAddr(a netip.Addr) string {
	if !a.IsValid() {
		return "address unknown (not an IP address)"
	}
	return a.String()
}
