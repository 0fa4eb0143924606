package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

// Group is the consumer group every instance reads the ready streams with.
const Group = "clawgate"

// Redis keeps the queue in Redis, shared by every instance.
//
// A route's queue is split into shards (one by default); everything about
// one event lives in its shard's Cluster slot, tag T = {q:ROUTE:SHARD},
// so every state change is one Lua script:
//
//	PREFIX webhook_qkey:T<key>   the key record, hash (package ledger's
//	                             schema, written by its Lua library): st
//	                             (queued|dead|done), eid, tok, fp, n
//	                             (copies), first, last (ms), qa (tries
//	                             this round), qt (tries in all), pos (the
//	                             stream entry that began the live token;
//	                             ent in records of earlier releases), rec
//	                             (finished record), and once dead-lettered
//	                             dlq (its DLQ entry id), reason, status,
//	                             err, died; PX retention once finished or
//	                             purged, no TTL before
//	PREFIX webhook_event:T<eid>  hash: key, req (payload), first; dlq
//	                             (its DLQ entry id) once dead-lettered;
//	                             events dead-lettered by earlier releases
//	                             also reason, status, err, died, attempts
//	PREFIX webhook_queue:T       stream of ready entries {e, t, k}, read by
//	                             the consumer group "clawgate"
//	PREFIX webhook_retry:T       zset "eid|tok|key" -> due (ms)
//	PREFIX webhook_age:T         zset eid -> first seen (ms), every
//	                             undelivered event: depth and lag
//	PREFIX webhook_dlq:T         stream of dead-lettered events {e}; never
//	                             trimmed
//	PREFIX webhook_dlq_bytes:T   the dead-lettered events' payload bytes
//	PREFIX webhook_queue_meta:{q:ROUTE}  the route's shard count, fixed
//	                             once set
//
// Nothing but a finished or purged key expires, and the DLQ is never
// trimmed: Redis needs `maxmemory-policy noeviction` (the server warns at
// start-up otherwise).
type Redis struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	// run sends one script; by default straight to client, or through
	// the store's batcher (UseBatcher).
	run ScriptRunner
	// durable, when set (UseDurable), sends the scripts that acknowledge
	// an event or record an outcome; nil: run.
	durable ScriptRunner
	// syncKeys, when set (CheckSyncRecords), names a key's sync-route
	// records, read by Enqueue.
	syncKeys SyncKeys
	// syncOpen, when set (CheckSyncRecordsWhile), says whether syncKeys
	// are read still.
	syncOpen func() bool
	// histo is the keys' history (SetHistory).
	histo ledger.HistoryOptions

	mu     sync.RWMutex
	shards map[string]int
}

var _ Backend = (*Redis)(nil)

// NewRedis returns the queue on client, its keys under prefix; every call
// is bounded by timeout.
func NewRedis(client redis.UniversalClient, prefix string, timeout time.Duration) *Redis {
	if timeout <= 0 {
		timeout = store.DefaultOpTimeout
	}
	r := &Redis{client: client, prefix: prefix, timeout: timeout, shards: map[string]int{}}
	r.run = func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		return s.Run(ctx, client, keys, args...)
	}
	return r
}

// UseBatcher sends the scripts of concurrent deliveries through run (the
// store's pipelining batcher) instead of one round trip each; every
// script stays one atomic call. Call it before use.
func (r *Redis) UseBatcher(run ScriptRunner) { r.run = run }

// UseDurable sends the scripts whose writes acknowledge an event or
// record an outcome (Enqueue before its 202, Settle, Replay, Purge)
// through run instead: the store's RunDurable, which waits for
// store.redis.wait_replicas replicas after each. Call it before use.
func (r *Redis) UseDurable(run ScriptRunner) { r.durable = run }

// SyncKeys names the Redis keys of the sync store's record of a route's
// key: its lock, its finished record and its attempt counter
// (store.Redis.SyncKeys with the scoped key).
type SyncKeys func(route, key string) (lock, done, attempts string)

// CheckSyncRecords makes Enqueue read, in its script, the sync store's
// record of a key the queue does not know: a key finished while the
// route was a sync route is answered as delivered (its stored answer,
// nothing queued), one whose sync copy is being forwarded as in flight.
// So a route switched from sync to queue does not deliver again an event
// it delivered before the switch, at no extra round trip. Only where
// those keys may share the script's slot: a single server or Sentinel,
// never a Cluster. Call it before use.
func (r *Redis) CheckSyncRecords(k SyncKeys) { r.syncKeys = k }

// CheckSyncRecordsWhile bounds CheckSyncRecords to while open says so:
// the sync records it reads are those of the store's schema version 1,
// which live only so long after the store moved to version 2
// (ledger.RedisStore.LegacyOpen); the sync records of version 2 are the
// queue's own. Call it before use.
func (r *Redis) CheckSyncRecordsWhile(open func() bool) { r.syncOpen = open }

// ChecksSyncRecords reports whether Enqueue reads the sync records.
func (r *Redis) ChecksSyncRecords() bool { return r.syncKeys != nil }

// runDurable runs s through the durable runner, or run without one.
func (r *Redis) runDurable(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if r.durable != nil {
		return r.durable(ctx, s, keys, args...)
	}
	return r.run(ctx, s, keys, args...)
}

func (r *Redis) tag(route string, shard int) string { return ledger.StreamsTag(route, shard) }

func (r *Redis) keyHash(route string, shard int, key string) string {
	return ledger.StreamsKey(r.prefix, route, shard, key)
}
func (r *Redis) event(route string, shard int, eid string) string {
	return r.prefix + "webhook_event:" + r.tag(route, shard) + eid
}
func (r *Redis) stream(route string, shard int) string {
	return r.prefix + "webhook_queue:" + r.tag(route, shard)
}
func (r *Redis) retrySet(route string, shard int) string {
	return r.prefix + "webhook_retry:" + r.tag(route, shard)
}
func (r *Redis) ageSet(route string, shard int) string {
	return ledger.StreamsAge(r.prefix, route, shard)
}
func (r *Redis) dlq(route string, shard int) string {
	return r.prefix + "webhook_dlq:" + r.tag(route, shard)
}
func (r *Redis) dlqBytes(route string, shard int) string {
	return r.prefix + "webhook_dlq_bytes:" + r.tag(route, shard)
}

// orderPrefix names the shard's order keys without their suffix (package
// ledger's order.go); keyPrefix its key hashes without the key.
func (r *Redis) orderPrefix(route string, shard int) string {
	return r.prefix + "webhook_ord:" + r.tag(route, shard)
}
func (r *Redis) keyPrefix(route string, shard int) string { return r.keyHash(route, shard, "") }

func (r *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// fail wraps a Redis error as ErrUnavailable (or ErrCorrupt for a key of
// the wrong type).
func fail(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.Contains(rerr.Error(), "WRONGTYPE") {
		return fmt.Errorf("queue: redis %s: %w: %v", op, ErrCorrupt, err)
	}
	return fmt.Errorf("queue: redis %s: %w: %v", op, ErrUnavailable, err)
}

func corrupt(op string, v any) error {
	return fmt.Errorf("queue: redis %s: %w: reply %v", op, ErrCorrupt, v)
}

// Shards returns route's shard count (1 before Prepare).
func (r *Redis) Shards(route string) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if n := r.shards[route]; n > 0 {
		return n
	}
	return 1
}

// Prepare records route's shard count in Redis the first time and refuses
// another one later (keys would move to other shards and copies of a
// queued event would be queued again), and creates the consumer group of
// every shard. The shard count is used from the call on, even when Redis
// does not answer (ErrUnavailable): the groups are then created when the
// workers first read.
func (r *Redis) Prepare(ctx context.Context, route string, shards int) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.fixShards(ctx, route, shards); err != nil {
		return err
	}
	for s := range shards {
		if err := r.createGroup(ctx, route, s); err != nil {
			return err
		}
		if err := r.countDLQBytes(ctx, route, s); err != nil {
			return err
		}
	}
	return nil
}

// PrepareKeys fixes a sync route's shard count as Prepare does, without
// its streams: the route's key records live in its shards' slots
// (SyncPlace), where they stay if the route becomes a queue route.
func (r *Redis) PrepareKeys(ctx context.Context, route string, shards int) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	return r.fixShards(ctx, route, shards)
}

// fixShards records route's shard count in Redis the first time and
// refuses another one later; the count is used from the call on, even
// when Redis does not answer.
func (r *Redis) fixShards(ctx context.Context, route string, shards int) error {
	use := func() {
		r.mu.Lock()
		r.shards[route] = shards
		r.mu.Unlock()
	}
	meta := r.prefix + "webhook_queue_meta:{q:" + route + "}"
	if err := r.client.SetNX(ctx, meta, shards, 0).Err(); err != nil {
		use()
		return fail("prepare", err)
	}
	got, err := r.client.Get(ctx, meta).Int()
	if err != nil {
		use()
		return fail("prepare", err)
	}
	use()
	if got != shards {
		r.mu.Lock()
		delete(r.shards, route)
		r.mu.Unlock()
		return fmt.Errorf("queue: route %q was queued with %d shards in Redis; queue.shards is %d: set it back (changing it needs the route's queue empty and %s deleted)", route, got, shards, meta)
	}
	return nil
}

// countDLQBytes sets shard's DLQ byte count from its events when it has
// none yet (a DLQ written before the count existed); the count is kept by
// the scripts from then on.
func (r *Redis) countDLQBytes(ctx context.Context, route string, shard int) error {
	key := r.dlqBytes(route, shard)
	n, err := r.client.Exists(ctx, key).Result()
	if err != nil {
		return fail("prepare", err)
	}
	if n == 1 {
		return nil
	}
	var total int64
	start := "-"
	for {
		msgs, err := r.client.XRangeN(ctx, r.dlq(route, shard), start, "+", 1000).Result()
		if err != nil {
			return fail("prepare", err)
		}
		pipe := r.client.Pipeline()
		lens := make([]*redis.IntCmd, len(msgs))
		for i, m := range msgs {
			eid, _ := m.Values["e"].(string)
			lens[i] = pipe.HStrLen(ctx, r.event(route, shard, eid), "req")
		}
		if len(msgs) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fail("prepare", err)
			}
		}
		for _, c := range lens {
			total += c.Val()
		}
		if len(msgs) < 1000 {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	if err := r.client.SetNX(ctx, key, total, 0).Err(); err != nil {
		return fail("prepare", err)
	}
	return nil
}

// createGroup creates shard's consumer group (and stream), reading from
// the stream's start; an existing group is left alone.
func (r *Redis) createGroup(ctx context.Context, route string, shard int) error {
	err := r.client.XGroupCreateMkStream(ctx, r.stream(route, shard), Group, "0").Err()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		return fail("create group", err)
	}
	return nil
}

func (r *Redis) shardOf(route, key string) int { return ledger.ShardOf(key, r.Shards(route)) }

// SyncPlace places a sync route's key records where this queue keeps its
// routes' keys (the shard count Prepare fixed), so that a route switching
// mode finds them: the sync path's ledger.SyncRedis runs on it.
func (r *Redis) SyncPlace() ledger.Place { return ledger.StreamsPlace(r.prefix, r.Shards) }

// newEventID names an event: its shard, a dash, 24 random hex digits.
func newEventID(shard int) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return strconv.Itoa(shard) + "-" + hex.EncodeToString(b[:])
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shardOfID reads the shard out of an event id; ok false for an id this
// queue never made.
func shardOfID(id string, shards int) (int, bool) {
	i := strings.IndexByte(id, '-')
	if i <= 0 || len(id)-i-1 != 24 {
		return 0, false
	}
	s, err := strconv.Atoi(id[:i])
	if err != nil || s < 0 || s >= shards {
		return 0, false
	}
	if _, err := hex.DecodeString(id[i+1:]); err != nil {
		return 0, false
	}
	return s, true
}

// The scripts call the key record's transitions in package ledger's Lua
// library (ledger.Script); what they do here is the events' and their
// positions' part: the event hash, the ready stream and its group, the
// retry set, the DLQ stream and its byte count.
var (
	// KEYS: key hash, event, stream, age, and with CheckSyncRecords the
	// sync store's lock, record and attempts of the key.
	// ARGV: eid, tok, fp, now ms, payload, max depth, key, order value,
	// stale value, order prefix.
	// Reply: {0, 1} enqueued; ledger.ReadSeen's {1, n, st, eid, fp}
	// pending or {2, n, rec} finished (here, or by the sync route the
	// route was: then n is the sync counter, counted as a sync claim
	// would); {3} full; {4} a sync copy in flight.
	enqueueScript = ledger.Script(`
local r = key_seen(KEYS[1], ARGV[4])
if r then
  return seen_hist(KEYS[1], r, ARGV[3], hist_args(11))
end
if #KEYS == 7 then
  local d = redis.call('GET', KEYS[6])
  if d then
    local n = redis.call('HINCRBY', KEYS[7], 'n', 1)
    if n == 1 then
      redis.call('HSET', KEYS[7], 'first', ARGV[4])
    end
    redis.call('HSET', KEYS[7], 'last', ARGV[4])
    local ttl = redis.call('PTTL', KEYS[6])
    if ttl > 0 then
      redis.call('PEXPIRE', KEYS[7], ttl)
    end
    return {2, n, d}
  end
  if redis.call('EXISTS', KEYS[5]) == 1 then
    return {4}
  end
end
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[6]) then
  return {3}
end
key_queue(KEYS[1], KEYS[4], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if ARGV[8] ~= '' then
  ord_new(KEYS[1], ARGV[10], ARGV[7], ARGV[8], ARGV[9])
end
redis.call('HSET', KEYS[2], 'key', ARGV[7], 'req', ARGV[5], 'first', ARGV[4])
redis.call('XADD', KEYS[3], '*', 'e', ARGV[1], 't', ARGV[2], 'k', ARGV[7])
hist_add(KEYS[1], hist_args(11), 'arrival', 1, 0, 'queued')
return {0, 1}
`)
	// KEYS: key hash, event, stream, age. ARGV: entry id, eid, tok,
	// consumer, delivery count the lease was handed out with (1 for a
	// read; each takeover raises it, so a takeover by the same consumer is
	// told apart), order prefix, key.
	// Reply: {0} leftover (dropped); {2} not the owner (nothing changed:
	// another consumer, or a later takeover, holds the entry; or nobody
	// does while the key still names it); {3} parked behind an earlier
	// event of its order value (the entry dropped, nothing counted; the
	// settle that makes it the head hands it back);
	// {1, qa, qt, payload, first, fp, 1 when stale}. The owner check and the renewal
	// (XCLAIM to the same consumer, JUSTID: idle back to 0, delivery count
	// unchanged) make the lease run from the begin, not from the read: a
	// consumer that stalled past lock_ttl before beginning cannot begin
	// beside the instance that took the entry over. When the group is
	// gone (Redis lost the stream), the key's token alone decides, as in
	// settle.
	beginScript = ledger.Script(`
local p = redis.pcall('XPENDING', KEYS[3], 'clawgate', ARGV[1], ARGV[1], 1)
local group, owned = true, false
if type(p) == 'table' and p.err then
  if not string.find(p.err, 'NOGROUP', 1, true) then
    return redis.error_reply(p.err)
  end
  group, owned = false, true
elseif #p == 1 then
  if p[1][2] ~= ARGV[4] or p[1][4] ~= tonumber(ARGV[5]) then
    return {2}
  end
  owned = true
end
local how, h = key_can_begin(KEYS[1], ARGV[2], ARGV[3], ARGV[1])
local ev = redis.call('HMGET', KEYS[2], 'req', 'first')
if how ~= 'live' or not ev[1] then
  if group then
    redis.call('XACK', KEYS[3], 'clawgate', ARGV[1])
  end
  redis.call('XDEL', KEYS[3], ARGV[1])
  return {0}
end
if not owned then
  return {2}
end
local gate = ARGV[6] and ord_gate(KEYS[1], ARGV[6], ARGV[7], ARGV[1], {h[9], h[10], h[11]}, true)
if gate == 'park' then
  if group then
    redis.call('XACK', KEYS[3], 'clawgate', ARGV[1])
  end
  redis.call('XDEL', KEYS[3], ARGV[1])
  return {3}
end
if group then
  redis.call('XCLAIM', KEYS[3], 'clawgate', ARGV[4], 0, ARGV[1], 'JUSTID')
end
local qa, qt = key_begin(KEYS[1], KEYS[4], h, how, ARGV[2], ARGV[3], ARGV[1])
-- The begun entry under its former name too: an instance of the release
-- before, running beside this one during a rolling upgrade, reads "ent"
-- when it requeues after Redis lost the stream, and must leave a begun
-- entry alone. Drop it once no such release runs.
redis.call('HSET', KEYS[1], 'ent', ARGV[1])
if gate == 'stale' then
  hist_add(KEYS[1], hist_args(8), 'skip', qt, 0, 'stale')
else
  hist_add(KEYS[1], hist_args(8), 'try', qt, 0, '')
end
return {1, qa, qt, ev[1], ev[2], h[5] or '', gate == 'stale' and 1 or 0}
`)
	// KEYS: key hash, event, stream, retry, age, dlq, dlq bytes.
	// ARGV: entry id, consumer, eid, tok, kind, now ms, key, then
	//   done:  record, retention ms
	//   retry: new tok, due ms
	//   dead:  reason, status, error
	// padded to 10, then the order prefix, the key hashes' prefix, a token
	// for an event handed back, 1 for on_dead: hold, and the retention ms
	// ("" none) an ordered value keeps its stale value for when a dead
	// letter empties its line.
	// Reply: 1 recorded, 0 not the owner (nothing changed), -1 leftover
	// (entry dropped, nothing recorded). When the group is gone (Redis lost
	// the stream), the key's token alone decides. The head of an order
	// value that settles hands the next event back when it was parked.
	settleScript = ledger.Script(handBackLua + `
local p = redis.pcall('XPENDING', KEYS[3], 'clawgate', ARGV[1], ARGV[1], 1)
if type(p) == 'table' and p.err then
  if not string.find(p.err, 'NOGROUP', 1, true) then
    return redis.error_reply(p.err)
  end
  -- Redis lost the stream and its group: ownership cannot be asked, the
  -- token alone fences (a requeue after the loss mints a new one).
else
  if #p == 0 or p[1][2] ~= ARGV[2] then
    return 0
  end
  redis.call('XACK', KEYS[3], 'clawgate', ARGV[1])
end
redis.call('XDEL', KEYS[3], ARGV[1])
local eid = ARGV[3]
local c, of = key_try(KEYS[1], eid, ARGV[4])
if c then
  return c
end
local H = hist_args(16)
if ARGV[5] == 'done' then
  key_finish(KEYS[1], KEYS[5], eid, ARGV[8], ARGV[9])
  hist_add(KEYS[1], H, 'settle', redis.call('HGET', KEYS[1], 'qt'), 0, 'delivered')
  redis.call('DEL', KEYS[2])
  if ARGV[11] then
    hand_back(ARGV[11], ARGV[12], KEYS[3], ord_done(KEYS[1], ARGV[11], ARGV[7], true, ARGV[9], of, true), ARGV[13])
  end
elseif ARGV[5] == 'retry' then
  key_retry(KEYS[1], ARGV[8])
  redis.call('ZADD', KEYS[4], ARGV[9], eid .. '|' .. ARGV[8] .. '|' .. ARGV[7])
  hist_add(KEYS[1], H, 'retry', redis.call('HGET', KEYS[1], 'qt'), 0, 'retry')
else
  local id = redis.call('XADD', KEYS[6], '*', 'e', eid)
  key_dead(KEYS[1], KEYS[5], eid, id, ARGV[8], ARGV[9], ARGV[10], ARGV[6])
  hist_add(KEYS[1], H, 'dead', redis.call('HGET', KEYS[1], 'qt'), tonumber(ARGV[9]), ARGV[8])
  -- the event's DLQ entry, on the event too: earlier releases, running
  -- beside this one in a rolling upgrade, replay, purge and reset by it
  redis.call('HSET', KEYS[2], 'dlq', id)
  redis.call('INCRBY', KEYS[7], redis.call('HSTRLEN', KEYS[2], 'req'))
  if ARGV[11] and ARGV[14] ~= '1' then
    hand_back(ARGV[11], ARGV[12], KEYS[3], ord_done(KEYS[1], ARGV[11], ARGV[7], false, ARGV[15] ~= '' and ARGV[15] or nil, of, true), ARGV[13])
  end
end
return 1
`)
	// KEYS: retry, stream. ARGV: now ms, limit. Reply: entries promoted.
	promoteScript = redis.NewScript(`
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  local a = string.find(m, '|', 1, true)
  local b = a and string.find(m, '|', a + 1, true)
  if b then
    redis.call('XADD', KEYS[2], '*', 'e', string.sub(m, 1, a - 1), 't', string.sub(m, a + 1, b - 1), 'k', string.sub(m, b + 1))
  end
  redis.call('ZREM', KEYS[1], m)
end
return #due
`)
	// KEYS: key hash, event, stream, dlq, age, dlq bytes. ARGV: eid, new
	// tok, key, order prefix. Reply: 1 replayed, 0 not in the DLQ (or
	// purged: no body). An ordered event dead-lettered with on_dead: hold
	// keeps its place; else it goes to the back of its value.
	// The DLQ entry is the event's dlq (written by every release; an
	// earlier one may have dead-lettered the event again after replaying
	// it, leaving the key's stale), and the details an earlier release
	// kept on the event are removed there.
	replayScript = ledger.Script(`
local d = key_dead_at(KEYS[1], ARGV[1])
local e = redis.call('HMGET', KEYS[2], 'dlq', 'req')
local pos = d and (e[1] or d[1])
if not pos or not e[2] then
  return 0
end
redis.call('XDEL', KEYS[4], pos)
if redis.call('DECRBY', KEYS[6], #e[2]) < 0 then
  redis.call('SET', KEYS[6], 0)
end
redis.call('HDEL', KEYS[2], 'dlq', 'reason', 'status', 'err', 'died', 'attempts')
key_replay(KEYS[1], KEYS[5], ARGV[1], ARGV[2], d[2])
if ARGV[4] then
  ord_assign(KEYS[1], ARGV[4], ARGV[3])
end
redis.call('XADD', KEYS[3], '*', 'e', ARGV[1], 't', ARGV[2], 'k', ARGV[3])
hist_add(KEYS[1], hist_args(5), 'replay', redis.call('HGET', KEYS[1], 'qt'), 0, 'replayed')
return 1
`)
	// KEYS: key hash, event, dlq, dlq bytes, stream. ARGV: eid,
	// retention ms, order prefix, key hashes' prefix, key, a token for an
	// event handed back. Reply: 1 purged, 0 not in the DLQ. An ordered
	// event held at its value's head (on_dead: hold) lets the next go.
	purgeScript = ledger.Script(handBackLua + `
local d = key_dead_at(KEYS[1], ARGV[1])
local pos = d and (redis.call('HGET', KEYS[2], 'dlq') or d[1])
if not pos then
  return 0
end
redis.call('XDEL', KEYS[3], pos)
if redis.call('DECRBY', KEYS[4], redis.call('HSTRLEN', KEYS[2], 'req')) < 0 then
  redis.call('SET', KEYS[4], 0)
end
redis.call('DEL', KEYS[2])
key_purge(KEYS[1], ARGV[1], ARGV[2])
hist_add(KEYS[1], hist_args(7), 'purge', redis.call('HGET', KEYS[1], 'qt'), 0, 'purged')
if ARGV[3] then
  hand_back(ARGV[3], ARGV[4], KEYS[5], ord_done(KEYS[1], ARGV[3], ARGV[5], false, ARGV[2]), ARGV[6])
end
return 1
`)
	// KEYS: key hash, age, dlq, dlq bytes, stream. ARGV: the event
	// hashes' name without the event id, order prefix, key hashes'
	// prefix, key, a token for an event handed back. Deletes the key and
	// its event (out of the DLQ); leftover entries are dropped by Begin or
	// Settle; an ordered event's value goes on without it.
	// Reply: the key hash as it was (HGETALL).
	deleteScript = ledger.Script(handBackLua + `
if ARGV[2] then
  hand_back(ARGV[2], ARGV[3], KEYS[5], ord_done(KEYS[1], ARGV[2], ARGV[4], false, nil), ARGV[5])
end
local old = redis.call('HMGET', KEYS[1], 'h', 'qt')
local h, eid, dead, pos = key_delete(KEYS[1], KEYS[2])
if old[1] then
  hist_kept(KEYS[1], hist_args(6), old[1], 'delete', old[2] or 0, 'deleted')
end
if eid then
  local ev = ARGV[1] .. eid
  if dead then
    pos = redis.call('HGET', ev, 'dlq') or pos
  end
  if pos then
    redis.call('XDEL', KEYS[3], pos)
    if redis.call('DECRBY', KEYS[4], redis.call('HSTRLEN', ev, 'req')) < 0 then
      redis.call('SET', KEYS[4], 0)
    end
  end
  redis.call('DEL', ev)
end
return h
`)
	// KEYS: dlq (the shard's slot). ARGV: the event hashes' and the key
	// hashes' names without the id, then event ids. Reply per event: {key,
	// reason, status, attempts, err, first, died} ('' when unknown).
	// Events dead-lettered by an earlier release keep the details on the
	// event hash (this release never writes a reason there): those win.
	dlqEntriesScript = ledger.Script(`
local out = {}
for i = 3, #ARGV do
  local eid = ARGV[i]
  local ev = redis.call('HMGET', ARGV[1] .. eid, 'key', 'reason', 'status', 'attempts', 'err', 'first', 'died')
  local e = ev[1] and key_dead_entry(ARGV[2] .. ev[1], eid)
  if ev[2] or not e then
    e = {ev[2] or '', ev[3] or '', ev[4] or '', ev[5] or '', ev[6] or '', ev[7] or ''}
  end
  out[#out + 1] = {ev[1] or '', e[1], e[2], e[3], e[4], e[5], e[6]}
end
return out
`)
	// KEYS: dlq (the shard's slot). ARGV: the event hashes' and the key
	// hashes' names without the id, then the event id. Reply: {0} when
	// the event is not in the DLQ (as Replay finds it), else {1, key,
	// reason, status, attempts, err, first, died, payload}, the details
	// as dlqEntriesScript reads them.
	deadScript = ledger.Script(`
local eid = ARGV[3]
local ev = redis.call('HMGET', ARGV[1] .. eid, 'key', 'reason', 'status', 'attempts', 'err', 'first', 'died', 'dlq', 'req')
if not ev[1] or not ev[9] then
  return {0}
end
local k = ARGV[2] .. ev[1]
local d = key_dead_at(k, eid)
if not d or not (ev[8] or d[1]) then
  return {0}
end
local e = key_dead_entry(k, eid)
if ev[2] or not e then
  e = {ev[2] or '', ev[3] or '', ev[4] or '', ev[5] or '', ev[6] or '', ev[7] or ''}
end
return {1, ev[1], e[1], e[2], e[3], e[4], e[5], e[6], ev[9]}
`)
	// KEYS: stream. ARGV: min idle ms, consumer, count. Takes over the
	// entries idle for at least min idle. Reply: {id, fields, delivery
	// count} per entry (deleted entries left out).
	reclaimScript = redis.NewScript(`
local r = redis.call('XAUTOCLAIM', KEYS[1], 'clawgate', ARGV[2], ARGV[1], '0-0', 'COUNT', ARGV[3])
local out = {}
for _, e in ipairs(r[2]) do
  if e and e[2] then
    local p = redis.call('XPENDING', KEYS[1], 'clawgate', e[1], e[1], 1)
    if #p == 1 then
      out[#out + 1] = {e[1], e[2], p[1][4]}
    end
  end
end
return out
`)
	// KEYS: stream. ARGV: entry id, consumer, idle ms. Marks the entry
	// idle so the next XAUTOCLAIM takes it, only while consumer owns it.
	handBackScript = redis.NewScript(`
local p = redis.call('XPENDING', KEYS[1], 'clawgate', ARGV[1], ARGV[1], 1)
if #p == 1 and p[1][2] == ARGV[2] then
  redis.call('XCLAIM', KEYS[1], 'clawgate', ARGV[2], 0, ARGV[1], 'IDLE', ARGV[3], 'JUSTID')
  return 1
end
return 0
`)
	// KEYS: key hash, retry, stream. ARGV: eid, new tok, key.
	// Puts a queued event back (after Redis lost the stream) unless it
	// still has a live entry: one waiting in the retry set, or one a
	// consumer has begun (the key's pos, set by Begin) that is still in
	// the stream with the key's token. A begun entry must be left alone:
	// a new token would make its owner's Settle stale and the requeued
	// copy would be delivered a second time. A ready entry that nobody
	// began yet may be superseded: its old token makes it a leftover.
	// Reply: 1 requeued, 0 not queued or still live.
	requeueScript = ledger.Script(`
local tok, pos = key_queued(KEYS[1], ARGV[1])
if not tok then
  return 0
end
if redis.call('ZSCORE', KEYS[2], ARGV[1] .. '|' .. tok .. '|' .. ARGV[3]) then
  return 0
end
if pos then
  local e = redis.call('XRANGE', KEYS[3], pos, pos)
  if #e == 1 then
    local f = e[1][2]
    for i = 1, #f, 2 do
      if f[i] == 't' and f[i + 1] == tok then
        return 0
      end
    end
  end
end
key_retry(KEYS[1], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'e', ARGV[1], 't', ARGV[2], 'k', ARGV[3])
return 1
`)
)

// Enqueue implements Backend.
func (r *Redis) Enqueue(ctx context.Context, e Entry, maxDepth int) (Ack, error) {
	shards := r.Shards(e.Route)
	shard := r.shardOf(e.Route, e.Key)
	if e.Order != "" {
		// Every event of an order value in one shard: the value's line
		// and its keys in one slot (see ordered).
		shard = r.shardOf(e.Route, e.Order)
	}
	eid := newEventID(shard)
	perShard := (maxDepth + shards - 1) / shards
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	keys := []string{r.keyHash(e.Route, shard, e.Key), r.event(e.Route, shard, eid), r.stream(e.Route, shard), r.ageSet(e.Route, shard)}
	if r.syncKeys != nil && (r.syncOpen == nil || r.syncOpen()) {
		lock, done, attempts := r.syncKeys(e.Route, e.Key)
		keys = append(keys, lock, done, attempts)
	}
	args := append([]any{eid, newToken(), e.Fingerprint, e.FirstSeen.UnixMilli(), e.Payload, perShard, e.Key,
		e.Order, e.Stale, r.orderPrefix(e.Route, shard)}, r.hargs(ctx, 0)...)
	res, err := r.runDurable(ctx, enqueueScript, keys, args...).Slice()
	if err != nil {
		return Ack{}, fail("enqueue", err)
	}
	if known, ok, err := ledger.ReadSeen("enqueue", e.Key, res); ok || err != nil {
		return Ack{State: known.State, ID: known.ID, Fingerprint: known.Fingerprint, Dead: known.Dead, Outcome: known.Outcome, Copies: known.Copies}, err
	}
	switch code, _ := elem[int64](res, 0); {
	case code == 0 && len(res) == 2:
		return Ack{State: Enqueued, ID: eid, Fingerprint: e.Fingerprint, Copies: 1}, nil
	case code == 3 && len(res) == 1:
		return Ack{State: Full}, nil
	case code == 4 && len(res) == 1:
		return Ack{State: InFlight}, nil
	}
	return Ack{}, corrupt("enqueue", res)
}

// elem returns res[i] as a T, ok false when absent or of another type.
func elem[T any](res []any, i int) (T, bool) {
	var zero T
	if i >= len(res) {
		return zero, false
	}
	v, ok := res[i].(T)
	return v, ok
}

// Read implements Backend. A missing group (Redis lost the stream: a
// restart without persistence, or someone deleted it) is created again
// and what the route's key records say is still queued is put back; the
// returned error says so, for the log.
func (r *Redis) Read(ctx context.Context, route string, shard int, consumer string, n int, block time.Duration) ([]Lease, error) {
	rctx, cancel := context.WithTimeout(ctx, block+r.timeout)
	defer cancel()
	q := r.stream(route, shard)
	streams, err := r.client.XReadGroup(rctx, &redis.XReadGroupArgs{
		Group: Group, Consumer: consumer, Streams: []string{q, ">"}, Count: int64(n), Block: block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		if strings.Contains(err.Error(), "NOGROUP") {
			return nil, r.recover(ctx, route, shard)
		}
		return nil, fail("read", err)
	}
	var out []Lease
	for _, s := range streams {
		out = append(out, r.leases(route, shard, consumer, s.Messages)...)
	}
	return out, nil
}

// ErrGroupLost: a ready stream or its consumer group was missing and has
// been created again; events that were in it are requeued from their key
// records.
var ErrGroupLost = errors.New("queue: the ready stream's consumer group was missing (Redis lost data or the stream was deleted); created it again and requeued the route's queued events")

// recover creates shard's group again and requeues every queued event
// without a live entry (see requeueScript): not waiting to retry, not
// begun by a consumer from an entry still in the stream. Ready entries
// that survived are dropped as leftovers when read, since requeueing
// mints new tokens. After a restart without persistence the stream holds
// only the events that arrived since, each with its entry: they are read
// from the recreated group and none is requeued.
//
// The pass covers the events queued when it began (the age set up to its
// newest score then), in pages by score: an event enqueued later has its
// entry in the recreated stream already, and a pass that followed the
// arrivals would never end while they came faster than it went (no read
// of the shard meanwhile: the queue stalled). Paging by score rather
// than rank also keeps deliveries, which remove events from the set
// meanwhile, from making it skip any.
func (r *Redis) recover(ctx context.Context, route string, shard int) error {
	cctx, cancel := r.ctx(ctx)
	err := r.createGroup(cctx, route, shard)
	cancel()
	if err != nil {
		return err
	}
	requeued, err := r.requeueQueued(ctx, route, shard)
	if err != nil {
		return fail("recover", err)
	}
	return fmt.Errorf("%w (route %s, shard %d, %d requeued)", ErrGroupLost, route, shard, requeued)
}

// requeueQueued is recover's pass over the events queued when it began:
// each is requeued unless it has a live entry; it returns how many were.
func (r *Redis) requeueQueued(ctx context.Context, route string, shard int) (int, error) {
	age := r.ageSet(route, shard)
	cctx, cancel := r.ctx(ctx)
	newest, err := r.client.ZRangeWithScores(cctx, age, -1, -1).Result()
	cancel()
	if err != nil || len(newest) == 0 {
		return 0, err
	}
	hi := strconv.FormatFloat(newest[0].Score, 'f', -1, 64)
	lo, atLo := "-inf", map[string]bool{} // the page's lowest score, and the events seen at it
	requeued := 0
	for {
		cctx, cancel := r.ctx(ctx)
		page, err := r.client.ZRangeByScoreWithScores(cctx, age, &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(recoverPage + len(atLo))}).Result()
		cancel()
		if err != nil {
			return requeued, err
		}
		for _, z := range page {
			eid, _ := z.Member.(string)
			if atLo[eid] {
				continue
			}
			n, err := r.requeue(ctx, route, shard, eid)
			if err != nil {
				return requeued, err
			}
			requeued += n
		}
		if recoverPageHook != nil {
			recoverPageHook()
		}
		// A page short of its count is the last (a full one holds at
		// least recoverPage events not seen before).
		if len(page) < recoverPage+len(atLo) {
			return requeued, nil
		}
		// The next page starts at this one's highest score, inclusive
		// (many events can share a millisecond): the ones seen at it
		// are skipped.
		last := page[len(page)-1].Score
		if next := strconv.FormatFloat(last, 'f', -1, 64); next != lo {
			lo, atLo = next, map[string]bool{}
		}
		for _, z := range page {
			if z.Score == last {
				eid, _ := z.Member.(string)
				atLo[eid] = true
			}
		}
	}
}

// recoverPage is how many events a recovery reads from the age set at a
// time; recoverPageHook, when set (tests), runs after each page.
var (
	recoverPage     = 500
	recoverPageHook func()
)

// requeue puts event eid back when it has no live entry (requeueScript):
// 1 requeued, 0 not (gone meanwhile, or still live).
func (r *Redis) requeue(ctx context.Context, route string, shard int, eid string) (int, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	key, err := r.client.HGet(ctx, r.event(route, shard, eid), "key").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	keys := []string{r.keyHash(route, shard, key), r.retrySet(route, shard), r.stream(route, shard)}
	n, err := r.run(ctx, requeueScript, keys, eid, newToken(), key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return int(n), err
}

func (r *Redis) leases(route string, shard int, consumer string, msgs []redis.XMessage) []Lease {
	out := make([]Lease, 0, len(msgs))
	for _, m := range msgs {
		l := Lease{Route: route, Shard: shard, Entry: m.ID, Consumer: consumer, claim: 1} // a new entry's first delivery
		l.EventID, _ = m.Values["e"].(string)
		l.Token, _ = m.Values["t"].(string)
		l.Key, _ = m.Values["k"].(string)
		out = append(out, l) // a malformed entry fails Begin's fence and is dropped
	}
	return out
}

// Begin implements Backend.
func (r *Redis) Begin(ctx context.Context, l Lease) (Job, bool, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	keys := []string{r.keyHash(l.Route, l.Shard, l.Key), r.event(l.Route, l.Shard, l.EventID), r.stream(l.Route, l.Shard), r.ageSet(l.Route, l.Shard)}
	args := append([]any{l.Entry, l.EventID, l.Token, l.Consumer, l.claim, r.orderPrefix(l.Route, l.Shard), l.Key}, r.hargs(ctx, 0)...)
	res, err := r.run(ctx, beginScript, keys, args...).Slice()
	if err != nil {
		return Job{}, false, fail("begin", err)
	}
	switch code, _ := elem[int64](res, 0); code {
	case 0:
		return Job{}, false, nil
	case 2:
		return Job{}, false, notOwner(l)
	case 3:
		return Job{}, false, nil // parked
	}
	qa, ok1 := elem[int64](res, 1)
	qt, ok2 := elem[int64](res, 2)
	req, ok3 := elem[string](res, 3)
	first, ok4 := elem[string](res, 4)
	fp, _ := elem[string](res, 5)
	stale, _ := elem[int64](res, 6)
	ms, err := strconv.ParseInt(first, 10, 64)
	if !ok1 || !ok2 || !ok3 || !ok4 || err != nil {
		return Job{}, false, corrupt("begin", res)
	}
	return Job{Lease: l, Payload: []byte(req), FirstSeen: time.UnixMilli(ms), Fingerprint: fp, Try: qa, Total: qt, Stale: stale == 1}, true, nil
}

// Settle implements Backend.
func (r *Redis) Settle(ctx context.Context, consumer string, j Job, s Settlement) (Settled, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	l := j.Lease
	keys := []string{r.keyHash(l.Route, l.Shard, l.Key), r.event(l.Route, l.Shard, l.EventID), r.stream(l.Route, l.Shard),
		r.retrySet(l.Route, l.Shard), r.ageSet(l.Route, l.Shard), r.dlq(l.Route, l.Shard), r.dlqBytes(l.Route, l.Shard)}
	args := []any{l.Entry, consumer, l.EventID, l.Token, "", s.At.UnixMilli(), l.Key}
	switch s.Kind {
	case SettleDelivered:
		rec, err := store.EncodeOutcome(s.Outcome)
		if err != nil {
			return 0, fmt.Errorf("queue: settle: %w", err)
		}
		args[4] = "done"
		args = append(args, rec, max(1, s.Retention.Milliseconds()))
	case SettleRetry:
		args[4] = "retry"
		args = append(args, newToken(), s.Due.UnixMilli())
	default:
		args[4] = "dead"
		args = append(args, s.Reason, s.Status, s.Error)
	}
	for len(args) < 10 {
		args = append(args, "")
	}
	hold, keep := s.OrderArgs()
	args = append(args, r.orderPrefix(l.Route, l.Shard), r.keyPrefix(l.Route, l.Shard), newToken(), hold, keep)
	status := 0
	if s.Kind == SettleDelivered {
		status = s.Outcome.Status
	}
	args = append(args, r.hargs(ctx, status)...)
	n, err := r.runDurable(ctx, settleScript, keys, args...).Int64()
	if err != nil {
		return 0, fail("settle", err)
	}
	switch n {
	case 1:
		return Recorded, nil
	case 0:
		return NotOwner, nil
	}
	return Stale, nil
}

// Promote implements Backend.
func (r *Redis) Promote(ctx context.Context, route string, shard int, now time.Time) (int, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	n, err := r.run(ctx, promoteScript, []string{r.retrySet(route, shard), r.stream(route, shard)}, now.UnixMilli(), 100).Int64()
	if err != nil {
		return 0, fail("promote", err)
	}
	return int(n), nil
}

// Reclaim implements Backend with XAUTOCLAIM, which moves ownership
// atomically: the former owner's Begin and Settle then find it is not the
// owner. Each lease carries the entry's delivery count, which every
// takeover raises, so that Begin also refuses a stale lease of the same
// consumer (an instance that took over its own stalled entry).
func (r *Redis) Reclaim(ctx context.Context, route string, shard int, consumer string, idle time.Duration) ([]Lease, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	res, err := r.run(ctx, reclaimScript, []string{r.stream(route, shard)}, max(0, idle.Milliseconds()), consumer, 100).Slice()
	if err != nil {
		if strings.Contains(err.Error(), "NOGROUP") {
			return nil, nil // Read recreates the group
		}
		return nil, fail("reclaim", err)
	}
	out := make([]Lease, 0, len(res))
	for _, x := range res {
		e, _ := x.([]any)
		id, ok1 := elem[string](e, 0)
		fields, ok2 := elem[[]any](e, 1)
		n, ok3 := elem[int64](e, 2)
		if !ok1 || !ok2 || !ok3 {
			return out, corrupt("reclaim", res)
		}
		l := Lease{Route: route, Shard: shard, Entry: id, Consumer: consumer, claim: uint64(n)}
		for i := 0; i+1 < len(fields); i += 2 {
			k, _ := fields[i].(string)
			v, _ := fields[i+1].(string)
			switch k {
			case "e":
				l.EventID = v
			case "t":
				l.Token = v
			case "k":
				l.Key = v
			}
		}
		out = append(out, l) // a malformed entry fails Begin's fence and is dropped
	}
	return out, nil
}

// HandBack implements Backend: each lease still owned by consumer is
// marked idle for idle, so the next XAUTOCLAIM of any instance takes it;
// one another consumer took over meanwhile is left with it.
func (r *Redis) HandBack(ctx context.Context, consumer string, leases []Lease, idle time.Duration) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var errs []error
	for _, l := range leases {
		err := r.run(ctx, handBackScript, []string{r.stream(l.Route, l.Shard)}, l.Entry, consumer, idle.Milliseconds()).Err()
		if err != nil {
			errs = append(errs, fail("hand back", err))
		}
	}
	return errors.Join(errs...)
}

// Stats implements Backend.
func (r *Redis) Stats(ctx context.Context, route string) (Stats, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	shards := r.Shards(route)
	pipe := r.client.Pipeline()
	depth := make([]*redis.IntCmd, shards)
	dlq := make([]*redis.IntCmd, shards)
	oldest := make([]*redis.ZSliceCmd, shards)
	dlqBytes := make([]*redis.StringCmd, shards)
	waiting := make([]*redis.StringCmd, shards)
	for s := range shards {
		waiting[s] = pipe.Get(ctx, r.orderPrefix(route, s)+"w")
		depth[s] = pipe.ZCard(ctx, r.ageSet(route, s))
		dlq[s] = pipe.XLen(ctx, r.dlq(route, s))
		dlqBytes[s] = pipe.Get(ctx, r.dlqBytes(route, s))
		oldest[s] = pipe.ZRangeWithScores(ctx, r.ageSet(route, s), 0, 0)
	}
	_, _ = pipe.Exec(ctx) // each command's error is checked below
	var st Stats
	for s := range shards {
		for _, err := range []error{depth[s].Err(), dlq[s].Err(), oldest[s].Err(), dlqBytes[s].Err(), waiting[s].Err()} {
			if err != nil && !errors.Is(err, redis.Nil) {
				return Stats{}, fail("stats", err)
			}
		}
		st.Depth += depth[s].Val()
		st.DLQ += dlq[s].Val()
		if n, err := dlqBytes[s].Int64(); err == nil && n > 0 {
			st.DLQBytes += n
		}
		if n, err := waiting[s].Int64(); err == nil && n > 0 {
			st.Waiting += n
		}
		if z := oldest[s].Val(); len(z) == 1 {
			t := time.UnixMilli(int64(z[0].Score))
			if st.Oldest.IsZero() || t.Before(st.Oldest) {
				st.Oldest = t
			}
		}
	}
	return st, nil
}

// ListDLQ implements Backend. The cursor is the DLQ stream id of the last
// entry listed; shards are merged in id (time) order.
func (r *Redis) ListDLQ(ctx context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	limit = max(limit, 1)
	shards := r.Shards(route)
	// The cursor is "ID/SHARD" of the last entry listed: two shards' DLQ
	// streams can hold the same id (their clocks tick alike), so entries
	// are ordered by (id, shard), and a shard after the cursor's starts at
	// the id itself.
	var afterID string
	afterShard := shards - 1
	if cursor != "" {
		id, sh, found := strings.Cut(cursor, "/")
		n, err := strconv.Atoi(sh)
		if _, _, ok := parseStreamID(id); !ok || found && (err != nil || n < 0 || n >= shards) {
			return nil, "", fmt.Errorf("%w: cursor %q", ErrBadCursor, clip(cursor))
		}
		afterID = id
		if found {
			afterShard = n
		}
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	type item struct {
		shard int
		msg   redis.XMessage
	}
	var all []item
	for s := range shards {
		start := "-"
		switch {
		case afterID == "":
		case s <= afterShard:
			start = "(" + afterID
		default:
			start = afterID
		}
		msgs, err := r.client.XRangeN(ctx, r.dlq(route, s), start, "+", int64(limit+1)).Result()
		if err != nil {
			return nil, "", fail("list dlq", err)
		}
		for _, m := range msgs {
			all = append(all, item{s, m})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.msg.ID == b.msg.ID {
			return a.shard < b.shard
		}
		return streamIDLess(a.msg.ID, b.msg.ID)
	})
	next := ""
	if len(all) > limit {
		all = all[:limit]
		next = all[limit-1].msg.ID + "/" + strconv.Itoa(all[limit-1].shard)
	}
	// One script a shard reads its events' details.
	eids := map[int][]any{}
	for _, it := range all {
		eid, _ := it.msg.Values["e"].(string)
		if eids[it.shard] == nil {
			eids[it.shard] = []any{r.event(route, it.shard, ""), r.keyHash(route, it.shard, "")}
		}
		eids[it.shard] = append(eids[it.shard], eid)
	}
	details := map[int][]any{}
	for s, args := range eids {
		res, err := r.run(ctx, dlqEntriesScript, []string{r.dlq(route, s)}, args...).Slice()
		if err != nil {
			return nil, "", fail("list dlq", err)
		}
		if len(res) != len(args)-2 {
			return nil, "", corrupt("list dlq", res)
		}
		details[s] = res
	}
	out := make([]DeadEntry, 0, len(all))
	for _, it := range all {
		res := details[it.shard]
		f, _ := res[0].([]any)
		details[it.shard] = res[1:]
		var v [7]string
		for i := range v {
			v[i], _ = elem[string](f, i)
		}
		e := DeadEntry{Key: v[0], Reason: v[1], Error: v[4]}
		e.ID, _ = it.msg.Values["e"].(string)
		e.Status, _ = strconv.Atoi(v[2])
		e.Attempts, _ = strconv.ParseInt(v[3], 10, 64)
		e.FirstSeen = millis(v[5])
		e.DiedAt = millis(v[6])
		out = append(out, e)
	}
	return out, next, nil
}

func millis(s string) time.Time {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func parseStreamID(id string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

func streamIDLess(a, b string) bool {
	am, as, _ := parseStreamID(a)
	bm, bs, _ := parseStreamID(b)
	return am < bm || am == bm && as < bs
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// locate finds a DLQ event's shard and key.
func (r *Redis) locate(ctx context.Context, route, id string) (int, string, error) {
	shard, ok := shardOfID(id, r.Shards(route))
	if !ok {
		return 0, "", ErrNotFound
	}
	key, err := r.client.HGet(ctx, r.event(route, shard, id), "key").Result()
	if errors.Is(err, redis.Nil) {
		return 0, "", ErrNotFound
	}
	if err != nil {
		return 0, "", fail("locate", err)
	}
	return shard, key, nil
}

// Dead implements Backend.
func (r *Redis) Dead(ctx context.Context, route, id string) (DeadEntry, []byte, error) {
	shard, ok := shardOfID(id, r.Shards(route))
	if !ok {
		return DeadEntry{}, nil, ErrNotFound
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	res, err := r.run(ctx, deadScript, []string{r.dlq(route, shard)}, r.event(route, shard, ""), r.keyHash(route, shard, ""), id).Slice()
	if err != nil {
		return DeadEntry{}, nil, fail("dead", err)
	}
	code, ok := elem[int64](res, 0)
	if ok && code == 0 && len(res) == 1 {
		return DeadEntry{}, nil, ErrNotFound
	}
	var v [8]string
	for i := range v {
		s, ok2 := elem[string](res, i+1)
		ok = ok && ok2
		v[i] = s
	}
	if !ok || code != 1 || len(res) != 9 {
		return DeadEntry{}, nil, corrupt("dead", res)
	}
	e := DeadEntry{ID: id, Key: v[0], Reason: v[1], Error: v[4]}
	e.Status, _ = strconv.Atoi(v[2])
	e.Attempts, _ = strconv.ParseInt(v[3], 10, 64)
	e.FirstSeen = millis(v[5])
	e.DiedAt = millis(v[6])
	return e, []byte(v[7]), nil
}

// Replay implements Backend.
func (r *Redis) Replay(ctx context.Context, route, id string) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	shard, key, err := r.locate(ctx, route, id)
	if err != nil {
		return err
	}
	keys := []string{r.keyHash(route, shard, key), r.event(route, shard, id), r.stream(route, shard), r.dlq(route, shard), r.ageSet(route, shard), r.dlqBytes(route, shard)}
	args := append([]any{id, newToken(), key, r.orderPrefix(route, shard)}, r.hargs(ctx, 0)...)
	n, err := r.runDurable(ctx, replayScript, keys, args...).Int64()
	if err != nil {
		return fail("replay", err)
	}
	if n != 1 {
		return ErrNotFound
	}
	return nil
}

// Purge implements Backend.
func (r *Redis) Purge(ctx context.Context, route, id string, retention time.Duration) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	shard, key, err := r.locate(ctx, route, id)
	if err != nil {
		return err
	}
	keys := []string{r.keyHash(route, shard, key), r.event(route, shard, id), r.dlq(route, shard), r.dlqBytes(route, shard), r.stream(route, shard)}
	args := append([]any{id, max(1, retention.Milliseconds()),
		r.orderPrefix(route, shard), r.keyPrefix(route, shard), key, newToken()}, r.hargs(ctx, 0)...)
	n, err := r.runDurable(ctx, purgeScript, keys, args...).Int64()
	if err != nil {
		return fail("purge", err)
	}
	if n != 1 {
		return ErrNotFound
	}
	return nil
}

// Get implements Backend.
func (r *Redis) Get(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var h map[string]string
	for _, shard := range r.keyShards(route, key) {
		var err error
		h, err = r.client.HGetAll(ctx, r.keyHash(route, shard, key)).Result()
		if err != nil {
			return KeyState{}, fail("get", err)
		}
		if len(h) > 0 {
			break
		}
	}
	return ledger.ReadKeyHash("get", key, h)
}

// Delete implements Backend: the key and its event are deleted, and the
// key reported as it was, in one script.
func (r *Redis) Delete(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	shards := r.keyShards(route, key)
	shard := shards[0]
	for _, s := range shards[1:] {
		// An ordered key lives in its order value's shard.
		n, err := r.client.Exists(ctx, r.keyHash(route, shard, key)).Result()
		if err != nil {
			return KeyState{}, fail("delete", err)
		}
		if n == 1 {
			break
		}
		shard = s
	}
	keys := []string{r.keyHash(route, shard, key), r.ageSet(route, shard), r.dlq(route, shard), r.dlqBytes(route, shard), r.stream(route, shard)}
	args := append([]any{r.event(route, shard, ""),
		r.orderPrefix(route, shard), r.keyPrefix(route, shard), key, newToken()}, r.hargs(ctx, 0)...)
	res, err := r.run(ctx, deleteScript, keys, args...).Slice()
	if err != nil {
		return KeyState{}, fail("delete", err)
	}
	return ledger.ReadKeyReply("delete", key, res)
}

// handBackLua is the Lua function the scripts that may move an order
// value's head start with: hand_back gives head (the key ord_done
// returned, nil: none) a new token and a ready entry, in the same script
// as the settle, purge or delete that made it the head.
const handBackLua = `
local function hand_back(p, kp, stream, head, tok)
  if not head then
    return
  end
  redis.call('ZREM', p .. 'd', head)
  local kh = kp .. head
  local h = redis.call('HMGET', kh, 'st', 'eid')
  if h[1] ~= QUEUED then
    return
  end
  key_retry(kh, tok)
  redis.call('XADD', stream, '*', 'e', h[2], 't', tok, 'k', head)
end
`

// keyShards lists the shards route's key may live in, the one its key
// names first: an ordered event lives in the shard its order value names
// (every event of a value in one slot, with the value's line), which the
// key alone does not tell.
func (r *Redis) keyShards(route, key string) []int {
	first := r.shardOf(route, key)
	out := []int{first}
	for s := range r.Shards(route) {
		if s != first {
			out = append(out, s)
		}
	}
	return out
}

// SetHistory sets the keys' history options; call it before use.
func (r *Redis) SetHistory(o ledger.HistoryOptions) { r.histo = o.Prepared() }

// hargs are the history's script arguments (ledger.HistoryArgs).
func (r *Redis) hargs(ctx context.Context, status int) []any {
	return ledger.HistoryArgs(ctx, r.histo, time.Now(), status)
}

// History returns route's key's history, oldest first, from the shard
// its record lives in.
func (r *Redis) History(ctx context.Context, route, key string) ([]store.HistoryEntry, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var out []store.HistoryEntry
	for _, shard := range r.keyShards(route, key) {
		h, err := r.client.HGet(ctx, r.keyHash(route, shard, key), "h").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fail("history", err)
		}
		if h != "" {
			return ledger.ReadHistory(h), nil
		}
	}
	return out, nil
}
