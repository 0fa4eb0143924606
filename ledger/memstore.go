package ledger

import (
	"context"
	"time"

	"github.com/clawgate/clawgate/store"
)

// MemoryStore is the sync routes' store.Store on one Memory (the memory
// store, store.backend: memory): every key kept in the ledger's key
// record, where the memory queue keeps its keys when it is given the same
// Memory, so a key has one record whatever its route's mode. Keys passed
// in are scoped ("route:key"; a route name has no ':').
//
// Everything lives in this process and is lost on restart. The Memory's
// budget (MaxBytes, MaxKeys, OnEvict) bounds what the sync path leaves
// behind: finished keys, the counters of released keys and of locks
// whose lease ran out, live locks and reset tombstones (see
// Memory.MaxBytes).
type MemoryStore struct {
	m *Memory
}

// It is no store.Peeker: a queue route's enqueue reads the same record,
// so a route that switched from sync needs no look into the sync path's.
var _ store.Store = (*MemoryStore)(nil)

// NewMemoryStore returns a memory store on a new Memory, configured by
// opts: MaxKeys and MaxBytes bound its budget (0: store.DefaultMaxKeys,
// store.DefaultMaxBytes), OnEvict counts what the budget forgets, and
// AttemptsTTL and ResetHold are its SyncOptions.
func NewMemoryStore(opts store.MemoryOptions) *MemoryStore {
	m := NewMemory(opts.Now)
	m.MaxKeys, m.MaxBytes, m.OnEvict = opts.MaxKeys, opts.MaxBytes, opts.OnEvict
	if m.MaxKeys <= 0 {
		m.MaxKeys = store.DefaultMaxKeys
	}
	if m.MaxBytes <= 0 {
		m.MaxBytes = store.DefaultMaxBytes
	}
	m.SetSync(SyncOptions{AttemptsTTL: opts.AttemptsTTL, ResetHold: opts.ResetHold})
	return &MemoryStore{m: m}
}

// Ledger is the Memory the store keeps its keys in: give it to the
// memory queue (queue.NewMemoryOn) so both keep a key in one record.
func (s *MemoryStore) Ledger() *Memory { return s.m }

// Claim implements store.Store.
func (s *MemoryStore) Claim(ctx context.Context, scoped, fp string, lockTTL time.Duration) (store.Claim, error) {
	route, key := splitScoped(scoped)
	return s.m.Claim(ctx, route, key, fp, lockTTL)
}

// Finish implements store.Store.
func (s *MemoryStore) Finish(ctx context.Context, scoped, tok string, out store.Outcome, retention time.Duration) error {
	route, key := splitScoped(scoped)
	return s.m.Finish(ctx, route, key, tok, out, retention)
}

// Release implements store.Store.
func (s *MemoryStore) Release(ctx context.Context, scoped, tok string) error {
	route, key := splitScoped(scoped)
	return s.m.Release(ctx, route, key, tok)
}

// Get implements store.Store. It changes nothing, not even recency.
func (s *MemoryStore) Get(ctx context.Context, scoped string) (store.KeyState, error) {
	route, key := splitScoped(scoped)
	ks, err := s.m.Get(ctx, route, key)
	return memStoreState(ks), err
}

// Delete implements store.Store: the key's record is forgotten with a
// reset tombstone (Sync.Reset).
func (s *MemoryStore) Delete(ctx context.Context, scoped string) (store.KeyState, error) {
	route, key := splitScoped(scoped)
	ks, err := s.m.Reset(ctx, route, key)
	return memStoreState(ks), err
}

// memStoreState is ks as the store reports a key: the zero KeyState
// for a key with nothing left.
func memStoreState(ks KeyState) store.KeyState {
	st := storeKeyState(ks)
	if st.State == store.Absent && st.Attempts == 0 {
		return store.KeyState{}
	}
	return st
}

// Ping implements store.Store; the memory store always answers.
func (s *MemoryStore) Ping(context.Context) error { return nil }

// Close implements store.Store.
func (s *MemoryStore) Close() error {
	s.m.Close()
	return nil
}

// Bytes is the Memory's estimated size (Memory.Bytes), what MaxBytes
// bounds.
func (s *MemoryStore) Bytes() int64 { return s.m.Bytes() }

// Len is how many keys the Memory holds (Memory.Len).
func (s *MemoryStore) Len() int { return s.m.Len() }
