package proxy

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/metrics"
)

// Breaker is a sync route's circuit breaker, shared by every instance
// (control.Gate).
type Breaker interface {
	Admit(ctx context.Context, route string, b control.Breaker) (control.Admission, error)
	Report(ctx context.Context, route string, b control.Breaker, ok, probe bool) error
	Abandon(ctx context.Context, route string) error
}

var _ Breaker = (*control.Gate)(nil)

// errBreakerOpen is the cause of the 503 a sync route answers while its
// breaker is open.
var errBreakerOpen = errors.New("the route's circuit breaker is open")

// breaker returns the route's breaker settings (zero: none).
func (rt *route) breaker() control.Breaker {
	return control.Breaker{Failures: rt.Breaker.Failures, Cooldown: rt.Breaker.Cooldown}
}

// admitTry asks the sync route's breaker whether the delivery may go to
// the upstream, before its key is claimed in the store: while the
// breaker is open the answer is 503 with Retry-After (the rest of the
// cooldown), so the provider tries later and the key stays free. Once
// the cooldown is over, one delivery of all instances probes (d.probe);
// the rest wait. A breaker whose state cannot be read keeps the delivery
// out (503), as an unreachable store would.
func (g *Gateway) admitTry(d *delivery) error {
	b := d.rt.breaker()
	if g.breaker == nil || !b.Enabled() || d.admitted {
		return nil
	}
	ctx := d.in.context()
	a, err := g.breaker.Admit(ctx, d.rt.Name, b)
	if err != nil {
		return unavailable(ctx, "circuit breaker state unavailable", err)
	}
	if !a.Allow {
		se := fail(http.StatusServiceUnavailable, metrics.OutcomeRejected, "upstream circuit breaker open", errBreakerOpen)
		se.retryAfter = max(1, int(math.Ceil(a.Wait.Seconds())))
		return se
	}
	d.admitted, d.probe = true, a.Probe
	return nil
}

// reportTry tells the breaker how the forward ended (status 0: no
// answer).
func (g *Gateway) reportTry(d *delivery, status int) {
	b := d.rt.breaker()
	if g.breaker == nil || !b.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.in.context()), 2*time.Second)
	defer cancel()
	if err := g.breaker.Report(ctx, d.rt.Name, b, !control.Failed(status), d.probe); err != nil {
		g.log.Warn("circuit breaker: could not record a try", "route", d.rt.Name, "error", err)
	}
	d.probe = false
}

// abandonTry gives back a probe the delivery did not use (its key was a
// duplicate, or it failed before the forward).
func (g *Gateway) abandonTry(d *delivery) {
	if !d.probe {
		return
	}
	d.probe = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.in.context()), 2*time.Second)
	defer cancel()
	if err := g.breaker.Abandon(ctx, d.rt.Name); err != nil {
		g.log.Warn("circuit breaker: could not give a probe back", "route", d.rt.Name, "error", err)
	}
}
