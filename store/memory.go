package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults for MemoryOptions and RedisOptions.
const (
	// DefaultMaxKeys bounds the Memory store when MemoryOptions.MaxKeys is 0.
	DefaultMaxKeys = 1_000_000
	// DefaultMaxBytes bounds the Memory store's estimated size when
	// MemoryOptions.MaxBytes is 0.
	DefaultMaxBytes = 256 << 20
	// DefaultAttemptsTTL is how long a key that was delivered but never
	// finished (its lock released or expired) keeps its attempt counter and
	// first-seen time, when the options leave AttemptsTTL at 0.
	DefaultAttemptsTTL = 24 * time.Hour
)

// MemoryOptions configures NewMemory.
type MemoryOptions struct {
	// MaxKeys bounds the keys kept once their lock is gone: finished records
	// and the attempt counters of released keys. When a new one would exceed
	// it, the least recently used is evicted first. Keys holding a live lock
	// are never evicted. 0 means DefaultMaxKeys.
	MaxKeys int
	// MaxBytes bounds the store's estimated size (see Memory.Bytes). When a
	// claim or a finished record would take it over MaxBytes, the least
	// recently used keys without a live lock are evicted first, as for
	// MaxKeys. Live locks and reset tombstones count but are never
	// evicted, and a record is never evicted to make room for itself. 0
	// means DefaultMaxBytes.
	MaxBytes int64
	// Now is the clock every TTL is judged on; nil means time.Now.
	Now func() time.Time
	// OnEvict, if set, is called once per key evicted for capacity (MaxKeys
	// or MaxBytes; not for expiry or Delete), outside the store's lock.
	OnEvict func()
	// AttemptsTTL is how long the attempt counter of a key that is neither
	// locked nor finished is kept after its last claim. 0 means
	// DefaultAttemptsTTL; a negative value keeps the counter only while the
	// lock lives. A finished key's counter always lives exactly as long as
	// its record.
	AttemptsTTL time.Duration
	// ResetHold is the shortest time the tombstone of a reset (every
	// Delete) lasts: while it does, Finish records nothing for the key
	// without owning its lock, so a delivery still trying to record its
	// outcome cannot undo the reset. Set it to the lock TTL (the longest
	// such a delivery keeps trying). 0: a tombstone is left only for a
	// deleted lock, for its remaining TTL.
	ResetHold time.Duration
}

// Memory is the embedded Store: all state lives in this process, is lost on
// restart and is not shared with other instances. Expired locks and records
// are dropped lazily (on access, plus a few of the oldest on every write),
// so no background goroutine runs; memory stays bounded by MaxKeys and
// MaxBytes.
//
// Each key's size is estimated as entryOverhead (the measured cost of the
// entry, its map slot and allocator rounding; see TestMemoryBytesPerKey)
// plus the lengths of the key, the stored body, the content type and a
// fingerprint that is not a canonical hex SHA-256 (a canonical one is kept
// as 32 raw bytes inside the entry). The gateway caps a key at 255 bytes
// and a stored body at replay_body_limit, so the worst case per finished
// key is about entryOverhead (256) + len(route) + 1 + 255 +
// replay_body_limit + len(content type) bytes, plus the allocator's
// rounding of the body that the estimate does not count (under an eighth
// of it, or under 8 KiB for a body over 32 KiB).
//
// The Outcome.Body returned by Claim shares the stored bytes: callers must
// not modify it.
type Memory struct {
	mu          sync.Mutex
	now         func() time.Time
	onEvict     func()
	max         int
	maxBytes    int64
	attemptsTTL int64 // nanoseconds; <0: counter lives only with the lock
	resetHold   int64 // nanoseconds

	entries map[string]*entry
	idle    entryList // finished records and bare counters, least recently used first
	locked  entryList // keys holding a lock, oldest claim first
	bytes   int64     // estimated size of entries and resets

	// resets holds the reset tombstones (key -> expiry, unix nanoseconds)
	// left by Delete of a locked key; expired ones are purged when the map
	// has doubled since the last purge.
	resets     map[string]int64
	resetPurge int

	tokenPrefix string // random per instance
	seq         uint64
}

var _ Store = (*Memory)(nil)

// entry is one key. It is kept compact: a finished key costs about 300 bytes
// beyond its body (see TestMemoryBytesPerKey and entryOverhead).
type entry struct {
	prev, next *entry
	key        string
	fp         [32]byte // fingerprint when flagRawFingerprint is set
	fpStr      string   // fingerprint otherwise (not a canonical hex SHA-256)
	ctype      string
	body       []byte
	attempts   int64
	first      int64 // unix nanoseconds
	last       int64
	exp        int64 // record (finished) or counter expiry, unix nanoseconds
	lockExp    int64 // lock expiry; 0 when not locked
	lockID     uint64
	status     uint16
	flags      uint8
}

// entryOverhead is the estimated cost of one key beyond the lengths of its
// key, body, content type and non-canonical fingerprint: the entry (192
// bytes with allocator rounding), its slot in the map (about 30 to 60 bytes
// depending on how full the map is) and the rounding of the key's and
// body's allocations. TestMemoryBytesPerKey checks the estimate against the
// measured heap.
const entryOverhead = 256

// resetOverhead is the estimated cost of one reset tombstone beyond its key.
const resetOverhead = 64

const (
	entryFinished uint8 = 1 << iota
	entryRawFP
	entryInIdle
	entryInLocked
)

// NewMemory returns an empty memory store.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{
		now:         opts.Now,
		onEvict:     opts.OnEvict,
		max:         opts.MaxKeys,
		maxBytes:    opts.MaxBytes,
		attemptsTTL: int64(opts.AttemptsTTL),
		resetHold:   int64(opts.ResetHold),
		entries:     make(map[string]*entry),
		resets:      make(map[string]int64),
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.max <= 0 {
		m.max = DefaultMaxKeys
	}
	if m.maxBytes <= 0 {
		m.maxBytes = DefaultMaxBytes
	}
	if opts.AttemptsTTL == 0 {
		m.attemptsTTL = int64(DefaultAttemptsTTL)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics rather than returning an error)
	m.tokenPrefix = "m" + hex.EncodeToString(b[:]) + "."
	return m
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, key, fingerprint string, lockTTL time.Duration) (Claim, error) {
	if lockTTL <= 0 {
		return Claim{}, fmt.Errorf("store: lock TTL %v must be positive", lockTTL)
	}
	now := m.now().UnixNano()
	m.mu.Lock()
	evicted := m.sweep(now)
	e := m.entries[key]
	var size int64 // e's estimated size before this claim
	switch {
	case e == nil:
		e = &entry{key: strings.Clone(key), first: now}
		m.entries[e.key] = e
	case e.lockExp > now:
		e.attempts++
		e.last = now
		c := Claim{State: InFlight, Attempts: e.attempts, RetryAfter: time.Duration(e.lockExp - now)}
		m.mu.Unlock()
		m.evicted(evicted)
		return c, nil
	case e.flags&entryFinished != 0 && e.exp > now:
		if e.attempts == 0 {
			// Recorded by Finish without a claim: this is its first count.
			e.first = now
		}
		e.attempts++
		e.last = now
		if e.flags&entryInIdle != 0 {
			m.idle.moveToBack(e)
		}
		c := Claim{State: Finished, Attempts: e.attempts, Outcome: e.outcome()}
		m.mu.Unlock()
		m.evicted(evicted)
		return c, nil
	case e.exp > now:
		// A released key, or one whose lock expired: the counter lives on.
		size = e.size()
	default:
		// Everything about the key has expired: start afresh.
		size = e.size()
		*e = entry{prev: e.prev, next: e.next, key: e.key, flags: e.flags & (entryInIdle | entryInLocked), first: now}
	}
	e.attempts++
	e.last = now
	e.flags &^= entryFinished
	e.status, e.ctype, e.body = 0, "", nil
	e.setFingerprint(fingerprint)
	e.lockExp = now + int64(lockTTL)
	m.seq++
	e.lockID = m.seq
	e.exp = max(e.exp, e.lockExp)
	if m.attemptsTTL > 0 {
		e.exp = max(e.exp, now+m.attemptsTTL)
	}
	m.unlink(e)
	m.locked.pushBack(e)
	e.flags |= entryInLocked
	m.bytes += e.size() - size
	evicted += m.shrink(nil)
	c := Claim{State: Claimed, Attempts: e.attempts, Token: m.token(e.lockID)}
	m.mu.Unlock()
	m.evicted(evicted)
	return c, nil
}

// Finish implements Store.
func (m *Memory) Finish(_ context.Context, key, token string, out Outcome, retention time.Duration) error {
	if retention <= 0 {
		return fmt.Errorf("store: retention %v must be positive", retention)
	}
	if out.Status < 0 || out.Status > maxStatus {
		return fmt.Errorf("store: status %d out of range 0-%d", out.Status, maxStatus)
	}
	var body []byte
	if len(out.Body) > 0 {
		body = make([]byte, len(out.Body))
		copy(body, out.Body)
	}
	ctype := internString(out.ContentType)
	now := m.now().UnixNano()
	m.mu.Lock()
	e := m.owned(key, token, now)
	var size int64 // e's estimated size before this finish
	if e != nil {
		size = e.size()
	} else {
		var ok bool
		if e, ok = m.unlocked(key, token, now); !ok {
			m.mu.Unlock()
			return ErrNotOwner
		}
		if e == nil {
			e = &entry{key: strings.Clone(key)}
			m.entries[e.key] = e
		} else {
			size = e.size()
			if e.exp <= now {
				// Its counter has expired too: the record starts afresh.
				*e = entry{prev: e.prev, next: e.next, key: e.key, flags: e.flags & (entryInIdle | entryInLocked)}
			}
		}
	}
	e.flags |= entryFinished
	e.status = uint16(out.Status)
	e.ctype = ctype
	e.body = body
	e.setFingerprint(out.Fingerprint)
	e.lockExp, e.lockID = 0, 0
	e.exp = now + int64(retention)
	m.unlink(e)
	m.bytes += e.size() - size
	evicted := m.addIdle(e)
	evicted += m.sweep(now)
	m.mu.Unlock()
	m.evicted(evicted)
	return nil
}

// unlocked reports whether Finish may record key without owning its lock:
// the token is not empty and the key has no live lock, no live record and
// no live reset tombstone. It returns the key's entry, nil if it has none.
func (m *Memory) unlocked(key, token string, now int64) (*entry, bool) {
	if token == "" {
		return nil, false
	}
	if exp, ok := m.resets[key]; ok {
		if exp > now {
			return nil, false
		}
		m.dropReset(key)
	}
	e := m.entries[key]
	if e == nil {
		return nil, true
	}
	if e.lockExp > now || (e.flags&entryFinished != 0 && e.exp > now) {
		return nil, false
	}
	return e, true
}

// Release implements Store.
func (m *Memory) Release(_ context.Context, key, token string) error {
	now := m.now().UnixNano()
	m.mu.Lock()
	e := m.owned(key, token, now)
	if e == nil {
		m.mu.Unlock()
		return ErrNotOwner
	}
	e.lockExp, e.lockID = 0, 0
	m.unlink(e)
	evicted := 0
	if m.attemptsTTL > 0 && e.exp > now {
		evicted = m.addIdle(e)
	} else {
		m.remove(e)
	}
	evicted += m.sweep(now)
	m.mu.Unlock()
	m.evicted(evicted)
	return nil
}

// Get implements Store. It changes nothing, not even recency.
func (m *Memory) Get(_ context.Context, key string) (KeyState, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	if e == nil {
		return KeyState{}, nil
	}
	return e.state(now), nil
}

// Peek implements Peeker. It changes nothing, not even recency.
func (m *Memory) Peek(_ context.Context, key string) (State, Outcome, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	switch {
	case e == nil:
		return Absent, Outcome{}, nil
	case e.lockExp > now:
		return InFlight, Outcome{}, nil
	case e.flags&entryFinished != 0 && e.exp > now:
		return Finished, e.outcome(), nil
	}
	return Absent, Outcome{}, nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key string) (KeyState, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	exp := int64(0)
	if m.resetHold > 0 {
		exp = now + m.resetHold
	}
	if e == nil {
		if exp > now {
			m.addReset(key, exp, now)
		}
		return KeyState{}, nil
	}
	st := e.state(now)
	if e.lockExp > exp {
		exp = e.lockExp
	}
	if exp > now {
		m.addReset(e.key, exp, now)
	}
	m.unlink(e)
	m.remove(e)
	return st, nil
}

// addReset leaves key's reset tombstone until exp, purging expired ones
// once the map has doubled since the last purge.
func (m *Memory) addReset(key string, exp, now int64) {
	if len(m.resets) >= m.resetPurge {
		for k, x := range m.resets {
			if x <= now {
				m.dropReset(k)
			}
		}
		m.resetPurge = max(64, 2*len(m.resets))
	}
	if _, ok := m.resets[key]; !ok {
		m.bytes += resetOverhead + int64(len(key))
	}
	m.resets[key] = exp
}

func (m *Memory) dropReset(key string) {
	delete(m.resets, key)
	m.bytes -= resetOverhead + int64(len(key))
}

// Ping implements Store; the memory store always answers.
func (m *Memory) Ping(context.Context) error { return nil }

// Close implements Store.
func (m *Memory) Close() error { return nil }

// Len reports how many keys the store holds, expired ones not yet dropped
// included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// Bytes reports the store's estimated size in bytes: every key held
// (expired ones not yet dropped included) and every reset tombstone. It is
// what MaxBytes bounds.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}

// owned returns key's entry if token holds its live lock.
func (m *Memory) owned(key, token string, now int64) *entry {
	e := m.entries[key]
	if e == nil || e.lockExp <= now || e.lockID == 0 {
		return nil
	}
	rest, ok := strings.CutPrefix(token, m.tokenPrefix)
	if !ok {
		return nil
	}
	id, err := strconv.ParseUint(rest, 36, 64)
	if err != nil || id != e.lockID {
		return nil
	}
	return e
}

func (m *Memory) token(id uint64) string {
	var b [48]byte
	n := copy(b[:], m.tokenPrefix)
	return string(strconv.AppendUint(b[:n], id, 36))
}

// addIdle appends e to the idle list and evicts the least recently used
// idle keys over capacity, returning how many it evicted.
func (m *Memory) addIdle(e *entry) int {
	m.idle.pushBack(e)
	e.flags |= entryInIdle
	return m.shrink(e)
}

// shrink evicts the least recently used idle keys while the idle keys
// exceed MaxKeys or the estimated size exceeds MaxBytes, never keep, and
// returns how many it evicted. Locked keys are not in the idle list, so a
// live lock is never evicted.
func (m *Memory) shrink(keep *entry) int {
	evicted := 0
	for m.idle.n > m.max || m.bytes > m.maxBytes {
		old := m.idle.head
		if old == nil || old == keep {
			break
		}
		m.unlink(old)
		m.remove(old)
		evicted++
	}
	return evicted
}

// remove deletes e, already unlinked, from the map and its size from the
// total.
func (m *Memory) remove(e *entry) {
	delete(m.entries, e.key)
	m.bytes -= e.size()
}

// size is e's estimated cost in bytes (see Memory).
func (e *entry) size() int64 {
	return entryOverhead + int64(len(e.key)+len(e.body)+len(e.ctype)+len(e.fpStr))
}

// sweepBatch bounds the expired keys dropped per call, keeping every
// operation O(1) while still draining expired state over time.
const sweepBatch = 4

// sweep drops a few expired keys from the front of both lists: locks that
// expired become bare counters (or vanish), expired records and counters
// vanish. It returns the number of capacity evictions it caused.
func (m *Memory) sweep(now int64) int {
	evicted := 0
	for i := 0; i < sweepBatch; i++ {
		e := m.locked.head
		if e == nil || e.lockExp > now {
			break
		}
		m.unlink(e)
		e.lockExp, e.lockID = 0, 0
		if e.exp > now {
			evicted += m.addIdle(e)
		} else {
			m.remove(e)
		}
	}
	for i := 0; i < sweepBatch; i++ {
		e := m.idle.head
		if e == nil || e.exp > now {
			break
		}
		m.unlink(e)
		m.remove(e)
	}
	return evicted
}

func (m *Memory) evicted(n int) {
	if m.onEvict == nil {
		return
	}
	for ; n > 0; n-- {
		m.onEvict()
	}
}

// unlink takes e out of whichever list holds it.
func (m *Memory) unlink(e *entry) {
	switch {
	case e.flags&entryInIdle != 0:
		m.idle.remove(e)
	case e.flags&entryInLocked != 0:
		m.locked.remove(e)
	}
	e.flags &^= entryInIdle | entryInLocked
}

func (e *entry) setFingerprint(fp string) {
	if parseFingerprint(fp, &e.fp) {
		e.flags |= entryRawFP
		e.fpStr = ""
		return
	}
	e.flags &^= entryRawFP
	e.fp = [32]byte{}
	e.fpStr = strings.Clone(fp)
}

func (e *entry) fingerprint() string {
	if e.flags&entryRawFP == 0 {
		return e.fpStr
	}
	var b [64]byte
	hex.Encode(b[:], e.fp[:])
	return string(b[:])
}

func (e *entry) outcome() Outcome {
	return Outcome{Status: int(e.status), ContentType: e.ctype, Body: e.body, Fingerprint: e.fingerprint()}
}

// state is the entry as the admin API shows it at time now.
func (e *entry) state(now int64) KeyState {
	st := KeyState{Attempts: e.attempts}
	if e.attempts > 0 {
		// A key recorded by Finish without a claim has no counter, like
		// Redis after losing the attempts hash: its times stay zero.
		st.FirstSeen, st.LastSeen = time.Unix(0, e.first), time.Unix(0, e.last)
	}
	switch {
	case e.lockExp > now:
		st.State = InFlight
		st.Fingerprint = e.fingerprint()
	case e.flags&entryFinished != 0 && e.exp > now:
		st.State = Finished
		st.Status = int(e.status)
		st.Fingerprint = e.fingerprint()
	case e.exp > now:
		// Seen, neither locked nor finished: absent, with its counter.
		st.State = Absent
	default:
		return KeyState{}
	}
	return st
}

// entryList is an intrusive doubly linked list: head is the oldest.
type entryList struct {
	head, tail *entry
	n          int
}

func (l *entryList) pushBack(e *entry) {
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

func (l *entryList) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
	l.n--
}

func (l *entryList) moveToBack(e *entry) {
	if l.tail == e {
		return
	}
	l.remove(e)
	l.pushBack(e)
}
