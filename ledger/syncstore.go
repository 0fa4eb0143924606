package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// RedisStore is the sync routes' store.Store on Redis: store.Redis's
// connection, pipelining, WAIT and schema, with every key kept in the
// ledger's key record (SyncRedis), where the route's queue keeps its
// keys. Keys passed in are scoped ("route:key"; a route name has no
// ':').
//
// Records of schema version 1 (store.SchemaVersion) written by an
// earlier release on the same Redis are answered too, for Legacy after
// the store moved to version 2 (store.Redis.Moved; always before that is
// known): a finished webhook_done:{route:key} as finished, a held
// webhook_lock:{route:key} as in flight. On a single server or Sentinel
// they are read inside the claim's own script; on a Cluster, where they
// live in another slot, by a second script after a claim that took the
// key.
type RedisStore struct {
	*store.Redis
	sync    *SyncRedis
	cluster bool
	// Legacy is how long after the move version-1 records may live: the
	// longest retention of any route, plus the lock TTL. 0: not looked
	// for once the move is known.
	Legacy time.Duration
	// now is the clock the move is judged on (tests).
	now func() time.Time
}

var (
	_ store.Store  = (*RedisStore)(nil)
	_ store.Peeker = (*RedisStore)(nil)
)

// NewRedisStore returns the sync routes' store on r, their records placed
// by place.
func NewRedisStore(r *store.Redis, place Place, opts SyncOptions, legacy time.Duration) *RedisStore {
	_, cluster := r.Client().(*redis.ClusterClient)
	return &RedisStore{
		Redis:   r,
		sync:    NewSyncRedis(place, opts, r.RunScript, r.RunDurable, r.OpTimeout()),
		cluster: cluster,
		Legacy:  legacy,
		now:     time.Now,
	}
}

// splitScoped cuts a scoped key into its route and key.
func splitScoped(scoped string) (route, key string) {
	route, key, ok := strings.Cut(scoped, ":")
	if !ok {
		return "", scoped
	}
	return route, key
}

// LegacyOpen reports whether version-1 sync records may still live (and
// are looked for): always before the schema's move is known.
func (s *RedisStore) LegacyOpen() bool {
	at, ok := s.Redis.Moved()
	return !ok || s.now().Before(at.Add(s.Legacy))
}

// v1SeenLua is the version-1 lookup both claim paths make: a key with a
// version-1 finished record or lock has the copy counted in its
// version-1 counter and is answered {2, n, rec} finished or {1, n, ms
// left} in flight (a lock without a TTL: lease ms); nil when it has
// neither.
const v1SeenLua = `
local function v1_seen(lock, done_key, counter, now, lease)
  local done = redis.call('GET', done_key)
  local ttl = redis.call('PTTL', lock)
  if not done and ttl == -2 then
    return nil
  end
  local n = redis.call('HINCRBY', counter, 'n', 1)
  redis.call('HSET', counter, 'last', now)
  if done then
    return {2, n, done}
  end
  if ttl < 0 then
    ttl = tonumber(lease)
  end
  return {1, n, ttl}
end
`

var (
	// KEYS: key hash, then the version-1 lock, record and counter of the
	// key. ARGV: as syncClaimScript. Reply: key_claim's; a version-1
	// record (when the key hash is free) answers {2, n, rec} finished or
	// {1, n, ms left} in flight, n counted in the version-1 counter.
	syncClaimV1Script = Script(v1SeenLua + `
local h = redis.call('HMGET', KEYS[1], 'st', 'lease')
if key_free(h[1], h[2]) then
  local old = v1_seen(KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[4])
  if old then
    return old
  end
end
local H = hist_args(6)
return claim_hist(KEYS[1], key_claim(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], H), ARGV[2], H)
`)
	// KEYS: the version-1 lock and record of a key. Reply: {0} none,
	// {1} held, {2, rec} finished; nothing changed.
	syncReadV1Script = redis.NewScript(`
local done = redis.call('GET', KEYS[2])
if done then
  return {2, done}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {1}
end
return {0}
`)
	// KEYS: the version-1 lock, record and counter of a key. ARGV: now
	// ms, lease ms. Reply: {0} none; {2, n, rec} finished; {1, n, ms
	// left} in flight (n counted).
	syncPeekV1Script = redis.NewScript(v1SeenLua + `
return v1_seen(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]) or {0}
`)
)

// Claim implements store.Store.
func (s *RedisStore) Claim(ctx context.Context, scoped, fp string, lockTTL time.Duration) (store.Claim, error) {
	route, key := splitScoped(scoped)
	if !s.LegacyOpen() {
		return s.sync.Claim(ctx, route, key, fp, lockTTL)
	}
	if s.cluster {
		return s.claimThenPeek(ctx, scoped, route, key, fp, lockTTL)
	}
	if lockTTL <= 0 {
		return store.Claim{}, errLease(lockTTL)
	}
	hash, _, _ := s.sync.place(route, key)
	lock, done, attempts := s.Redis.SyncKeys(scoped)
	tok := newSyncToken()
	ctx, cancel := s.sync.ctx(ctx)
	defer cancel()
	now := s.sync.now()
	v, err := s.sync.eval(ctx, s.sync.run, "claim", syncClaimV1Script, []string{hash, lock, done, attempts},
		appendHist(append(make([]any, 0, 5+histN), tok, fp, now.UnixMilli(), ledgerTTL(lockTTL), s.sync.opts.keep().Milliseconds()), ctx, s.sync.hist, now)...)
	if err != nil {
		return store.Claim{}, err
	}
	res, _ := v.([]any)
	return readClaim(key, tok, res)
}

// claimThenPeek claims the key and, when that took it, looks for a
// version-1 record in its own slot: one found gives the key back
// (Release) and is answered instead. Claiming first means a copy that
// arrives meanwhile on this build finds the lock.
func (s *RedisStore) claimThenPeek(ctx context.Context, scoped, route, key, fp string, lockTTL time.Duration) (store.Claim, error) {
	c, err := s.sync.Claim(ctx, route, key, fp, lockTTL)
	if err != nil || c.State != store.Claimed {
		return c, err
	}
	lock, done, attempts := s.Redis.SyncKeys(scoped)
	pctx, cancel := s.sync.ctx(ctx)
	defer cancel()
	v, err := s.sync.eval(pctx, s.sync.run, "claim", syncPeekV1Script, []string{lock, done, attempts},
		s.sync.now().UnixMilli(), ledgerTTL(lockTTL))
	if err != nil {
		// It cannot be told whether the key was finished before the
		// upgrade: the key is given back and the caller told so.
		_ = s.sync.Release(context.WithoutCancel(ctx), route, key, c.Token)
		return store.Claim{}, err
	}
	res, _ := v.([]any)
	if code, _ := ledgerElem[int64](res, 0); code == 0 && len(res) == 1 {
		return c, nil
	}
	old, err := readClaim(key, "", res)
	if err != nil {
		_ = s.sync.Release(context.WithoutCancel(ctx), route, key, c.Token)
		return store.Claim{}, err
	}
	if err := s.sync.Release(context.WithoutCancel(ctx), route, key, c.Token); err != nil && !errors.Is(err, store.ErrNotOwner) {
		return store.Claim{}, err
	}
	return old, nil
}

// Finish implements store.Store: the script and, with wait_replicas, its
// WAIT in one round trip.
func (s *RedisStore) Finish(ctx context.Context, scoped, tok string, out store.Outcome, retention time.Duration) error {
	route, key := splitScoped(scoped)
	return s.sync.Finish(ctx, route, key, tok, out, retention)
}

// Release implements store.Store.
func (s *RedisStore) Release(ctx context.Context, scoped, tok string) error {
	route, key := splitScoped(scoped)
	return s.sync.Release(ctx, route, key, tok)
}

// Get implements store.Store.
func (s *RedisStore) Get(ctx context.Context, scoped string) (store.KeyState, error) {
	route, key := splitScoped(scoped)
	ks, err := s.sync.Get(ctx, route, key)
	if err != nil {
		return store.KeyState{}, err
	}
	return storeKeyState(ks), nil
}

// Peek implements store.Peeker for the one record the queue's own
// cannot see: a version-1 sync record, while such records may live
// (Absent with no round trip after that). A key's record of this schema
// is the queue's own, read by its enqueue.
func (s *RedisStore) Peek(ctx context.Context, scoped string) (store.State, store.Outcome, error) {
	if !s.LegacyOpen() {
		return store.Absent, store.Outcome{}, nil
	}
	lock, done, _ := s.Redis.SyncKeys(scoped)
	ctx, cancel := s.sync.ctx(ctx)
	defer cancel()
	v, err := s.sync.eval(ctx, s.sync.run, "peek", syncReadV1Script, []string{lock, done})
	if err != nil {
		return store.Absent, store.Outcome{}, err
	}
	res, _ := v.([]any)
	code, ok := ledgerElem[int64](res, 0)
	switch {
	case ok && code == 1 && len(res) == 1:
		return store.InFlight, store.Outcome{}, nil
	case ok && code == 2 && len(res) == 2:
		rec, _ := ledgerElem[string](res, 1)
		out, err := store.DecodeOutcome([]byte(rec))
		if err != nil {
			return store.Absent, store.Outcome{}, fmt.Errorf("ledger: redis peek %q: %w: %v", scoped, errBothCorrupt, err)
		}
		return store.Finished, out, nil
	case ok && code == 0 && len(res) == 1:
		return store.Absent, store.Outcome{}, nil
	}
	return store.Absent, store.Outcome{}, ledgerCorrupt("peek", res)
}

// Delete implements store.Store: the key's record is forgotten with a
// reset tombstone (Sync.Reset), and so are its version-1 keys while they
// may live.
func (s *RedisStore) Delete(ctx context.Context, scoped string) (store.KeyState, error) {
	route, key := splitScoped(scoped)
	ks, err := s.sync.Reset(ctx, route, key)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return store.KeyState{}, err
	}
	if s.LegacyOpen() {
		lock, done, attempts := s.Redis.SyncKeys(scoped)
		dctx, cancel := s.sync.ctx(ctx)
		defer cancel()
		if derr := s.Redis.Client().Del(dctx, lock, done, attempts).Err(); derr != nil {
			return store.KeyState{}, fmt.Errorf("ledger: redis reset of version-1 keys: %w: %v", errBothUnavailable, derr)
		}
	}
	return storeKeyState(ks), nil
}

// storeKeyState is ks as the store reports a key.
func storeKeyState(ks KeyState) store.KeyState {
	st := store.KeyState{Attempts: ks.Copies, FirstSeen: ks.FirstSeen, LastSeen: ks.LastSeen,
		Status: ks.Status, Fingerprint: ks.Fingerprint}
	switch ks.State {
	case StateInFlight:
		st.State = store.InFlight
	case StateFinished:
		st.State = store.Finished
		if ks.Outcome.Fingerprint != "" {
			st.Fingerprint = ks.Outcome.Fingerprint
		}
	case StateQueued, StateDeadLettered:
		st.State = store.Queued
	default:
		st.State = store.Absent
		st.Fingerprint = ""
	}
	return st
}

// RedisStoreOn is NewRedisStore with the records placed as a Redis
// Streams queue of one shard places them and the default options, for
// tools and tests.
func RedisStoreOn(r *store.Redis) *RedisStore {
	return NewRedisStore(r, StreamsPlace(r.KeyPrefix(), func(string) int { return 1 }), SyncOptions{}, 0)
}
