package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/ledger/ledgertest"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// opTimeout bounds each call of the Redis ledgers under test: generous,
// since these tests check what they do, not how fast, and the race
// detector on a busy machine is slow.
const opTimeout = 10 * time.Second

var background = context.Background()

// kind is one ledger.Ledger implementation: setup starts what it needs
// for the test and returns a maker of fresh ledgers on a clock.
type kind struct {
	name  string
	setup func(t *testing.T) func(t *testing.T, clock *ledgertest.Clock) ledgertest.Subject
}

var kinds = []kind{
	{"memory", func(*testing.T) func(*testing.T, *ledgertest.Clock) ledgertest.Subject { return memorySubject }},
	{"redis", func(t *testing.T) func(*testing.T, *ledgertest.Clock) ledgertest.Subject {
		return redisSubjects(redisClient(t, redistest.Start(t)))
	}},
	{"redis-cluster", func(t *testing.T) func(*testing.T, *ledgertest.Clock) ledgertest.Subject {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
		t.Cleanup(func() { _ = cc.Close() })
		return redisSubjects(cc)
	}},
}

func memorySubject(_ *testing.T, clock *ledgertest.Clock) ledgertest.Subject {
	m := ledger.NewMemory(clock.Now)
	ttl := func(t *testing.T, route, key string) time.Duration { return ledger.MemoryTTL(m, route, key) }
	return ledgertest.Subject{
		Ledger: m,
		TTL:    ttl,
		Expire: func(t *testing.T, route, key string) {
			t.Helper()
			d := ttl(t, route, key)
			if d <= 0 {
				t.Fatalf("expire %s: key has no expiry (ttl %v)", key, d)
			}
			clock.Add(d)
		},
		EndLease: func(*testing.T, string, string) { clock.Add(ledgertest.Lease) },
	}
}

func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefixes gives every Redis ledger of the suite its own key space
// on a shared server.
var prefixes atomic.Int64

func redisSubjects(c redis.UniversalClient) func(*testing.T, *ledgertest.Clock) ledgertest.Subject {
	return func(t *testing.T, clock *ledgertest.Clock) ledgertest.Subject {
		l := ledger.NewRedis(c, "t"+strconv.FormatInt(prefixes.Add(1), 10)+":", opTimeout)
		l.Now = clock.Now
		ttl := func(t *testing.T, route, key string) time.Duration {
			t.Helper()
			d, err := c.PTTL(context.Background(), ledger.KeyHash(l, route, key)).Result()
			if err != nil {
				t.Fatalf("PTTL %s: %v", key, err)
			}
			return d
		}
		return ledgertest.Subject{
			Ledger: l,
			TTL:    ttl,
			Expire: func(t *testing.T, route, key string) {
				t.Helper()
				if d := ttl(t, route, key); d <= 0 {
					t.Fatalf("expire %s: key has no expiry (ttl %v)", key, d)
				}
				name := ledger.KeyHash(l, route, key)
				if err := c.PExpire(context.Background(), name, time.Millisecond).Err(); err != nil {
					t.Fatalf("PEXPIRE %s: %v", key, err)
				}
				ledgertest.WaitFor(t, "the key to expire", func() bool {
					n, err := c.Exists(context.Background(), name).Result()
					return err == nil && n == 0
				})
			},
			EndLease: func(t *testing.T, route, key string) {
				t.Helper()
				if err := c.HSet(context.Background(), ledger.KeyHash(l, route, key), "lease", 1).Err(); err != nil {
					t.Fatalf("HSET lease %s: %v", key, err)
				}
			},
		}
	}
}

func TestLedgerConformance(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) { ledgertest.Run(t, kind.setup(t)) })
	}
}

// --- Redis only ---

// TestLedgerRedisLayout checks the key names and contents others (and
// operators) rely on, on a Cluster so that every script's keys must share
// a slot.
func TestLedgerRedisLayout(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
	t.Cleanup(func() { _ = cc.Close() })
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(cc, "p:", opTimeout)
	l.Now = clock.Now
	ctx := background
	const tag = "{kq:" + ledgertest.Route + "}"
	kh, age, dead := "p:webhook_kkey:"+tag+"k", "p:webhook_kage:"+tag, "p:webhook_kdead:"+tag
	ledgertest.MustReserve(t, l, ledgertest.Res(clock, "k", "e1", "t1"))
	h := cc.HGetAll(ctx, kh).Val()
	if h["st"] != "enq" || h["eid"] != "e1" || h["tok"] != "t1" || h["fp"] != "fp-k" || h["n"] != "1" ||
		h["first"] != strconv.FormatInt(clock.Now().UnixMilli(), 10) {
		t.Fatalf("key hash after Reserve = %v", h)
	}
	ledgertest.MustConfirm(t, l, "k", "t1", true)
	if s, err := cc.ZScore(ctx, age, "e1").Result(); err != nil || int64(s) != clock.Now().UnixMilli() {
		t.Fatalf("age score = %v, %v", s, err)
	}
	ledgertest.MustBegin(t, l, "k", "e1", "t1", "p1", "w1", true)
	if h := cc.HGetAll(ctx, kh).Val(); h["pos"] != "p1" || h["owner"] != "w1" || h["qa"] != "1" || h["qt"] != "1" {
		t.Fatalf("key hash after Begin = %v", h)
	}
	ledgertest.MustSettle(t, l, "k", "e1", "t1", "w1", ledgertest.DeadSettlement(clock, "d1"), ledger.Recorded)
	if got := cc.HGet(ctx, dead, "e1").Val(); got != "k" {
		t.Fatalf("dead index e1 = %q", got)
	}
	if h := cc.HGetAll(ctx, kh).Val(); h["st"] != "dead" || h["dlq"] != "d1" || h["pos"] != "" || h["owner"] != "" {
		t.Fatalf("key hash after a dead letter = %v", h)
	}
	if n := cc.ZCard(ctx, age).Val(); n != 0 {
		t.Fatalf("age index holds %d", n)
	}
	// Every name of the route hashes to one slot.
	slots := map[int64]bool{}
	for _, k := range []string{kh, age, dead} {
		s, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[s] = true
	}
	if len(slots) != 1 {
		t.Fatalf("the route's keys span slots %v", slots)
	}
}

// TestLedgerRedisBatcher sends the scripts through a runner.
func TestLedgerRedisBatcher(t *testing.T) {
	c := redisClient(t, redistest.Start(t))
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(c, "b:", opTimeout)
	var calls atomic.Int64
	l.UseBatcher(func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		calls.Add(1)
		return s.Run(ctx, c, keys, args...)
	})
	eid := ledgertest.Kill(t, l, clock, "k", "d")
	if err := l.Replay(background, ledgertest.Route, eid, "d", "r"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d scripts went through the runner, want 5", n)
	}
}

// The writes that acknowledge an event or record an outcome (Confirm,
// Settle, Replay, Purge) go through UseDurable's runner, which waits for
// store.redis.wait_replicas; the others through the batcher. They used to
// go through the batcher alone, with no WAIT.
func TestLedgerRedisDurableWrites(t *testing.T) {
	c := redisClient(t, redistest.Start(t))
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(c, "w:", opTimeout)
	l.Now = clock.Now
	var mu sync.Mutex
	var durable, batched int
	count := func(n *int) ledger.ScriptRunner {
		return func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
			mu.Lock()
			*n++
			mu.Unlock()
			return s.Run(ctx, c, keys, args...)
		}
	}
	l.UseBatcher(count(&batched))
	l.UseDurable(count(&durable))
	step := func(what string, wantDurable, wantBatched int, f func()) {
		t.Helper()
		f()
		mu.Lock()
		d, b := durable, batched
		durable, batched = 0, 0
		mu.Unlock()
		if d != wantDurable || b != wantBatched {
			t.Fatalf("%s: %d scripts through the durable runner, %d through the batcher; want %d and %d", what, d, b, wantDurable, wantBatched)
		}
	}
	var eid, tok string
	step("Reserve, Confirm", 1, 1, func() { eid, tok = ledgertest.Enqueue(t, l, clock, "k") })
	step("Begin", 0, 1, func() { ledgertest.MustBegin(t, l, "k", eid, tok, "p1", "w1", true) })
	step("Intend", 0, 1, func() {
		if got, err := l.Intend(background, ledgertest.Route, "k", eid, tok, "w1", "t2"); err != nil || got != ledger.Recorded {
			t.Fatalf("Intend = %v, %v", got, err)
		}
	})
	step("Settle (retry)", 1, 0, func() {
		ledgertest.MustSettle(t, l, "k", eid, tok, "w1", ledgertest.RetrySettlement("t2"), ledger.Recorded)
	})
	step("Begin", 0, 1, func() { ledgertest.MustBegin(t, l, "k", eid, "t2", "p2", "w1", true) })
	step("Settle (dead)", 1, 0, func() {
		ledgertest.MustSettle(t, l, "k", eid, "t2", "w1", ledgertest.DeadSettlement(clock, "d1"), ledger.Recorded)
	})
	step("Dead, Replay", 1, 1, func() {
		if _, _, err := l.Dead(background, ledgertest.Route, eid, "t3"); err != nil {
			t.Fatal(err)
		}
		if err := l.Replay(background, ledgertest.Route, eid, "d1", "t3"); err != nil {
			t.Fatal(err)
		}
	})
	step("Begin", 0, 1, func() { ledgertest.MustBegin(t, l, "k", eid, "t3", "p3", "w1", true) })
	step("Settle (dead)", 1, 0, func() {
		ledgertest.MustSettle(t, l, "k", eid, "t3", "w1", ledgertest.DeadSettlement(clock, "d2"), ledger.Recorded)
	})
	step("Purge", 1, 0, func() {
		if err := l.Purge(background, ledgertest.Route, eid, time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	step("Get, Stats, Delete", 0, 3, func() {
		ledgertest.WantState(t, l, "k", ledger.StateDeadLettered)
		ledgertest.WantStats(t, l, 0, 0, time.Time{})
		if _, err := l.Delete(background, ledgertest.Route, "k"); err != nil {
			t.Fatal(err)
		}
	})
	// The sync path: only Finish records an outcome.
	var sc store.Claim
	step("Claim", 0, 1, func() { sc = ledgertest.MustClaim(t, l, "s", store.Claimed) })
	step("Finish", 1, 0, func() {
		if err := l.Finish(background, ledgertest.Route, "s", sc.Token, ledgertest.SyncOutcome("s"), time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	step("Claim, Release, Reset", 0, 3, func() {
		sc = ledgertest.MustClaim(t, l, "s2", store.Claimed)
		if err := l.Release(background, ledgertest.Route, "s2", sc.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Reset(background, ledgertest.Route, "s2"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLedgerRedisCorrupt: data Redis holds but the ledger cannot read is
// ledger.ErrCorrupt.
func TestLedgerRedisCorrupt(t *testing.T) {
	c := redisClient(t, redistest.Start(t))
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(c, "c:", opTimeout)
	ctx := background
	// A key hash in a state no ledger writes.
	c.HSet(ctx, ledger.KeyHash(l, ledgertest.Route, "odd"), "st", "weird", "eid", "e", "n", "1")
	_, err := l.Get(ctx, ledgertest.Route, "odd")
	ledgertest.WantErr(t, "Get of an odd state", err, ledger.ErrCorrupt)
	_, err = l.Reserve(ctx, ledgertest.Res(clock, "odd", "e2", "t2"))
	ledgertest.WantErr(t, "Reserve of an odd state", err, ledger.ErrCorrupt)
	_, err = l.Delete(ctx, ledgertest.Route, "odd")
	ledgertest.WantErr(t, "Delete of an odd state", err, ledger.ErrCorrupt)
	// A finished key whose record is damaged.
	c.HSet(ctx, ledger.KeyHash(l, ledgertest.Route, "bad"), "st", "done", "eid", "e", "rec", "garbage")
	_, err = l.Get(ctx, ledgertest.Route, "bad")
	ledgertest.WantErr(t, "Get of a damaged record", err, ledger.ErrCorrupt)
	_, err = l.Reserve(ctx, ledgertest.Res(clock, "bad", "e2", "t2"))
	ledgertest.WantErr(t, "Reserve of a damaged record", err, ledger.ErrCorrupt)
	// Keys of the wrong type.
	c.Set(ctx, ledger.KeyHash(l, ledgertest.Route, "str"), "x", 0)
	_, err = l.Reserve(ctx, ledgertest.Res(clock, "str", "e2", "t2"))
	ledgertest.WantErr(t, "Reserve of a string key", err, ledger.ErrCorrupt)
	_, err = l.Get(ctx, ledgertest.Route, "str")
	ledgertest.WantErr(t, "Get of a string key", err, ledger.ErrCorrupt)
	c.Set(ctx, ledger.AgeSet(l, ledgertest.Route), "x", 0)
	c.Set(ctx, ledger.DeadIndex(l, ledgertest.Route), "x", 0)
	_, err = l.Stats(ctx, ledgertest.Route)
	ledgertest.WantErr(t, "Stats of string indexes", err, ledger.ErrCorrupt)
	_, _, err = l.ListDead(ctx, ledgertest.Route, "", 10)
	ledgertest.WantErr(t, "ListDead of a string index", err, ledger.ErrCorrupt)
	// A count that is not a number.
	c.HSet(ctx, ledger.KeyHash(l, ledgertest.Route, "nan"), "st", "queued", "eid", "e", "n", "many")
	_, err = l.Reserve(ctx, ledgertest.Res(clock, "nan", "e2", "t2"))
	ledgertest.WantErr(t, "Reserve with a bad count", err, ledger.ErrCorrupt)
}

// TestLedgerRedisOddReplies: replies no script gives are ledger.ErrCorrupt
// (or read as something harmless), never a panic.
func TestLedgerRedisOddReplies(t *testing.T) {
	replies := []any{nil, int64(7), int64(-1), "x", []any{}, []any{int64(1)}, []any{int64(0), "x"},
		[]any{"a", int64(1), nil}, []any{int64(2), "x"}, []any{int64(2), int64(1), int64(3)},
		[]any{int64(1), int64(1), int64(1), "fp", "notanumber"}, []any{int64(1), "k"}, []any{"1", "", "e"},
		[]any{"", "", "e", "k", "r", "s", "q", "e", "f", "d"}, []any{int64(1), int64(2), 3.5},
		[]any{int64(1), "st", "eid"}, []any{[]any{}, "x"}, redis.Nil, errors.New("boom")}
	clock := ledgertest.NewClock()
	// The scripts never reach a server: the runner answers.
	nowhere := redisClient(t, "127.0.0.1:1")
	for i, reply := range replies {
		l := ledger.NewRedis(nowhere, "", 0)
		l.UseBatcher(func(ctx context.Context, _ *redis.Script, _ []string, _ ...any) *redis.Cmd {
			cmd := redis.NewCmd(ctx)
			if err, ok := reply.(error); ok {
				cmd.SetErr(err)
			} else {
				cmd.SetVal(reply)
			}
			return cmd
		})
		check := func(op string, err error) {
			t.Helper()
			if err != nil && !errors.Is(err, ledger.ErrCorrupt) && !errors.Is(err, ledger.ErrNotFound) &&
				!errors.Is(err, ledger.ErrUnavailable) {
				t.Errorf("reply %d (%v): %s: unexpected error %v", i, reply, op, err)
			}
			if _, isErr := reply.(error); isErr && err == nil {
				t.Errorf("reply %d (%v): %s passed", i, reply, op)
			}
		}
		_, err := l.Reserve(background, ledgertest.Res(clock, "k", "e", "t"))
		check("Reserve", err)
		_, err = l.Confirm(background, "r", "k", "t")
		check("Confirm", err)
		check("Abort", l.Abort(background, "r", "k", "t"))
		_, _, err = l.Begin(background, "r", "k", "e", "t", "p", "o")
		check("Begin", err)
		_, err = l.Settle(background, "r", "k", "e", "t", "o", ledgertest.DoneSettlement("k"))
		check("Settle", err)
		_, _, err = l.Dead(background, "r", "e", "")
		check("Dead", err)
		check("Replay", l.Replay(background, "r", "e", "d", "t"))
		check("Purge", l.Purge(background, "r", "e", time.Hour))
		_, _, err = l.ListDead(background, "r", "", 1)
		check("ListDead", err)
		_, err = l.Delete(background, "r", "k")
		check("Delete", err)
		_, err = l.Stats(background, "r")
		check("Stats", err)
	}
	// Spot checks of exact answers.
	l := ledger.NewRedis(nowhere, "", 0)
	l.UseBatcher(func(ctx context.Context, _ *redis.Script, _ []string, _ ...any) *redis.Cmd {
		cmd := redis.NewCmd(ctx)
		cmd.SetVal(int64(7))
		return cmd
	})
	_, err := l.Settle(background, "r", "k", "e", "t", "o", ledgertest.DoneSettlement("k"))
	ledgertest.WantErr(t, "Settle replying 7", err, ledger.ErrCorrupt)
	_, err = l.Reserve(background, ledgertest.Res(clock, "k", "e", "t"))
	ledgertest.WantErr(t, "Reserve replying 7", err, ledger.ErrCorrupt)
	_, err = l.Stats(background, "r")
	ledgertest.WantErr(t, "Stats replying 7", err, ledger.ErrCorrupt)
}

// TestLedgerRedisUnavailable: a Redis that does not answer is
// ledger.ErrUnavailable from every method.
func TestLedgerRedisUnavailable(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(c, "u:", opTimeout)
	ledgertest.Kill(t, l, clock, "k", "d") // it works while Redis runs
	srv.Stop()
	for name, call := range allCalls(l, clock) {
		if err := call(); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s against a stopped Redis: %v, want ErrUnavailable", name, err)
		}
	}
	// A paused Redis runs into the timeout.
	srv.Start()
	srv.Pause()
	t.Cleanup(srv.Resume)
	l = ledger.NewRedis(c, "u:", 100*time.Millisecond)
	for name, call := range allCalls(l, clock) {
		if err := call(); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s against a paused Redis: %v, want ErrUnavailable", name, err)
		}
	}
}

func allCalls(l ledger.Ledger, clock *ledgertest.Clock) map[string]func() error {
	return map[string]func() error{
		"Reserve": func() error { _, err := l.Reserve(background, ledgertest.Res(clock, "k2", "e", "t")); return err },
		"Confirm": func() error { _, err := l.Confirm(background, ledgertest.Route, "k", "t"); return err },
		"Abort":   func() error { return l.Abort(background, ledgertest.Route, "k", "t") },
		"Begin": func() error {
			_, _, err := l.Begin(background, ledgertest.Route, "k", "e", "t", "p", "o")
			return err
		},
		"Settle": func() error {
			_, err := l.Settle(background, ledgertest.Route, "k", "e", "t", "o", ledgertest.DoneSettlement("k"))
			return err
		},
		"Dead":     func() error { _, _, err := l.Dead(background, ledgertest.Route, "e-k", ""); return err },
		"Replay":   func() error { return l.Replay(background, ledgertest.Route, "e-k", "d", "r") },
		"Purge":    func() error { return l.Purge(background, ledgertest.Route, "e-k", time.Hour) },
		"ListDead": func() error { _, _, err := l.ListDead(background, ledgertest.Route, "", 10); return err },
		"Get":      func() error { _, err := l.Get(background, ledgertest.Route, "k"); return err },
		"Delete":   func() error { _, err := l.Delete(background, ledgertest.Route, "k"); return err },
		"Stats":    func() error { _, err := l.Stats(background, ledgertest.Route); return err },
	}
}

// TestLedgerRedisRealExpiry lets Redis itself end a short lease.
func TestLedgerRedisRealExpiry(t *testing.T) {
	c := redisClient(t, redistest.Start(t))
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(c, "x:", opTimeout)
	r := ledgertest.Res(clock, "k", "e1", "t1")
	r.Lease = 20 * time.Millisecond
	ledgertest.MustReserve(t, l, r)
	ledgertest.WaitFor(t, "the lease to end", func() bool {
		ks, err := l.Get(background, ledgertest.Route, "k")
		return err == nil && ks.State == ledger.StateAbsent
	})
	ledgertest.MustConfirm(t, l, "k", "t1", false)
}

// TestLedgerMemorySweep: keys whose time is up are forgotten even when
// nobody looks at them again.
func TestLedgerMemorySweep(t *testing.T) {
	clock := ledgertest.NewClock()
	m := ledger.NewMemory(clock.Now)
	for i := range 10 {
		ledgertest.MustReserve(t, m, ledgertest.Res(clock, "k"+strconv.Itoa(i), "e", "t"))
	}
	clock.Add(ledgertest.Lease + ledger.SweepEvery)
	ledgertest.MustReserve(t, m, ledgertest.Res(clock, "other", "e", "t"))
	n := ledger.MemoryKeys(m, ledgertest.Route)
	if n != 1 {
		t.Fatalf("%d keys kept, want 1", n)
	}

	// Stats, which the queue's gauges ask for on an idle gateway too,
	// sweeps as well, and the finished keys forgotten leave the budget.
	finish(t, m, clock, "done", []byte("ok"))
	if m.Bytes() == 0 {
		t.Fatal("a finished key not counted")
	}
	clock.Add(ledgertest.Retain + ledger.SweepEvery)
	if _, err := m.Stats(background, "other-route"); err != nil {
		t.Fatal(err)
	}
	if n, b := ledger.MemoryKeys(m, ledgertest.Route), m.Bytes(); n != 0 || b != 0 {
		t.Fatalf("%d keys and %d bytes kept after a sweep, want none", n, b)
	}
}

// Regression: the sweep went over every key at once, under the store's
// lock, once a minute: 6.5 s at 10M keys (about 0.6 s at 1M) held every
// delivery (BenchmarkScaleKeysHeld). Each call now does its share of a
// pass per SweepEvery: a tenth of the period forgets about a tenth of the
// keys whose time is up, and a whole period all of them.
func TestLedgerMemorySweepsAShareAtATime(t *testing.T) {
	clock := ledgertest.NewClock()
	m := ledger.NewMemory(clock.Now)
	const n = 10_000
	for i := range n {
		ledgertest.MustReserve(t, m, ledgertest.Res(clock, "k"+strconv.Itoa(i), "e", "t"))
	}
	// The clock steps a tenth of the period at a time, with a call each,
	// until every lease is long over: no call forgets more than about a
	// tenth of the keys, and a period after the leases end none is left.
	step := ledger.SweepEvery / 10
	prev := n
	for elapsed := step; elapsed <= ledgertest.Lease+2*ledger.SweepEvery; elapsed += step {
		clock.Add(step)
		if _, err := m.Stats(background, "other-route"); err != nil {
			t.Fatal(err)
		}
		left := ledger.MemoryKeys(m, ledgertest.Route)
		if prev-left > n*15/100 {
			t.Fatalf("one call forgot %d of %d keys, want about a tenth at most", prev-left, n)
		}
		prev = left
	}
	if prev != 0 {
		t.Fatalf("%d keys kept a period after their leases ended, want none", prev)
	}
}

func BenchmarkLedger(b *testing.B) {
	kinds := []struct {
		name string
		make func(b *testing.B) ledger.Ledger
	}{
		{"memory", func(*testing.B) ledger.Ledger { return ledger.NewMemory(nil) }},
		{"redis", func(b *testing.B) ledger.Ledger {
			return ledger.NewRedis(redisClient(b, redistest.Start(b)), "bench:", 0)
		}},
	}
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			l := kind.make(b)
			clock := ledgertest.NewClock()
			done := ledgertest.DoneSettlement("k")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := "k" + strconv.Itoa(i)
				eid, tok := "e"+strconv.Itoa(i), "t"+strconv.Itoa(i)
				i++
				got, err := l.Reserve(background, ledgertest.Res(clock, key, eid, tok))
				if err != nil || got.State != ledger.Enqueued {
					b.Fatalf("Reserve = %+v, %v", got, err)
				}
				if _, ok, err := l.Begin(background, ledgertest.Route, key, eid, tok, "p", "w"); !ok || err != nil {
					b.Fatalf("Begin = %v, %v", ok, err)
				}
				if s, err := l.Settle(background, ledgertest.Route, key, eid, tok, "w", done); s != ledger.Recorded || err != nil {
					b.Fatalf("Settle = %v, %v", s, err)
				}
			}
		})
	}
}

// finish enqueues key on l, begins it and delivers it with body.
func finish(t *testing.T, l ledger.Ledger, clock *ledgertest.Clock, key string, body []byte) {
	t.Helper()
	eid, tok := ledgertest.Enqueue(t, l, clock, key)
	ledgertest.MustBegin(t, l, key, eid, tok, "p-"+key, "w", true)
	s := ledgertest.DoneSettlement(key)
	s.Outcome.Body = body
	ledgertest.MustSettle(t, l, key, eid, tok, "w", s, ledger.Recorded)
}

// TestLedgerMemoryFinishedKeysBoundedByMaxBytes: the finished and purged
// keys kept for their retention, with the upstream's answers, stay within
// MaxBytes (less what Others takes): the oldest are forgotten first, each
// counted by OnEvict, and the key being finished is kept even when it
// alone is over the budget.
func TestLedgerMemoryFinishedKeysBoundedByMaxBytes(t *testing.T) {
	clock := ledgertest.NewClock()
	m := ledger.NewMemory(clock.Now)
	m.MaxBytes = 16 << 10
	evicted := 0
	m.OnEvict = func() { evicted++ }
	body := make([]byte, 1<<10)
	for i := range 100 {
		finish(t, m, clock, fmt.Sprintf("k%03d", i), body)
		if b := m.Bytes(); b > m.MaxBytes {
			t.Fatalf("after %d finishes the finished keys take %d bytes, over MaxBytes %d", i+1, b, m.MaxBytes)
		}
	}
	if evicted < 80 {
		t.Fatalf("%d keys forgotten, want most of 100", evicted)
	}
	if n := ledger.MemoryKeys(m, ledgertest.Route); n != 100-evicted {
		t.Fatalf("%d keys kept after %d evictions of 100", n, evicted)
	}
	for i := range 100 {
		want := ledger.StateFinished
		if i < evicted {
			want = ledger.StateAbsent // oldest first
		}
		ledgertest.WantState(t, m, fmt.Sprintf("k%03d", i), want)
	}

	// The others' bytes take their share of the budget first.
	m.Others = func() int64 { return 12 << 10 }
	finish(t, m, clock, "k100", body)
	if b := m.Bytes(); b > 4<<10 {
		t.Fatalf("finished keys take %d bytes beside the others' 12KiB, over the 16KiB budget", b)
	}
	m.Others = nil

	// A dead-lettered key counts once purged (its event is gone, its key
	// kept for the retention).
	m.MaxBytes = 1 << 30
	before := m.Bytes()
	eid := ledgertest.Kill(t, m, clock, "dead", "d1")
	if b := m.Bytes(); b != before {
		t.Fatalf("a dead-lettered key counted: %d bytes, was %d", b, before)
	}
	if err := m.Purge(background, ledgertest.Route, eid, ledgertest.Retain); err != nil {
		t.Fatal(err)
	}
	if b := m.Bytes(); b <= before {
		t.Fatalf("a purged key not counted: %d bytes, was %d", b, before)
	}
	m.MaxBytes = 16 << 10

	// A key over the whole budget by itself is kept; it evicts every
	// other one.
	evicted = 0
	kept := ledger.MemoryKeys(m, ledgertest.Route)
	finish(t, m, clock, "huge", make([]byte, 32<<10))
	ledgertest.WantState(t, m, "huge", ledger.StateFinished)
	if evicted != kept || ledger.MemoryKeys(m, ledgertest.Route) != 1 {
		t.Fatalf("a key over the budget evicted %d of %d, kept %d keys; want every other one evicted, itself kept",
			evicted, kept, ledger.MemoryKeys(m, ledgertest.Route))
	}

	// Forgetting a key (a reset, its retention) uncounts it.
	if _, err := m.Delete(background, ledgertest.Route, "huge"); err != nil {
		t.Fatal(err)
	}
	if b := m.Bytes(); b != 0 {
		t.Fatalf("%d bytes counted with no key kept", b)
	}
	finish(t, m, clock, "short", body)
	clock.Add(ledgertest.Retain)
	ledgertest.WantState(t, m, "short", ledger.StateAbsent)
	if b := m.Bytes(); b != 0 {
		t.Fatalf("%d bytes counted after the last key's retention ran out", b)
	}
}

// TestLedgerMemoryDeadEntries: a transport that keeps its DLQ's order
// gets the dead-lettered events described in that order, with what
// ListDead says of them, and nothing of an event not dead-lettered.
func TestLedgerMemoryDeadEntries(t *testing.T) {
	clock := ledgertest.NewClock()
	m := ledger.NewMemory(clock.Now)
	a := ledgertest.Kill(t, m, clock, "a", "1")
	b := ledgertest.Kill(t, m, clock, "b", "2")
	queued, _ := ledgertest.Enqueue(t, m, clock, "q")
	listed, _, err := m.ListDead(background, ledgertest.Route, "", 10)
	if err != nil || len(listed) != 2 {
		t.Fatalf("ListDead = %+v, %v", listed, err)
	}
	got := m.DeadEntries(ledgertest.Route, []string{b, queued, "nonsense", a})
	if len(got) != 2 || got[0].ID != b || got[1].ID != a {
		t.Fatalf("DeadEntries = %+v, want b then a", got)
	}
	for _, d := range listed {
		if i := map[string]int{b: 0, a: 1}[d.ID]; got[i] != d {
			t.Fatalf("DeadEntries says %+v, ListDead %+v", got[i], d)
		}
	}
}
