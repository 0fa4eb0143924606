package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/clawgate/clawgate/store"
)

// The operators' side of the queue: the DLQ and the keys of queue routes.
// Every method answers ErrNoRoute for a route that is not a queue route
// of this instance.

func (m *Manager) routeCfg(route string) (Route, error) {
	rn := m.route(route)
	if rn == nil {
		return Route{}, fmt.Errorf("%w: %q", ErrNoRoute, route)
	}
	return rn.cfg, nil
}

// refresh asks route's gauges to be read now.
func (m *Manager) refresh(route string) {
	if rn := m.route(route); rn != nil {
		rn.refresh()
	}
}

// IsRoute reports whether route is a queue route of this instance.
func (m *Manager) IsRoute(route string) bool { return m.route(route) != nil }

// ListDLQ lists route's dead-lettered events: each once across the
// pages, oldest first on the memory and Redis backends (in no set order
// on Kafka).
func (m *Manager) ListDLQ(ctx context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	if _, err := m.routeCfg(route); err != nil {
		return nil, "", err
	}
	return m.o.Backend.ListDLQ(ctx, route, cursor, limit)
}

// Dead reports one dead-lettered event of route with its payload (the
// stored outgoing request); ErrNotFound when it is not in the DLQ.
func (m *Manager) Dead(ctx context.Context, route, id string) (DeadEntry, []byte, error) {
	if _, err := m.routeCfg(route); err != nil {
		return DeadEntry{}, nil, err
	}
	return m.o.Backend.Dead(ctx, route, id)
}

// Replay moves one dead-lettered event back to the ready queue.
func (m *Manager) Replay(ctx context.Context, route, id string) error {
	if _, err := m.routeCfg(route); err != nil {
		return err
	}
	if err := m.o.Backend.Replay(ctx, route, id); err != nil {
		return err
	}
	m.o.Metrics.DLQReplayed(route, 1)
	m.refresh(route)
	m.log.Info("queue: dead-lettered event replayed", "route", route, "id", id)
	return nil
}

// Purge drops a dead-lettered event's body; its key stays dead-lettered
// for the route's retention.
func (m *Manager) Purge(ctx context.Context, route, id string) error {
	cfg, err := m.routeCfg(route)
	if err != nil {
		return err
	}
	if err := m.o.Backend.Purge(ctx, route, id, cfg.Retention); err != nil {
		return err
	}
	m.o.Metrics.DLQPurged(route, 1)
	m.refresh(route)
	m.log.Info("queue: dead-lettered event purged", "route", route, "id", id)
	return nil
}

// Get reports a queue route's key.
func (m *Manager) Get(ctx context.Context, route, key string) (KeyState, error) {
	if _, err := m.routeCfg(route); err != nil {
		return KeyState{}, err
	}
	return m.o.Backend.Get(ctx, route, key)
}

// Record reports route's key as the backend holds it, whether or not
// route is still a queue route of this instance: a reload that turned it
// into a sync route leaves its finished and dead-lettered keys in the
// backend for their retention, and the sync path reads them (proxy's
// fromQueue).
func (m *Manager) Record(ctx context.Context, route, key string) (KeyState, error) {
	return m.o.Backend.Get(ctx, route, key)
}

// Delete forgets a queue route's key and cancels its delivery.
func (m *Manager) Delete(ctx context.Context, route, key string) (KeyState, error) {
	if _, err := m.routeCfg(route); err != nil {
		return KeyState{}, err
	}
	return m.o.Backend.Delete(ctx, route, key)
}

// History reports route's key's history from the backend, when it keeps
// one apart from the store's (nil otherwise: the store's is the key's).
func (m *Manager) History(ctx context.Context, route, key string) ([]store.HistoryEntry, error) {
	if h, ok := m.o.Backend.(interface {
		History(ctx context.Context, route, key string) ([]store.HistoryEntry, error)
	}); ok {
		return h.History(ctx, route, key)
	}
	return nil, nil
}

// ReplayStatus is a replay of a whole DLQ as the admin API shows it.
type ReplayStatus struct {
	Route string `json:"route"`
	// State is running, done, cancelled or failed.
	State    string    `json:"state"`
	Total    int64     `json:"total"` // the DLQ's size when the replay began: the most it replays
	Replayed int64     `json:"replayed"`
	Rate     float64   `json:"rate"`
	Started  time.Time `json:"started"`
	Error    string    `json:"error,omitempty"`
}

type replayJob struct {
	st     ReplayStatus
	cancel context.CancelFunc
	done   chan struct{} // closed when the run ends
}

// ErrReplayRunning: a replay of the route's DLQ is already running here.
var ErrReplayRunning = errors.New("queue: a replay of this DLQ is already running")

// ReplayAll starts replaying route's whole DLQ at ReplayRate events per
// second, in the background, so that a backlog does not swamp the
// upstream's live traffic. It replays at most the events in the DLQ when
// it starts (an event that dies again is not replayed twice by one run).
// CancelReplay stops it.
func (m *Manager) ReplayAll(route string) (ReplayStatus, error) {
	if _, err := m.routeCfg(route); err != nil {
		return ReplayStatus{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	st, err := m.o.Backend.Stats(ctx, route)
	cancel()
	if err != nil {
		return ReplayStatus{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if j := m.jobs[route]; j != nil && j.st.State == "running" {
		return j.st, ErrReplayRunning
	}
	jctx, jcancel := context.WithCancel(context.Background())
	j := &replayJob{cancel: jcancel, done: make(chan struct{}), st: ReplayStatus{Route: route, State: "running", Total: st.DLQ, Rate: m.o.ReplayRate, Started: time.Now().UTC()}}
	m.jobs[route] = j
	go m.runReplay(store.WithNote(jctx, store.Note{Action: "dlq replay all"}), j)
	return j.st, nil
}

func (m *Manager) runReplay(ctx context.Context, j *replayJob) {
	route := j.st.Route
	lim := rate.NewLimiter(rate.Limit(m.o.ReplayRate), 1)
	var failure error
	cursor := ""
	done := int64(0)
loop:
	for done < j.st.Total {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		entries, next, err := m.o.Backend.ListDLQ(lctx, route, cursor, 100)
		cancel()
		if err != nil {
			failure = err
			break
		}
		for _, e := range entries {
			if done >= j.st.Total {
				break loop
			}
			if err := lim.Wait(ctx); err != nil {
				break loop
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := m.o.Backend.Replay(rctx, route, e.ID)
			cancel()
			done++
			switch {
			case err == nil:
				m.o.Metrics.DLQReplayed(route, 1)
				m.mu.Lock()
				j.st.Replayed++
				m.mu.Unlock()
			case errors.Is(err, ErrNotFound): // replayed or purged meanwhile
			default:
				failure = err
				break loop
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	defer close(j.done)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case ctx.Err() != nil: // a call cut by the cancel fails with it
		j.st.State = "cancelled"
	case failure != nil:
		j.st.State, j.st.Error = "failed", failure.Error()
	default:
		j.st.State = "done"
	}
	m.log.Info("queue: DLQ replay ended", "route", route, "state", j.st.State, "replayed", j.st.Replayed, "total", j.st.Total)
}

// Replaying reports the last replay of route's DLQ started here; ok
// false when there was none.
func (m *Manager) Replaying(route string) (ReplayStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[route]
	if j == nil {
		return ReplayStatus{}, false
	}
	return j.st, true
}

// CancelReplay stops a running replay of route's DLQ; what it replayed
// stays replayed. ok false when none was started here.
func (m *Manager) CancelReplay(route string) (ReplayStatus, bool) {
	m.mu.Lock()
	j := m.jobs[route]
	m.mu.Unlock()
	if j == nil {
		return ReplayStatus{}, false
	}
	j.cancel()
	<-j.done // the run stops at its next event: within a Redis call's time
	st, _ := m.Replaying(route)
	return st, true
}

// Stats measures route's queue: depth, DLQ size, oldest event.
func (m *Manager) Stats(ctx context.Context, route string) (Stats, error) {
	if m.route(route) == nil {
		return Stats{}, fmt.Errorf("%w: %q", ErrNoRoute, route)
	}
	return m.o.Backend.Stats(ctx, route)
}
