package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/clawgate/clawgate/ledger"
)

// Memory is the queue of one process, with the same semantics as Redis
// inside it. Everything in it is lost when the process stops.
//
// The keys live in a ledger.Memory (Keys), with how each dead-lettered
// event died: the queue keeps only the events, the ready list, the
// entries its consumers hold, the retry set and the DLQ's order. Every
// call takes the queue's lock first and the ledger's within it, so that
// each call stays one atomic step.
type Memory struct {
	// Now is the clock of the queue and of its ledger; nil means time.Now.
	Now func() time.Time

	keys   *ledger.Memory
	mu     sync.Mutex
	routes map[string]*memRoute
	seq    uint64
	claims uint64 // numbers every read and takeover of an entry
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty in-process queue with a ledger of its own.
func NewMemory() *Memory {
	m := &Memory{routes: map[string]*memRoute{}}
	m.keys = ledger.NewMemory(m.now)
	return m
}

// NewMemoryOn returns an empty in-process queue keeping its keys in keys,
// the ledger the memory store's sync path keeps them in too
// (ledger.MemoryStore.Ledger): a key has one record whatever its route's
// mode. keys' clock is the ledger's own.
func NewMemoryOn(keys *ledger.Memory) *Memory {
	return &Memory{routes: map[string]*memRoute{}, keys: keys}
}

// Keys is the ledger the queue keeps its keys in; set its budget
// (ledger.Memory's MaxBytes, Others, OnEvict) before the first call.
func (m *Memory) Keys() *ledger.Memory { return m.keys }

// memReservation bounds a key's enqueuing state, which never outlives one
// Enqueue (it is confirmed under the queue's lock).
const memReservation = time.Minute

type memRoute struct {
	events   map[string]*memEvent // by event id: undelivered and dead-lettered
	ready    []memEntry
	pending  map[string]*memPending
	retry    map[string]memRetry // by eid|tok
	dlq      map[string]uint64   // eid -> DLQ sequence (its position in the ledger)
	dlqBytes int64               // the dead-lettered events' payloads
	wake     chan struct{}       // closed when an entry becomes ready
}

// memEvent is one stored event.
type memEvent struct {
	key     string
	payload []byte
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
		r = &memRoute{events: map[string]*memEvent{}, pending: map[string]*memPending{},
			retry: map[string]memRetry{}, dlq: map[string]uint64{}, wake: make(chan struct{})}
		m.routes[name] = r
	}
	return r
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

// Enqueue implements Backend: the key is reserved and confirmed in the
// ledger and the event stored, all under the queue's lock.
func (m *Memory) Enqueue(ctx context.Context, e Entry, maxDepth int) (Ack, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	eid, tok := newEventID(0), newToken()
	res, err := m.keys.Reserve(ctx, ledger.Reservation{Route: e.Route, Key: e.Key, Fingerprint: e.Fingerprint,
		EventID: eid, Token: tok, FirstSeen: e.FirstSeen, Lease: memReservation, MaxDepth: maxDepth,
		Order: e.Order, Stale: e.Stale})
	if err != nil {
		return Ack{}, err
	}
	if res.State != Enqueued {
		return Ack{State: res.State, ID: res.ID, Fingerprint: res.Fingerprint, Dead: res.Dead, Outcome: res.Outcome, Copies: res.Copies}, err
	}
	if ok, err := m.keys.Confirm(ctx, e.Route, e.Key, tok); err != nil || !ok {
		return Ack{}, fmt.Errorf("memory queue: enqueue %q: the reservation was lost (%v)", e.Key, err)
	}
	r := m.route(e.Route)
	r.events[eid] = &memEvent{key: e.Key, payload: append([]byte(nil), e.Payload...)}
	m.push(r, eid, tok, e.Key)
	return Ack{State: Enqueued, ID: eid, Fingerprint: e.Fingerprint, Copies: res.Copies}, nil
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
			// Drop the taken entries from the front without copying the
			// rest: a copy made every read cost time and garbage in
			// proportion to the events waiting. The array is let go when
			// append outgrows it (it copies only the live entries) or the
			// list empties; the taken slots are cleared meanwhile so that
			// they hold nothing.
			clear(r.ready[:take])
			r.ready = r.ready[take:]
			if len(r.ready) == 0 {
				r.ready = nil
			}
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
// per process), and the begin restarts the lease's idle time. The ledger
// records the entry as the try's position and the consumer as its owner.
func (m *Memory) Begin(ctx context.Context, l Lease) (Job, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(l.Route)
	p := r.pending[l.Entry]
	if p != nil && (p.owner != l.Consumer || p.claim != l.claim) {
		return Job{}, false, notOwner(l)
	}
	ev := r.events[l.EventID]
	if p == nil || ev == nil {
		delete(r.pending, l.Entry)
		return Job{}, false, nil
	}
	b, ok, err := m.keys.Begin(ctx, l.Route, l.Key, l.EventID, l.Token, l.Entry, l.Consumer)
	if err != nil || !ok {
		delete(r.pending, l.Entry)
		return Job{}, false, err
	}
	p.since = m.now()
	return Job{Lease: l, Payload: ev.payload, FirstSeen: b.FirstSeen, Fingerprint: b.Fingerprint, Try: b.Try, Total: b.Total, Stale: b.Stale}, true, nil
}

func notOwner(l Lease) error {
	return fmt.Errorf("%w (route %s, entry %s)", ErrNotOwner, l.Route, l.Entry)
}

// Settle implements Backend. A retry gets a token minted here, a dead
// letter its DLQ sequence as its position.
func (m *Memory) Settle(ctx context.Context, consumer string, j Job, s Settlement) (Settled, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(j.Route)
	p := r.pending[j.Entry]
	if p == nil || p.owner != consumer {
		return NotOwner, nil
	}
	switch s.Kind {
	case SettleRetry:
		s.NewToken = newToken()
	case SettleDead:
		s.DLQPos = strconv.FormatUint(m.seq+1, 10)
	}
	got, err := m.keys.Settle(ctx, j.Route, j.Key, j.EventID, j.Token, consumer, s)
	if err != nil || got == NotOwner {
		return got, err
	}
	delete(r.pending, j.Entry)
	if got != Recorded {
		return got, nil
	}
	m.handBackParked(r, j.Route)
	switch s.Kind {
	case SettleDelivered:
		delete(r.events, j.EventID)
	case SettleRetry:
		r.retry[j.EventID+"|"+s.NewToken] = memRetry{memEntry: memEntry{eid: j.EventID, tok: s.NewToken, key: j.Key}, due: s.Due}
	default:
		m.seq++
		r.dlq[j.EventID] = m.seq
		r.dlqBytes += r.size(j.EventID)
	}
	return Recorded, nil
}

// Promote implements Backend.
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

// Stats implements Backend: the ledger's, with the DLQ's bytes.
func (m *Memory) Stats(ctx context.Context, route string) (Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.keys.Stats(ctx, route)
	st.DLQBytes = m.route(route).dlqBytes
	return st, err
}

// ListDLQ implements Backend, in the order the events died; the cursor is
// the last entry's sequence.
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
	eids := make([]string, len(all))
	for i, it := range all {
		eids[i] = it.eid
	}
	return m.keys.DeadEntries(route, eids), next, nil
}

// size is the payload size of event eid (0 when it is not stored).
func (r *memRoute) size(eid string) int64 {
	if ev := r.events[eid]; ev != nil {
		return int64(len(ev.payload))
	}
	return 0
}

// drop takes a dead-lettered event out of the DLQ; gone also forgets its
// body.
func (r *memRoute) drop(eid string, gone bool) {
	if _, ok := r.dlq[eid]; ok {
		delete(r.dlq, eid)
		r.dlqBytes -= r.size(eid)
	}
	if gone {
		delete(r.events, eid)
	}
}

// Dead implements Backend.
func (m *Memory) Dead(ctx context.Context, route, id string) (DeadEntry, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	ev := r.events[id]
	if _, ok := r.dlq[id]; !ok || ev == nil {
		return DeadEntry{}, nil, ErrNotFound
	}
	d, _, err := m.keys.DeadEntry(ctx, route, id)
	if err != nil {
		return DeadEntry{}, nil, err
	}
	return d, append([]byte(nil), ev.payload...), nil
}

// Replay implements Backend.
func (m *Memory) Replay(ctx context.Context, route, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	seq, ok := r.dlq[id]
	ev := r.events[id]
	if !ok || ev == nil {
		return ErrNotFound
	}
	tok := newToken()
	if err := m.keys.Replay(ctx, route, id, strconv.FormatUint(seq, 10), tok); err != nil {
		return err
	}
	r.drop(id, false)
	m.push(r, id, tok, ev.key)
	return nil
}

// Purge implements Backend.
func (m *Memory) Purge(ctx context.Context, route, id string, retention time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	if _, ok := r.dlq[id]; !ok {
		return ErrNotFound
	}
	if err := m.keys.Purge(ctx, route, id, retention); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	m.handBackParked(r, route)
	r.drop(id, true)
	return nil
}

// Get implements Backend.
func (m *Memory) Get(ctx context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys.Get(ctx, route, key)
}

// Delete implements Backend: the key is forgotten and its event dropped;
// its entries left in the ready list, the retry set or held by a consumer
// are dropped when begun.
func (m *Memory) Delete(ctx context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ks, err := m.keys.Delete(ctx, route, key)
	r := m.route(route)
	m.handBackParked(r, route)
	if ev := r.events[ks.EventID]; ev != nil && ev.key == key {
		r.drop(ks.EventID, true)
	}
	return ks, err
}

// handBackParked makes a ready entry for each ordered event the ledger
// handed back (its value's head moved to it while it was parked), under
// the queue's lock, so that the hand-back is one step with the settle,
// purge or delete that moved the head.
func (m *Memory) handBackParked(r *memRoute, route string) {
	hs, _ := m.keys.HandBacks(context.Background(), route, 0, 0) // a memory ledger does not fail
	for _, h := range hs {
		if r.events[h.EventID] != nil {
			m.push(r, h.EventID, h.Token, h.Key)
		}
	}
}
