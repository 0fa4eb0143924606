package ledger

import "time"

// Hooks into the ledgers' internals for the external tests.

// SweepEvery is how often Memory sweeps.
const SweepEvery = ledgerSweepEvery

// MemoryTTL is how long route's key has left in m, as PTTL says it: -1
// when it does not expire, -2 when it is absent.
func MemoryTTL(m *Memory, route, key string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.routes[route]
	if r == nil {
		return -2
	}
	now := m.now()
	k := r.key(key, now)
	switch {
	case k == nil:
		return -2
	case k.expires == 0:
		return -1
	}
	return time.Duration(k.expires - now.UnixNano())
}

// MemoryKeys counts the keys m holds for route, expired or not.
func MemoryKeys(m *Memory, route string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.routes[route]; r != nil {
		return len(r.keys)
	}
	return 0
}

// KeyHash, AgeSet and DeadIndex name the Redis keys of l.
func KeyHash(l *Redis, route, key string) string { return l.keyHash(route, key) }
func AgeSet(l *Redis, route string) string       { return l.ageSet(route) }
func DeadIndex(l *Redis, route string) string    { return l.deadIndex(route) }

// MemoryRecount is s's estimated size computed afresh from what its
// Memory holds, for checking Bytes.
func MemoryRecount(s *MemoryStore) int64 {
	m := s.Ledger()
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, r := range m.routes {
		for name, k := range r.keys {
			if k.acct != 0 {
				n += memKeySize(name, k)
			}
		}
	}
	return n
}

// MemoryTombstones counts the reset tombstones s's Memory holds.
func MemoryTombstones(s *MemoryStore) int {
	m := s.Ledger()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.routes {
		for _, k := range r.keys {
			if k.st == stReset {
				n++
			}
		}
	}
	return n
}

// MemKeyOverhead is the fixed estimated size of one key record.
const MemKeyOverhead = memKeyOverhead
