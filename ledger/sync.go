package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// Sync is the sync routes' path through the key record: the same record,
// in the same place, as the queue's, so a copy finds the key whatever
// mode the route ran in when it was first seen.
//
//	free (absent, released, reset, lease over) -> lock(tok, lease)   Claim
//	lock(tok)       -> done(outcome, retention)                      Finish
//	lock(tok)       -> released (counters kept)                      Release
//	any             -> absent + reset tombstone                      Reset
//
// A lock's lease is judged on one clock for every instance (Redis' own on
// Redis). Finish and Release with a token that does not own the lock
// change nothing and return store.ErrNotOwner.
type Sync interface {
	// Claim counts a copy of route's key and locks the key for it for
	// lease when it is free: store.Claimed with the owner token. A
	// locked key answers store.InFlight with the lease's remaining time,
	// a finished one store.Finished with its outcome, one the queue holds
	// store.Queued (queued, retrying or dead-lettered: EventID,
	// Fingerprint, Dead), or store.InFlight with a second's wait while
	// its event is being stored (Kafka).
	Claim(ctx context.Context, route, key, fingerprint string, lease time.Duration) (store.Claim, error)
	// Finish records out for retention when tok owns the lock (its lease
	// over or not), and also when the key has no state at all, or only
	// another copy's lock whose lease is over, and tok is not empty: the
	// lock vanished and the upstream did accept this copy, so recording
	// it keeps the next copy from being forwarded again. In every other
	// case (another copy's live lease, a finished key, a reset
	// tombstone, a key the queue holds) it changes nothing:
	// store.ErrNotOwner.
	Finish(ctx context.Context, route, key, tok string, out store.Outcome, retention time.Duration) error
	// Release drops tok's lock while its lease lasts, so that the next
	// copy is forwarded; the counters stay for SyncOptions.AttemptsTTL.
	// store.ErrNotOwner when tok holds no live lease.
	Release(ctx context.Context, route, key, tok string) error
	// Reset forgets the key as Delete does, and leaves a reset tombstone
	// for the remaining lease of a lock or SyncOptions.ResetHold, the
	// longer: while it lasts Finish records nothing without owning the
	// lock. Claim ignores tombstones.
	Reset(ctx context.Context, route, key string) (KeyState, error)
}

// SyncOptions are how long a sync route's counters and tombstones last.
type SyncOptions struct {
	// AttemptsTTL is how long the counters of a key whose lock was
	// released (or whose lease ran out) are kept after its last claim. 0
	// means store.DefaultAttemptsTTL; negative: only while the lock
	// lives. A finished key's counters live exactly as long as its
	// outcome.
	AttemptsTTL time.Duration
	// ResetHold is the shortest time a reset tombstone lasts; 0: a
	// tombstone is left only for a lock, for its remaining lease.
	ResetHold time.Duration
}

// keep is how long, at least, a locked key's counters live beyond the
// lease (0: not beyond it).
func (o SyncOptions) keep() time.Duration {
	switch {
	case o.AttemptsTTL == 0:
		return store.DefaultAttemptsTTL
	case o.AttemptsTTL < 0:
		return 0
	}
	return o.AttemptsTTL
}

var (
	_ Sync = (*Memory)(nil)
	_ Sync = (*Redis)(nil)
	_ Sync = (*SyncRedis)(nil)
)

// errLease refuses a claim no lock could be taken with.
func errLease(lease time.Duration) error {
	return fmt.Errorf("ledger: lease %v must be positive", lease)
}

func errRetention(d time.Duration) error {
	return fmt.Errorf("ledger: retention %v must be positive", d)
}

// Placement: where a key record lives on Redis. A sync route's record
// lives where its queue keeps its keys, so both modes find it.

// ShardOf is the shard of a route's queue that key belongs to, of n.
func ShardOf(key string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// StreamsTag is the Cluster hash tag of a Redis Streams queue's shard:
// every key of the shard's events and key records shares its slot.
func StreamsTag(route string, shard int) string {
	return "{q:" + route + ":" + strconv.Itoa(shard) + "}"
}

// StreamsKey names the key record of route's key on the Redis Streams
// queue (queue.backend: redis): PREFIX webhook_qkey:{q:ROUTE:SHARD}KEY.
func StreamsKey(prefix, route string, shard int, key string) string {
	return prefix + "webhook_qkey:" + StreamsTag(route, shard) + key
}

// StreamsAge names the age zset of route's shard on the Redis Streams
// queue.
func StreamsAge(prefix, route string, shard int) string {
	return prefix + "webhook_age:" + StreamsTag(route, shard)
}

// KafkaKey names the key record of route's key in the Kafka queue's
// ledger (Redis): PREFIX webhook_kkey:{kq:ROUTE}KEY.
func KafkaKey(prefix, route, key string) string {
	return prefix + "webhook_kkey:" + ledgerTag(route) + key
}

// KafkaPlace places records as the Kafka queue's ledger (Redis) does.
func KafkaPlace(prefix string) Place {
	return func(route, key string) (string, string, string) {
		t := ledgerTag(route)
		return KafkaKey(prefix, route, key), prefix + "webhook_kage:" + t, prefix + "webhook_kdead:" + t
	}
}

// Place names the Redis keys of route's key record: its hash, the age
// zset of its shard and the route's dead index ("" when the transport
// keeps none), all in one slot.
type Place func(route, key string) (hash, age, dead string)

// StreamsPlace places records as the Redis Streams queue does, with the
// route's shard count from shards (the count Prepare fixed).
func StreamsPlace(prefix string, shards func(route string) int) Place {
	return func(route, key string) (string, string, string) {
		s := ShardOf(key, shards(route))
		return StreamsKey(prefix, route, s, key), StreamsAge(prefix, route, s), ""
	}
}

// --- Memory ---

// SetSync sets the sync routes' counters' and tombstones' lifetimes;
// call it before the first Claim.
func (m *Memory) SetSync(o SyncOptions) { m.sync = o }

// free reports whether k is free for a new copy at now (ms): no state,
// a reset tombstone, or a lock whose lease is over.
func (k *memLedgerKey) free(now int64) bool {
	return k.st == stReleased || k.st == stReset || k.st == stLocked && k.lease <= now
}

// expireNoSooner makes k live at least until t.
func (k *memLedgerKey) expireNoSooner(t time.Time) {
	if ns := t.UnixNano(); k.expires != 0 && k.expires < ns {
		k.expires = ns
	}
}

// syncToken mints a lock owner token (under m.mu).
func (m *Memory) syncToken() string {
	if m.tokPrefix == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		m.tokPrefix = "m" + hex.EncodeToString(b[:]) + "."
	}
	m.seq++
	var b [48]byte
	n := copy(b[:], m.tokPrefix)
	return string(strconv.AppendUint(b[:n], m.seq, 36))
}

// Claim implements Sync.
func (m *Memory) Claim(ctx context.Context, route, key, fp string, lease time.Duration) (store.Claim, error) {
	if lease <= 0 {
		return store.Claim{}, errLease(lease)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	ms := ledgerMs(now)
	m.sweep(now)
	r := m.route(route)
	k := r.key(key, now)
	name := key
	if k == nil {
		name = strings.Clone(key)
		k = &memLedgerKey{name: name}
		r.keys[name] = k
	}
	k.n++
	if k.n == 1 {
		k.first = ms
	}
	k.last = ms
	keep := max(lease, m.sync.keep())
	switch {
	case k.st == stDone:
		out, err := store.DecodeOutcome(k.rec)
		if err != nil {
			return store.Claim{}, fmt.Errorf("ledger: memory claim %q: %w: %v", key, errBothCorrupt, err)
		}
		m.touch(r, name, k)
		v := "replayed"
		if out.Fingerprint != fp {
			v = "conflict"
		}
		m.hist(ctx, k, now, store.HistArrival, k.n, 0, v)
		return store.Claim{State: store.Finished, Attempts: k.n, Outcome: out}, nil
	case k.st == stLocked && !k.free(ms):
		left := time.Duration(k.lease-ms) * time.Millisecond
		k.expireNoSooner(now.Add(max(keep, left)))
		m.hist(ctx, k, now, store.HistArrival, k.n, 0, "in_flight")
		return store.Claim{State: store.InFlight, Attempts: k.n, RetryAfter: left}, nil
	case !k.free(ms):
		v := "queued"
		if k.fp != fp {
			v = "conflict"
		}
		m.hist(ctx, k, now, store.HistArrival, k.n, 0, v)
		return queuedClaim(k.st.String(), k.n, k.eid(), k.fp), nil
	}
	k.st, k.tok, k.fp = stLocked, m.syncToken(), strings.Clone(fp)
	k.lease = ms + ledgerTTL(lease)
	k.qt++
	if k.expires == 0 {
		k.expireAt(now.Add(keep))
	}
	k.expireNoSooner(now.Add(keep))
	m.hist(ctx, k, now, store.HistArrival, k.n, 0, "forwarded")
	m.account(r, name, k, acctLock)
	return store.Claim{State: store.Claimed, Token: k.tok, Attempts: k.n}, nil
}

// queuedClaim is Claim's answer about a key the queue holds in state st.
func queuedClaim(st string, n int64, eid, fp string) store.Claim {
	if st == ledgerEnqueuing {
		// Its event is being stored this instant: ask for a retry.
		return store.Claim{State: store.InFlight, Attempts: n, RetryAfter: time.Second}
	}
	return store.Claim{State: store.Queued, Attempts: n, EventID: eid, Fingerprint: fp, Dead: st == ledgerDead}
}

// Finish implements Sync.
func (m *Memory) Finish(ctx context.Context, route, key, tok string, out store.Outcome, retention time.Duration) error {
	if retention <= 0 {
		return errRetention(retention)
	}
	rec, err := store.EncodeOutcome(out)
	if err != nil {
		return fmt.Errorf("ledger: finish: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	ms := ledgerMs(now)
	m.sweep(now)
	r := m.route(route)
	k := r.key(key, now)
	switch {
	case k != nil && k.st == stLocked && k.tok == tok:
	case k != nil && k.rst() > ms:
		// A reset tombstone's time still runs.
		return store.ErrNotOwner
	case k != nil && k.st == stLocked && tok != "" && k.free(ms):
	case tok != "" && (k == nil || k.st == stReleased):
		if k == nil {
			k = &memLedgerKey{name: strings.Clone(key)}
			r.keys[k.name] = k
		}
	default:
		return store.ErrNotOwner
	}
	k.st, k.tok, k.lease, k.rec = stDone, "", 0, rec
	if out.Fingerprint != "" {
		// Kept in the outcome: a finished key answers with that one.
		k.fp = ""
	}
	k.expireAt(now.Add(time.Duration(ledgerTTL(retention)) * time.Millisecond))
	m.hist(ctx, k, now, store.HistSettle, k.qt, out.Status, "finished")
	m.remember(r, key, k)
	return nil
}

// Release implements Sync.
func (m *Memory) Release(ctx context.Context, route, key, tok string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.sweep(now)
	r := m.route(route)
	k := r.key(key, now)
	if k == nil || k.st != stLocked || k.tok != tok || k.free(ledgerMs(now)) {
		return store.ErrNotOwner
	}
	m.hist(ctx, k, now, store.HistRelease, k.qt, 0, "released")
	if m.sync.keep() == 0 {
		r.forget(key, k)
		return nil
	}
	k.st, k.tok, k.lease = stReleased, "", 0
	m.remember(r, key, k)
	return nil
}

// Reset implements Sync.
func (m *Memory) Reset(ctx context.Context, route, key string) (KeyState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.route(route)
	ks, err := m.get(r, key)
	hold := m.sync.ResetHold
	var h *memHistory
	if k := r.keys[key]; k != nil {
		h = k.hist
		if k.st == stLocked {
			hold = max(hold, time.Duration(k.lease-ledgerMs(now))*time.Millisecond)
		}
		eid := k.eid()
		delete(r.age, eid)
		if r.dead[eid] == key {
			delete(r.dead, eid)
		}
		r.forget(key, k)
	}
	var tomb *memLedgerKey
	if hold > 0 {
		name := strings.Clone(key)
		tomb = &memLedgerKey{st: stReset, name: name, x: &memKeyExtra{rst: ledgerMs(now.Add(hold))}}
		tomb.expireAt(now.Add(hold))
		r.keys[name] = tomb
		m.account(r, name, tomb, acctHeld)
	}
	if m.histo.Cap > 0 {
		if h == nil {
			h = &memHistory{}
		}
		hk := &memLedgerKey{hist: h}
		m.hist(ctx, hk, now, store.HistReset, 0, 0, "reset")
		m.keepHistory(r, strings.Clone(key), hk.hist, tomb, now)
	}
	return ks, err
}

// --- Redis ---

// SyncRedis runs the Sync transitions on Redis, on the key records place
// names: the Kafka ledger's (Redis.SetSync) or the Redis Streams queue's
// (StreamsPlace). Each is one Lua script of the key record's library;
// Finish goes through the durable runner (it records an outcome).
type SyncRedis struct {
	// Now is the clock of first- and last-seen times; nil means
	// time.Now. Leases run on Redis' clock.
	Now func() time.Time

	place   Place
	opts    SyncOptions
	hist    HistoryOptions
	timeout time.Duration
	run     ScriptRunner
	durable ScriptRunner
}

// NewSyncRedis returns the sync transitions on the records place names,
// sent with run (and Finish with durable; nil: run); every call is
// bounded by timeout (0: store.DefaultOpTimeout).
func NewSyncRedis(place Place, opts SyncOptions, run, durable ScriptRunner, timeout time.Duration) *SyncRedis {
	if timeout <= 0 {
		timeout = store.DefaultOpTimeout
	}
	if durable == nil {
		durable = run
	}
	return &SyncRedis{place: place, opts: opts, timeout: timeout, run: run, durable: durable}
}

// SetSync makes l run the Sync transitions on its records with o; call
// it before use.
func (l *Redis) SetSync(o SyncOptions) {
	run := func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		return l.run(ctx, s, keys, args...)
	}
	durable := func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		if l.durable != nil {
			return l.durable(ctx, s, keys, args...)
		}
		return l.run(ctx, s, keys, args...)
	}
	l.sync = NewSyncRedis(KafkaPlace(l.prefix), o, run, durable, l.timeout)
	l.sync.Now = l.now
	l.sync.hist = l.histo
}

func (l *Redis) syncer() *SyncRedis { return l.sync }

// Claim implements Sync.
func (l *Redis) Claim(ctx context.Context, route, key, fp string, lease time.Duration) (store.Claim, error) {
	return l.syncer().Claim(ctx, route, key, fp, lease)
}

// Finish implements Sync.
func (l *Redis) Finish(ctx context.Context, route, key, tok string, out store.Outcome, retention time.Duration) error {
	return l.syncer().Finish(ctx, route, key, tok, out, retention)
}

// Release implements Sync.
func (l *Redis) Release(ctx context.Context, route, key, tok string) error {
	return l.syncer().Release(ctx, route, key, tok)
}

// Reset implements Sync.
func (l *Redis) Reset(ctx context.Context, route, key string) (KeyState, error) {
	return l.syncer().Reset(ctx, route, key)
}

var (
	// KEYS: key hash. ARGV: tok, fp, now ms, lease ms, keep ms.
	// Reply: key_claim's.
	// ARGV[6...]: the history's (hist_args).
	syncClaimScript = Script(`
local H = hist_args(6)
return claim_hist(KEYS[1], key_claim(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], H), ARGV[2], H)`)
	// KEYS: key hash. ARGV: tok, rec, retention ms. Reply: 1 recorded, 0
	// not.
	// ARGV[5...]: the history's; ARGV[4] the outcome's status.
	syncFinishScript = Script(`return key_done(KEYS[1], ARGV[1], ARGV[2], ARGV[3], hist_args(5), ARGV[4])`)
	// KEYS: key hash. ARGV: tok, "1" to drop the counters. Reply: 1
	// released, 0 not the owner.
	// ARGV[3...]: the history's.
	syncReleaseScript = Script(`
local n = redis.call('HGET', KEYS[1], 'qt')
local r = key_release(KEYS[1], ARGV[1], ARGV[2])
if r == 1 then
  hist_add(KEYS[1], hist_args(3), 'release', n, 0, 'released')
end
return r
`)
	// KEYS: key hash. Reply: {Redis' clock ms, then the hash (HGETALL)}.
	syncGetScript = Script(`
local out = {redis_ms()}
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do
  out[#out + 1] = v
end
return out
`)
	// KEYS: key hash, age, and the dead index when the transport keeps
	// one. ARGV: key, hold ms, then the history's. Reply: as syncGetScript's, the hash as it
	// was (now deleted, a tombstone left).
	syncResetScript = Script(`
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'hash' and ty ~= 'none' then
  -- Not a record at all: cleared, as an operator's reset means to.
  redis.call('DEL', KEYS[1])
  return {redis_ms()}
end
local old = redis.call('HGET', KEYS[1], 'h')
local h, eid, dead, dlq, t = key_reset(KEYS[1], KEYS[2], ARGV[2])
if KEYS[3] and eid and redis.call('HGET', KEYS[3], eid) == ARGV[1] then
  redis.call('HDEL', KEYS[3], eid)
end
hist_kept(KEYS[1], hist_args(3), old, 'reset', 0, 'reset')
local out = {t}
for _, v in ipairs(h) do
  out[#out + 1] = v
end
return out
`)
)

func (s *SyncRedis) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SyncRedis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// eval runs one script with run. Its errors are both the ledger's and
// the store's (ErrUnavailable, ErrCorrupt): the sync path reads them as
// a store's.
func (s *SyncRedis) eval(ctx context.Context, run ScriptRunner, op string, sc *redis.Script, keys []string, args ...any) (any, error) {
	v, err := run(ctx, sc, keys, args...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("ledger: redis %s: %w: nil reply", op, errBothCorrupt)
	}
	if err != nil {
		cause := errBothUnavailable
		if errors.Is(ledgerFail(op, err), ErrCorrupt) {
			cause = errBothCorrupt
		}
		return nil, fmt.Errorf("ledger: redis %s: %w: %v", op, cause, err)
	}
	return v, nil
}

// bothErr is one of the ledger's errors that is also the store's.
type bothErr struct {
	msg           string
	ledger, store error
}

func (e *bothErr) Error() string { return e.msg }
func (e *bothErr) Is(target error) bool {
	return target == e.ledger || target == e.store
}

var (
	errBothUnavailable = &bothErr{"unavailable", ErrUnavailable, store.ErrUnavailable}
	errBothCorrupt     = &bothErr{"corrupt data", ErrCorrupt, store.ErrCorrupt}
)

// Claim implements Sync.
func (s *SyncRedis) Claim(ctx context.Context, route, key, fp string, lease time.Duration) (store.Claim, error) {
	if lease <= 0 {
		return store.Claim{}, errLease(lease)
	}
	hash, _, _ := s.place(route, key)
	tok := newSyncToken()
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	now := s.now()
	v, err := s.eval(ctx, s.run, "claim", syncClaimScript, []string{hash},
		appendHist(append(make([]any, 0, 5+histN), tok, fp, now.UnixMilli(), ledgerTTL(lease), s.opts.keep().Milliseconds()), ctx, s.hist, now)...)
	if err != nil {
		return store.Claim{}, err
	}
	res, _ := v.([]any)
	return readClaim(key, tok, res)
}

// readClaim reads key_claim's reply.
func readClaim(key, tok string, res []any) (store.Claim, error) {
	code, ok0 := ledgerElem[int64](res, 0)
	n, ok1 := ledgerElem[int64](res, 1)
	if !ok0 || !ok1 {
		return store.Claim{}, ledgerCorrupt("claim", res)
	}
	switch {
	case code == 0 && len(res) == 2:
		return store.Claim{State: store.Claimed, Token: tok, Attempts: n}, nil
	case code == 1 && len(res) == 3:
		left, ok := ledgerElem[int64](res, 2)
		if !ok {
			break
		}
		return store.Claim{State: store.InFlight, Attempts: n, RetryAfter: time.Duration(max(left, 1)) * time.Millisecond}, nil
	case code == 2 && len(res) == 3:
		rec, ok := ledgerElem[string](res, 2)
		if !ok {
			break
		}
		out, err := store.DecodeOutcome([]byte(rec))
		if err != nil {
			return store.Claim{}, fmt.Errorf("ledger: redis claim %q: %w: %v", key, errBothCorrupt, err)
		}
		return store.Claim{State: store.Finished, Attempts: n, Outcome: out}, nil
	case code == 3 && len(res) == 5:
		st, ok2 := ledgerElem[string](res, 2)
		eid, ok3 := ledgerElem[string](res, 3)
		fp, ok4 := ledgerElem[string](res, 4)
		if !ok2 || !ok3 || !ok4 {
			break
		}
		switch st {
		case ledgerEnqueuing, ledgerQueued, ledgerDead:
			return queuedClaim(st, n, eid, fp), nil
		}
		return store.Claim{}, fmt.Errorf("ledger: redis claim %q: %w: state %q", key, errBothCorrupt, clipLedger(st))
	}
	return store.Claim{}, ledgerCorrupt("claim", res)
}

// Finish implements Sync.
func (s *SyncRedis) Finish(ctx context.Context, route, key, tok string, out store.Outcome, retention time.Duration) error {
	if retention <= 0 {
		return errRetention(retention)
	}
	rec, err := store.EncodeOutcome(out)
	if err != nil {
		return fmt.Errorf("ledger: finish: %w", err)
	}
	hash, _, _ := s.place(route, key)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.eval(ctx, s.durable, "finish", syncFinishScript, []string{hash},
		appendHist(append(make([]any, 0, 4+histN), tok, rec, ledgerTTL(retention), out.Status), ctx, s.hist, s.now())...)
	return ownerReply("finish", v, err)
}

// ownerReply reads a 1 (done) or 0 (store.ErrNotOwner) reply.
func ownerReply(op string, v any, err error) error {
	switch {
	case err != nil:
		return err
	case v == int64(1):
		return nil
	case v == int64(0):
		return store.ErrNotOwner
	}
	return ledgerCorrupt(op, v)
}

// Release implements Sync.
func (s *SyncRedis) Release(ctx context.Context, route, key, tok string) error {
	hash, _, _ := s.place(route, key)
	drop := "0"
	if s.opts.keep() == 0 {
		drop = "1"
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.eval(ctx, s.run, "release", syncReleaseScript, []string{hash}, appendHist(append(make([]any, 0, 2+histN), tok, drop), ctx, s.hist, s.now())...)
	return ownerReply("release", v, err)
}

// Get reports route's key, a lock's lease judged on Redis' clock.
func (s *SyncRedis) Get(ctx context.Context, route, key string) (KeyState, error) {
	hash, _, _ := s.place(route, key)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.eval(ctx, s.run, "get", syncGetScript, []string{hash})
	if err != nil {
		return KeyState{}, err
	}
	return readTimedHash("get", key, v)
}

// Reset implements Sync.
func (s *SyncRedis) Reset(ctx context.Context, route, key string) (KeyState, error) {
	hash, age, dead := s.place(route, key)
	keys := []string{hash, age}
	if dead != "" {
		keys = append(keys, dead)
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.eval(ctx, s.run, "reset", syncResetScript, keys, append([]any{key, s.opts.ResetHold.Milliseconds()}, histArgs(ctx, s.hist, s.now())...)...)
	if err != nil {
		return KeyState{}, err
	}
	return readTimedHash("reset", key, v)
}

// readTimedHash reads {Redis' clock ms, then a hash as HGETALL gives it}.
func readTimedHash(op, key string, v any) (KeyState, error) {
	res, _ := v.([]any)
	now, ok := ledgerElem[int64](res, 0)
	if !ok || len(res)%2 != 1 {
		return KeyState{}, ledgerCorrupt(op, v)
	}
	h := make(map[string]string, len(res)/2)
	for i := 1; i < len(res); i += 2 {
		k, ok1 := ledgerElem[string](res, i)
		val, ok2 := ledgerElem[string](res, i+1)
		if !ok1 || !ok2 {
			return KeyState{}, ledgerCorrupt(op, v)
		}
		h[k] = val
	}
	return readKeyHash(op, key, h, now)
}

// newSyncToken mints a lock owner token.
func newSyncToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
