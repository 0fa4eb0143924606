package ledger

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// The key record on Redis: one hash per key, the same fields for every
// queue transport (the Redis Streams queue's webhook_qkey, the Kafka
// ledger's webhook_kkey):
//
//	st      enq (reserved, its record being produced: Kafka) | queued |
//	        dead | done
//	eid     the event id
//	tok     the live token; rt the reserving token (Kafka); ptok a
//	        pending token, adopted by Begin (Kafka: a retry or replay
//	        record read before its settlement was recorded)
//	fp      the fingerprint
//	n       copies seen; first, last (ms) first and last seen
//	qa, qt  tries this round (reset by a replay), tries in all
//	pos     the entry or record that began the live token; owner its
//	        consumer (Kafka). Streams queue records begun by earlier
//	        releases name it ent instead; readers fall back to it.
//	rec     the encoded outcome (done)
//	dlq     the DLQ position (dead, not purged); reason, status, err,
//	        died (ms) the dead-letter details. The Streams queue's records
//	        dead-lettered by earlier releases keep these on the event hash
//	        (with attempts); readers fall back to it.
//
// A finished or purged key expires after its retention, a reserved one
// after its lease; nothing else expires. Every transition below is a Lua
// function on one key hash (and the route's age zset: event id -> first
// seen, every undelivered event); the transports' scripts call them and
// keep only their own event and position work.

// luaFunc is one function of the library: its name, and its source.
type luaFunc struct{ name, src string }

// luaLib is the library, each function after those it calls.
var luaLib = []luaFunc{
	{"", `local ENQ, QUEUED, DEAD, DONE = '` + ledgerEnqueuing + `', '` + ledgerQueued + `', '` + ledgerDead + `', '` + ledgerDone + `'
local LOCK, RESET = '` + ledgerLocked + `', '` + ledgerReset + `'
`},
	{"redis_ms", `
-- redis_ms is Redis' clock in ms: a sync copy's lease is judged on it,
-- the same for every instance whatever its own clock says.
local function redis_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`},
	{"key_free", `
-- key_free says whether a key in state st (false: none) with the lease
-- deadline lease is free for a new copy: no state, a reset tombstone, or
-- a sync copy's lock whose lease is over.
local function key_free(st, lease)
  return not st or st == RESET or (st == LOCK and (tonumber(lease) or 0) <= redis_ms())
end
`},
	{"key_seen", `
-- key_seen counts a copy of a known key (n, last = now) and reports it:
-- {1, n, st, eid, fp}, or {2, n, rec} when finished; nil (nothing
-- changed) when the key is free (key_free).
local function key_seen(k, now)
  local h = redis.call('HMGET', k, 'st', 'eid', 'fp', 'rec', 'lease')
  if key_free(h[1], h[5]) then
    return nil
  end
  local n = redis.call('HINCRBY', k, 'n', 1)
  redis.call('HSET', k, 'last', now)
  if h[1] == DONE then
    return {2, n, h[4] or ''}
  end
  return {1, n, h[1], h[2] or '', h[3] or ''}
end
`},
	{"key_new", `
-- key_new writes a new key in state st: one copy, no try yet. The
-- history (h) of a key reset or released before goes on.
local function key_new(k, st, eid, tok, fp, first)
  local h = redis.call('HGET', k, 'h')
  redis.call('DEL', k)
  redis.call('HSET', k, 'st', st, 'eid', eid, 'tok', tok, 'fp', fp, 'n', 1, 'first', first, 'last', first, 'qa', 0, 'qt', 0)
  if h then
    redis.call('HSET', k, 'h', h)
  end
end
`},
	{"key_undelivered", `
-- key_undelivered makes the key queued for good: no expiry, its event in
-- the age zset.
local function key_undelivered(k, age, eid, first)
  redis.call('PERSIST', k)
  redis.call('ZADD', age, tonumber(first) or 0, eid)
end
`},
	{"key_queue", `
-- key_queue queues a new key whose event is stored in the same script.
local function key_queue(k, age, eid, tok, fp, first)
  key_new(k, QUEUED, eid, tok, fp, first)
  key_undelivered(k, age, eid, first)
end
`},
	{"key_reserve", `
-- key_reserve reserves a new key for an event about to be stored
-- elsewhere: gone after lease ms unless confirmed (or begun).
local function key_reserve(k, eid, tok, fp, first, lease)
  key_new(k, ENQ, eid, tok, fp, first)
  redis.call('HSET', k, 'rt', tok)
  redis.call('PEXPIRE', k, lease)
end
`},
	{"key_confirm", `
-- key_confirm queues a reservation made with tok: 1 (also when already
-- adopted), 0 when it is gone or replaced.
local function key_confirm(k, age, tok)
  local h = redis.call('HMGET', k, 'st', 'eid', 'rt', 'first')
  if not h[1] or h[3] ~= tok then
    return 0
  end
  if h[1] == ENQ then
    redis.call('HSET', k, 'st', QUEUED)
    key_undelivered(k, age, h[2] or '', h[4])
  end
  return 1
end
`},
	{"key_abort", `
-- key_abort removes a reservation made with tok: 1, or 0 (left alone).
local function key_abort(k, tok)
  local h = redis.call('HMGET', k, 'st', 'tok')
  if h[1] ~= ENQ or h[2] ~= tok then
    return 0
  end
  redis.call('DEL', k)
  return 1
end
`},
	{"key_replay", `
-- key_replay puts a dead-lettered key back to queued with token tok:
-- this round's tries reset, the dead-letter details gone.
local function key_replay(k, age, eid, tok, first)
  redis.call('HSET', k, 'st', QUEUED, 'tok', tok, 'qa', 0)
  redis.call('HDEL', k, 'pos', 'owner', 'ptok', 'dlq', 'reason', 'status', 'err', 'died')
  key_undelivered(k, age, eid, first)
end
`},
	{"key_can_begin", `
-- key_can_begin says whether the entry or record at pos carrying (eid,
-- tok) may begin a try: 'live' (tok is the live token of a queued or
-- reserved key, not begun from another pos), 'pending' (tok is the
-- pending token), or nil (a leftover). The second result is the key
-- (st, eid, tok, pos, fp, first, ptok, owner) for key_begin, then its
-- order fields (ov, os, sv) for ord_gate.
local function key_can_begin(k, eid, tok, pos)
  local h = redis.call('HMGET', k, 'st', 'eid', 'tok', 'pos', 'fp', 'first', 'ptok', 'owner', 'ov', 'os', 'sv')
  if h[2] ~= eid or tok == '' then
    return nil, h
  end
  if (h[1] == QUEUED or h[1] == ENQ) and h[3] == tok then
    if h[4] and h[4] ~= '' and h[4] ~= pos then
      return nil, h
    end
    return 'live', h
  end
  if (h[1] == QUEUED or h[1] == DEAD) and h[7] == tok then
    return 'pending', h
  end
  return nil, h
end
`},
	{"key_begin", `
-- key_begin begins the try key_can_begin allowed (how, h): a reserved
-- key is adopted as key_confirm would, a pending token becomes the live
-- one (a dead-lettered key goes back to queued); records pos (and owner,
-- when given) and counts the try. Returns qa, qt and the owner that had
-- begun the same pos before ('' none).
local function key_begin(k, age, h, how, eid, tok, pos, owner)
  local prev = ''
  if how == 'live' then
    if h[4] == pos then
      prev = h[8] or ''
    end
    if h[1] == ENQ then
      redis.call('HSET', k, 'st', QUEUED)
      key_undelivered(k, age, eid, h[6])
    end
  elseif h[1] == DEAD then
    key_replay(k, age, eid, tok, h[6])
  else
    redis.call('HSET', k, 'tok', tok)
  end
  redis.call('HDEL', k, 'ptok')
  redis.call('HSET', k, 'pos', pos)
  if owner then
    redis.call('HSET', k, 'owner', owner)
  end
  return redis.call('HINCRBY', k, 'qa', 1), redis.call('HINCRBY', k, 'qt', 1), prev
end
`},
	{"key_try", `
-- key_try checks that (eid, tok) is the key's live try, begun by owner
-- when owner is given: nil when it is; else -1 (stale: the key moved on)
-- or 0 (another owner began it). With adopted, a key whose token is
-- adopted already (a retry record carrying it was begun) answers 1.
-- When it is the live try, the second result is the key's order fields
-- {ov, sv} for ord_done.
local function key_try(k, eid, tok, owner, adopted)
  local h = redis.call('HMGET', k, 'st', 'eid', 'tok', 'owner', 'ov', 'sv')
  if adopted and h[1] == QUEUED and h[2] == eid and h[3] == adopted then
    return 1
  end
  if h[1] ~= QUEUED or h[2] ~= eid or h[3] ~= tok then
    return -1
  end
  if owner and (h[4] or '') ~= owner then
    return 0
  end
  return nil, {h[5], h[6]}
end
`},
	{"key_pend", `
-- key_pend makes tok the key's pending token, adopted by key_begin.
local function key_pend(k, tok)
  redis.call('HSET', k, 'ptok', tok)
end
`},
	{"key_intend", `
-- key_intend records pending as the pending token of owner's try: 1, or
-- key_try's code (nothing changed).
local function key_intend(k, eid, tok, owner, pending)
  local c = key_try(k, eid, tok, owner)
  if c then
    return c
  end
  key_pend(k, pending)
  return 1
end
`},
	{"key_finish", `
-- key_finish records the outcome: done with rec, kept for retention ms.
local function key_finish(k, age, eid, rec, retention)
  redis.call('HSET', k, 'st', DONE, 'rec', rec)
  redis.call('HDEL', k, 'tok', 'pos', 'owner', 'ptok')
  redis.call('PEXPIRE', k, retention)
  redis.call('ZREM', age, eid)
end
`},
	{"key_retry", `
-- key_retry gives the key a new token for its next entry or record.
local function key_retry(k, tok)
  redis.call('HSET', k, 'tok', tok)
  redis.call('HDEL', k, 'pos', 'owner', 'ptok')
end
`},
	{"key_dead", `
-- key_dead dead-letters the key: its DLQ position and the details.
local function key_dead(k, age, eid, dlq, reason, status, err, died)
  redis.call('HSET', k, 'st', DEAD, 'dlq', dlq, 'reason', reason, 'status', status, 'err', err, 'died', died)
  redis.call('HDEL', k, 'tok', 'pos', 'owner', 'ptok')
  redis.call('ZREM', age, eid)
end
`},
	{"key_dead_at", `
-- key_dead_at reads a key dead-lettered with eid: {dlq (false when
-- purged, or written by an earlier Streams queue), first}; nil when the
-- key is not.
local function key_dead_at(k, eid)
  local h = redis.call('HMGET', k, 'st', 'eid', 'dlq', 'first')
  if h[1] ~= DEAD or h[2] ~= eid then
    return nil
  end
  return {h[3], h[4]}
end
`},
	{"key_dead_entry", `
-- key_dead_entry is a dead-lettered key as a DLQ listing shows it:
-- {reason, status, attempts, err, first, died} ('' for a missing field);
-- nil when the key is not dead-lettered with eid.
local function key_dead_entry(k, eid)
  local h = redis.call('HMGET', k, 'st', 'eid', 'reason', 'status', 'qt', 'err', 'first', 'died')
  if h[1] ~= DEAD or h[2] ~= eid then
    return nil
  end
  return {h[3] or '', h[4] or '', h[5] or '', h[6] or '', h[7] or '', h[8] or ''}
end
`},
	{"key_purge", `
-- key_purge forgets a dead-lettered key's DLQ position; the key stays
-- dead for retention ms so that copies are not delivered again. Nothing
-- changes unless it is dead-lettered with eid.
local function key_purge(k, eid, retention)
  if key_dead_at(k, eid) then
    redis.call('HDEL', k, 'dlq')
    redis.call('PEXPIRE', k, retention)
  end
end
`},
	{"key_queued", `
-- key_queued reads a key queued with eid: its token and the entry or
-- record that began it (false: none); nil when the key is not queued
-- with eid.
local function key_queued(k, eid)
  local h = redis.call('HMGET', k, 'st', 'eid', 'tok', 'pos', 'ent')
  if h[1] ~= QUEUED or h[2] ~= eid then
    return nil
  end
  return h[3], h[4] or h[5]
end
`},
	{"key_delete", `
-- key_delete forgets the key: returns it as it was (HGETALL), its event
-- id, and whether it was dead-lettered with its DLQ position (false:
-- none); its event leaves the age zset.
local function key_delete(k, age)
  local h = redis.call('HGETALL', k)
  local f = redis.call('HMGET', k, 'eid', 'st', 'dlq')
  redis.call('DEL', k)
  if f[1] then
    redis.call('ZREM', age, f[1])
  end
  return h, f[1], f[2] == DEAD, f[2] == DEAD and f[3]
end
`},
	{"key_claim", `
-- key_claim counts a copy of a sync route's event (n, first, last =
-- now) and, when the key is free (key_free), locks it for the copy:
-- state lock, owner tok, lease deadline (Redis' clock), fingerprint fp,
-- one try more; the hash lives at least max(lease, keep) ms (keep: how
-- long the counters outlive a released lock). Reply: {0, n} locked;
-- {1, n, ms left} another copy's lease; {2, n, rec} finished; {3, n,
-- st, eid, fp} the queue holds the key (enq, queued or dead). With the
-- history's arguments H, a copy that locks the key is recorded as
-- forwarded in the same write (hist_entry).
local function key_claim(k, tok, fp, now, lease, keep, H)
  local h = redis.call('HMGET', k, 'st', 'lease', 'eid', 'fp', 'rec', 'h')
  local n = redis.call('HINCRBY', k, 'n', 1)
  if n == 1 then
    redis.call('HSET', k, 'first', now, 'last', now)
  else
    redis.call('HSET', k, 'last', now)
  end
  local t = redis_ms()
  lease = tonumber(lease)
  local ttl = math.max(lease, tonumber(keep) or 0)
  if h[1] == DONE then
    return {2, n, h[5] or ''}
  end
  if not key_free(h[1], h[2]) then
    if h[1] ~= LOCK then
      return {3, n, h[1], h[3] or '', h[4] or ''}
    end
    local left = tonumber(h[2]) - t
    if redis.call('PTTL', k) < math.max(ttl, left) then
      redis.call('PEXPIRE', k, math.max(ttl, left))
    end
    return {1, n, left}
  end
  if H and not H[9] then
    redis.call('HSET', k, 'st', LOCK, 'tok', tok, 'lease', t + lease, 'fp', fp, 'h', hist_entry(h[6], H, 'arrival', n, 0, 'forwarded'))
  else
    redis.call('HSET', k, 'st', LOCK, 'tok', tok, 'lease', t + lease, 'fp', fp)
  end
  redis.call('HINCRBY', k, 'qt', 1)
  if redis.call('PTTL', k) < ttl then
    redis.call('PEXPIRE', k, ttl)
  end
  return {0, n}
end
`},
	{"key_done", `
-- key_done records a sync copy's outcome rec for retention ms: 1 when
-- tok owns the key's lock (its lease over or not), or when the key is
-- free of everything but counters (no state, or another copy's lock
-- whose lease is over), tok is not empty and no reset tombstone's time
-- (rst) runs: the lock vanished and the upstream did accept this copy.
-- 0 (nothing changed) otherwise: another copy's live lease, a finished
-- key, a reset tombstone, a key the queue holds. With the history's
-- arguments H, the settle (the upstream's status) is recorded in the same
-- write (hist_entry).
local function key_done(k, tok, rec, retention, H, status)
  local h = redis.call('HMGET', k, 'st', 'tok', 'lease', 'rst', 'qt', 'h')
  if h[1] ~= LOCK or h[2] ~= tok then
    if tok == '' or (h[1] and not (h[1] == LOCK and key_free(h[1], h[3]))) then
      return 0
    end
    -- Not the owner: a reset tombstone (rst, its deadline) still bars it,
    -- whatever copies claimed and released the key since.
    if (tonumber(h[4]) or 0) > redis_ms() then
      return 0
    end
  end
  if H and not H[9] then
    redis.call('HSET', k, 'st', DONE, 'rec', rec, 'h', hist_entry(h[6], H, 'settle', h[5], status, 'finished'))
  else
    redis.call('HSET', k, 'st', DONE, 'rec', rec)
  end
  redis.call('HDEL', k, 'tok', 'lease')
  redis.call('PEXPIRE', k, retention)
  return 1
end
`},
	{"key_release", `
-- key_release drops the lock tok holds while its lease lasts: 1, the
-- counters kept until the hash expires (or dropped with it when drop is
-- '1'); 0 (nothing changed) when tok holds no live lease.
local function key_release(k, tok, drop)
  local h = redis.call('HMGET', k, 'st', 'tok', 'lease')
  if h[1] ~= LOCK or h[2] ~= tok or key_free(h[1], h[3]) then
    return 0
  end
  if drop == '1' then
    redis.call('DEL', k)
  else
    redis.call('HDEL', k, 'st', 'tok', 'lease')
  end
  return 1
end
`},
	{"key_reset", `
-- key_reset forgets the key as key_delete does and leaves a reset
-- tombstone (state reset, rst its deadline on Redis' clock) for the
-- remaining lease of a sync copy's lock or hold ms, the longer: until
-- then key_done records nothing without owning the lock, also once a
-- later copy claimed and released the key (key_claim keeps rst), so a
-- copy in flight at the reset cannot undo it. Returns key_delete's answers and Redis' clock.
local function key_reset(k, age, hold)
  local lease = redis.call('HMGET', k, 'st', 'lease')
  local t = redis_ms()
  local keep = tonumber(hold) or 0
  if lease[1] == LOCK then
    keep = math.max(keep, (tonumber(lease[2]) or 0) - t)
  end
  local h, eid, dead, dlq = key_delete(k, age)
  if keep > 0 then
    redis.call('HSET', k, 'st', RESET, 'rst', t + keep)
    redis.call('PEXPIRE', k, keep)
  end
  return h, eid, dead, dlq, t
end
`},
}

// Script returns the Redis script that runs body after the functions of
// the key record's Lua library it calls (and those they call), so that
// every transport's step stays one script.
func Script(body string) *redis.Script { return redis.NewScript(luaSource(body)) }

// luaSource is Script's source: the library functions body calls, then
// body.
func luaSource(body string) string {
	use := make([]bool, len(fullLib))
	use[0] = true // the state names
	// Each function comes after those it calls: walking back once finds
	// every function used.
	for i := len(fullLib) - 1; i > 0; i-- {
		if luaCalls(body, fullLib[i].name) {
			use[i] = true
		}
		if !use[i] {
			continue
		}
		for j := 1; j < i; j++ {
			if luaCalls(fullLib[i].src, fullLib[j].name) {
				use[j] = true
			}
		}
	}
	var b strings.Builder
	for i, f := range fullLib {
		if use[i] {
			b.WriteString(f.src)
		}
	}
	b.WriteString(body)
	return b.String()
}

// luaCalls reports whether src calls the library function name.
func luaCalls(src, name string) bool { return strings.Contains(src, name+"(") }

// ReadKeyHash reads a key hash (as HGETALL gives it) into the KeyState
// the admin API shows; a hash with no state is absent. op and key name
// the read in an error.
func ReadKeyHash(op, key string, h map[string]string) (KeyState, error) {
	return readKeyHash(op, key, h, 0)
}

// readKeyHash is ReadKeyHash judging a sync copy's lease on Redis' clock
// now (ms); 0: not judged, a lock is in flight.
func readKeyHash(op, key string, h map[string]string, now int64) (KeyState, error) {
	ks := KeyState{State: StateAbsent}
	switch h["st"] {
	case ledgerReset:
		return ks, nil
	case "":
		if h["n"] == "" {
			return ks, nil
		}
	case ledgerLocked:
		if lease, _ := strconv.ParseInt(h["lease"], 10, 64); now == 0 || lease > now {
			ks.State = StateInFlight
		}
	case ledgerEnqueuing, ledgerQueued:
		ks.State = StateQueued
	case ledgerDead:
		ks.State = StateDeadLettered
	case ledgerDone:
		ks.State = StateFinished
	default:
		return ks, fmt.Errorf("ledger: redis %s %q: %w: state %q", op, key, errBothCorrupt, clipLedger(h["st"]))
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
			return ks, fmt.Errorf("ledger: redis %s %q: %w: %v", op, key, errBothCorrupt, err)
		}
		ks.Status, ks.Outcome = out.Status, out
	}
	return ks, nil
}

// ReadKeyReply reads a script's HGETALL reply of a key hash (key_delete's)
// as ReadKeyHash does.
func ReadKeyReply(op, key string, res []any) (KeyState, error) {
	if len(res)%2 != 0 {
		return KeyState{}, ledgerCorrupt(op, res)
	}
	h := make(map[string]string, len(res)/2)
	for i := 0; i < len(res); i += 2 {
		k, ok1 := ledgerElem[string](res, i)
		v, ok2 := ledgerElem[string](res, i+1)
		if !ok1 || !ok2 {
			return KeyState{}, ledgerCorrupt(op, res)
		}
		h[k] = v
	}
	return ReadKeyHash(op, key, h)
}

// ReadSeen reads key_seen's reply about a known key: {1, n, st, eid, fp}
// is Pending (InFlight while reserved, Dead when dead-lettered), {2, n,
// rec} Delivered. ok false for any other reply.
func ReadSeen(op, key string, res []any) (r Reserved, ok bool, err error) {
	code, _ := ledgerElem[int64](res, 0)
	n, ok1 := ledgerElem[int64](res, 1)
	switch code {
	case 1:
		st, ok2 := ledgerElem[string](res, 2)
		eid, ok3 := ledgerElem[string](res, 3)
		fp, ok4 := ledgerElem[string](res, 4)
		if !ok1 || !ok2 || !ok3 || !ok4 || len(res) != 5 {
			return Reserved{}, false, nil
		}
		r := Reserved{State: Pending, ID: eid, Fingerprint: fp, Copies: n}
		switch st {
		case ledgerEnqueuing, ledgerLocked:
			// Being stored (Kafka), or forwarded by a sync route's copy.
			r.State = InFlight
		case ledgerQueued:
		case ledgerDead:
			r.Dead = true
		default:
			return Reserved{}, true, fmt.Errorf("ledger: redis %s %q: %w: state %q", op, key, ErrCorrupt, clipLedger(st))
		}
		return r, true, nil
	case 2:
		rec, ok2 := ledgerElem[string](res, 2)
		if !ok1 || !ok2 || len(res) != 3 {
			return Reserved{}, false, nil
		}
		out, err := store.DecodeOutcome([]byte(rec))
		if err != nil {
			return Reserved{}, true, fmt.Errorf("ledger: redis %s %q: %w: %v", op, key, ErrCorrupt, err)
		}
		return Reserved{State: Delivered, Fingerprint: out.Fingerprint, Outcome: out, Copies: n}, true, nil
	}
	return Reserved{}, false, nil
}
