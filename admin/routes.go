package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/metrics"
)

// Controls is the routes' shared control state (control.Gate): pause and
// resume, and the breaker's state for the listing.
type Controls interface {
	SetPaused(ctx context.Context, route string, paused bool) (since time.Time, changed bool, err error)
	State(ctx context.Context, route string) (control.State, error)
}

var _ Controls = (*control.Gate)(nil)

// Counters is this instance's count of each route's answers (a
// *metrics.Metrics), by route name.
type Counters interface {
	RouteCounts() map[string]metrics.RouteCounts
}

var _ Counters = (*metrics.Metrics)(nil)

// RouteInfo is one route in GET /admin/routes. Depth, DLQ, LagSeconds
// and Paused are for queue routes (Depth, DLQ and LagSeconds are absent
// when the queue did not answer); Breaker is "closed", "open" or
// "half_open" for a route with a breaker, absent without one.
type RouteInfo struct {
	Name     string `json:"name"`
	Delivery string `json:"delivery"`
	// Deliveries, Forwarded, Queued, Replayed and Refused count the
	// route's deliveries this instance answered since it started (each
	// instance counts its own, from 0 at its start; add them up over the
	// instances, or use the webhook_* metrics, for the whole gateway):
	// every answer, whatever its status; those forwarded while the
	// provider waited (sync routes); those stored for delivery (queue
	// routes); those answered from an earlier copy's stored outcome; and
	// those the gateway turned away itself without forwarding them (401,
	// a bad or too large request, allow_ips, rate_limit, and the 503 of
	// an open breaker or of a store or queue that is full or does not
	// answer). All 0 when the admin listener has no counters
	// (Options.Counters).
	Deliveries int64  `json:"deliveries"`
	Forwarded  int64  `json:"forwarded"`
	Queued     int64  `json:"queued"`
	Replayed   int64  `json:"replayed"`
	Refused    int64  `json:"refused"`
	Depth      *int64 `json:"depth,omitempty"`
	DLQ        *int64 `json:"dlq,omitempty"`
	// LagSeconds is how long the oldest undelivered event of a queue
	// route has waited since it was first seen, 0 when none waits.
	LagSeconds  *float64   `json:"lag_seconds,omitempty"`
	Paused      bool       `json:"paused"`
	PausedSince *time.Time `json:"paused_since,omitempty"`
	Breaker     string     `json:"breaker,omitempty"`
	// BreakerOpenUntil is when an open breaker lets a probe through.
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
	// Failures counts the failed tries in a row (routes with a breaker).
	Failures int64 `json:"failures,omitempty"`
	// Error says what could not be read, when something could not.
	Error string `json:"error,omitempty"`
}

// RoutesPage is the JSON answer to GET /admin/routes.
type RoutesPage struct {
	Routes []RouteInfo `json:"routes"`
}

// PauseResult is the JSON answer to a pause or a resume: the route's
// state after it, and whether the call changed it.
type PauseResult struct {
	Route       string     `json:"route"`
	Paused      bool       `json:"paused"`
	PausedSince *time.Time `json:"paused_since,omitempty"`
	Changed     bool       `json:"changed"`
}

func (a *api) routeHandlers(mux *http.ServeMux) {
	mux.Handle("GET /admin/routes", a.auth(a.listRoutes))
	mux.Handle("POST /admin/routes/{route}/pause", a.auth(func(w http.ResponseWriter, r *http.Request) { a.pause(w, r, true) }))
	mux.Handle("POST /admin/routes/{route}/resume", a.auth(func(w http.ResponseWriter, r *http.Request) { a.pause(w, r, false) }))
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// listRoutes answers every route of the running config with its delivery
// mode, this instance's counts of its answers, queue depth, lag and DLQ
// size, paused flag and breaker state, read afresh from the shared state.
func (a *api) listRoutes(w http.ResponseWriter, r *http.Request) {
	page := RoutesPage{Routes: []RouteInfo{}}
	var counts map[string]metrics.RouteCounts
	if a.Counters != nil {
		counts = a.Counters.RouteCounts()
	}
	now := time.Now()
	for _, rc := range a.Gateway.Config().Routes {
		c := counts[rc.Name]
		info := RouteInfo{Name: rc.Name, Delivery: string(rc.Delivery),
			Deliveries: c.Deliveries, Forwarded: c.Forwarded, Queued: c.Queued, Replayed: c.Replayed, Refused: c.Refused}
		if info.Delivery == "" {
			info.Delivery = "sync"
		}
		var errs []string
		if rc.Queued() && a.Queue != nil {
			if st, err := a.Queue.Stats(r.Context(), rc.Name); err != nil {
				errs = append(errs, "queue: "+err.Error())
			} else {
				lag := 0.0
				if st.Depth > 0 && !st.Oldest.IsZero() {
					lag = max(0, now.Sub(st.Oldest).Seconds())
				}
				info.Depth, info.DLQ, info.LagSeconds = &st.Depth, &st.DLQ, &lag
			}
		}
		if a.Controls != nil && (rc.Queued() || rc.Breaker.Enabled()) {
			st, err := a.Controls.State(r.Context(), rc.Name)
			if err != nil {
				errs = append(errs, err.Error())
			} else {
				info.Paused, info.PausedSince = !st.PausedAt.IsZero(), timePtr(st.PausedAt)
				if rc.Breaker.Enabled() {
					info.Breaker, info.Failures = st.Breaker, st.Failures
					if st.Breaker != control.BreakerClosed {
						info.BreakerOpenUntil = timePtr(st.OpenUntil)
					}
				}
			}
		}
		if len(errs) > 0 {
			info.Error = fmt.Sprint(errs)
		}
		page.Routes = append(page.Routes, info)
	}
	writeJSON(w, http.StatusOK, page)
}

// pause pauses (or resumes) a queue route for every instance: it keeps
// acknowledging and stops delivering, across restarts, until resumed.
// 404 for an unknown route, 400 for a sync route (it has no queue to
// hold), 503 when the shared state does not answer.
func (a *api) pause(w http.ResponseWriter, r *http.Request, paused bool) {
	route := r.PathValue("route")
	if !a.knownRoute(w, route) {
		return
	}
	verb := "pause"
	if !paused {
		verb = "resume"
	}
	if !a.queueKey(route) || a.Controls == nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("route %q is not a delivery: queue route: only a queue route can %s (a sync route forwards while the provider waits)", route, verb), "route": route})
		return
	}
	since, changed, err := a.Controls.SetPaused(r.Context(), route, paused)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
		return
	}
	if changed {
		a.Logger.Warn("admin: route "+verb+"d", "route", route)
	}
	writeJSON(w, http.StatusOK, PauseResult{Route: route, Paused: paused, PausedSince: timePtr(since), Changed: changed})
}
