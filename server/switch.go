package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawgate/clawgate/config"
)

// ErrQueueNotDrained is wrapped by the error of a reload refused because
// it would turn a queue route that still holds events into a sync route,
// or remove it: nothing would deliver them.
var ErrQueueNotDrained = errors.New("the queue route still holds events")

// queueCountTimeout bounds the count of a leaving route's events.
const queueCountTimeout = 5 * time.Second

// leavingQueue lists the routes of the running config that are queue
// routes and are not in next, or are sync routes there.
func leavingQueue(running, next *config.Config) []string {
	queued := map[string]bool{}
	for i := range next.Routes {
		queued[next.Routes[i].Name] = next.Routes[i].Queued()
	}
	var out []string
	for i := range running.Routes {
		r := &running.Routes[i]
		if r.Queued() && !queued[r.Name] {
			out = append(out, r.Name)
		}
	}
	return out
}

// checkQueueLeaving refuses a reload that would stop a queue route while
// its queue still holds undelivered (queued, being delivered, waiting to
// retry) or dead-lettered events: a sync route never reads them, and a
// removed one has no workers, so they would be parked silently (and lost
// with the process on the memory queue). The counts are the backend's, so
// on Redis and Kafka they cover every instance. A backend that does not
// answer refuses the reload too: the events cannot be counted. The
// error is a *config.Error, one problem per route, each wrapping
// ErrQueueNotDrained (or the backend's error).
func (in *Server) checkQueueLeaving(next *config.Config, path string) error {
	names := leavingQueue(in.gw.Config(), next)
	if len(names) == 0 {
		return nil
	}
	lines := map[string]int{}
	for i := range next.Routes {
		lines[next.Routes[i].Name] = next.Routes[i].Line
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueCountTimeout)
	defer cancel()
	var ce config.Error
	for _, name := range names {
		what := "be removed"
		if _, ok := lines[name]; ok {
			what = "become a sync route"
		}
		p := &config.Problem{File: path, Line: lines[name], Field: fmt.Sprintf("route %q", name)}
		st, err := in.qb.Stats(ctx, name)
		switch {
		case err != nil:
			p.Msg = fmt.Sprintf("would %s, but its queued and dead-lettered events cannot be counted (%v); reload again when the queue's backend answers", what, err)
			p.Err = err
		case st.Depth > 0 || st.DLQ > 0:
			p.Msg = fmt.Sprintf("would %s while its queue holds %d undelivered (queued or retrying) and %d dead-lettered events; keep delivery: queue until they drain, replay or purge the dead-lettered ones (clawgate dlq), then reload", what, st.Depth, st.DLQ)
			p.Err = ErrQueueNotDrained
		default:
			continue
		}
		ce.Problems = append(ce.Problems, p)
	}
	if len(ce.Problems) == 0 {
		return nil
	}
	return &ce
}

// reportParked logs, after a reload switched the gateway, any event that
// reached a route's queue between checkQueueLeaving's count and the
// switch: an acknowledged event nothing delivers until the route is a
// queue route again.
func (in *Server) reportParked(names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), queueCountTimeout)
	defer cancel()
	for _, name := range names {
		st, err := in.qb.Stats(ctx, name)
		if err != nil || (st.Depth == 0 && st.DLQ == 0) {
			continue
		}
		in.log.Error("config reload: events reached the queue of a route that stopped being a queue route while the reload ran; make it a queue route again to deliver them",
			"route", name, "undelivered", st.Depth, "dead_lettered", st.DLQ)
	}
}
