package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/clawgate/clawgate/store"
)

// Memory is the queue of one process, with the same semantics as Redis
// inside it. Everything in it is lost when the process stops.
type Memory struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxBytes bounds the estimated size of the finished (and purged)
	// keys every route remembers for its retention, with their stored
	// answers: when a finish would take them over it, the oldest are
	// forgotten first (a provider's retry of one is then queued and
	// delivered again). 0: no bound. Queued and dead-lettered events are
	// bounded by the routes' max_depth and DLQ bounds instead.
	MaxBytes int64
	// Others, if set, reports the bytes others already take of the same
	// budget (the memory store's keys): the finished keys are kept within
	// MaxBytes minus those.
	Others func() int64
	// OnEvict, if set, is called for each key forgotten for MaxBytes.
	OnEvict func()

	mu     sync.Mutex
	routes map[string]*memRoute
	seq    uint64
	claims uint64 // numbers every read and takeover of an entry
	swept  time.Time
	// done is the estimated size of the finished keys; order lists them
	// oldest first (an entry whose key moved on is skipped).
	done  int64
	order []memDone
}

// memDone is a finished key in the order of finishing.
type memDone struct {
	r    *memRoute
	name string
	k    *memKey
}

// memKeyOverhead is the estimated fixed size of one finished key's
// record (map entry, struct, strings' headers).
const memKeyOverhead = 256

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-process queue.
func NewMemory() *Memory { return &Memory{routes: map[string]*memRoute{}} }

type memRoute struct {
	m       *Memory
	keys    map[string]*memKey
	events  map[string]*memEvent
	ready   []memEntry
	pending map[string]*memPending
	retry   map[string]memRetry // by eid|tok
	dlq     map[string]uint64   // eid -> DLQ sequence
	wake    chan struct{}       // closed when an entry becomes ready
}

type memKey struct {
	st           string // queued, dead, done
	eid, tok, fp string
	n, qa, qt    int64
	first, last  time.Time
	rec          store.Outcome
	expires      time.Time // zero: never
	size         int64     // counted in Memory.done (finished or purged keys)
}

type memEvent struct {
	key      string
	payload  []byte
	first    time.Time
	reason   string
	status   int
	err      string
	died     time.Time
	attempts int64
}

type memEntry struct{ id, eid, tok, key string }

type memPending struct {
	memEntry
	owner string
	since time.Time
	claim uint64 // the read or takeover that handed the entry to owner
}

type memRetry struct {
	memEntry
	due time.Time
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Memory) route(name string) *memRoute {
	r := m.routes[name]
	if r == nil {
		r = &memRoute{m: m, keys: map[string]*memKey{}, events: map[string]*memEvent{}, pending: map[string]*memPending{},
			retry: map[string]memRetry{}, dlq: map[string]uint64{}, wake: make(chan struct{})}
		m.routes[name] = r
	}
	return r
}

// key returns name's live key record, forgetting one whose retention ran
// out.
func (r *memRoute) key(name string, now time.Time) *memKey {
	k := r.keys[name]
	if k != nil && !k.expires.IsZero() && !now.Before(k.expires) {
		r.forget(name, k)
		return nil
	}
	return k
}

// forget drops key name, uncounting its size.
func (r *memRoute) forget(name string, k *memKey) {
	delete(r.keys, name)
	r.m.done -= k.size
	k.size = 0
}

// remember counts k, just finished or purged, against MaxBytes, forgetting
// the oldest finished keys to keep within it (never k itself).
func (m *Memory) remember(r *memRoute, name string, k *memKey) {
	k.size = int64(memKeyOverhead + len(name) + len(k.eid) + len(k.fp) + len(k.rec.ContentType) + len(k.rec.Body) + len(k.rec.Fingerprint))
	m.done += k.size
	if m.MaxBytes <= 0 {
		return
	}
	m.order = append(m.order, memDone{r, name, k})
	var others int64
	if m.Others != nil {
		others = m.Others()
	}
	for m.done+others > m.MaxBytes && len(m.order) > 1 {
		d := m.order[0]
		m.order[0] = memDone{}
		m.order = m.order[1:]
		if d.k == k {
			m.order = append(m.order, d)
			continue
		}
		if d.r.keys[d.name] == d.k && d.k.size > 0 {
			d.r.forget(d.name, d.k)
			if m.OnEvict != nil {
				m.OnEvict()
			}
		}
	}
	if len(m.order) > 64 && cap(m.order) > 4*len(m.order) {
		m.order = append([]memDone(nil), m.order...)
	}
}

func (m *Memory) push(r *memRoute, eid, tok, key string) {
	m.seq++
	r.ready = append(r.ready, memEntry{id: strconv.FormatUint(m.seq, 10), eid: eid, tok: tok, key: key})
	close(r.wake)
	r.wake = make(chan struct{})
}

// Prepare implements Backend; the memory queue has one shard.
func (m *Memory) Prepare(context.Context, string, int) error { return nil }

// Shards implements Backend.
func (m *Memory) Shards(string) int { return 1 }

// Enqueue implements Backend.
func (m *Memory) Enqueue(_ context.Context, e Entry, maxDepth int) (Ack, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.route(e.Route)
	k := r.key(e.Key, now)
	if k == nil {
		if m.depth(r) >= maxDepth {
			return Ack{State: Full}, nil
		}
		eid := newEventID(0)
		k = &memKey{st: "queued", eid: eid, tok: newToken(), fp: e.Fingerprint, first: e.FirstSeen}
		r.keys[e.Key] = k
		r.events[eid] = &memEvent{key: e.Key, payload: append([]byte(nil), e.Payload...), first: e.FirstSeen}
		m.push(r, eid, k.tok, e.Key)
	} else if k.st == "queued" || k.st == "dead" {
		k.n++
		k.last = now
		return Ack{State: Pending, ID: k.eid, Fingerprint: k.fp, Dead: k.st == "dead", Copies: k.n}, nil
	} else {
		k.n++
		k.last = now
		return Ack{State: Delivered, Fingerprint: k.rec.Fingerprint, Outcome: k.rec, Copies: k.n}, nil
	}
	k.n++
	k.last = now
	return Ack{State: Enqueued, ID: k.eid, Fingerprint: e.Fingerprint, Copies: k.n}, nil
}

// depth counts r's undelivered events (a purge drops an event from
// events and dlq together).
func (m *Memory) depth(r *memRoute) int {
	return len(r.events) - len(r.dlq)
}

// Read implements Backend.
func (m *Memory) Read(ctx context.Context, route string, _ int, consumer string, n int, block time.Duration) ([]Lease, error) {
	timer := time.NewTimer(block)
	defer timer.Stop()
	for {
		m.mu.Lock()
		r := m.route(route)
		if len(r.ready) > 0 {
			take := min(n, len(r.ready))
			out := make([]Lease, 0, take)
			now := m.now()
			for _, e := range r.ready[:take] {
				m.claims++
				p := &memPending{memEntry: e, owner: consumer, since: now, claim: m.claims}
				r.pending[e.id] = p
				out = append(out, p.lease(route))
			}
			r.ready = append(r.ready[:0:0], r.ready[take:]...)
			m.mu.Unlock()
			return out, nil
		}
		wake := r.wake
		m.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

func (p *memPending) lease(route string) Lease {
	return Lease{Route: route, Entry: p.id, EventID: p.eid, Token: p.tok, Key: p.key, Consumer: p.owner, claim: p.claim}
}

// Begin implements Backend. The lease must be the entry's latest read or
// takeover: a worker that stalled past the lock TTL before beginning is
// refused even when the takeover was by its own instance (one consumer
// per process), and the begin restarts the lease's idle time.
func (m *Memory) Begin(_ context.Context, l Lease) (Job, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(l.Route)
	p := r.pending[l.Entry]
	if p != nil && (p.owner != l.Consumer || p.claim != l.claim) {
		return Job{}, false, notOwner(l)
	}
	now := m.now()
	k := r.key(l.Key, now)
	ev := r.events[l.EventID]
	if k == nil || k.st != "queued" || k.eid != l.EventID || k.tok != l.Token || ev == nil {
		delete(r.pending, l.Entry)
		return Job{}, false, nil
	}
	if p == nil {
		return Job{}, false, notOwner(l)
	}
	p.since = now
	k.qa++
	k.qt++
	return Job{Lease: l, Payload: ev.payload, FirstSeen: ev.first, Fingerprint: k.fp, Try: k.qa, Total: k.qt}, true, nil
}

func notOwner(l Lease) error {
	return fmt.Errorf("%w (route %s, entry %s)", ErrNotOwner, l.Route, l.Entry)
}

// Settle implements Backend.
func (m *Memory) Settle(_ context.Context, consumer string, j Job, s Settlement) (Settled, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(j.Route)
	p := r.pending[j.Entry]
	if p == nil || p.owner != consumer {
		return NotOwner, nil
	}
	delete(r.pending, j.Entry)
	k := r.key(j.Key, m.now())
	if k == nil || k.st != "queued" || k.tok != j.Token {
		return Stale, nil
	}
	switch s.Kind {
	case SettleDelivered:
		k.st, k.tok, k.rec = "done", "", s.Outcome
		k.expires = m.now().Add(s.Retention)
		delete(r.events, k.eid)
		m.remember(r, j.Key, k)
	case SettleRetry:
		k.tok = newToken()
		r.retry[k.eid+"|"+k.tok] = memRetry{memEntry: memEntry{eid: k.eid, tok: k.tok, key: j.Key}, due: s.Due}
	default:
		k.st, k.tok = "dead", ""
		ev := r.events[k.eid]
		ev.reason, ev.status, ev.err, ev.died, ev.attempts = s.Reason, s.Status, s.Error, s.At, k.qt
		m.seq++
		r.dlq[k.eid] = m.seq
	}
	return Recorded, nil
}

// Promote implements Backend. Once a minute it also forgets finished and
// purged keys whose retention ran out.
func (m *Memory) Promote(_ context.Context, route string, _ int, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	var due []memRetry
	for id, rt := range r.retry {
		if !rt.due.After(now) {
			due = append(due, rt)
			delete(r.retry, id)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].due.Before(due[j].due) })
	for _, rt := range due {
		m.push(r, rt.eid, rt.tok, rt.key)
	}
	if now.Sub(m.swept) > time.Minute {
		m.swept = now
		for _, rr := range m.routes {
			for name := range rr.keys {
				rr.key(name, now)
			}
		}
		live := m.order[:0]
		for _, d := range m.order {
			if d.r.keys[d.name] == d.k && d.k.size > 0 {
				live = append(live, d)
			}
		}
		clear(m.order[len(live):])
		m.order = live
	}
	return len(due), nil
}

// Reclaim implements Backend.
func (m *Memory) Reclaim(_ context.Context, route string, _ int, consumer string, idle time.Duration) ([]Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	now := m.now()
	var out []Lease
	for _, p := range r.pending {
		if now.Sub(p.since) >= idle {
			m.claims++
			p.owner, p.since, p.claim = consumer, now, m.claims
			out = append(out, p.lease(route))
		}
	}
	return out, nil
}

// HandBack implements Backend.
func (m *Memory) HandBack(_ context.Context, consumer string, leases []Lease, idle time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, l := range leases {
		if p := m.route(l.Route).pending[l.Entry]; p != nil && p.owner == consumer {
			p.since = now.Add(-idle)
		}
	}
	return nil
}

// Stats implements Backend.
func (m *Memory) Stats(_ context.Context, route string) (Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	st := Stats{DLQ: int64(len(r.dlq))}
	for eid, ev := range r.events {
		if _, dead := r.dlq[eid]; dead {
			st.DLQBytes += int64(len(ev.payload))
			continue
		}
		st.Depth++
		if st.Oldest.IsZero() || ev.first.Before(st.Oldest) {
			st.Oldest = ev.first
		}
	}
	return st, nil
}

// ListDLQ implements Backend; the cursor is the last entry's sequence.
func (m *Memory) ListDLQ(_ context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	limit = max(limit, 1)
	var after uint64
	if cursor != "" {
		v, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			return nil, "", ErrBadCursor
		}
		after = v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	type item struct {
		seq uint64
		eid string
	}
	var all []item
	for eid, seq := range r.dlq {
		if seq > after {
			all = append(all, item{seq, eid})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = strconv.FormatUint(all[limit-1].seq, 10)
	}
	out := make([]DeadEntry, 0, len(all))
	for _, it := range all {
		ev := r.events[it.eid]
		out = append(out, DeadEntry{ID: it.eid, Key: ev.key, Reason: ev.reason, Status: ev.status, Attempts: ev.attempts,
			Error: ev.err, FirstSeen: ev.first.UTC(), DiedAt: ev.died.UTC()})
	}
	return out, next, nil
}

// Replay implements Backend.
func (m *Memory) Replay(_ context.Context, route, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	if _, ok := r.dlq[id]; !ok {
		return ErrNotFound
	}
	ev := r.events[id]
	k := r.key(ev.key, m.now())
	if k == nil || k.st != "dead" || k.eid != id {
		return ErrNotFound
	}
	delete(r.dlq, id)
	ev.reason, ev.status, ev.err, ev.died, ev.attempts = "", 0, "", time.Time{}, 0
	k.st, k.tok, k.qa = "queued", newToken(), 0
	m.push(r, id, k.tok, ev.key)
	return nil
}

// Purge implements Backend.
func (m *Memory) Purge(_ context.Context, route, id string, retention time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	if _, ok := r.dlq[id]; !ok {
		return ErrNotFound
	}
	ev := r.events[id]
	delete(r.dlq, id)
	delete(r.events, id)
	if k := r.key(ev.key, m.now()); k != nil && k.eid == id {
		k.expires = m.now().Add(retention)
		m.remember(r, ev.key, k)
	}
	return nil
}

// Get implements Backend.
func (m *Memory) Get(_ context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.get(m.route(route), key), nil
}

func (m *Memory) get(r *memRoute, key string) KeyState {
	k := r.key(key, m.now())
	if k == nil {
		return KeyState{State: StateAbsent}
	}
	ks := KeyState{EventID: k.eid, Copies: k.n, Attempts: k.qt, FirstSeen: k.first, LastSeen: k.last, Fingerprint: k.fp}
	switch k.st {
	case "queued":
		ks.State = StateQueued
	case "dead":
		ks.State = StateDeadLettered
	default:
		ks.State, ks.Status, ks.Outcome = StateFinished, k.rec.Status, k.rec
	}
	return ks
}

// Delete implements Backend.
func (m *Memory) Delete(_ context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	ks := m.get(r, key)
	if k := r.keys[key]; k != nil {
		delete(r.events, k.eid)
		delete(r.dlq, k.eid)
		r.forget(key, k)
	}
	return ks, nil
}
