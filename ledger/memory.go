package ledger

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clawgate/clawgate/store"
)

// Memory is the ledger of one process, with the same semantics as
// Redis inside it; everything in it is lost when the process stops.
// Times are kept at millisecond precision, as Redis keeps them. Leases
// and retentions run on the injected clock; a key whose time is up is
// forgotten when next looked at (and by a sweep once a minute).
//
// Set the budget fields before the first call.
type Memory struct {
	// MaxBytes bounds the estimated size (Bytes) of what the keys leave
	// behind: the finished and purged keys every route remembers for their
	// retention with their stored answers, the counters of released sync
	// locks (and of locks whose lease ran out), live sync locks and reset
	// tombstones. When a finish, a purge, a release or a claim would take
	// them over it, the least recently used finished, purged and released
	// keys are forgotten first (a provider's retry of one is then
	// delivered again); the key just written is kept, and live locks and
	// tombstones count but are never forgotten for it. 0: no bound.
	// Queued and dead-lettered keys are bounded by the routes' max_depth
	// and DLQ bounds instead.
	MaxBytes int64
	// MaxKeys bounds, as MaxBytes does, how many finished, purged and
	// released keys are kept. 0: no bound.
	MaxKeys int
	// Others, if set, reports the bytes others already take of the same
	// budget: the keys are kept within MaxBytes minus those.
	Others func() int64
	// OnEvict, if set, is called for each key forgotten for MaxBytes or
	// MaxKeys (not for expiry or a reset).
	OnEvict func()

	now func() time.Time

	mu     sync.Mutex
	routes map[string]*memLedgerRoute
	swept  time.Time
	sw     memSweep
	// done is the estimated size of the keys counted (Bytes); idle is
	// how many of them may be forgotten for the budget. order lists
	// those least recently used first and locks the live locks oldest
	// claim first (an entry whose key was forgotten or moved on since is
	// skipped); ords numbers their entries.
	done  int64
	idle  int
	nlock int
	order []memDone
	locks []memDone
	ords  uint64

	// sync is the sync routes' options (SetSync); tokPrefix and seq
	// mint their lock tokens.
	sync      SyncOptions
	tokPrefix string
	seq       uint64
	// histo is the keys' history (SetHistory, history.go).
	histo HistoryOptions
}

// memDone is a counted key in order or locks: live while its key's ord
// is seq.
type memDone struct {
	k   *memLedgerKey
	seq uint64
}

// live reports whether d is still its key's entry.
func (d memDone) live() bool {
	return d.k.ord == d.seq && d.k.r.keys[d.k.name] == d.k
}

// The estimate of a key record's size (memKeySize) is the allocator's
// size class of each of its structs, the allocations of its strings and
// stored answer as the allocator rounds them (memAlloc), and memKeyShare.
// TestMemoryKeyRecordSize checks the classes against the structs, and
// TestMemoryBytesPerKey the estimate against the measured heap.
const (
	memKeyClass      = 160 // memLedgerKey
	memKeyExtraClass = 112 // memKeyExtra
	memDeadClass     = 64  // memDead
	memKeyOrderClass = 64  // memKeyOrder
	// memKeyShare bounds a key's share of its route's map (a 24-byte
	// slot and its control byte, in tables between 7/16 and 7/8 full:
	// at most 64 bytes) and of the budget's order (at most two 16-byte
	// entries per key before it is compacted, and the slice's room to
	// grow: 40 bytes).
	memKeyShare    = 64 + 40
	memKeyOverhead = memKeyClass + memKeyShare
)

// memClasses are the Go allocator's size classes up to 32 KiB.
// TestMemAlloc checks them against the runtime's own rounding.
var memClasses = [...]uint16{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672, 32768}

// memAlloc is what the allocator takes for n bytes without pointers (a
// string, a stored answer): n's size class, or whole 8 KiB pages above
// 32 KiB. 0 for 0.
func memAlloc(n int) int {
	switch {
	case n <= 0:
		return 0
	case n > int(memClasses[len(memClasses)-1]):
		return (n + 8191) &^ 8191
	}
	i, _ := slices.BinarySearch(memClasses[:], uint16(n))
	return int(memClasses[i])
}

var _ Ledger = (*Memory)(nil)

// NewMemory returns an empty ledger on the clock now (nil:
// time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, routes: map[string]*memLedgerRoute{}}
}

type memLedgerRoute struct {
	m    *Memory
	keys map[string]*memLedgerKey
	age  map[string]int64  // eid -> first seen (ms): undelivered events
	dead map[string]string // eid -> key: dead-lettered, not purged
	ord  memOrders         // order values (order.go)
}

// memLedgerKey mirrors Redis's key hash; an empty string is an
// absent field. It holds what every key uses, largest fields first so
// that no padding is left: 152 bytes (the allocator's 160-byte class,
// with room for one more word). The fields only queued, dead-lettered
// and reset keys use are in x, nil for a sync route's key
// (TestMemoryKeyRecordSize keeps these sizes).
type memLedgerKey struct {
	n, qt       int64  // copies; tries over every lock or begin
	first, last int64  // ms
	lease       int64  // ms: a lock's lease deadline
	expires     int64  // Unix ns; 0: never
	ord         uint64 // its entry in Memory.order or locks; 0: none
	tok, fp     string
	// name is the key's name, the same string as its map key.
	name string
	rec  []byte          // encoded outcome (done)
	r    *memLedgerRoute // its route, once counted
	x    *memKeyExtra    // nil: never queued nor reset
	hist *memHistory     // its history (history.go); nil: none
	// size is counted in Memory.done (see account); it saturates at 4
	// GiB, far above any stored answer a process can hold.
	size uint32
	st   memState
	acct uint8 // how it is counted (acctIdle...); 0: not
}

// memKeyExtra is the part of a key record only the queue's keys and
// reset tombstones use, kept apart so that a sync route's finished key
// does not carry its fields.
type memKeyExtra struct {
	eid, rtok string
	// ptok is a pending token: a retry or replay record produced with it
	// may be read before its settlement is recorded, and is adopted then.
	ptok       string
	pos, owner string
	qa         int64
	rst        int64        // ms: a reset tombstone's deadline (kept by Claim)
	dead       *memDead     // dead-lettered: where and why; nil otherwise
	ko         *memKeyOrder // its place in its order value's line; nil: unordered
}

// more is k's extra part, made when first needed.
func (k *memLedgerKey) more() *memKeyExtra {
	if k.x == nil {
		k.x = &memKeyExtra{}
	}
	return k.x
}

// eid is k's event id ("" for a sync route's key).
func (k *memLedgerKey) eid() string {
	if k.x == nil {
		return ""
	}
	return k.x.eid
}

// rst is k's reset tombstone deadline (ms; 0: none).
func (k *memLedgerKey) rst() int64 {
	if k.x == nil {
		return 0
	}
	return k.x.rst
}

// ko is k's order fields, nil when it is unordered.
func (k *memLedgerKey) ko() *memKeyOrder {
	if k.x == nil {
		return nil
	}
	return k.x.ko
}

// memKeyOrder is an ordered key's order value ov, its sequence os in it
// (0: none yet), its stale value sv when hasSV, and where its entry or
// record was parked (ppos), kept apart so that unordered keys do not
// carry its fields.
type memKeyOrder struct {
	ppos  string
	ov    string
	os    int64
	sv    float64
	hasSV bool
}

// memDead is a dead-lettered key's DLQ position and what killed it, kept
// apart so that the other keys do not carry its fields.
type memDead struct {
	dlq, reason string
	status      int
	err         string
	died        int64 // ms
}

// deadInfo is k's dead-letter fields, zero when it has none.
func (k *memLedgerKey) deadInfo() memDead {
	if k.x == nil || k.x.dead == nil {
		return memDead{}
	}
	return *k.x.dead
}

// expired reports whether k's time is up at now.
func (k *memLedgerKey) expired(now time.Time) bool {
	return k.expires != 0 && now.UnixNano() >= k.expires
}

// expireAt makes k expire at t (zero: never).
func (k *memLedgerKey) expireAt(t time.Time) {
	k.expires = 0
	if !t.IsZero() {
		k.expires = t.UnixNano()
	}
}

// Key record states, as stored.
const (
	ledgerEnqueuing = "enq"
	ledgerQueued    = "queued"
	ledgerDead      = "dead"
	ledgerDone      = "done"
	// ledgerLocked: a sync route's copy holds the key (Claim) until its
	// lease deadline; ledgerReset: a reset tombstone (Reset).
	ledgerLocked = "lock"
	ledgerReset  = "reset"
)

// memState is a Memory key record's state (the stored states above).
type memState uint8

const (
	// stReleased: a released sync lock's counters ("").
	stReleased memState = iota
	stEnqueuing
	stQueued
	stDead
	stDone
	stLocked
	stReset
)

// String is the state as stored (ledgerEnqueuing...).
func (s memState) String() string {
	switch s {
	case stEnqueuing:
		return ledgerEnqueuing
	case stQueued:
		return ledgerQueued
	case stDead:
		return ledgerDead
	case stDone:
		return ledgerDone
	case stLocked:
		return ledgerLocked
	case stReset:
		return ledgerReset
	}
	return ""
}

// ledgerSweepEvery is how long Memory's pass over its keys takes, each
// call doing its share (sweepKeys); a key whose time is up is also
// forgotten when a call comes for it.
const ledgerSweepEvery = time.Minute

// ledgerMs is t in Unix milliseconds, 0 for the zero time.
func ledgerMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ledgerTime is the UTC time of ms, the zero time for 0.
func ledgerTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// ledgerTTL is d as a Redis expiry: at least a millisecond (PEXPIRE with
// 0 would delete the key at once).
func ledgerTTL(d time.Duration) int64 { return max(1, d.Milliseconds()) }

// ledgerParseCursor reads a ListDead cursor: "" (the start) or
// "SCAN[/EID]", the scan cursor of the batch to list and, when that batch
// was cut short, the last event id listed from it (batches are listed in
// event id order).
func ledgerParseCursor(cursor string) (scan, after string, err error) {
	if cursor == "" {
		return "0", "", nil
	}
	scan, after, _ = strings.Cut(cursor, "/")
	if _, perr := strconv.ParseUint(scan, 10, 64); perr != nil {
		c := cursor
		if len(c) > 64 {
			c = c[:64] + "..."
		}
		return "", "", fmt.Errorf("%w: cursor %q", ErrBadCursor, c)
	}
	return scan, after, nil
}

// ledgerCursor makes the cursor ledgerParseCursor reads.
func ledgerCursor(scan, after string) string {
	if after == "" {
		return scan
	}
	return scan + "/" + after
}

var errLedgerNoToken = errors.New("ledger: settle: a retry needs a new token")

// ledgerSettleCheck refuses a settlement no ledger could record.
func ledgerSettleCheck(s Settlement) error {
	if s.Kind == SettleRetry && s.NewToken == "" {
		return errLedgerNoToken
	}
	return nil
}

func (m *Memory) route(name string) *memLedgerRoute {
	r := m.routes[name]
	if r == nil {
		r = &memLedgerRoute{m: m, keys: map[string]*memLedgerKey{}, age: map[string]int64{}, dead: map[string]string{}}
		m.routes[name] = r
	}
	return r
}

// key returns name's record, forgetting it when its time is up.
func (r *memLedgerRoute) key(name string, now time.Time) *memLedgerKey {
	k := r.keys[name]
	if k != nil && k.expired(now) {
		r.forget(name, k)
		return nil
	}
	return k
}

// forget drops key name, uncounting its size.
func (r *memLedgerRoute) forget(name string, k *memLedgerKey) {
	delete(r.keys, name)
	r.m.uncount(k)
}

// How a key is counted against the budget (account).
const (
	// acctIdle: finished, purged or released; forgotten for the budget,
	// least recently used first.
	acctIdle uint8 = 1 + iota
	// acctLock: a live sync lock; counted, never forgotten for the
	// budget, turned idle once its lease is over (expireLocks).
	acctLock
	// acctHeld: a reset tombstone; counted, never forgotten for the
	// budget.
	acctHeld
)

// uncount takes k, forgotten or moved on, out of the budget.
func (m *Memory) uncount(k *memLedgerKey) {
	m.done -= int64(k.size)
	switch k.acct {
	case acctIdle:
		m.idle--
	case acctLock:
		m.nlock--
	}
	k.size, k.ord, k.acct = 0, 0, 0
}

// bounded reports whether a budget is set.
func (m *Memory) bounded() bool { return m.MaxBytes > 0 || m.MaxKeys > 0 }

// remember counts k, just finished, purged or released, as idle (the
// most recently used), forgetting the least recently used idle keys to
// keep within the budget (never k itself).
func (m *Memory) remember(r *memLedgerRoute, name string, k *memLedgerKey) {
	m.account(r, name, k, acctIdle)
}

// account counts k, route r's key name, as how says (acctIdle...) and
// keeps the budget. k keeps its own name, set when it was made (name is
// k's only when it has none).
func (m *Memory) account(r *memLedgerRoute, name string, k *memLedgerKey, how uint8) {
	if k.name == "" {
		k.name = name
	}
	m.uncount(k)
	k.size = uint32(min(memKeySize(k.name, k), math.MaxUint32))
	m.done += int64(k.size)
	k.acct = how
	switch how {
	case acctIdle:
		m.idle++
	case acctLock:
		m.nlock++
	}
	if !m.bounded() {
		return
	}
	m.ords++
	k.ord, k.r = m.ords, r
	switch how {
	case acctIdle:
		m.order = append(m.order, memDone{k, k.ord})
	case acctLock:
		m.locks = append(m.locks, memDone{k, k.ord})
	}
	m.shrink(k)
}

// memKeySize is the estimated size of key name's record k.
func memKeySize(name string, k *memLedgerKey) int64 {
	n := memKeyOverhead + memAlloc(len(name)) + memAlloc(len(k.fp)) + memAlloc(len(k.tok)) + memAlloc(len(k.rec))
	if x := k.x; x != nil {
		n += memKeyExtraClass + memAlloc(len(x.eid)) + memAlloc(len(x.rtok)) + memAlloc(len(x.ptok)) +
			memAlloc(len(x.pos)) + memAlloc(len(x.owner))
		if d := x.dead; d != nil {
			n += memDeadClass + memAlloc(len(d.reason)) + memAlloc(len(d.err)) + memAlloc(len(d.dlq))
		}
		if o := x.ko; o != nil {
			n += memKeyOrderClass + memAlloc(len(o.ov)) + memAlloc(len(o.ppos))
		}
	}
	return int64(n) + k.hist.size()
}

// touch makes idle k the most recently used.
func (m *Memory) touch(r *memLedgerRoute, name string, k *memLedgerKey) {
	if k.acct != acctIdle || !m.bounded() {
		return
	}
	if k.name == "" {
		k.name = name
	}
	m.ords++
	k.ord, k.r = m.ords, r
	m.order = append(m.order, memDone{k, k.ord})
	m.compact()
}

// over reports whether the budget is exceeded, others' bytes included.
func (m *Memory) over(others int64) bool {
	return m.MaxBytes > 0 && m.done+others > m.MaxBytes || m.MaxKeys > 0 && m.idle > m.MaxKeys
}

// shrink forgets the least recently used idle keys, never keep, while
// the budget is exceeded.
func (m *Memory) shrink(keep *memLedgerKey) {
	var others int64
	if m.Others != nil {
		others = m.Others()
	}
	for m.over(others) && len(m.order) > 0 {
		d := m.order[0]
		m.order[0] = memDone{}
		m.order = m.order[1:]
		if !d.live() {
			continue
		}
		if d.k == keep {
			m.order = append(m.order, d)
			if m.idle <= 1 {
				break
			}
			continue
		}
		d.k.r.forget(d.k.name, d.k)
		if m.OnEvict != nil {
			m.OnEvict()
		}
	}
	m.compact()
}

// compact drops the entries of order and locks no longer live once they
// outnumber the live ones, and gives back a backing array mostly unused.
func (m *Memory) compact() {
	if len(m.order) > 2*m.idle+64 {
		m.order = liveOnly(m.order)
	}
	if len(m.locks) > 2*m.nlock+64 {
		m.locks = liveOnly(m.locks)
	}
}

func liveOnly(ds []memDone) []memDone {
	live := ds[:0]
	for _, d := range ds {
		if d.live() {
			live = append(live, d)
		}
	}
	clear(ds[len(live):])
	if cap(live) > 64 && cap(live) > 4*len(live) {
		live = append([]memDone(nil), live...)
	}
	return live
}

// expireLocksBatch bounds the locks expireLocks turns idle per call.
const expireLocksBatch = 16

// expireLocks turns a few sync locks whose lease is over, oldest claim
// first, into idle keys (their counters live on), so that the budget
// bounds them.
func (m *Memory) expireLocks(now time.Time) {
	ms := ledgerMs(now)
	base := m.locks
	for n := 0; len(m.locks) > 0 && n < expireLocksBatch; {
		d := m.locks[0]
		live := d.live()
		if live && d.k.lease > ms {
			break
		}
		// Off the list before account, which may compact what is left.
		m.locks[0] = memDone{}
		m.locks = m.locks[1:]
		if live {
			m.account(d.k.r, d.k.name, d.k, acctIdle)
			n++
		}
	}
	if len(m.locks) == 0 && cap(base) <= 64 {
		// Emptied: the next lock goes at the front of the small array
		// again rather than into a new one.
		clear(base[:cap(base)])
		m.locks = base[:0]
	}
}

// Bytes is the estimated size of the keys counted against MaxBytes:
// finished, purged and released keys, live sync locks and reset
// tombstones, expired ones not yet forgotten included.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done
}

// Len is how many keys m holds (reset tombstones left out), expired
// ones not yet forgotten included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.routes {
		n += len(r.keys)
		for _, k := range r.keys {
			if k.st == stReset {
				n--
			}
		}
	}
	return n
}

// sweep turns a few sync locks whose lease is over idle, forgets its
// share of the keys whose time is up (sweepKeys) and, at most once a
// minute, the order values whose time is up.
func (m *Memory) sweep(now time.Time) {
	m.expireLocks(now)
	m.sweepKeys(now)
	if now.Sub(m.swept) < ledgerSweepEvery {
		return
	}
	m.swept = now
	for _, r := range m.routes {
		r.ord.sweep(now)
	}
	m.compact()
}

// sweepChunkMax bounds the keys one call of sweepKeys looks at: about 5 ms
// of the store's lock at 10M keys, on the machines of docs/benchmarks.md.
const sweepChunkMax = 100_000

// memSweep is where Memory's pass over its keys stands.
type memSweep struct {
	at    time.Time             // the last call
	size  int                   // the keys held when the pass began
	owed  float64               // keys the pass is behind by
	todo  []*memLedgerRoute     // the routes still to go in this pass
	route *memLedgerRoute       // the route being swept
	next  func() (string, bool) // its keys, from where the pass stands
	stop  func()
}

// end stops the route's iterator, if any.
func (s *memSweep) end() {
	if s.stop != nil {
		s.stop()
	}
	s.next, s.stop, s.route = nil, nil, nil
}

// Close ends the pass over the keys under way (its iterator holds the
// route's keys); a later call starts a new one.
func (m *Memory) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sw.end()
	m.sw.todo = nil
}

// sweepKeys forgets, a slice at a time, every key whose time is up that
// no call has come for (a key is forgotten lazily when one comes): each
// call looks at its share of a pass over every key per ledgerSweepEvery
// (the keys held when the pass began times the time since the last call,
// over the period: the keys it forgets do not slow it down), at most
// sweepChunkMax, resuming where the last call stopped. A pass in one
// go held the store's lock for 6.5 s at 10M keys (in proportion, about
// 0.6 s at 1M), once a minute (BenchmarkScaleKeysHeld).
func (m *Memory) sweepKeys(now time.Time) {
	s := &m.sw
	el := now.Sub(s.at)
	s.at = now
	if el <= 0 || el > 24*time.Hour {
		return // the first call, or a clock that jumped
	}
	if s.next == nil && len(s.todo) == 0 {
		// Between passes: the next one is as long as the keys held now.
		s.size = 0
		for _, r := range m.routes {
			s.size += len(r.keys)
		}
	}
	s.owed = min(s.owed+float64(s.size)*el.Seconds()/ledgerSweepEvery.Seconds(), sweepChunkMax)
	for s.owed >= 1 {
		if s.next == nil {
			if len(s.todo) == 0 {
				for _, r := range m.routes {
					s.todo = append(s.todo, r)
				}
			}
			s.route, s.todo = s.todo[0], s.todo[1:]
			s.next, s.stop = iter.Pull(maps.Keys(s.route.keys))
		}
		name, ok := s.next()
		if !ok {
			s.end()
			if len(s.todo) == 0 {
				// A pass is over: a new one starts with the next call
				// that owes keys, not in this one (each key once a call).
				s.owed = 0
				return
			}
			continue
		}
		s.route.key(name, now)
		s.owed--
	}
}

// Reserve implements Ledger.
func (m *Memory) Reserve(ctx context.Context, res Reservation) (Reserved, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	r := m.route(res.Route)
	k := r.key(res.Key, now)
	var h *memHistory
	if k != nil && k.free(ledgerMs(now)) {
		// A released lock, a lease run out, a reset tombstone: the key
		// is new to the queue.
		r.forget(res.Key, k)
		k, h = nil, k.hist
	}
	if k == nil {
		if res.MaxDepth < 0 || res.MaxDepth > 0 && len(r.age) >= res.MaxDepth {
			return Reserved{State: Full}, nil
		}
		first := ledgerMs(res.FirstSeen)
		k := &memLedgerKey{st: stEnqueuing, tok: res.Token, fp: res.Fingerprint, n: 1, first: first, last: first,
			name: res.Key, x: &memKeyExtra{eid: res.EventID, rtok: res.Token}}
		k.expireAt(now.Add(time.Duration(ledgerTTL(res.Lease)) * time.Millisecond))
		k.orderOf(res)
		k.hist = h
		m.hist(ctx, k, now, store.HistArrival, 1, 0, "queued")
		r.keys[res.Key] = k
		return Reserved{State: Enqueued, ID: res.EventID, Fingerprint: res.Fingerprint, Copies: 1}, nil
	}
	k.n++
	k.last = ledgerMs(now)
	if m.histo.Cap > 0 { // the verdict decodes a finished key's outcome
		m.hist(ctx, k, now, store.HistArrival, k.n, 0, reservedVerdict(k, res.Fingerprint))
	}
	switch k.st {
	case stEnqueuing, stLocked:
		// Being stored, or forwarded by a sync route's copy.
		return Reserved{State: InFlight, ID: k.eid(), Fingerprint: k.fp, Copies: k.n}, nil
	case stDone:
		out, err := store.DecodeOutcome(k.rec)
		if err != nil {
			return Reserved{}, fmt.Errorf("ledger: memory reserve %q: %w: %v", res.Key, ErrCorrupt, err)
		}
		m.touch(r, res.Key, k)
		return Reserved{State: Delivered, Fingerprint: out.Fingerprint, Outcome: out, Copies: k.n}, nil
	}
	return Reserved{State: Pending, ID: k.eid(), Fingerprint: k.fp, Dead: k.st == stDead, Copies: k.n}, nil
}

// Confirm implements Ledger.
func (m *Memory) Confirm(_ context.Context, route, key, tok string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	k := r.key(key, m.now())
	if k == nil || k.x == nil || k.x.rtok != tok {
		return false, nil
	}
	if k.st == stEnqueuing {
		m.adopt(r, k)
	}
	return true, nil
}

// adopt makes an enqueuing key queued: permanent, in the age index.
func (m *Memory) adopt(r *memLedgerRoute, k *memLedgerKey) {
	k.st = stQueued
	k.expires = 0
	r.age[k.x.eid] = k.first
	r.orderAssign(k)
}

// Abort implements Ledger.
func (m *Memory) Abort(_ context.Context, route, key, tok string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	if k := r.key(key, m.now()); k != nil && k.st == stEnqueuing && k.tok == tok {
		r.forget(key, k)
	}
	return nil
}

// Begin implements Ledger.
func (m *Memory) Begin(ctx context.Context, route, key, eid, tok, pos, owner string) (Begun, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	k := r.key(key, m.now())
	if k == nil || k.x == nil || k.x.eid != eid || tok == "" {
		return Begun{}, false, nil
	}
	x := k.x
	prev := ""
	switch {
	case (k.st == stQueued || k.st == stEnqueuing) && k.tok == tok:
		if x.pos != "" && x.pos != pos {
			return Begun{}, false, nil
		}
		if x.pos == pos {
			prev = x.owner
		}
		if k.st == stEnqueuing {
			m.adopt(r, k)
		}
		// The record of the live token won: a retry record still being
		// settled for it is a leftover.
		x.ptok = ""
	case (k.st == stQueued || k.st == stDead) && x.ptok == tok:
		// A retry or replay record read before its settlement was
		// recorded: it is the live one now.
		if k.st == stDead {
			m.revive(r, k)
		}
		k.tok, x.ptok = tok, ""
	default:
		return Begun{}, false, nil
	}
	gate := r.orderGate(k, pos)
	if gate == gatePark {
		return Begun{Parked: true}, false, nil
	}
	x.pos, x.owner = pos, owner
	x.qa++
	k.qt++
	if gate == gateStale {
		m.hist(ctx, k, m.now(), store.HistSkip, k.qt, 0, "stale")
	} else {
		m.hist(ctx, k, m.now(), store.HistTry, k.qt, 0, "")
	}
	return Begun{Fingerprint: k.fp, FirstSeen: ledgerTime(k.first), Try: x.qa, Total: k.qt, PrevOwner: prev, Stale: gate == gateStale}, true, nil
}

// revive moves a dead-lettered key back to queued for a replay.
func (m *Memory) revive(r *memLedgerRoute, k *memLedgerKey) {
	x := k.x
	k.st, x.qa = stQueued, 0
	x.pos, x.owner = "", ""
	x.dead = nil
	k.expires = 0
	m.uncount(k) // a purged key read again
	r.age[x.eid] = k.first
	delete(r.dead, x.eid)
	r.orderAssign(k)
}

// Intend implements Ledger.
func (m *Memory) Intend(_ context.Context, route, key, eid, tok, owner, next string) (Settled, error) {
	if next == "" {
		return 0, errors.New("ledger: intend: no token")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.route(route).key(key, m.now())
	if k == nil || k.st != stQueued || k.x.eid != eid || k.tok != tok {
		return Stale, nil
	}
	if k.x.owner != owner {
		return NotOwner, nil
	}
	k.x.ptok = next
	return Recorded, nil
}

// Settle implements Ledger.
func (m *Memory) Settle(ctx context.Context, route, key, eid, tok, owner string, s Settlement) (Settled, error) {
	if err := ledgerSettleCheck(s); err != nil {
		return 0, err
	}
	var rec []byte
	if s.Kind == SettleDelivered {
		var err error
		if rec, err = store.EncodeOutcome(s.Outcome); err != nil {
			return 0, fmt.Errorf("ledger: settle: %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.route(route)
	k := r.key(key, now)
	if s.Kind == SettleRetry && k != nil && k.st == stQueued && k.x.eid == eid && k.tok == s.NewToken {
		// Its retry record was read and adopted first.
		return Recorded, nil
	}
	if k == nil || k.st != stQueued || k.x.eid != eid || k.tok != tok {
		return Stale, nil
	}
	x := k.x
	if x.owner != owner {
		return NotOwner, nil
	}
	x.pos, x.owner = "", ""
	switch s.Kind {
	case SettleDelivered:
		k.st, k.tok, x.ptok, k.rec = stDone, "", "", rec
		k.expireAt(now.Add(time.Duration(ledgerTTL(s.Retention)) * time.Millisecond))
		delete(r.age, eid)
		m.remember(r, key, k)
		r.orderDone(k, true, now.Add(time.Duration(ledgerTTL(s.Retention))*time.Millisecond))
		m.hist(ctx, k, now, store.HistSettle, k.qt, s.Outcome.Status, "delivered")
	case SettleRetry:
		k.tok, x.ptok = s.NewToken, ""
		m.hist(ctx, k, now, store.HistRetry, k.qt, 0, "retry")
	default:
		k.st, k.tok, x.ptok = stDead, "", ""
		x.dead = &memDead{dlq: s.DLQPos, reason: s.Reason, status: s.Status, err: s.Error, died: ledgerMs(s.At)}
		delete(r.age, eid)
		r.dead[eid] = key
		m.hist(ctx, k, now, store.HistDead, k.qt, s.Status, s.Reason)
		if !s.OrderHold {
			r.orderDone(k, false, orderKeep(now, s.Retention))
		}
	}
	return Recorded, nil
}

// deadKey returns eid's key record while eid is dead-lettered.
func (m *Memory) deadKey(r *memLedgerRoute, eid string) (string, *memLedgerKey) {
	key, ok := r.dead[eid]
	if !ok {
		return "", nil
	}
	k := r.key(key, m.now())
	if k == nil || k.st != stDead || k.x.eid != eid {
		return "", nil
	}
	return key, k
}

// Dead implements Ledger.
func (m *Memory) Dead(_ context.Context, route, eid, next string) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, k := m.deadKey(m.route(route), eid)
	if k == nil {
		return "", "", ErrNotFound
	}
	if next != "" {
		k.x.ptok = next
	}
	return key, k.deadInfo().dlq, nil
}

// DeadEntry implements Ledger.
func (m *Memory) DeadEntry(_ context.Context, route, eid string) (DeadEntry, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	d, ok := m.deadEntry(r, eid)
	if !ok {
		return DeadEntry{}, "", ErrNotFound
	}
	_, k := m.deadKey(r, eid)
	return d, k.deadInfo().dlq, nil
}

// Replay implements Ledger.
func (m *Memory) Replay(ctx context.Context, route, eid, dlqPos, tok string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	_, k := m.deadKey(r, eid)
	if k == nil || k.deadInfo().dlq != dlqPos {
		return ErrNotFound
	}
	m.revive(r, k)
	k.tok, k.x.ptok = tok, ""
	m.hist(ctx, k, m.now(), store.HistReplay, k.qt, 0, "replayed")
	return nil
}

// Purge implements Ledger.
func (m *Memory) Purge(ctx context.Context, route, eid string, retention time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	key, ok := r.dead[eid]
	if !ok {
		return ErrNotFound
	}
	delete(r.dead, eid)
	now := m.now()
	if k := r.key(key, now); k != nil && k.st == stDead && k.x.eid == eid {
		k.expireAt(now.Add(time.Duration(ledgerTTL(retention)) * time.Millisecond))
		m.hist(ctx, k, now, store.HistPurge, k.qt, 0, "purged")
		m.remember(r, key, k)
		r.orderDone(k, false, orderKeep(now, retention))
	}
	return nil
}

// ListDead implements Ledger. The whole dead index is one batch (scan
// cursor 0) listed in event id order: the cursor is "0/LAST-EID".
func (m *Memory) ListDead(_ context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	limit = max(limit, 1)
	_, after, err := ledgerParseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	eids := make([]string, 0, len(r.dead))
	for eid := range r.dead {
		if after == "" || eid > after {
			eids = append(eids, eid)
		}
	}
	sort.Strings(eids)
	out := make([]DeadEntry, 0, min(limit, len(eids)))
	next := ""
	for _, eid := range eids {
		d, ok := m.deadEntry(r, eid)
		if !ok {
			continue
		}
		if len(out) == limit {
			next = ledgerCursor("0", out[len(out)-1].ID)
			break
		}
		out = append(out, d)
	}
	return out, next, nil
}

// DeadEntries describes route's dead-lettered events eids, in that order,
// leaving out any not dead-lettered: a transport that keeps its DLQ's
// order itself (the memory queue) lists it with these.
func (m *Memory) DeadEntries(route string, eids []string) []DeadEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	out := make([]DeadEntry, 0, len(eids))
	for _, eid := range eids {
		if d, ok := m.deadEntry(r, eid); ok {
			out = append(out, d)
		}
	}
	return out
}

// deadEntry describes eid while it is dead-lettered.
func (m *Memory) deadEntry(r *memLedgerRoute, eid string) (DeadEntry, bool) {
	key, k := m.deadKey(r, eid)
	if k == nil {
		return DeadEntry{}, false
	}
	dd := k.deadInfo()
	return DeadEntry{ID: eid, Key: key, Reason: dd.reason, Status: dd.status, Attempts: k.qt,
		Error: dd.err, FirstSeen: ledgerTime(k.first), DiedAt: ledgerTime(dd.died)}, true
}

// Get implements Ledger.
func (m *Memory) Get(_ context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.get(m.route(route), key)
}

func (m *Memory) get(r *memLedgerRoute, key string) (KeyState, error) {
	now := m.now()
	k := r.key(key, now)
	if k == nil || k.st == stReset {
		return KeyState{State: StateAbsent}, nil
	}
	ks := KeyState{EventID: k.eid(), Copies: k.n, Attempts: k.qt, FirstSeen: ledgerTime(k.first),
		LastSeen: ledgerTime(k.last), Fingerprint: k.fp}
	switch k.st {
	case stLocked, stReleased:
		// A sync copy's lock, or its counters once released.
		ks.State = StateAbsent
		if !k.free(ledgerMs(now)) {
			ks.State = StateInFlight
		}
	case stEnqueuing, stQueued:
		ks.State = StateQueued
	case stDead:
		ks.State = StateDeadLettered
	default:
		ks.State = StateFinished
		out, err := store.DecodeOutcome(k.rec)
		if err != nil {
			return ks, fmt.Errorf("ledger: memory get %q: %w: %v", key, ErrCorrupt, err)
		}
		ks.Status, ks.Outcome = out.Status, out
		if out.Fingerprint != "" {
			ks.Fingerprint = out.Fingerprint
		}
	}
	return ks, nil
}

// Delete implements Ledger.
func (m *Memory) Delete(ctx context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.route(route)
	ks, err := m.get(r, key)
	if k := r.keys[key]; k != nil {
		eid := k.eid()
		delete(r.age, eid)
		if r.dead[eid] == key {
			delete(r.dead, eid)
		}
		r.orderDone(k, false, time.Time{})
		r.forget(key, k)
		if m.histo.Cap > 0 && k.hist != nil {
			m.hist(ctx, k, m.now(), store.HistDelete, k.qt, 0, "deleted")
			m.keepHistory(r, strings.Clone(key), k.hist, nil, m.now())
		}
	}
	return ks, err
}

// Stats implements Ledger.
func (m *Memory) Stats(_ context.Context, route string) (Stats, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(m.now())
	r := m.route(route)
	st := Stats{Depth: int64(len(r.age)), DLQ: int64(len(r.dead)), Waiting: r.ord.waiting}
	var oldest int64
	found := false
	for _, first := range r.age {
		if !found || first < oldest {
			oldest, found = first, true
		}
	}
	st.Oldest = ledgerTime(oldest)
	return st, nil
}
