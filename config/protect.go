package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Breaker is a route's circuit breaker: after Failures failed tries in a
// row (no answer, 5xx, 408 or 429), counted over every instance, no try
// goes to the upstream for Cooldown; then one try probes, a 2xx closes
// the breaker and a failure opens it for another Cooldown. While it is
// open a queue route keeps acknowledging and counts no attempt (an outage
// does not fill the DLQ); a sync route answers 503 with Retry-After
// without claiming the key.
type Breaker struct {
	// Failures is how many failed tries in a row open the breaker, from
	// 1 to 10000. 0 (the default): no breaker.
	Failures int `yaml:"failures"`
	// Cooldown is how long the breaker stays open before one try probes,
	// up to 24h. 0 (the default) with failures set becomes 30s (after
	// loading it holds that value).
	Cooldown time.Duration `yaml:"cooldown"`
}

// Enabled reports whether the route has a breaker.
func (b Breaker) Enabled() bool { return b.Failures > 0 }

// PaceLimit is a route's pace compiled: at most Rate tries per Per.
type PaceLimit struct {
	Rate int
	Per  time.Duration
}

// Limited reports whether the route has a pace.
func (p PaceLimit) Limited() bool { return p.Rate > 0 }

// Bounds of pace and breaker.
const (
	// DefaultBreakerCooldown is breaker.cooldown when it is not written.
	DefaultBreakerCooldown = 30 * time.Second
	maxBreakerFailures     = 10000
	maxBreakerCooldown     = 24 * time.Hour
	maxPaceRate            = 1_000_000
)

// ParsePace reads a pace: "N/s", "N/m" or "N/h" (N tries per second,
// minute or hour, N a whole number from 1 to 1000000), or "N/DURATION"
// with a Go duration such as "5/10s".
func ParsePace(s string) (PaceLimit, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return PaceLimit{}, fmt.Errorf("%q is not a pace; write tries per second, minute or hour, such as 50/s, 300/m or 5/10s", clip(s))
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 || n > maxPaceRate {
		return PaceLimit{}, fmt.Errorf("%q: the number of tries must be a whole number from 1 to %d (remove pace for no bound)", clip(s), maxPaceRate)
	}
	var d time.Duration
	switch per = strings.TrimSpace(per); per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	default:
		d, err = time.ParseDuration(per)
		if err != nil || d < time.Millisecond || d > 24*time.Hour {
			return PaceLimit{}, fmt.Errorf("%q: the period must be s, m, h or a duration from 1ms to 24h, such as 10s", clip(s))
		}
	}
	if d.Microseconds()/int64(n) < 1 {
		return PaceLimit{}, fmt.Errorf("%q is more than one try per microsecond", clip(s))
	}
	return PaceLimit{Rate: n, Per: d}, nil
}

// checkProtect validates route i's pace and breaker, compiling pace into
// PaceLimit and filling breaker.cooldown's default.
func (b *builder) checkProtect(i int) {
	r := &b.cfg.Routes[i]
	r.PaceLimit = PaceLimit{}
	if b.loc.written("routes", i, "pace") {
		switch p, err := ParsePace(r.Pace); {
		case err != nil:
			b.routeError(i, []any{"pace"}, "pace", "%v", err)
		case !r.Queued():
			b.routeError(i, []any{"pace"}, "pace", "applies only to delivery: queue (a sync route forwards while the provider waits); remove it, or set delivery: queue")
		default:
			r.PaceLimit = p
		}
	}
	br := &r.Breaker
	if !b.loc.written("routes", i, "breaker") {
		return
	}
	switch {
	case br.Failures < 1 || br.Failures > maxBreakerFailures:
		b.routeError(i, []any{"breaker", "failures"}, "breaker.failures", "must be from 1 to %d failed tries in a row, got %d (remove breaker for none)", maxBreakerFailures, br.Failures)
	}
	switch {
	case br.Cooldown < 0 || br.Cooldown > maxBreakerCooldown:
		b.routeError(i, []any{"breaker", "cooldown"}, "breaker.cooldown", "must be from 1s to %v, got %v (0 means %v)", maxBreakerCooldown, br.Cooldown, DefaultBreakerCooldown)
	case br.Cooldown > 0 && br.Cooldown < time.Second:
		b.routeError(i, []any{"breaker", "cooldown"}, "breaker.cooldown", "must be at least 1s, got %v: every instance reads the breaker's state within a quarter second", br.Cooldown)
	case br.Cooldown == 0:
		br.Cooldown = DefaultBreakerCooldown
	}
}
