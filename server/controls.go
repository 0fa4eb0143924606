package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/metrics"
)

// controlsEvery is how often the route controls' gauges are refreshed
// from the shared state.
const controlsEvery = 5 * time.Second

// openControls returns the routes' shared control state (pause, breaker,
// pace): in the store's Redis, or in this process with the memory store.
// Breaker transitions are counted and logged.
func openControls(st storeBackend, m *metrics.Metrics, log *slog.Logger) *control.Gate {
	var cs control.Store = control.NewMemory()
	if rc, ok := st.(redisClient); ok {
		cs = control.NewRedis(rc.Client(), rc.KeyPrefix(), rc.OpTimeout())
	}
	g := control.NewGate(cs)
	g.OnTransition = func(route, to string) {
		m.BreakerTransition(route, to)
		if to == "open" {
			log.Warn("circuit breaker open: no try reaches the upstream until a probe succeeds", "route", route)
		} else {
			log.Info("circuit breaker closed: the upstream answers again", "route", route)
		}
	}
	return g
}

// watchControls refreshes the route controls' gauges of the routes
// routes() returns, every controlsEvery, until ctx ends; routes gone
// since the last refresh lose their gauges.
func watchControls(ctx context.Context, g *control.Gate, m *metrics.Metrics, routes func() []config.Route) {
	shown := map[string]bool{}
	t := time.NewTicker(controlsEvery)
	defer t.Stop()
	for {
		seen := map[string]bool{}
		for _, r := range routes() {
			// Every route's mode is recorded again about once a minute,
			// for the instances that switch it (proxy's Announce).
			_ = g.Seen(ctx, r.Name, r.Queued())
			if !r.Queued() && !r.Breaker.Enabled() {
				continue // no gauge to show
			}
			st, err := g.State(ctx, r.Name)
			if err != nil {
				continue // the store's own errors are counted and logged elsewhere
			}
			seen[r.Name] = true
			m.SetRouteControl(r.Name, r.Queued(), !st.PausedAt.IsZero(), r.Breaker.Enabled(), st.Breaker != control.BreakerClosed)
		}
		for name := range shown {
			if !seen[name] {
				m.ForgetRouteControl(name)
			}
		}
		shown = seen
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
