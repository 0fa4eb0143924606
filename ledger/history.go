package ledger

import (
	"context"
	"math"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
)

// A key's history: the newest entries, at most History.Cap, written by
// the key's record in the same atomic step as the change each records
// (one Lua script on Redis, under the lock in Memory), kept as long as
// the record and, once an operator reset or deleted it, for
// History.Keep (in a record of state reset that holds only the history
// and what a reset tombstone keeps). On Redis the entries are the hash's
// field h; in Memory the record's hist.
//
// Only a change to a record, or a record that exists, gets an entry: an
// unauthenticated copy, or one of an unknown key, never creates one (see
// Memory.Note), so forged keys cannot pin memory or Redis.

// HistoryOptions configure the history.
type HistoryOptions struct {
	// Cap is the entries kept per key, oldest dropped first; 0: no
	// history (nothing written).
	Cap int
	// Keep is how long the history of a key an operator reset or
	// deleted outlives it; 0: store.DefaultAttemptsTTL.
	Keep time.Duration
	// Instance names this instance in its entries.
	Instance string

	box *histBox // the script arguments of the fields above (Prepared)
}

func (o HistoryOptions) keep() time.Duration {
	if o.Keep <= 0 {
		return store.DefaultAttemptsTTL
	}
	return o.Keep
}

// memHistory is a key's history in Memory: its entries encoded as on
// Redis (store.EncodeHistory, joined by 0x1e, oldest first) in one string,
// which costs a finished key about half what a slice of entries would,
// and n, their count.
type memHistory struct {
	s string
	n int
}

func (h *memHistory) size() int64 {
	if h == nil {
		return 0
	}
	// The struct and the string, as the allocator rounds them.
	return int64(memAlloc(int(unsafe.Sizeof(*h))) + memAlloc(len(h.s)))
}

// SetHistory sets the history's options; call it before use.
func (m *Memory) SetHistory(o HistoryOptions) { m.histo = o }

// hist appends an entry to k's history (nothing when it is off).
func (m *Memory) hist(ctx context.Context, k *memLedgerKey, now time.Time, kind string, attempt int64, status int, detail string) {
	if m.histo.Cap <= 0 || k == nil {
		return
	}
	n := store.NoteFrom(ctx)
	if n.Unrecorded {
		return
	}
	if status == 0 {
		status = n.Status
	}
	if k.hist == nil {
		k.hist = &memHistory{}
	}
	h := k.hist
	if k.acct != 0 {
		// A counted record: the budget follows its history's growth.
		before := h.size()
		defer func() {
			d := h.size() - before
			size := uint32(min(max(int64(k.size)+d, 0), math.MaxUint32))
			m.done += int64(size) - int64(k.size)
			k.size = size
			if d > 0 && m.bounded() {
				m.shrink(k)
			}
		}()
	}
	at := now
	if !n.At.IsZero() {
		at = n.At
	}
	e := store.EncodeHistory(store.HistoryEntry{At: at, Kind: kind, Instance: m.histo.Instance,
		RequestID: n.RequestID, Attempt: attempt, Status: status, MS: n.UpstreamMS, Detail: detail + n.Suffix()})
	rest := h.s
	for ; h.n >= m.histo.Cap && rest != ""; h.n-- {
		_, rest, _ = strings.Cut(rest, "\x1e")
	}
	if rest == "" {
		h.s, h.n = e, 1
		return
	}
	h.s, h.n = rest+"\x1e"+e, h.n+1
}

// keepHistory leaves route r's key name, just forgotten with its history
// h, a record holding the history for History.Keep (tomb, when not nil,
// is the reset tombstone to carry it).
func (m *Memory) keepHistory(r *memLedgerRoute, name string, h *memHistory, tomb *memLedgerKey, now time.Time) {
	if h == nil || m.histo.Cap <= 0 {
		return
	}
	until := now.Add(m.histo.keep())
	if tomb != nil {
		tomb.hist = h
		tomb.expireNoSooner(until)
		return
	}
	k := &memLedgerKey{st: stReset, name: name, hist: h}
	k.expireAt(until)
	r.keys[name] = k
	m.remember(r, name, k)
}

// History returns route's key's history, oldest first.
func (m *Memory) History(_ context.Context, route, key string) ([]store.HistoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.route(route).key(key, m.now())
	if k == nil || k.hist == nil {
		return nil, nil
	}
	return ReadHistory(k.hist.s), nil
}

// Note appends an arrival that changed nothing to route's key's history
// (a copy answered from an instance's local window, or refused 401),
// only when the key has a record: a copy of an unknown key, or one that
// was not authenticated, never creates a record or a history.
func (m *Memory) Note(ctx context.Context, route, key, verdict string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := m.route(route).key(key, now)
	if k == nil || k.st == stReset && k.hist == nil {
		return nil
	}
	m.hist(ctx, k, now, store.HistArrival, k.n, 0, verdict)
	return nil
}

// Redis.

// histLua is the history's part of the Lua library.
var histLua = []luaFunc{
	{"hist_args", `
-- hist_args reads the history arguments from ARGV[i]: cap, keep ms (as
-- sent: hist_kept alone reads it as a number), at ms, instance, request
-- id, status, upstream ms, detail suffix (strings: an entry joins them as
-- they are, no number is formatted again); nil
-- when the history is off (cap 0). A negative cap: on, but this call
-- records nothing (H[9]): a history it moves is kept all the same.
local function hist_args(i)
  local cap = tonumber(ARGV[i]) or 0
  if cap == 0 then
    return nil
  end
  return {math.abs(cap), ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], cap < 0}
end
`},
	{"hist_entry", `
-- hist_entry is the history s (false or nil: none) with an entry
-- appended (H from hist_args): entries separated by \30 and their fields
-- by \31, the oldest dropped past H[1]. It calls nothing: the key
-- transitions that read and write the record anyway (key_claim,
-- key_done) carry the history in the same HMGET and HSET.
local function hist_entry(s, H, kind, attempt, status, detail)
  if not status or status == 0 or status == '0' then
    status = H[6]
  end
  local e = H[3] .. '\31' .. kind .. '\31' .. H[4] .. '\31' .. H[5] .. '\31' .. (attempt or 0) .. '\31' .. status .. '\31' .. H[7] .. '\31' .. (detail or '') .. H[8]
  if not s then
    return e
  end
  s = s .. '\30' .. e
  -- Every entry holds seven \31 and one \30 joins two: n entries take at
  -- least 8n - 1 bytes, so a shorter history cannot be over the cap and
  -- is not counted (a key's few entries are never scanned).
  if #s < 8 * H[1] then
    return s
  end
  local n, i = 1, string.find(s, '\30', 1, true)
  while i do
    n = n + 1
    i = string.find(s, '\30', i + 1, true)
  end
  while n > H[1] do
    s = string.sub(s, string.find(s, '\30', 1, true) + 1)
    n = n - 1
  end
  return s
end
`},
	{"hist_add", `
-- hist_add appends an entry to k's history (H from hist_args; nil: off):
-- the hash's field h (hist_entry). It lives and dies with the hash.
local function hist_add(k, H, kind, attempt, status, detail)
  if not H or H[9] then
    return
  end
  redis.call('HSET', k, 'h', hist_entry(redis.call('HGET', k, 'h'), H, kind, attempt, status, detail))
end
`},
	{"hist_kept", `
-- hist_kept records an operator's reset or delete of k, whose history
-- was old (false: none) before the record was deleted: the history goes
-- on in what is left of the record (a reset tombstone, or a record of
-- state reset made for it), kept at least keep ms (H[2]).
local function hist_kept(k, H, old, kind, attempt, detail)
  if not H then
    return
  end
  if redis.call('EXISTS', k) == 0 then
    redis.call('HSET', k, 'st', RESET)
  end
  if old then
    redis.call('HSET', k, 'h', old)
  end
  hist_add(k, H, kind, attempt, 0, detail)
  local keep = tonumber(H[2]) or 0
  if redis.call('PTTL', k) < keep then
    redis.call('PEXPIRE', k, keep)
  end
end
`},
	{"done_verdict", `
-- done_verdict is the verdict of a copy (fingerprint fp) of finished key
-- k: replayed, or conflict for another payload.
local function done_verdict(k, fp)
  if redis.call('HGET', k, 'fp') ~= fp then
    return 'conflict'
  end
  return 'replayed'
end
`},
	{"seen_hist", `
-- seen_hist appends the arrival key_seen's reply r tells of (fp the
-- copy's fingerprint) and returns r.
local function seen_hist(k, r, fp, H)
  if H then
    local v = 'queued'
    if r[1] == 2 then
      v = done_verdict(k, fp)
    elseif r[3] == ENQ or r[3] == LOCK then
      v = 'in_flight'
    elseif r[5] ~= fp then
      v = 'conflict'
    end
    hist_add(k, H, 'arrival', r[2], 0, v)
  end
  return r
end
`},
	{"claim_hist", `
-- claim_hist appends the arrival key_claim's reply r tells of (fp the
-- copy's fingerprint; history arguments H) and returns r. A copy that
-- locked the key (r[1] 0) key_claim has recorded itself, as forwarded.
local function claim_hist(k, r, fp, H)
  if H and r[1] ~= 0 then
    local c, v = r[1], 'queued'
    if c == 1 then
      v = 'in_flight'
    elseif c == 2 then
      v = done_verdict(k, fp)
    elseif r[5] ~= fp then
      v = 'conflict'
    end
    hist_add(k, H, 'arrival', r[2], 0, v)
  end
  return r
end
`},
	{"note_hist", `
-- note_hist appends an arrival that changed nothing (verdict v) to k's
-- history, only when k has a record or a history already.
local function note_hist(k, H, v)
  if not H then
    return 0
  end
  if redis.call('EXISTS', k) == 0 then
    return 0
  end
  hist_add(k, H, 'arrival', redis.call('HGET', k, 'n') or 0, 0, v)
  return 1
end
`},
}

// HistoryArgs are the arguments a script of the Lua library's history
// functions reads with hist_args(i), last of its ARGV; with status, when
// not 0, as the entries' upstream status.
func HistoryArgs(ctx context.Context, o HistoryOptions, now time.Time, status int) []any {
	a := histArgs(ctx, o, now)
	if status != 0 && o.Cap > 0 {
		a[5] = status
	}
	return a
}

// histArgs are the history arguments of a script (hist_args): none but
// a 0 cap when the history is off.
func histArgs(ctx context.Context, o HistoryOptions, now time.Time) []any {
	return appendHist(make([]any, 0, histN), ctx, o, now)
}

// histN is the number of history arguments.
const histN = 8

// histOff are the history arguments when the history is off.
var histOff = [histN]any{0, 0, 0, "", "", 0, 0, ""}

// appendHist appends the history arguments to dst (the script's other
// arguments, with room for histN more: a unique delivery's two scripts
// then build their arguments in one allocation).
func appendHist(dst []any, ctx context.Context, o HistoryOptions, now time.Time) []any {
	if o.Cap <= 0 {
		return append(dst, histOff[:]...)
	}
	b := o.box
	if b == nil { // options not passed through Prepared
		b = o.boxed()
	}
	n := store.NoteFrom(ctx)
	if n.Unrecorded {
		return append(dst, b.negCap, b.keep, 0, "", "", 0, 0, "")
	}
	if !n.At.IsZero() {
		now = n.At
	}
	return append(dst, b.cap, b.keep, now.UnixMilli(), b.inst, store.CleanField(n.RequestID), n.Status, n.UpstreamMS, store.CleanField(n.Suffix()))
}

// histBox is a HistoryOptions's constant script arguments, boxed once.
type histBox struct{ cap, negCap, keep, inst any }

func (o HistoryOptions) boxed() *histBox {
	return &histBox{cap: o.Cap, negCap: -o.Cap, keep: o.keep().Milliseconds(), inst: store.CleanField(o.Instance)}
}

// Prepared is o with its constant script arguments boxed once, for the
// SetHistory of a store whose scripts take them (HistoryArgs).
func (o HistoryOptions) Prepared() HistoryOptions {
	o.box = o.boxed()
	return o
}

// ReadHistory reads a record's history field (h), oldest first (by
// time: an entry written late, such as the copies a window answered, takes
// its place), skipping what is not an entry.
func ReadHistory(h string) []store.HistoryEntry {
	if h == "" {
		return nil
	}
	vals := strings.Split(h, "\x1e")
	out := make([]store.HistoryEntry, 0, len(vals))
	for _, v := range vals {
		if e, ok := store.DecodeHistory(v); ok {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

var (
	// KEYS: key hash. ARGV: verdict, then the history's. Reply: 1
	// appended, 0 not (no record).
	noteScript = Script(`return note_hist(KEYS[1], hist_args(2), ARGV[1])`)
	// KEYS: key hash. Reply: its history field ('' none).
	historyScript = redis.NewScript(`return redis.call('HGET', KEYS[1], 'h') or ''`)
)

// hargs is args followed by the history's.
func (l *Redis) hargs(ctx context.Context, args ...any) []any {
	return appendHist(args, ctx, l.histo, l.now())
}

// History returns route's key's history, oldest first.
func (l *Redis) History(ctx context.Context, route, key string) ([]store.HistoryEntry, error) {
	return l.syncer().History(ctx, route, key)
}

// Note appends an arrival that changed nothing to route's key's history
// when the key has a record.
func (l *Redis) Note(ctx context.Context, route, key, verdict string) error {
	return l.syncer().Note(ctx, route, key, verdict)
}

// SetHistory sets the history's options; call it before use.
func (s *SyncRedis) SetHistory(o HistoryOptions) { s.hist = o.Prepared() }

// SetHistory sets the history's options of the sync routes' records;
// call it before use.
func (s *RedisStore) SetHistory(o HistoryOptions) { s.sync.SetHistory(o) }

// SetHistory sets the history's options; call it before use (after
// SetSync).
func (l *Redis) SetHistory(o HistoryOptions) {
	o = o.Prepared()
	l.histo = o
	if l.sync != nil {
		l.sync.SetHistory(o)
	}
}

// History returns route's key's history, oldest first.
func (s *SyncRedis) History(ctx context.Context, route, key string) ([]store.HistoryEntry, error) {
	hash, _, _ := s.place(route, key)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.eval(ctx, s.run, "history", historyScript, []string{hash})
	if err != nil {
		return nil, err
	}
	str, _ := v.(string)
	return ReadHistory(str), nil
}

// Note appends an arrival that changed nothing to route's key's history,
// as Memory.Note does: only when the key has a record.
func (s *SyncRedis) Note(ctx context.Context, route, key, verdict string) error {
	if s.hist.Cap <= 0 {
		return nil
	}
	hash, _, _ := s.place(route, key)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	_, err := s.eval(ctx, s.run, "note", noteScript, []string{hash}, append([]any{verdict}, histArgs(ctx, s.hist, s.now())...)...)
	return err
}

// History implements store.Historian.
func (s *RedisStore) History(ctx context.Context, scoped string) ([]store.HistoryEntry, error) {
	route, key := splitScoped(scoped)
	return s.sync.History(ctx, route, key)
}

// Note appends an arrival that changed nothing to scoped's history when
// the key has a record (HistoryNoter).
func (s *RedisStore) Note(ctx context.Context, scoped, verdict string) error {
	route, key := splitScoped(scoped)
	return s.sync.Note(ctx, route, key, verdict)
}

// History implements store.Historian.
func (s *MemoryStore) History(ctx context.Context, scoped string) ([]store.HistoryEntry, error) {
	route, key := splitScoped(scoped)
	return s.m.History(ctx, route, key)
}

// Note appends an arrival that changed nothing to scoped's history when
// the key has a record (store.HistoryNoter).
func (s *MemoryStore) Note(ctx context.Context, scoped, verdict string) error {
	route, key := splitScoped(scoped)
	return s.m.Note(ctx, route, key, verdict)
}

// SetHistory sets the history's options; call it before use.
func (s *MemoryStore) SetHistory(o HistoryOptions) { s.m.SetHistory(o) }

var (
	_ store.Historian    = (*MemoryStore)(nil)
	_ store.Historian    = (*RedisStore)(nil)
	_ store.HistoryNoter = (*MemoryStore)(nil)
	_ store.HistoryNoter = (*RedisStore)(nil)
)

// reservedVerdict is the verdict of a copy of known key k with
// fingerprint fp arriving on a queue route.
func reservedVerdict(k *memLedgerKey, fp string) string {
	switch {
	case k.st == stEnqueuing || k.st == stLocked:
		return "in_flight"
	case k.st == stDone:
		if out, err := store.DecodeOutcome(k.rec); err == nil && out.Fingerprint != "" && out.Fingerprint != fp {
			return "conflict"
		}
		return "replayed"
	case k.fp != "" && k.fp != fp:
		return "conflict"
	}
	return "queued"
}
