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
//	PREFIX webhook_kkey:T<key>  hash: st (enq|queued|dead|done), eid, tok
//	                            (live token), rt (the reserving token),
//	                            fp, n (copies), first, last (ms), qa (tries
//	                            this round), qt (tries in all), pos and
//	                            owner (of the begun token), rec (encoded
//	                            outcome, done), dlq (DLQ position), reason,
//	                            status, err, died (ms) (dead)
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
func (l *Redis) keyHash(route, key string) string { return l.keyPrefix(route) + key }
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
	// depth, now ms.
	// Reply: {0, 1} reserved; {1, n, st, eid, fp} known; {2, n, rec}
	// finished; {3} full.
	ledgerReserveScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'eid', 'fp', 'rec')
if not h[1] then
  local cap = tonumber(ARGV[6]) or 0
  if cap < 0 or cap > 0 and redis.call('ZCARD', KEYS[2]) >= cap then
    return {3}
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'st', 'enq', 'eid', ARGV[1], 'tok', ARGV[2], 'rt', ARGV[2], 'fp', ARGV[3],
    'n', 1, 'first', ARGV[4], 'last', ARGV[4], 'qa', 0, 'qt', 0)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {0, 1}
end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], 'last', ARGV[7])
if h[1] == 'done' then
  return {2, n, h[4] or ''}
end
return {1, n, h[1], h[2] or '', h[3] or ''}
`)
	// KEYS: key hash, age. ARGV: tok. Reply: 1 confirmed (or adopted
	// already), 0 gone or replaced.
	ledgerConfirmScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'eid', 'rt', 'first')
if not h[1] or h[3] ~= ARGV[1] then
  return 0
end
if h[1] == 'enq' then
  redis.call('HSET', KEYS[1], 'st', 'queued')
  redis.call('PERSIST', KEYS[1])
  redis.call('ZADD', KEYS[2], tonumber(h[4]) or 0, h[2] or '')
end
return 1
`)
	// KEYS: key hash. ARGV: tok. Reply: 1 removed, 0 left alone.
	ledgerAbortScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'tok')
if h[1] ~= 'enq' or h[2] ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)
	// KEYS: key hash, age, dead. ARGV: eid, tok, pos, owner.
	// Reply: {0} leftover; {1, qa, qt, fp, first}.
	ledgerBeginScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'eid', 'tok', 'pos', 'fp', 'first', 'ptok', 'owner')
if h[2] ~= ARGV[1] or ARGV[2] == '' then
  return {0}
end
local prev = ''
if (h[1] == 'queued' or h[1] == 'enq') and h[3] == ARGV[2] then
  if h[4] and h[4] ~= '' and h[4] ~= ARGV[3] then
    return {0}
  end
  if h[4] == ARGV[3] then
    prev = h[8] or ''
  end
  if h[1] == 'enq' then
    redis.call('HSET', KEYS[1], 'st', 'queued')
    redis.call('PERSIST', KEYS[1])
    redis.call('ZADD', KEYS[2], tonumber(h[6]) or 0, ARGV[1])
  end
  -- the live record won: a retry record still being settled is a leftover
  redis.call('HDEL', KEYS[1], 'ptok')
elseif (h[1] == 'queued' or h[1] == 'dead') and h[7] == ARGV[2] then
  -- a retry or replay record read before its settlement was recorded
  if h[1] == 'dead' then
    redis.call('HSET', KEYS[1], 'st', 'queued', 'qa', 0)
    redis.call('HDEL', KEYS[1], 'dlq', 'reason', 'status', 'err', 'died')
    redis.call('PERSIST', KEYS[1])
    redis.call('ZADD', KEYS[2], tonumber(h[6]) or 0, ARGV[1])
    redis.call('HDEL', KEYS[3], ARGV[1])
  end
  redis.call('HSET', KEYS[1], 'tok', ARGV[2])
  redis.call('HDEL', KEYS[1], 'ptok')
else
  return {0}
end
redis.call('HSET', KEYS[1], 'pos', ARGV[3], 'owner', ARGV[4])
local qa = redis.call('HINCRBY', KEYS[1], 'qa', 1)
local qt = redis.call('HINCRBY', KEYS[1], 'qt', 1)
return {1, qa, qt, h[5] or '', h[6] or '', prev}
`)
	// KEYS: key hash. ARGV: eid, tok, owner, next.
	// Reply: 1 recorded, 0 not the owner, -1 stale (nothing changed).
	ledgerIntendScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'eid', 'tok', 'owner')
if h[1] ~= 'queued' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then
  return -1
end
if (h[4] or '') ~= ARGV[3] then
  return 0
end
redis.call('HSET', KEYS[1], 'ptok', ARGV[4])
return 1
`)
	// KEYS: key hash, age, dead. ARGV: eid, tok, owner, kind, key, then
	//   done:  rec, retention ms
	//   retry: new tok
	//   dead:  dlq pos, reason, status, error, died ms
	// Reply: 1 recorded, 0 not the owner, -1 stale (nothing changed).
	ledgerSettleScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'eid', 'tok', 'owner')
if ARGV[4] == 'retry' and h[1] == 'queued' and h[2] == ARGV[1] and h[3] == ARGV[6] then
  return 1 -- its retry record was read and adopted first
end
if h[1] ~= 'queued' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then
  return -1
end
if (h[4] or '') ~= ARGV[3] then
  return 0
end
redis.call('HDEL', KEYS[1], 'ptok')
if ARGV[4] == 'done' then
  redis.call('HSET', KEYS[1], 'st', 'done', 'rec', ARGV[6])
  redis.call('HDEL', KEYS[1], 'tok', 'pos', 'owner')
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif ARGV[4] == 'retry' then
  redis.call('HSET', KEYS[1], 'tok', ARGV[6])
  redis.call('HDEL', KEYS[1], 'pos', 'owner')
else
  redis.call('HSET', KEYS[1], 'st', 'dead', 'dlq', ARGV[6], 'reason', ARGV[7], 'status', ARGV[8], 'err', ARGV[9], 'died', ARGV[10])
  redis.call('HDEL', KEYS[1], 'tok', 'pos', 'owner')
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[5])
end
return 1
`)
	// KEYS: dead. ARGV: eid, key hash prefix, pending token ("": none).
	// Reply: {0} not dead-lettered; {1, key, dlq pos}.
	ledgerDeadScript = redis.NewScript(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
if not k then
  return {0}
end
local h = redis.call('HMGET', ARGV[2] .. k, 'st', 'eid', 'dlq')
if h[1] ~= 'dead' or h[2] ~= ARGV[1] then
  return {0}
end
if ARGV[3] ~= '' then
  redis.call('HSET', ARGV[2] .. k, 'ptok', ARGV[3])
end
return {1, k, h[3] or ''}
`)
	// KEYS: dead, age. ARGV: eid, dlq pos, tok, key hash prefix.
	// Reply: 1 replayed, 0 not dead-lettered at that position.
	ledgerReplayScript = redis.NewScript(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
if not k then
  return 0
end
local kh = ARGV[4] .. k
local h = redis.call('HMGET', kh, 'st', 'eid', 'dlq', 'first')
if h[1] ~= 'dead' or h[2] ~= ARGV[1] or (h[3] or '') ~= ARGV[2] then
  return 0
end
redis.call('HSET', kh, 'st', 'queued', 'tok', ARGV[3], 'qa', 0)
redis.call('HDEL', kh, 'pos', 'owner', 'ptok', 'dlq', 'reason', 'status', 'err', 'died')
redis.call('PERSIST', kh)
redis.call('ZADD', KEYS[2], tonumber(h[4]) or 0, ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`)
	// KEYS: dead. ARGV: eid, retention ms, key hash prefix.
	// Reply: 1 purged, 0 not dead-lettered.
	ledgerPurgeScript = redis.NewScript(`
local k = redis.call('HGET', KEYS[1], ARGV[1])
if not k then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
local kh = ARGV[3] .. k
local h = redis.call('HMGET', kh, 'st', 'eid')
if h[1] == 'dead' and h[2] == ARGV[1] then
  redis.call('PEXPIRE', kh, ARGV[2])
end
return 1
`)
	// KEYS: dead. ARGV: scan cursor, last eid listed from its batch (""
	// none), limit, key hash prefix.
	// Lists the dead index batch by batch (HSCAN), each batch in eid
	// order, skipping index entries whose key says otherwise.
	// Reply: {next scan cursor ("" done), last eid listed from its batch,
	// then per entry: eid, key, reason, status, qt, err, first, died}.
	ledgerListDeadScript = redis.NewScript(`
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
    local h = redis.call('HMGET', pre .. it[2], 'st', 'eid', 'reason', 'status', 'qt', 'err', 'first', 'died')
    if h[1] == 'dead' and h[2] == it[1] and not seen[it[1]] then
      if got >= limit then
        out[1], out[2] = cur, last
        return out
      end
      seen[it[1]] = true
      local e = {it[1], it[2], h[3] or '', h[4] or '', h[5] or '', h[6] or '', h[7] or '', h[8] or ''}
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
	// KEYS: key hash, age, dead. ARGV: key.
	// Reply: the key hash as it was (HGETALL), now deleted.
	ledgerDeleteScript = redis.NewScript(`
local h = redis.call('HGETALL', KEYS[1])
local eid = redis.call('HGET', KEYS[1], 'eid')
redis.call('DEL', KEYS[1])
if eid then
  redis.call('ZREM', KEYS[2], eid)
  if redis.call('HGET', KEYS[3], eid) == ARGV[1] then
    redis.call('HDEL', KEYS[3], eid)
  end
end
return h
`)
	// KEYS: age, dead. Reply: {depth, dlq size, oldest first seen ("" none)}.
	ledgerStatsScript = redis.NewScript(`
local o = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), redis.call('HLEN', KEYS[2]), o[2] or ''}
`)
)

// Reserve implements Ledger.
func (l *Redis) Reserve(ctx context.Context, r Reservation) (Reserved, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(r.Route, r.Key), l.ageSet(r.Route)}
	res, err := l.evalSlice(ctx, "reserve", ledgerReserveScript, keys, r.EventID, r.Token, r.Fingerprint,
		ledgerMs(r.FirstSeen), ledgerTTL(r.Lease), r.MaxDepth, ledgerMs(l.now()))
	if err != nil {
		return Reserved{}, err
	}
	code, _ := ledgerElem[int64](res, 0)
	switch code {
	case 0:
		if len(res) != 2 {
			break
		}
		return Reserved{State: Enqueued, ID: r.EventID, Fingerprint: r.Fingerprint, Copies: 1}, nil
	case 1:
		n, ok1 := ledgerElem[int64](res, 1)
		st, ok2 := ledgerElem[string](res, 2)
		eid, ok3 := ledgerElem[string](res, 3)
		fp, ok4 := ledgerElem[string](res, 4)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			break
		}
		out := Reserved{State: Pending, ID: eid, Fingerprint: fp, Copies: n}
		switch st {
		case ledgerEnqueuing:
			out.State = InFlight
		case ledgerQueued:
		case ledgerDead:
			out.Dead = true
		default:
			return Reserved{}, fmt.Errorf("kafka ledger: redis reserve %q: %w: state %q", r.Key, ErrCorrupt, clipLedger(st))
		}
		return out, nil
	case 2:
		n, ok1 := ledgerElem[int64](res, 1)
		rec, ok2 := ledgerElem[string](res, 2)
		if !ok1 || !ok2 {
			break
		}
		out, err := store.DecodeOutcome([]byte(rec))
		if err != nil {
			return Reserved{}, fmt.Errorf("kafka ledger: redis reserve %q: %w: %v", r.Key, ErrCorrupt, err)
		}
		return Reserved{State: Delivered, Fingerprint: out.Fingerprint, Outcome: out, Copies: n}, nil
	case 3:
		if len(res) != 1 {
			break
		}
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
	return l.flag(ctx, "confirm", ledgerConfirmScript, []string{l.keyHash(route, key), l.ageSet(route)}, tok)
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
	res, err := l.evalSlice(ctx, "begin", ledgerBeginScript, keys, eid, tok, pos, owner)
	if err != nil {
		return Begun{}, false, err
	}
	code, ok := ledgerElem[int64](res, 0)
	if ok && code == 0 && len(res) == 1 {
		return Begun{}, false, nil
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
	return Begun{Fingerprint: fp, FirstSeen: ledgerTime(ms), Try: qa, Total: qt, PrevOwner: prev}, true, nil
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
		eid, dlqPos, tok, l.keyPrefix(route))
	if err == nil && !ok {
		err = ErrNotFound
	}
	return err
}

// Purge implements Ledger.
func (l *Redis) Purge(ctx context.Context, route, eid string, retention time.Duration) error {
	ok, err := l.flag(ctx, "purge", ledgerPurgeScript, []string{l.deadIndex(route)},
		eid, ledgerTTL(retention), l.keyPrefix(route))
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
		e := DeadEntry{ID: f[0], Key: f[1], Reason: f[2], Error: f[5]}
		e.Status, _ = strconv.Atoi(f[3])
		e.Attempts, _ = strconv.ParseInt(f[4], 10, 64)
		first, _ := strconv.ParseInt(f[6], 10, 64)
		died, _ := strconv.ParseInt(f[7], 10, 64)
		e.FirstSeen, e.DiedAt = ledgerTime(first), ledgerTime(died)
		out = append(out, e)
	}
	if next == "" {
		return out, "", nil
	}
	if _, err := strconv.ParseUint(next, 10, 64); err != nil {
		return nil, "", ledgerCorrupt("list dead", res)
	}
	return out, ledgerCursor(next, last), nil
}

// Get implements Ledger.
func (l *Redis) Get(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	h, err := l.client.HGetAll(ctx, l.keyHash(route, key)).Result()
	if err != nil {
		return KeyState{}, ledgerFail("get", err)
	}
	return ledgerKeyState("get", key, h)
}

// Delete implements Ledger.
func (l *Redis) Delete(ctx context.Context, route, key string) (KeyState, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	keys := []string{l.keyHash(route, key), l.ageSet(route), l.deadIndex(route)}
	res, err := l.evalSlice(ctx, "delete", ledgerDeleteScript, keys, key)
	if err != nil {
		return KeyState{}, err
	}
	if len(res)%2 != 0 {
		return KeyState{}, ledgerCorrupt("delete", res)
	}
	h := make(map[string]string, len(res)/2)
	for i := 0; i < len(res); i += 2 {
		k, ok1 := ledgerElem[string](res, i)
		v, ok2 := ledgerElem[string](res, i+1)
		if !ok1 || !ok2 {
			return KeyState{}, ledgerCorrupt("delete", res)
		}
		h[k] = v
	}
	return ledgerKeyState("delete", key, h)
}

// ledgerKeyState reads a key hash; an empty one is absent.
func ledgerKeyState(op, key string, h map[string]string) (KeyState, error) {
	ks := KeyState{State: StateAbsent}
	if len(h) == 0 {
		return ks, nil
	}
	switch h["st"] {
	case ledgerEnqueuing, ledgerQueued:
		ks.State = StateQueued
	case ledgerDead:
		ks.State = StateDeadLettered
	case ledgerDone:
		ks.State = StateFinished
	default:
		return ks, fmt.Errorf("kafka ledger: redis %s %q: %w: state %q", op, key, ErrCorrupt, clipLedger(h["st"]))
	}
	ks.EventID, ks.Fingerprint = h["eid"], h["fp"]
	ks.Copies, _ = strconv.ParseInt(h["n"], 10, 64)
	ks.Attempts, _ = strconv.ParseInt(h["qt"], 10, 64)
	first, _ := strconv.ParseInt(h["first"], 10, 64)
	last, _ := strconv.ParseInt(h["last"], 10, 64)
	ks.FirstSeen, ks.LastSeen = ledgerTime(first), ledgerTime(last)
	if ks.State == StateFinished {
		out, err := store.DecodeOutcome([]byte(h["rec"]))
		if err != nil {
			return ks, fmt.Errorf("kafka ledger: redis %s %q: %w: %v", op, key, ErrCorrupt, err)
		}
		ks.Status, ks.Outcome = out.Status, out
	}
	return ks, nil
}

// Stats implements Ledger.
func (l *Redis) Stats(ctx context.Context, route string) (Stats, error) {
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	res, err := l.evalSlice(ctx, "stats", ledgerStatsScript, []string{l.ageSet(route), l.deadIndex(route)})
	if err != nil {
		return Stats{}, err
	}
	depth, ok1 := ledgerElem[int64](res, 0)
	dlq, ok2 := ledgerElem[int64](res, 1)
	oldest, ok3 := ledgerElem[string](res, 2)
	if !ok1 || !ok2 || !ok3 || len(res) != 3 {
		return Stats{}, ledgerCorrupt("stats", res)
	}
	st := Stats{Depth: depth, DLQ: dlq}
	if oldest != "" {
		ms, err := strconv.ParseFloat(oldest, 64)
		if err != nil {
			return Stats{}, ledgerCorrupt("stats", res)
		}
		st.Oldest = ledgerTime(int64(ms))
	}
	return st, nil
}
