package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"sort"
	"strconv"
	"time"
)

// Per-object order (a route's order.by), as model/order.pml specifies it.
//
// Each event of an ordered route carries its order value (Reservation.
// Order). When its key becomes queued (the durable enqueue: Confirm, or a
// Begin that adopts the reservation) the value's sequence is taken in the
// same step, and the key joins the value's line (the live set: every
// undelivered event of the value, by sequence). The head is the line's
// least sequence.
//
//	Begin   of a key that is not its value's head parks it: nothing is
//	        counted, the transport drops its entry or record, and the key
//	        waits in the value's wait set. Of the head: begun as on any
//	        queue route; Begun.Stale when its stale value is below the
//	        greatest delivered for its value.
//	Settle  delivered (skipped included) or dead with on_dead: continue
//	        takes the key out of the line; a retry keeps it (the value
//	        waits). dead with hold keeps it until Replay and a delivery,
//	        or Purge. When the new head is parked it is due to be handed
//	        back: HandBacks gives it a pending token (adopted by its
//	        Begin, as a retry record's) and the transport makes an entry
//	        or record carrying it: the memory queue under its lock, in
//	        the same step; Kafka in a step of its own (produce the record,
//	        fetched from the parked position), which an instance may die
//	        before, so HandBacks also hands back again a due key not
//	        begun since redo ago (the sweeper), with the same pending
//	        token: of two records carrying it the first begun wins and
//	        the other is a leftover, so a slow consumer is never raced
//	        by an endless chain of new tokens.
//	Replay  of a key still in the line (hold) keeps its place; of one
//	        that left it (continue) takes a new sequence: it is delivered
//	        after the events of its value queued before the replay.
//
// A key's order value and sequence live on its record (ov, os; sv its
// stale value), so a try of the head that an instance died during is
// recovered by the transport's lease as on any route: the head does not
// move until it settles.

// Gate answers of a begin.
const (
	gatePass  = 0
	gatePark  = 1
	gateStale = 2
)

// memOrders are a route's order values in a Memory ledger.
type memOrders struct {
	vals    map[string]*memOrder
	waiting int64 // parked keys, over every value
	// due are the keys whose turn came while parked, not begun since:
	// when each was last handed back (zero: not yet) and its parked
	// position.
	due map[string]memDue
}

type memDue struct {
	at  time.Time
	pos string
}

// memOrder is one order value: its sequence, its line (key -> seq), the
// parked keys (key -> seq), the greatest stale value delivered.
type memOrder struct {
	seq     int64
	live    map[string]int64
	parked  map[string]int64
	last    float64
	hasLast bool
	expires time.Time // zero: kept; a value with an empty line is kept for its stale value's retention
}

// HandBack is a parked key handed back: the transport makes a ready entry
// or record of event EventID carrying Token (the key's pending token),
// with the payload of the entry or record parked at Pos.
type HandBack struct {
	Key, EventID, Token, Pos string
}

// orderOf records the reservation's order and stale values on k.
func (k *memLedgerKey) orderOf(res Reservation) {
	if res.Order == "" {
		return
	}
	ko := &memKeyOrder{ov: res.Order}
	k.more().ko = ko
	if res.Stale == "" {
		return
	}
	if v, err := strconv.ParseFloat(res.Stale, 64); err == nil && !math.IsNaN(v) {
		ko.sv, ko.hasSV = v, true
	}
}

func (o *memOrders) value(v string) *memOrder {
	if o.vals == nil {
		o.vals = map[string]*memOrder{}
	}
	mo := o.vals[v]
	if mo == nil {
		mo = &memOrder{live: map[string]int64{}, parked: map[string]int64{}}
		o.vals[v] = mo
	}
	return mo
}

// orderAssign puts a key that became queued (or was replayed) in its
// value's line: a new sequence unless it is there already (a replay of a
// key dead-lettered with hold keeps its place).
func (r *memLedgerRoute) orderAssign(k *memLedgerKey) {
	ko := k.ko()
	if ko == nil {
		return
	}
	mo := r.ord.value(ko.ov)
	mo.expires = time.Time{}
	if _, ok := mo.live[k.name]; ok {
		return
	}
	mo.seq++
	ko.os = mo.seq
	mo.live[k.name] = ko.os
}

// head is the key of the value's least sequence ("" when the line is
// empty).
func (mo *memOrder) head() string {
	var key string
	var best int64
	for k, s := range mo.live {
		if key == "" || s < best || s == best && k < key {
			key, best = k, s
		}
	}
	return key
}

// orderGate decides a begin of k: pass (unordered, or the head), park (k
// joins the wait set) or stale.
func (r *memLedgerRoute) orderGate(k *memLedgerKey, pos string) int {
	ko := k.ko()
	if ko == nil {
		return gatePass
	}
	mo := r.ord.vals[ko.ov]
	if mo == nil {
		return gatePass
	}
	if _, ok := mo.live[k.name]; !ok {
		// Not in the line (written before it was ordered): unordered.
		return gatePass
	}
	if mo.head() != k.name {
		if _, ok := mo.parked[k.name]; !ok {
			mo.parked[k.name] = ko.os
			r.ord.waiting++
		}
		ko.ppos = pos
		return gatePark
	}
	delete(r.ord.due, k.name)
	if ko.hasSV && mo.hasLast && ko.sv < mo.last {
		return gateStale
	}
	return gatePass
}

// orderDone takes k out of its value's line (delivered: its stale value
// raises the value's greatest), and hands the new head back when it is
// parked. keep is how long a value whose line is now empty is kept for its
// stale value (zero: as long as it was).
func (r *memLedgerRoute) orderDone(k *memLedgerKey, delivered bool, keep time.Time) {
	ko := k.ko()
	if ko == nil {
		return
	}
	mo := r.ord.vals[ko.ov]
	if mo == nil {
		return
	}
	delete(mo.live, k.name)
	delete(r.ord.due, k.name)
	if _, ok := mo.parked[k.name]; ok {
		delete(mo.parked, k.name)
		r.ord.waiting--
	}
	if delivered && ko.hasSV && (!mo.hasLast || ko.sv > mo.last) {
		mo.last, mo.hasLast = ko.sv, true
	}
	h := mo.head()
	if h == "" {
		if !mo.hasLast {
			delete(r.ord.vals, ko.ov)
		} else if !keep.IsZero() {
			mo.expires = keep
		}
		return
	}
	if _, ok := mo.parked[h]; !ok {
		return
	}
	delete(mo.parked, h)
	r.ord.waiting--
	if r.ord.due == nil {
		r.ord.due = map[string]memDue{}
	}
	pos := ""
	if hk := r.keys[h]; hk != nil && hk.ko() != nil {
		pos = hk.ko().ppos
	}
	r.ord.due[h] = memDue{pos: pos}
}

// orderKeep is how long from now a value whose line is empty keeps its
// stale value: retention (zero: as long as it was).
func orderKeep(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(ledgerTTL(retention)) * time.Millisecond)
}

// sweep forgets the values with an empty line whose stale value's
// retention ended.
func (o *memOrders) sweep(now time.Time) {
	for v, mo := range o.vals {
		if len(mo.live) == 0 && !mo.expires.IsZero() && !now.Before(mo.expires) {
			delete(o.vals, v)
		}
	}
}

// HandBacks implements Ledger.
func (m *Memory) HandBacks(_ context.Context, route string, redo time.Duration, limit int) ([]HandBack, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.route(route)
	keys := make([]string, 0, len(r.ord.due))
	for key := range r.ord.due {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var out []HandBack
	for _, key := range keys {
		if limit > 0 && len(out) >= limit {
			break
		}
		d := r.ord.due[key]
		if !d.at.IsZero() && (redo <= 0 || now.Sub(d.at) < redo) {
			continue
		}
		k := r.key(key, now)
		if k == nil || k.st != stQueued {
			delete(r.ord.due, key)
			continue
		}
		x := k.x
		if x.ptok == "" {
			x.ptok = orderToken()
		}
		d.at = now
		r.ord.due[key] = d
		out = append(out, HandBack{Key: key, EventID: x.eid, Token: x.ptok, Pos: d.pos})
	}
	return out, nil
}

// OrderLine reports route's order value v as the tests look at it: the
// keys of its line by sequence and the parked ones, sorted.
func (m *Memory) OrderLine(route, v string) (line, parked []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mo := m.route(route).ord.vals[v]
	if mo == nil {
		return nil, nil
	}
	for k := range mo.live {
		line = append(line, k)
	}
	sort.Slice(line, func(i, j int) bool { return mo.live[line[i]] < mo.live[line[j]] })
	for k := range mo.parked {
		parked = append(parked, k)
	}
	sort.Strings(parked)
	return line, parked
}

// orderToken mints a handed-back key's token.
func orderToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// The gate on Redis: functions of the Lua library (lua.go), called by the
// Redis ledger's scripts and the Redis Streams queue's. p is the route's
// (Streams queue: the shard's) order prefix, in the slot of its key
// records; per order value v:
//
//	p h:<v>   hash: seq (the last sequence taken), last (the greatest
//	          stale value delivered); expires after the retention once
//	          the line is empty, deleted then when it has no last
//	p l:<v>   zset key -> seq: the line (every undelivered event of v)
//	p p:<v>   zset key -> seq: the parked keys
//	p d       zset key -> when last handed back (ms; 0 not yet): keys
//	          whose turn came while parked, not begun since
//	p w       the parked keys' count (webhook_queue_order_waiting)
//
// and on the key record: ov (the order value), os (its sequence), sv
// (its stale value), ppos (where its entry or record was parked).
var orderLua = []luaFunc{
	{"ord_assign", `
-- ord_assign puts a key that became queued (or was replayed) in its
-- value's line: a new sequence, unless it is there already (a replay of a
-- key dead-lettered with on_dead: hold keeps its place).
local function ord_assign(k, p, key)
  local v = redis.call('HGET', k, 'ov')
  if not v or v == '' then
    return
  end
  local line, h = p .. 'l:' .. v, p .. 'h:' .. v
  redis.call('PERSIST', h)
  if redis.call('ZSCORE', line, key) then
    return
  end
  local seq = redis.call('HINCRBY', h, 'seq', 1)
  redis.call('HSET', k, 'os', seq)
  redis.call('ZADD', line, seq, key)
end
`},
	{"ord_new", `
-- ord_new puts a key just queued by the same script (key_queue: a new
-- record) in the line of order value v with stale value sv ('' none): a
-- new sequence, written with ov and sv in one step. ord_assign's for a new
-- key, without reading back what the script just wrote.
local function ord_new(k, p, key, v, sv)
  local line, h = p .. 'l:' .. v, p .. 'h:' .. v
  redis.call('PERSIST', h)
  local seq = redis.call('HINCRBY', h, 'seq', 1)
  if sv ~= '' then
    redis.call('HSET', k, 'ov', v, 'os', seq, 'sv', sv)
  else
    redis.call('HSET', k, 'ov', v, 'os', seq)
  end
  redis.call('ZADD', line, seq, key)
end
`},
	{"ord_gate", `
-- ord_gate decides a begin of key from pos: nil (unordered, or its
-- value's head), 'park' (not the head: it joins the wait set, nothing
-- else changes) or 'stale' (the head, older than an event of its value
-- already delivered). f, when given, is the key's {ov, os, sv} as the
-- caller read them (key_can_begin's h[9], h[10], h[11]); nil: read here.
-- nodue: the transport keeps no due set (ord_done's begun), so the head
-- is not taken out of it.
local function ord_gate(k, p, key, pos, f, nodue)
  if not f then
    f = redis.call('HMGET', k, 'ov', 'os', 'sv')
  end
  local v = f[1]
  if not v or v == '' then
    return nil
  end
  local line = p .. 'l:' .. v
  -- The head is in the line: one read decides the usual begin; only
  -- another key's is asked whether it is in the line at all.
  if redis.call('ZRANGE', line, 0, 0)[1] ~= key then
    if not redis.call('ZSCORE', line, key) then
      return nil
    end
    if redis.call('ZADD', p .. 'p:' .. v, tonumber(f[2]) or 0, key) == 1 then
      redis.call('INCR', p .. 'w')
    end
    redis.call('HSET', k, 'ppos', pos)
    return 'park'
  end
  if not nodue then
    redis.call('ZREM', p .. 'd', key)
  end
  if f[3] then
    local last = redis.call('HGET', p .. 'h:' .. v, 'last')
    if last and tonumber(f[3]) < tonumber(last) then
      return 'stale'
    end
  end
  return nil
end
`},
	{"ord_done", `
-- ord_done takes key out of its value's line (delivered: its stale value
-- raises the value's last; keep, when given, is how long a value whose
-- line is now empty keeps it, ms). When the new head is parked it leaves
-- the wait set, becomes due (p d) and is returned; else nil. f, when
-- given, is the key's {ov, sv} as the caller read them (key_try's second
-- result); nil: read here. begun: key is settling a try it began as its
-- value's head from a transport that keeps no due set (the Streams queue,
-- whose hand_back empties it in the same script): it is then neither
-- parked nor due (a key leaves both when it becomes the head, and the
-- head stays the head until it leaves the line), so they are not asked.
local function ord_done(k, p, key, delivered, keep, f, begun)
  if not f then
    f = redis.call('HMGET', k, 'ov', 'sv')
  end
  local v = f[1]
  if not v or v == '' then
    return nil
  end
  local line, h, park = p .. 'l:' .. v, p .. 'h:' .. v, p .. 'p:' .. v
  redis.call('ZREM', line, key)
  if not begun then
    redis.call('ZREM', p .. 'd', key)
    if redis.call('ZREM', park, key) == 1 then
      redis.call('DECR', p .. 'w')
    end
  end
  local haslast = false
  if delivered and f[2] then
    local last = redis.call('HGET', h, 'last')
    if not last or tonumber(f[2]) > tonumber(last) then
      redis.call('HSET', h, 'last', f[2])
    end
    haslast = true
  end
  local head = redis.call('ZRANGE', line, 0, 0)[1]
  if not head then
    if not haslast and redis.call('HEXISTS', h, 'last') == 0 then
      redis.call('DEL', h)
    elseif keep then
      redis.call('PEXPIRE', h, keep)
    end
    return nil
  end
  if redis.call('ZREM', park, head) == 0 then
    return nil
  end
  redis.call('DECR', p .. 'w')
  redis.call('ZADD', p .. 'd', 0, head)
  return head
end
`},
}

// fullLib is the library luaSource builds scripts from: lua.go's, then
// the order gate's.
var fullLib = append(append(append([]luaFunc{luaLib[0]}, histLua...), luaLib[1:]...), orderLua...)

// orderPrefix is the name of route's order keys without their suffix (in
// the route's slot).
func (l *Redis) orderPrefix(route string) string {
	return l.prefix + "webhook_kord:" + ledgerTag(route)
}

// KEYS: due. ARGV: now ms, redo ms (0: none), limit, key hash prefix,
// then one new token per key to hand back (limit of them).
// Reply: {key, eid, parked position, token} per key handed back.
var ledgerHandBacksScript = Script(`
local now, redo, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cut = 0
if redo > 0 then
  cut = now - redo
end
local due = redis.call('ZRANGE', KEYS[1], '-inf', cut, 'BYSCORE', 'LIMIT', 0, limit)
local out = {}
for i, key in ipairs(due) do
  local k = ARGV[4] .. key
  local h = redis.call('HMGET', k, 'st', 'eid', 'ppos', 'ptok')
  if h[1] ~= QUEUED then
    redis.call('ZREM', KEYS[1], key)
  else
    local tok = h[4] or ARGV[4 + i]
    key_pend(k, tok)
    redis.call('ZADD', KEYS[1], now, key)
    out[#out + 1] = {key, h[2] or '', h[3] or '', tok}
  end
end
return out
`)

// HandBacks implements Ledger.
func (l *Redis) HandBacks(ctx context.Context, route string, redo time.Duration, limit int) ([]HandBack, error) {
	if limit <= 0 {
		limit = 100
	}
	ctx, cancel := l.ctx(ctx)
	defer cancel()
	args := []any{ledgerMs(l.now()), max(0, redo.Milliseconds()), limit, l.keyPrefix(route)}
	for range limit {
		args = append(args, orderToken())
	}
	res, err := l.evalSlice(ctx, "hand back", ledgerHandBacksScript, []string{l.orderPrefix(route) + "d"}, args...)
	if err != nil {
		return nil, err
	}
	out := make([]HandBack, 0, len(res))
	for _, x := range res {
		f, _ := x.([]any)
		key, ok1 := ledgerElem[string](f, 0)
		eid, ok2 := ledgerElem[string](f, 1)
		pos, ok3 := ledgerElem[string](f, 2)
		tok, ok4 := ledgerElem[string](f, 3)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return out, ledgerCorrupt("hand back", res)
		}
		out = append(out, HandBack{Key: key, EventID: eid, Token: tok, Pos: pos})
	}
	return out, nil
}
