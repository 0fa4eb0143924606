package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// Redis keeps the ledger in Redis, shared by every instance.
//
// Everything about one route lives in one Cluster slot, tag
// T = {kq:ROUTE}, so that every step is one Lua script:
//
//	PREFIX webhook_kkey:T<key>  the key record, hash (the schema and its
//	                            transitions are lua.go's, shared with the
//	                            Redis Streams queue's webhook_qkey): st
//	                            (enq|queued|dead|done), eid, tok (live
//	                            token), rt (the reserving token), ptok
//	                            (pending token), fp, n (copies), first,
//	                            last (ms), qa (tries this round), qt
//	                            (tries in all), pos and owner (of the
//	                            begun token), rec (encoded outcome, done),
//	                            dlq (DLQ position), reason, status, err,
//	                            died (ms) (dead)
//	PREFIX webhook_kage:T       zset eid -> first seen (ms): every
//	                            undelivered event, for depth and lag
//	PREFIX webhook_kdead:T      hash eid -> key: dead-lettered events not
//	                            purged
//
// An enqueuing key expires after its lease unless confirmed or adopted; a
// finished or purged key expires after its retention; nothing else
// expires, so Redis needs `maxmemory-policy noeviction`. Times come from
// the Go side (Now, or the caller's), not from Redis' clock.
type Redis struct {
	// Now is the clock of last-seen times; nil means time.Now. Set it
	// before use.
	Now func() time.Time

	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	// run sends one script; by default straight to client, or through
	// the store's batcher (UseBatcher).
	run ScriptRunner
	// durable, when set (UseDurable), sends the durableScripts; nil: run.
	durable ScriptRunner
	// sync runs the Sync transitions on the same records (SetSync).
	sync *SyncRedis
	// histo is the keys' history (SetHistory).
	histo HistoryOptions
}

var _ Ledger = (*Redis)(nil)

// NewRedis returns the ledger on client, its keys under prefix;
// every call is bounded by timeout (0: store.DefaultOpTimeout).
func NewRedis(client redis.UniversalClient, prefix string, timeout time.Duration) *Redis {
	if timeout <= 0 {
		timeout = store.DefaultOpTimeout
	}
	l := &Redis{client: client, prefix: prefix, timeout: timeout}
	l.run = func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		return s.Run(ctx, client, keys, args...)
	}
	l.SetSync(SyncOptions{})
	return l
}

// UseBatcher sends the scripts of concurrent calls through run (the
// store's pipelining batcher) instead of one round trip each; every
// script stays one atomic call. Call it before use.
func (l *Redis) UseBatcher(run ScriptRunner) { l.run = run }

// UseDurable sends the scripts whose writes acknowledge an event or
// record an outcome (durableScripts: Confirm, before the 202, Settle,
// Replay, Purge) through run instead: the store's RunDurable, which waits
// for store.redis.wait_replicas replicas after each. Call it before use.
func (l *Redis) UseDurable(run ScriptRunner) { l.durable = run }

// durableScripts are the scripts UseDurable's runner sends.
var durableScripts = map[*redis.Script]bool{
	ledgerConfirmScript: true,
	ledgerSettleScript:  true,
	ledgerReplayScript:  true,
	ledgerPurgeScript:   true,
}

func (l *Redis) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func ledgerTag(route string) string { return "{kq:" + route + "}" }

// keyPrefix is the name of route's key hashes without the key: scripts
// that find a key through the dead index build its name from it (the
// same slot as their declared keys).
func (l *Redis) keyPrefix(route string) string {
	return l.prefix + "webhook_kkey:" + ledgerTag(route)
}
func (l *Redis) keyHash(route, key string) string { return KafkaKey(l.prefix, route, key) }
func (l *Redis) ageSet(route string) string {
	return l.prefix + "webhook_kage:" + ledgerTag(route)
}
func (l *Redis) deadIndex(route string) string {
	return l.prefix + "webhook_kdead:" + ledgerTag(route)
}

func (l *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.timeout)
}

// ledgerFail wraps a Redis error as ErrUnavailable, or
// ErrCorrupt when Redis refused the data it holds (a key of the
// wrong type, a field that is not a number).
func ledgerFail(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		if strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") || strings.Contains(msg, "not a valid float") {
			return fmt.Errorf("kafka ledger: redis %s: %w: %v", op, ErrCorrupt, err)
		}
	}
	return fmt.Errorf("kafka ledger: redis %s: %w: %v", op, ErrUnavailable, err)
}

func ledgerCorrupt(op string, v any) error {
	s := fmt.Sprint(v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Errorf("kafka ledger: redis %s: %w: reply %s", op, ErrCorrupt, s)
}

// ledgerElem returns res[i] as a T, ok false when absent or of another
// type.
func ledgerElem[T any](res []any, i int) (T, bool) {
	var zero T
	if i < 0 || i >= len(res) {
		return zero, false
	}
	v, ok := res[i].(T)
	return v, ok
}

// eval runs one script and returns its reply; a nil reply (no script
// here returns one) is corrupt.
func (l *Redis) eval(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) (any, error) {
	run := l.run
	if l.durable != nil && durableScripts[s] {
		run = l.durable
	}
	v, err := run(ctx, s, keys, args...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, ledgerCorrupt(op, "nil")
	}
	if err != nil {
		return nil, ledgerFail(op, err)
	}
	return v, nil
}

// evalSlice is eval for a script that replies with an array.
func (l *Redis) evalSlice(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) ([]any, error) {
	v, err := l.eval(ctx, op, s, keys, args...)
	if err != nil {
		return nil, err
	}
	res, ok := v.([]any)
	if !ok {
		return nil, ledgerCorrupt(op, v)
	}
	return res, nil
}

var (
	// KEYS: key hash, age. ARGV: eid, tok, fp, first ms, lease ms, max
	// depth, now ms, order value, stale value ("" none).
	// Reply: {0, 1} reserved; key_seen's {1, n, st, eid, fp} or {2, n,
	// rec} known; {3} full.
	// ARGV[10...]: the history's (hist_args).
	ledgerReserveScript = Script(`
local r = key_seen(KEYS[1], ARGV[7])
if r then
  return seen_hist(KEYS[1], r, ARGV[3], hist_args(10))
end
local cap = tonumber(ARGV[6]) or 0
if cap < 0 or cap > 0 and redis.call('ZCARD', KEYS[2]) >= cap then
  return {3}
end
key_reserve(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if (ARGV[8] or '') ~= '' then
  redis.call('HSET', KEYS[1], 'ov', ARGV[8])
  if ARGV[9] ~= '' then
    redis.call('HSET', KEYS[1], 'sv', ARGV[9])
  end
end
hist_add(KEYS[1], hist_args(10), 'arrival', 1, 0, 'queued')
return {0, 1}
`)
	// KEYS: key hash, age. ARGV: tok, order prefix, key. Reply: 1
	// confirmed (or adopted already), 0 gone or replaced. An ordered key
	// takes its sequence here (order.go).
	ledgerConfirmScript = Script(`
local st = redis.call('HGET', KEYS[1], 'st')
local ok = key_confirm(KEYS[1], KEYS[2], ARGV[1])
if ok == 1 and st == ENQ and ARGV[2] then
  ord_assign(KEYS[1], ARGV[2], ARGV[3])
end
return ok
`)
	// KEYS: key hash. ARGV: tok. Reply: 1 removed, 0 left alone.
	ledgerAbortScript = Script(`return key_abort(KEYS[1], ARGV[1])`)
	// KEYS: key hash, age, dead. ARGV: eid, tok, pos, owner, order
	// prefix, key.
	// Reply: {0} leftover; {2} parked (order.go: the key is adopted or
	// revived as the begin would, nothing counted); {1, qa, qt, fp,
	// first, previous owner, 1 when stale}.
	ledgerBeginScript = Script(`
local how, h = key_can_begin(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
if not how then
  return {0}
end
local gate = nil
if ARGV[5] then
  if h[1] == ENQ or h[1] == DEAD then
    ord_assign(KEYS[1], ARGV[5], ARGV[6])
  end
  gate = ord_gate(KEYS[1], ARGV[5], ARGV[6], ARGV[3])
end
if gate == 'park' then
  if h[1] == ENQ then
    redis.call('HSET', KEYS[1], 'st', QUEUED)
    key_undelivered(KEYS[1], KEYS[2], ARGV[1], h[6])
  elseif h[1] == DEAD then
    redis.call('HDEL', KEYS[3], ARGV[1])
    key_replay(KEYS[1], KEYS[2], ARGV[1], ARGV[2], h[6])
  elseif how == 'pending' then
    redis.call('HSET', KEYS[1], 'tok', ARGV[2])
    redis.call('HDEL', KEYS[1], 'ptok')
  end
  return {2}
end
if h[1] == DEAD then
  redis.call('HDEL', KEYS[3], ARGV[1])
end
local qa, qt, prev = key_begin(KEYS[1], KEYS[2], h, how, ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if gate == 'stale' then
  hist_add(KEYS[1], hist_args(7), 'skip', qt, 0, 'stale')
else
  hist_add(KEYS[1], hist_args(7), 'try', qt, 0, '')
end
return {1, qa, qt, h[5] or '', h[6] or '', prev, gate == 'stale' and 1 or 0}
`)
	// KEYS: key hash. ARGV: eid, tok, owner, next.
	// Reply: 1 recorded, 0 not the owner, -1 stale (nothing changed).
	ledgerIntendScript = Script(`return key_intend(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])`)
	// KEYS: key hash, age, dead. ARGV: eid, tok, owner, kind, key, then
	//   done:  rec, retention ms
	//   retry: new tok
	//   dead:  dlq pos, reason, status, error, died ms
	// padded to 10, then the order prefix, 1 for on_dead: hold, and the
	// retention ms ("" none) an ordered value keeps its stale value for
	// when a dead letter empties its line.
	// Reply: 1 recorded, 0 not the owner, -1 stale (nothing changed).
	ledgerSettleScript = Script(`
local adopted = nil
if ARGV[4] == 'retry' then
  adopted = ARGV[6]
end
local c, of = key_try(KEYS[1], ARGV[1], ARGV[2], ARGV[3], adopted)
if c then
  return c
end
local H = hist_args(14)
if ARGV[4] == 'done' then
  key_finish(KEYS[1], KEYS[2], ARGV[1], ARGV[6], ARGV[7])
  if ARGV[11] then
    ord_done(KEYS[1], ARGV[11], ARGV[5], true, ARGV[7], of)
  end
  hist_add(KEYS[1], H, 'settle', redis.call('HGET', KEYS[1], 'qt'), 0, 'delivered')
elseif ARGV[4] == 'retry' then
  key_retry(KEYS[1], ARGV[6])
  hist_add(KEYS[1], H, 'retry', redis.call('HGET', KEYS[1], 'qt'), 0, 'retry')
else
  key_dead(KEYS[1], KEYS[2], ARGV[1], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
  if ARGV[11] and ARGV[12] ~= '1' then
    ord_done(KEYS[1], ARGV[11], ARGV[5], false, ARGV[13] ~= '' and ARGV[13] or nil, of)
  end
  hist_add(KEYS[1], H, 'dead', redis.call('HGET', KEYS[1], 'qt'), tonumber(ARGV[8]), ARGV[7])
end
return 1
`)
	// KEYS: dead. ARGV: eid, key hash prefix, pending token ("": none).
	// Reply: {0} not dead-lettered; {1, key, dlq pos}.
	ledgerDeadScript = Script(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
local d = k and key_dead_at(ARGV[2] .. k, ARGV[1])
if not d then
  return {0}
end
if ARGV[3] ~= '' then
  key_pend(ARGV[2] .. k, ARGV[3])
end
return {1, k, d[1] or ''}
`)
	// KEYS: dead. ARGV: eid, key hash prefix.
	// Reply: {0} not dead-lettered, or {1, key, dlq pos, then
	// key_dead_entry's reason, status, attempts, err, first, died}.
	ledgerDeadEntryScript = Script(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
local d = k and key_dead_at(ARGV[2] .. k, ARGV[1])
local e = d and key_dead_entry(ARGV[2] .. k, ARGV[1])
if not e then
  return {0}
end
return {1, k, d[1] or '', e[1], e[2], e[3], e[4], e[5], e[6]}
`)
	// KEYS: dead, age. ARGV: eid, dlq pos, tok, key hash prefix, order
	// prefix.
	// Reply: 1 replayed, 0 not dead-lettered at that position.
	ledgerReplayScript = Script(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
local d = k and key_dead_at(ARGV[4] .. k, ARGV[1])
if not d or (d[1] or '') ~= ARGV[2] then
  return 0
end
key_replay(ARGV[4] .. k, KEYS[2], ARGV[1], ARGV[3], d[2])
redis.call('HDEL', KEYS[1], ARGV[1])
if ARGV[5] then
  ord_assign(ARGV[4] .. k, ARGV[5], k)
end
hist_add(ARGV[4] .. k, hist_args(6), 'replay', redis.call('HGET', ARGV[4] .. k, 'qt'), 0, 'replayed')
return 1
`)
	// KEYS: dead. ARGV: eid, retention ms, key hash prefix, order prefix.
	// Reply: 1 purged, 0 not dead-lettered.
	ledgerPurgeScript = Script(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
if not k then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
key_purge(ARGV[3] .. k, ARGV[1], ARGV[2])
if ARGV[4] and key_dead_at(ARGV[3] .. k, ARGV[1]) then
  ord_done(ARGV[3] .. k, ARGV[4], k, false, ARGV[2])
end
if key_dead_at(ARGV[3] .. k, ARGV[1]) then
  hist_add(ARGV[3] .. k, hist_args(5), 'purge', redis.call('HGET', ARGV[3] .. k, 'qt'), 0, 'purged')
end
return 1
`)
	// KEYS: dead. ARGV: scan cursor, last eid listed from its batch (""
	// none), limit, key hash prefix.
	// Lists the dead index batch by batch (HSCAN), each batch in eid
	// order, skipping index entries whose key says otherwise.
	// Reply: {next scan cursor ("" done), last eid listed from its batch,
	// then per entry: eid, key, then key_dead_entry's reason, status,
	// attempts, err, first, died}.
	ledgerListDeadScript = Script(`
local limit = tonumber(ARGV[3]) or 1
local cur, after, pre = ARGV[1], ARGV[2], ARGV[4]
local out = {'', ''}
local got = 0
local seen = {}
for round = 1, 64 do
  local r = redis.call('HSCAN', KEYS[1], cur, 'COUNT', 100)
  local f = r[2]
  local items = {}
  for i = 1, #f - 1, 2 do
    if (after == '' or f[i] > after) and not seen[f[i]] then
      items[#items + 1] = {f[i], f[i + 1]}
    end
  end
  table.sort(items, function(a, b) return a[1] < b[1] end)
  local last = ''
  for _, it in ipairs(items) do
    local e = not seen[it[1]] and key_dead_entry(pre .. it[2], it[1])
    if e then
      if got >= limit then
        out[1], out[2] = cur, last
        return out
      end
      seen[it[1]] = true
      out[#out + 1] = it[1]
      out[#out + 1] = it[2]
      for _, v in ipairs(e) do
        out[#out + 1] = v
      end
      got = got + 1
      last = it[1]
    end
  end
  after = ''
  cur = r[1]
  if cur == '0' then
    return out
  end
end
out[1] = cur
return out
`)
	// KEYS: key hash, age, dead. ARGV: key, order prefix.
	// Reply: the key hash as it was (HGETALL), now deleted.
	ledgerDeleteScript = Script(`
if ARGV[2] then
  ord_done(KEYS[1], ARGV[2], ARGV[1], false, nil)
end
local old = redis.call('HMGET', KEYS[1], 'h', 'qt')
local h, eid = key_delete(KEYS[1], KEYS[2])
if eid and redis.call('HGET', KEYS[3], eid) == ARGV[1] then
  redis.call('HDEL', KEYS[3], eid)
end
if old[1] then
  hist_kept(KEYS[1], hist_args(3), old[1], 'delete', old[2] or 0, 'deleted')
end
return h
`)
	// KEYS: age, dead, order waiting count. Reply: {depth, dlq size,
	// oldest first seen ("" none), waiting}.
	ledgerStatsScript = redis.NewScript(`
local o = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local w = KEYS[3] and tonumber(redis.call('GET', KEYS[3]) or '0') or 0
return {redis.call('ZCARD', KEYS[1]), redis.call('HLEN', KEYS[2]), o[2] or '', w}
`)
)

// Reserve implements Ledger.
func (l *Redis) Reserve(ctx context.Context, r Reservation) (Reserved, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(r.Route, r.Key), l.ageSet(r.Route)}
	res, err := l.evalSlice(ctx, "reserve", ledgerReserveScript, keys, l.hargs(ctx, r.EventID, r.Token, r.Fingerprint,
		ledgerMs(r.FirstSeen), ledgerTTL(r.Lease), r.MaxDepth, ledgerMs(l.now()), r.Order, r.Stale)...)
	if err != nil {
		return Reserved{}, err
	}
	if known, ok, err := ReadSeen("reserve", r.Key, res); ok || err != nil {
		return known, err
	}
	code, _ := ledgerElem[int64](res, 0)
	switch {
	case code == 0 && len(res) == 2:
		return Reserved{State: Enqueued, ID: r.EventID, Fingerprint: r.Fingerprint, Copies: 1}, nil
	case code == 3 && len(res) == 1:
		return Reserved{State: Full}, nil
	}
	return Reserved{}, ledgerCorrupt("reserve", res)
}

func clipLedger(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// flag runs a script whose reply is 1 (done) or 0 (refused).
func (l *Redis) flag(ctx context.Context, op string, s *redis.Script, keys []string, args ...any) (bool, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	v, err := l.eval(ctx, op, s, keys, args...)
	if err != nil {
		return false, err
	}
	switch v {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	}
	return false, ledgerCorrupt(op, v)
}

// Confirm implements Ledger.
func (l *Redis) Confirm(ctx context.Context, route, key, tok string) (bool, error) {
	return l.flag(ctx, "confirm", ledgerConfirmScript, []string{l.keyHash(route, key), l.ageSet(route)}, tok, l.orderPrefix(route), key)
}

// Abort implements Ledger.
func (l *Redis) Abort(ctx context.Context, route, key, tok string) error {
	_, err := l.flag(ctx, "abort", ledgerAbortScript, []string{l.keyHash(route, key)}, tok)
	return err
}

// Begin implements Ledger.
func (l *Redis) Begin(ctx context.Context, route, key, eid, tok, pos, owner string) (Begun, bool, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(route, key), l.ageSet(route), l.deadIndex(route)}
	res, err := l.evalSlice(ctx, "begin", ledgerBeginScript, keys, l.hargs(ctx, eid, tok, pos, owner, l.orderPrefix(route), key)...)
	if err != nil {
		return Begun{}, false, err
	}
	code, ok := ledgerElem[int64](res, 0)
	if ok && code == 0 && len(res) == 1 {
		return Begun{}, false, nil
	}
	if ok && code == 2 && len(res) == 1 {
		return Begun{Parked: true}, false, nil
	}
	qa, ok1 := ledgerElem[int64](res, 1)
	qt, ok2 := ledgerElem[int64](res, 2)
	fp, ok3 := ledgerElem[string](res, 3)
	first, ok4 := ledgerElem[string](res, 4)
	ms, perr := strconv.ParseInt(first, 10, 64)
	if !ok || code != 1 || !ok1 || !ok2 || !ok3 || !ok4 || perr != nil {
		return Begun{}, false, ledgerCorrupt("begin", res)
	}
	prev, _ := ledgerElem[string](res, 5)
	stale, _ := ledgerElem[int64](res, 6)
	return Begun{Fingerprint: fp, FirstSeen: ledgerTime(ms), Try: qa, Total: qt, PrevOwner: prev, Stale: stale == 1}, true, nil
}

// Settle implements Ledger.
func (l *Redis) Settle(ctx context.Context, route, key, eid, tok, owner string, s Settlement) (Settled, error) {
	if err := ledgerSettleCheck(s); err != nil {
		return 0, err
	}
	args := []any{eid, tok, owner, "", key}
	switch s.Kind {
	case SettleDelivered:
		rec, err := store.EncodeOutcome(s.Outcome)
		if err != nil {
			return 0, fmt.Errorf("kafka ledger: settle: %w", err)
		}
		args[3] = "done"
		args = append(args, rec, ledgerTTL(s.Retention))
	case SettleRetry:
		args[3] = "retry"
		args = append(args, s.NewToken)
	default:
		args[3] = "dead"
		args = append(args, s.DLQPos, s.Reason, s.Status, s.Error, ledgerMs(s.At))
	}
	for len(args) < 10 {
		args = append(args, "")
	}
	hold, keep := s.OrderArgs()
	args = append(args, l.orderPrefix(route), hold, keep)
	ha := histArgs(ctx, l.histo, l.now())
	if s.Kind == SettleDelivered && l.histo.Cap > 0 {
		ha[5] = s.Outcome.Status // the entry's status
	}
	args = append(args, ha...)
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(route, key), l.ageSet(route), l.deadIndex(route)}
	v, err := l.eval(ctx, "settle", ledgerSettleScript, keys, args...)
	if err != nil {
		return 0, err
	}
	return settled("settle", v)
}

// settled reads a settle or intend script's reply.
func settled(op string, v any) (Settled, error) {
	switch v {
	case int64(1):
		return Recorded, nil
	case int64(0):
		return NotOwner, nil
	case int64(-1):
		return Stale, nil
	}
	return 0, ledgerCorrupt(op, v)
}

// Intend implements Ledger.
func (l *Redis) Intend(ctx context.Context, route, key, eid, tok, owner, next string) (Settled, error) {
	if next == "" {
		return 0, errors.New("kafka ledger: intend: no token")
	}
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	v, err := l.eval(ctx, "intend", ledgerIntendScript, []string{l.keyHash(route, key)}, eid, tok, owner, next)
	if err != nil {
		return 0, err
	}
	return settled("intend", v)
}

// Dead implements Ledger.
func (l *Redis) Dead(ctx context.Context, route, eid, next string) (string, string, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.evalSlice(ctx, "dead", ledgerDeadScript, []string{l.deadIndex(route)}, eid, l.keyPrefix(route), next)
	if err != nil {
		return "", "", err
	}
	code, ok := ledgerElem[int64](res, 0)
	if ok && code == 0 && len(res) == 1 {
		return "", "", ErrNotFound
	}
	key, ok1 := ledgerElem[string](res, 1)
	pos, ok2 := ledgerElem[string](res, 2)
	if !ok || code != 1 || !ok1 || !ok2 {
		return "", "", ledgerCorrupt("dead", res)
	}
	return key, pos, nil
}

// Replay implements Ledger.
func (l *Redis) Replay(ctx context.Context, route, eid, dlqPos, tok string) error {
	ok, err := l.flag(ctx, "replay", ledgerReplayScript, []string{l.deadIndex(route), l.ageSet(route)},
		l.hargs(ctx, eid, dlqPos, tok, l.keyPrefix(route), l.orderPrefix(route))...)
	if err == nil && !ok {
		err = ErrNotFound
	}
	return err
}

// Purge implements Ledger.
func (l *Redis) Purge(ctx context.Context, route, eid string, retention time.Duration) error {
	ok, err := l.flag(ctx, "purge", ledgerPurgeScript, []string{l.deadIndex(route)},
		l.hargs(ctx, eid, ledgerTTL(retention), l.keyPrefix(route), l.orderPrefix(route))...)
	if err == nil && !ok {
		err = ErrNotFound
	}
	return err
}

// ListDead implements Ledger. The cursor is the dead index's HSCAN
// cursor, followed by "/" and the last event id listed when a page ended
// inside one HSCAN batch (each batch is listed in event id order). As
// with HSCAN, an event dead-lettered for the whole listing is listed
// once; one that came or went meanwhile may or may not be.
func (l *Redis) ListDead(ctx context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	limit = max(limit, 1)
	scan, after, err := ledgerParseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.evalSlice(ctx, "list dead", ledgerListDeadScript, []string{l.deadIndex(route)}, scan, after, limit, l.keyPrefix(route))
	if err != nil {
		return nil, "", err
	}
	const fields = 8
	next, ok1 := ledgerElem[string](res, 0)
	last, ok2 := ledgerElem[string](res, 1)
	if !ok1 || !ok2 || (len(res)-2)%fields != 0 || (len(res)-2)/fields > limit {
		return nil, "", ledgerCorrupt("list dead", res)
	}
	out := make([]DeadEntry, 0, (len(res)-2)/fields)
	for i := 2; i < len(res); i += fields {
		var f [fields]string
		for j := range f {
			s, ok := ledgerElem[string](res, i+j)
			if !ok {
				return nil, "", ledgerCorrupt("list dead", res)
			}
			f[j] = s
		}
		out = append(out, deadFields(f))
	}
	if next == "" {
		return out, "", nil
	}
	if _, err := strconv.ParseUint(next, 10, 64); err != nil {
		return nil, "", ledgerCorrupt("list dead", res)
	}
	return out, ledgerCursor(next, last), nil
}

// deadFields reads a dead-lettered event as the scripts answer it: id,
// key, then key_dead_entry's reason, status, attempts, err, first, died.
func deadFields(f [8]string) DeadEntry {
	e := DeadEntry{ID: f[0], Key: f[1], Reason: f[2], Error: f[5]}
	e.Status, _ = strconv.Atoi(f[3])
	e.Attempts, _ = strconv.ParseInt(f[4], 10, 64)
	first, _ := strconv.ParseInt(f[6], 10, 64)
	died, _ := strconv.ParseInt(f[7], 10, 64)
	e.FirstSeen, e.DiedAt = ledgerTime(first), ledgerTime(died)
	return e
}

// DeadEntry implements Ledger.
func (l *Redis) DeadEntry(ctx context.Context, route, eid string) (DeadEntry, string, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.evalSlice(ctx, "dead entry", ledgerDeadEntryScript, []string{l.deadIndex(route)}, eid, l.keyPrefix(route))
	if err != nil {
		return DeadEntry{}, "", err
	}
	code, ok := ledgerElem[int64](res, 0)
	if ok && code == 0 && len(res) == 1 {
		return DeadEntry{}, "", ErrNotFound
	}
	if !ok || code != 1 || len(res) != 9 {
		return DeadEntry{}, "", ledgerCorrupt("dead entry", res)
	}
	// res: 1, key, pos, then the six details.
	var s [8]string
	for i := 1; i < len(res); i++ {
		if s[i-1], ok = ledgerElem[string](res, i); !ok {
			return DeadEntry{}, "", ledgerCorrupt("dead entry", res)
		}
	}
	f := [8]string{eid, s[0], s[2], s[3], s[4], s[5], s[6], s[7]}
	return deadFields(f), s[1], nil
}

// Get implements Ledger.
func (l *Redis) Get(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	return l.sync.Get(ctx, route, key)
}

// Delete implements Ledger.
func (l *Redis) Delete(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(route, key), l.ageSet(route), l.deadIndex(route)}
	res, err := l.evalSlice(ctx, "delete", ledgerDeleteScript, keys, l.hargs(ctx, key, l.orderPrefix(route))...)
	if err != nil {
		return KeyState{}, err
	}
	return ReadKeyReply("delete", key, res)
}

// Stats implements Ledger.
func (l *Redis) Stats(ctx context.Context, route string) (Stats, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.evalSlice(ctx, "stats", ledgerStatsScript, []string{l.ageSet(route), l.deadIndex(route), l.orderPrefix(route) + "w"})
	if err != nil {
		return Stats{}, err
	}
	depth, ok1 := ledgerElem[int64](res, 0)
	dlq, ok2 := ledgerElem[int64](res, 1)
	oldest, ok3 := ledgerElem[string](res, 2)
	waiting, ok4 := ledgerElem[int64](res, 3)
	if !ok1 || !ok2 || !ok3 || !ok4 || len(res) != 4 {
		return Stats{}, ledgerCorrupt("stats", res)
	}
	st := Stats{Depth: depth, DLQ: dlq, Waiting: waiting}
	if oldest != "" {
		ms, err := strconv.ParseFloat(oldest, 64)
		if err != nil {
			return Stats{}, ledgerCorrupt("stats", res)
		}
		st.Oldest = ledgerTime(int64(ms))
	}
	return st, nil
}
