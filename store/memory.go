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
	// Now is the clock every TTL is judged on; nil means time.Now.
	Now func() time.Time
	// OnEvict, if set, is called once per key evicted for capacity (not for
	// expiry or Delete), outside the store's lock.
	OnEvict func()
	// AttemptsTTL is how long the attempt counter of a key that is neither
	// locked nor finished is kept after its last claim. 0 means
	// DefaultAttemptsTTL; a negative value keeps the counter only while the
	// lock lives. A finished key's counter always lives exactly as long as
	// its record.
	AttemptsTTL time.Duration
}

// Memory is the embedded Store: all state lives in this process, is lost on
// restart and is not shared with other instances. Expired locks and records
// are dropped lazily (on access, plus a few of the oldest on every write),
// so no background goroutine runs; memory stays bounded by MaxKeys.
//
// The Outcome.Body returned by Claim shares the stored bytes: callers must
// not modify it.
type Memory struct {
	mu          sync.Mutex
	now         func() time.Time
	onEvict     func()
	max         int
	attemptsTTL int64 // nanoseconds; <0: counter lives only with the lock

	entries map[string]*entry
	idle    entryList // finished records and bare counters, least recently used first
	locked  entryList // keys holding a lock, oldest claim first

	tokenPrefix string // random per instance
	seq         uint64
}

var _ Store = (*Memory)(nil)

// entry is one key. It is kept compact: a finished key costs about 300 bytes
// beyond its body (see TestMemoryBytesPerKey).
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
		attemptsTTL: int64(opts.AttemptsTTL),
		entries:     make(map[string]*entry),
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.max <= 0 {
		m.max = DefaultMaxKeys
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
	default:
		// Everything about the key has expired: start afresh.
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
	if e == nil {
		m.mu.Unlock()
		return ErrNotOwner
	}
	e.flags |= entryFinished
	e.status = uint16(out.Status)
	e.ctype = ctype
	e.body = body
	e.setFingerprint(out.Fingerprint)
	e.lockExp, e.lockID = 0, 0
	e.exp = now + int64(retention)
	m.unlink(e)
	evicted := m.addIdle(e)
	evicted += m.sweep(now)
	m.mu.Unlock()
	m.evicted(evicted)
	return nil
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
		delete(m.entries, e.key)
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

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key string) (KeyState, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	if e == nil {
		return KeyState{}, nil
	}
	st := e.state(now)
	m.unlink(e)
	delete(m.entries, e.key)
	return st, nil
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
	evicted := 0
	for m.idle.n > m.max {
		old := m.idle.head
		m.unlink(old)
		delete(m.entries, old.key)
		evicted++
	}
	return evicted
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
			delete(m.entries, e.key)
		}
	}
	for i := 0; i < sweepBatch; i++ {
		e := m.idle.head
		if e == nil || e.exp > now {
			break
		}
		m.unlink(e)
		delete(m.entries, e.key)
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
	st := KeyState{Attempts: e.attempts, FirstSeen: time.Unix(0, e.first), LastSeen: time.Unix(0, e.last)}
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
