package kafka

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

	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// The ledger conformance suite: every case runs against every ledger kind
// (memory, a redis-server, a three-node Redis Cluster), which must behave
// alike.

const ledgerTestRoute = "hooks"

// ledgerWaitBound bounds every wait for a condition in these tests.
const ledgerWaitBound = 10 * time.Second

// ledgerOpTimeout bounds each call of the Redis ledgers under test:
// generous, since these tests check what they do, not how fast, and the
// race detector on a busy machine is slow.
const ledgerOpTimeout = 10 * time.Second

// What ledgerUnderTest.ttl reports, as PTTL does.
const (
	ledgerNoTTL  time.Duration = -1
	ledgerNoKey  time.Duration = -2
	ledgerLease                = time.Minute
	ledgerRetain               = time.Hour
)

// ledgerClock is a settable clock, at millisecond precision.
type ledgerClock struct {
	mu sync.Mutex
	t  time.Time
}

func newLedgerClock() *ledgerClock {
	return &ledgerClock{t: time.UnixMilli(1_700_000_000_000).UTC()}
}

func (c *ledgerClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *ledgerClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// ledgerUnderTest is a fresh, empty ledger with probes into its expiries.
type ledgerUnderTest struct {
	Ledger
	// ttl is how long route's key has left: ledgerNoTTL when it does
	// not expire, ledgerNoKey when it is absent.
	ttl func(t *testing.T, route, key string) time.Duration
	// expire lets the time of route's key run out; it must have one.
	expire func(t *testing.T, route, key string)
}

// ledgerKind is one Ledger implementation: setup starts what it needs
// for the test and returns a maker of fresh ledgers on a clock.
type ledgerKind struct {
	name  string
	setup func(t *testing.T) func(t *testing.T, clock *ledgerClock) ledgerUnderTest
}

var ledgerKinds = []ledgerKind{
	{"memory", func(*testing.T) func(*testing.T, *ledgerClock) ledgerUnderTest { return newMemoryLedgerUnderTest }},
	{"redis", func(t *testing.T) func(*testing.T, *ledgerClock) ledgerUnderTest {
		return redisLedgerMaker(ledgerRedisClient(t, redistest.Start(t)))
	}},
	{"redis-cluster", func(t *testing.T) func(*testing.T, *ledgerClock) ledgerUnderTest {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
		t.Cleanup(func() { _ = cc.Close() })
		return redisLedgerMaker(cc)
	}},
}

func newMemoryLedgerUnderTest(_ *testing.T, clock *ledgerClock) ledgerUnderTest {
	m := NewMemoryLedger(clock.Now)
	ttl := func(t *testing.T, route, key string) time.Duration {
		m.mu.Lock()
		defer m.mu.Unlock()
		r := m.routes[route]
		if r == nil {
			return ledgerNoKey
		}
		k := r.key(key, clock.Now())
		switch {
		case k == nil:
			return ledgerNoKey
		case k.expires.IsZero():
			return ledgerNoTTL
		}
		return k.expires.Sub(clock.Now())
	}
	return ledgerUnderTest{
		Ledger: m,
		ttl:    ttl,
		expire: func(t *testing.T, route, key string) {
			t.Helper()
			d := ttl(t, route, key)
			if d <= 0 {
				t.Fatalf("expire %s: key has no expiry (ttl %v)", key, d)
			}
			clock.Add(d)
		},
	}
}

func ledgerRedisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ledgerPrefixes gives every Redis ledger of the suite its own key space
// on a shared server.
var ledgerPrefixes atomic.Int64

func redisLedgerMaker(c redis.UniversalClient) func(*testing.T, *ledgerClock) ledgerUnderTest {
	return func(t *testing.T, clock *ledgerClock) ledgerUnderTest {
		l := NewRedisLedger(c, "t"+strconv.FormatInt(ledgerPrefixes.Add(1), 10)+":", ledgerOpTimeout)
		l.Now = clock.Now
		ttl := func(t *testing.T, route, key string) time.Duration {
			t.Helper()
			d, err := c.PTTL(context.Background(), l.keyHash(route, key)).Result()
			if err != nil {
				t.Fatalf("PTTL %s: %v", key, err)
			}
			return d
		}
		return ledgerUnderTest{
			Ledger: l,
			ttl:    ttl,
			expire: func(t *testing.T, route, key string) {
				t.Helper()
				if d := ttl(t, route, key); d <= 0 {
					t.Fatalf("expire %s: key has no expiry (ttl %v)", key, d)
				}
				name := l.keyHash(route, key)
				if err := c.PExpire(context.Background(), name, time.Millisecond).Err(); err != nil {
					t.Fatalf("PEXPIRE %s: %v", key, err)
				}
				ledgerWaitFor(t, "the key to expire", func() bool {
					n, err := c.Exists(context.Background(), name).Result()
					return err == nil && n == 0
				})
			},
		}
	}
}

func ledgerWaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ledgerWaitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", ledgerWaitBound, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ledgerCase is one conformance case.
type ledgerCase struct {
	name string
	run  func(t *testing.T, l ledgerUnderTest, clock *ledgerClock)
}

func TestLedgerConformance(t *testing.T) {
	for _, kind := range ledgerKinds {
		t.Run(kind.name, func(t *testing.T) {
			fresh := kind.setup(t)
			for _, c := range ledgerCases {
				t.Run(c.name, func(t *testing.T) {
					clock := newLedgerClock()
					c.run(t, fresh(t, clock), clock)
				})
			}
		})
	}
}

// --- helpers ---

var ledgerCtx = context.Background()

func ledgerRes(clock *ledgerClock, key, eid, tok string) Reservation {
	return Reservation{Route: ledgerTestRoute, Key: key, Fingerprint: "fp-" + key, EventID: eid, Token: tok,
		FirstSeen: clock.Now(), Lease: ledgerLease}
}

func ledgerMustReserve(t *testing.T, l Ledger, r Reservation) Reserved {
	t.Helper()
	got, err := l.Reserve(ledgerCtx, r)
	if err != nil {
		t.Fatalf("Reserve %s: %v", r.Key, err)
	}
	return got
}

func ledgerMustConfirm(t *testing.T, l Ledger, key, tok string, want bool) {
	t.Helper()
	ok, err := l.Confirm(ledgerCtx, ledgerTestRoute, key, tok)
	if err != nil || ok != want {
		t.Fatalf("Confirm %s %s = %v, %v; want %v", key, tok, ok, err, want)
	}
}

// ledgerMustBegin begins and checks ok.
func ledgerMustBegin(t *testing.T, l Ledger, key, eid, tok, pos, owner string, want bool) Begun {
	t.Helper()
	b, ok, err := l.Begin(ledgerCtx, ledgerTestRoute, key, eid, tok, pos, owner)
	if err != nil || ok != want {
		t.Fatalf("Begin %s %s %s @%s by %s = %+v, %v, %v; want ok %v", key, eid, tok, pos, owner, b, ok, err, want)
	}
	if !ok && b != (Begun{}) {
		t.Fatalf("Begin refused with %+v", b)
	}
	return b
}

func ledgerMustSettle(t *testing.T, l Ledger, key, eid, tok, owner string, s Settlement, want queue.Settled) {
	t.Helper()
	got, err := l.Settle(ledgerCtx, ledgerTestRoute, key, eid, tok, owner, s)
	if err != nil || got != want {
		t.Fatalf("Settle %s %s %s by %s (kind %d) = %v, %v; want %v", key, eid, tok, owner, s.Kind, got, err, want)
	}
}

func ledgerMustGet(t *testing.T, l Ledger, key string) queue.KeyState {
	t.Helper()
	ks, err := l.Get(ledgerCtx, ledgerTestRoute, key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return ks
}

func ledgerWantState(t *testing.T, l Ledger, key, state string) queue.KeyState {
	t.Helper()
	ks := ledgerMustGet(t, l, key)
	if ks.State != state {
		t.Fatalf("Get %s = %+v, want state %s", key, ks, state)
	}
	return ks
}

func ledgerWantStats(t *testing.T, l Ledger, depth, dlq int64, oldest time.Time) {
	t.Helper()
	st, err := l.Stats(ledgerCtx, ledgerTestRoute)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Depth != depth || st.DLQ != dlq || !st.Oldest.Equal(oldest) {
		t.Fatalf("Stats = %+v, want depth %d, dlq %d, oldest %v", st, depth, dlq, oldest)
	}
}

// ledgerWantTTL checks route's key expires within (0, max], or has want's
// special value (ledgerNoTTL, ledgerNoKey).
func ledgerWantTTL(t *testing.T, l ledgerUnderTest, key string, want time.Duration) {
	t.Helper()
	got := l.ttl(t, ledgerTestRoute, key)
	if want < 0 {
		if got != want {
			t.Fatalf("ttl of %s = %v, want %v", key, got, want)
		}
		return
	}
	if got <= 0 || got > want {
		t.Fatalf("ttl of %s = %v, want within (0, %v]", key, got, want)
	}
}

func ledgerWantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// ledgerEnqueue reserves and confirms key: event "e-KEY", token "t-KEY".
func ledgerEnqueue(t *testing.T, l Ledger, clock *ledgerClock, key string) (eid, tok string) {
	t.Helper()
	eid, tok = "e-"+key, "t-"+key
	if got := ledgerMustReserve(t, l, ledgerRes(clock, key, eid, tok)); got.State != queue.Enqueued {
		t.Fatalf("Reserve %s = %+v, want Enqueued", key, got)
	}
	ledgerMustConfirm(t, l, key, tok, true)
	return eid, tok
}

func ledgerDeadSettlement(clock *ledgerClock, pos string) Settlement {
	return Settlement{Settlement: queue.Settlement{Kind: queue.SettleDead, Reason: "rejected:400", Status: 400,
		Error: "bad request", At: clock.Now()}, DLQPos: pos}
}

func ledgerDoneSettlement(key string) Settlement {
	return Settlement{Settlement: queue.Settlement{Kind: queue.SettleDelivered, Retention: ledgerRetain,
		Outcome: store.Outcome{Status: 201, ContentType: "text/plain", Body: []byte("ok " + key), Fingerprint: "fp-" + key}}}
}

func ledgerRetry(tok string) Settlement {
	return Settlement{Settlement: queue.Settlement{Kind: queue.SettleRetry}, NewToken: tok}
}

// ledgerKill enqueues key, begins it once and dead-letters it at DLQ
// position pos.
func ledgerKill(t *testing.T, l Ledger, clock *ledgerClock, key, pos string) (eid string) {
	t.Helper()
	eid, tok := ledgerEnqueue(t, l, clock, key)
	ledgerMustBegin(t, l, key, eid, tok, "p-"+key, "w1", true)
	ledgerMustSettle(t, l, key, eid, tok, "w1", ledgerDeadSettlement(clock, pos), queue.Recorded)
	return eid
}

// ledgerListAllDead pages through the route's dead index limit at a time.
func ledgerListAllDead(t *testing.T, l Ledger, limit int) []queue.DeadEntry {
	t.Helper()
	var all []queue.DeadEntry
	cursor := ""
	for page := 0; ; page++ {
		if page > 10000 {
			t.Fatalf("ListDead(limit %d) did not end", limit)
		}
		list, next, err := l.ListDead(ledgerCtx, ledgerTestRoute, cursor, limit)
		if err != nil {
			t.Fatalf("ListDead(limit %d, cursor %q): %v", limit, cursor, err)
		}
		if len(list) > limit {
			t.Fatalf("ListDead(limit %d) returned %d entries", limit, len(list))
		}
		all = append(all, list...)
		if next == "" {
			return all
		}
		if next == cursor && len(list) == 0 {
			t.Fatalf("ListDead(limit %d) is stuck at cursor %q", limit, cursor)
		}
		cursor = next
	}
}

func ledgerSameOutcome(a, b store.Outcome) bool {
	return a.Status == b.Status && a.ContentType == b.ContentType && string(a.Body) == string(b.Body) &&
		a.Fingerprint == b.Fingerprint
}

// --- cases ---

var ledgerCases = []ledgerCase{
	{"ReserveAbsent", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		want := Reserved{State: queue.Enqueued, ID: "e1", Fingerprint: "fp-k", Copies: 1}
		if !ledgerReservedEqual(got, want) {
			t.Fatalf("Reserve = %+v, want %+v", got, want)
		}
		ks := ledgerWantState(t, l, "k", queue.StateQueued)
		if ks.EventID != "e1" || ks.Copies != 1 || ks.Attempts != 0 || !ks.FirstSeen.Equal(first) ||
			!ks.LastSeen.Equal(first) || ks.Fingerprint != "fp-k" || ks.Status != 0 {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantTTL(t, l, "k", ledgerLease)
		ledgerWantStats(t, l, 0, 0, time.Time{}) // not in the age index until confirmed
	}},
	{"InFlight", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		clock.Add(time.Second)
		r := ledgerRes(clock, "k", "e2", "t2")
		r.Fingerprint = "other"
		got := ledgerMustReserve(t, l, r)
		want := Reserved{State: queue.InFlight, ID: "e1", Fingerprint: "fp-k", Copies: 2}
		if !ledgerReservedEqual(got, want) {
			t.Fatalf("Reserve of a reserved key = %+v, want %+v", got, want)
		}
		ks := ledgerWantState(t, l, "k", queue.StateQueued)
		if ks.EventID != "e1" || ks.Copies != 2 || !ks.FirstSeen.Equal(first) || !ks.LastSeen.Equal(clock.Now()) {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantTTL(t, l, "k", ledgerLease) // counting a copy keeps the lease
		// The other reservation's token does not confirm it.
		ledgerMustConfirm(t, l, "k", "t2", false)
	}},
	{"Confirm", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		ledgerMustConfirm(t, l, "k", "other", false)
		ledgerMustConfirm(t, l, "k", "t1", true)
		ledgerWantTTL(t, l, "k", ledgerNoTTL)
		ledgerWantStats(t, l, 1, 0, first)
		ledgerMustConfirm(t, l, "k", "t1", true) // again: still true, counted once
		ledgerWantStats(t, l, 1, 0, first)
		clock.Add(time.Second)
		got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "e2", "t2"))
		want := Reserved{State: queue.Pending, ID: "e1", Fingerprint: "fp-k", Copies: 2}
		if !ledgerReservedEqual(got, want) {
			t.Fatalf("Reserve of a queued key = %+v, want %+v", got, want)
		}
		ledgerMustConfirm(t, l, "k", "t2", false)
		ledgerMustConfirm(t, l, "absent", "t1", false)
	}},
	{"ConfirmAfterAdoption", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		b := ledgerMustBegin(t, l, "k", "e1", "t1", "p1", "w1", true)
		if b != (Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 1}) {
			t.Fatalf("Begin adopting = %+v", b)
		}
		ledgerWantState(t, l, "k", queue.StateQueued)
		ledgerWantTTL(t, l, "k", ledgerNoTTL)
		ledgerWantStats(t, l, 1, 0, first)
		// The producer's late confirmation still succeeds, also once
		// the consumer moved the key on, and counts nothing twice.
		ledgerMustSettle(t, l, "k", "e1", "t1", "w1", ledgerRetry("t1b"), queue.Recorded)
		ledgerMustConfirm(t, l, "k", "t1", true)
		ledgerWantStats(t, l, 1, 0, first)
		ledgerMustBegin(t, l, "k", "e1", "t1b", "p2", "w1", true)
		ledgerMustSettle(t, l, "k", "e1", "t1b", "w1", ledgerDoneSettlement("k"), queue.Recorded)
		ledgerMustConfirm(t, l, "k", "t1", true)
		ledgerWantState(t, l, "k", queue.StateFinished)
		ledgerWantStats(t, l, 0, 0, time.Time{})
		ledgerMustConfirm(t, l, "k", "t1b", false) // a retry token is no reservation
	}},
	{"LeaseExpiry", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		l.expire(t, ledgerTestRoute, "k")
		ledgerWantState(t, l, "k", queue.StateAbsent)
		ledgerMustConfirm(t, l, "k", "t1", false)
		ledgerMustBegin(t, l, "k", "e1", "t1", "p1", "w1", false)
		ledgerWantStats(t, l, 0, 0, time.Time{})
		// Another copy reserves the key afresh; the stale producer can
		// neither confirm nor abort it.
		got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "e2", "t2"))
		if got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after the lease = %+v", got)
		}
		ledgerMustConfirm(t, l, "k", "t1", false)
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "k", "t1"); err != nil {
			t.Fatal(err)
		}
		if ks := ledgerWantState(t, l, "k", queue.StateQueued); ks.EventID != "e2" {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerMustBegin(t, l, "k", "e1", "t1", "p1", "w1", false)
		ledgerMustConfirm(t, l, "k", "t2", true)
	}},
	{"Abort", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "k", "other"); err != nil {
			t.Fatal(err)
		}
		ledgerWantState(t, l, "k", queue.StateQueued)
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "k", "t1"); err != nil {
			t.Fatal(err)
		}
		ledgerWantState(t, l, "k", queue.StateAbsent)
		ledgerMustConfirm(t, l, "k", "t1", false)
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "absent", "t1"); err != nil {
			t.Fatal(err)
		}
		// A confirmed (or adopted) reservation's record exists: an abort
		// leaves it alone.
		eid, tok := ledgerEnqueue(t, l, clock, "k2")
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "k2", tok); err != nil {
			t.Fatal(err)
		}
		ledgerWantState(t, l, "k2", queue.StateQueued)
		ledgerMustReserve(t, l, ledgerRes(clock, "k3", "e3", "t3"))
		ledgerMustBegin(t, l, "k3", "e3", "t3", "p3", "w1", true)
		if err := l.Abort(ledgerCtx, ledgerTestRoute, "k3", "t3"); err != nil {
			t.Fatal(err)
		}
		ledgerWantState(t, l, "k3", queue.StateQueued)
		ledgerWantStats(t, l, 2, 0, clock.Now())
		ledgerMustBegin(t, l, "k2", eid, tok, "p2", "w1", true)
	}},
	{"Full", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		ledgerEnqueue(t, l, clock, "a")
		clock.Add(time.Second)
		eb, tb := ledgerEnqueue(t, l, clock, "b")
		r := ledgerRes(clock, "c", "ec", "tc")
		r.MaxDepth = 2
		if got := ledgerMustReserve(t, l, r); !ledgerReservedEqual(got, Reserved{State: queue.Full}) {
			t.Fatalf("Reserve at max depth = %+v, want Full", got)
		}
		ledgerWantState(t, l, "c", queue.StateAbsent)
		ledgerWantStats(t, l, 2, 0, first)
		// A known key is still reported and counted at max depth.
		ra := ledgerRes(clock, "a", "x", "y")
		ra.MaxDepth = 2
		if got := ledgerMustReserve(t, l, ra); got.State != queue.Pending || got.ID != "e-a" || got.Copies != 2 {
			t.Fatalf("Reserve of a queued key at max depth = %+v", got)
		}
		// Unconfirmed reservations do not count against the depth.
		r.MaxDepth = 3
		if got := ledgerMustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve below max depth = %+v", got)
		}
		rd := ledgerRes(clock, "d", "ed", "td")
		rd.MaxDepth = 3
		if got := ledgerMustReserve(t, l, rd); got.State != queue.Enqueued {
			t.Fatalf("Reserve below max depth (reservations pending) = %+v", got)
		}
		ledgerMustConfirm(t, l, "c", "tc", true)
		re := ledgerRes(clock, "e", "ee", "te")
		re.MaxDepth = 3
		if got := ledgerMustReserve(t, l, re); got.State != queue.Full {
			t.Fatalf("Reserve at max depth 3 = %+v", got)
		}
		// A delivered event frees its place; 0 is no limit.
		ledgerMustBegin(t, l, "b", eb, tb, "pb", "w1", true)
		ledgerMustSettle(t, l, "b", eb, tb, "w1", ledgerDoneSettlement("b"), queue.Recorded)
		if got := ledgerMustReserve(t, l, re); got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after a delivery = %+v", got)
		}
		re = ledgerRes(clock, "f", "ef", "tf")
		if got := ledgerMustReserve(t, l, re); got.State != queue.Enqueued {
			t.Fatalf("Reserve with max depth 0 = %+v", got)
		}
		// queue.RefuseNew (the route's DLQ at its bound): no new key,
		// known ones still reported.
		rg := ledgerRes(clock, "g", "eg", "tg")
		rg.MaxDepth = queue.RefuseNew
		if got := ledgerMustReserve(t, l, rg); got.State != queue.Full {
			t.Fatalf("Reserve with RefuseNew = %+v, want Full", got)
		}
		ledgerWantState(t, l, "g", queue.StateAbsent)
		ra.MaxDepth = queue.RefuseNew
		if got := ledgerMustReserve(t, l, ra); got.State != queue.Pending {
			t.Fatalf("Reserve of a queued key with RefuseNew = %+v", got)
		}
	}},
	{"Begin", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		eid, tok := ledgerEnqueue(t, l, clock, "k")
		ledgerMustBegin(t, l, "absent", eid, tok, "p1", "w1", false)
		ledgerMustBegin(t, l, "k", "other", tok, "p1", "w1", false)
		ledgerMustBegin(t, l, "k", eid, "other", "p1", "w1", false)
		b := ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		if b != (Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 1}) {
			t.Fatalf("Begin = %+v", b)
		}
		// A second copy of the record (another position) is a leftover,
		// and changes nothing.
		ledgerMustBegin(t, l, "k", eid, tok, "p2", "w2", false)
		if ks := ledgerMustGet(t, l, "k"); ks.Attempts != 1 {
			t.Fatalf("Get after a refused Begin = %+v", ks)
		}
		// The same record read again (the first consumer died) is a new try
		// by its new owner; the former owner can no longer settle.
		b = ledgerMustBegin(t, l, "k", eid, tok, "p1", "w2", true)
		if b.Try != 2 || b.Total != 2 {
			t.Fatalf("Begin again = %+v", b)
		}
		ledgerMustSettle(t, l, "k", eid, tok, "w1", ledgerDoneSettlement("k"), queue.NotOwner)
		if ks := ledgerWantState(t, l, "k", queue.StateQueued); ks.Attempts != 2 {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerMustSettle(t, l, "k", eid, tok, "w2", ledgerDoneSettlement("k"), queue.Recorded)
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w2", false)
	}},
	{"ConcurrentBegin", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		for i := range 20 {
			key := "k" + strconv.Itoa(i)
			eid, tok := ledgerEnqueue(t, l, clock, key)
			var oks atomic.Int32
			var wg sync.WaitGroup
			for _, pos := range []string{"p1", "p2"} {
				wg.Go(func() {
					_, ok, err := l.Begin(ledgerCtx, ledgerTestRoute, key, eid, tok, pos, "w-"+pos)
					if err != nil {
						t.Errorf("Begin @%s: %v", pos, err)
					}
					if ok {
						oks.Add(1)
					}
				})
			}
			wg.Wait()
			if n := oks.Load(); n != 1 {
				t.Fatalf("%d of two Begins of one token from two positions passed", n)
			}
			if ks := ledgerMustGet(t, l, key); ks.Attempts != 1 {
				t.Fatalf("Get = %+v", ks)
			}
		}
	}},
	{"SettleDelivered", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		eid, tok := ledgerEnqueue(t, l, clock, "k")
		s := ledgerDoneSettlement("k")
		// Not begun: nobody owns it.
		ledgerMustSettle(t, l, "k", eid, tok, "w1", s, queue.NotOwner)
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		ledgerMustSettle(t, l, "absent", eid, tok, "w1", s, queue.Stale)
		ledgerMustSettle(t, l, "k", "other", tok, "w1", s, queue.Stale)
		ledgerMustSettle(t, l, "k", eid, "other", "w1", s, queue.Stale)
		ledgerMustSettle(t, l, "k", eid, tok, "w2", s, queue.NotOwner)
		ledgerWantState(t, l, "k", queue.StateQueued)
		ledgerWantStats(t, l, 1, 0, clock.Now())
		ledgerMustSettle(t, l, "k", eid, tok, "w1", s, queue.Recorded)
		ks := ledgerWantState(t, l, "k", queue.StateFinished)
		if ks.Status != 201 || ks.Attempts != 1 || ks.EventID != eid || ks.Fingerprint != "fp-k" || ks.Copies != 1 {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantStats(t, l, 0, 0, time.Time{})
		ledgerWantTTL(t, l, "k", ledgerRetain)
		// Settling or beginning again finds the key moved on.
		ledgerMustSettle(t, l, "k", eid, tok, "w1", s, queue.Stale)
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", false)
		// A later copy gets the stored answer (with the finishing
		// delivery's fingerprint).
		r := ledgerRes(clock, "k", "e2", "t2")
		r.Fingerprint = "another"
		got := ledgerMustReserve(t, l, r)
		if got.State != queue.Delivered || got.Copies != 2 || got.Fingerprint != "fp-k" || got.ID != "" ||
			!ledgerSameOutcome(got.Outcome, s.Outcome) {
			t.Fatalf("Reserve of a finished key = %+v", got)
		}
		ledgerWantTTL(t, l, "k", ledgerRetain) // counting a copy keeps the retention
		l.expire(t, ledgerTestRoute, "k")
		ledgerWantState(t, l, "k", queue.StateAbsent)
		if got := ledgerMustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve after the retention = %+v", got)
		}
	}},
	{"SettleRetry", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		eid, tok := ledgerEnqueue(t, l, clock, "k")
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		if _, err := l.Settle(ledgerCtx, ledgerTestRoute, "k", eid, tok, "w1", ledgerRetry("")); err == nil {
			t.Fatal("Settle retry without a new token passed")
		}
		ledgerMustSettle(t, l, "k", eid, tok, "w2", ledgerRetry("t2"), queue.NotOwner)
		ledgerMustSettle(t, l, "k", eid, tok, "w1", ledgerRetry("t2"), queue.Recorded)
		ledgerWantState(t, l, "k", queue.StateQueued)
		ledgerWantTTL(t, l, "k", ledgerNoTTL)
		ledgerWantStats(t, l, 1, 0, first)
		// The old token is gone: its record is a leftover, its owner stale.
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", false)
		ledgerMustSettle(t, l, "k", eid, tok, "w1", ledgerRetry("t3"), queue.Stale)
		// The retry record begins from its own position.
		b := ledgerMustBegin(t, l, "k", eid, "t2", "r1", "w3", true)
		if b != (Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 2, Total: 2}) {
			t.Fatalf("Begin of the retry = %+v", b)
		}
		ledgerMustBegin(t, l, "k", eid, "t2", "r2", "w3", false)
		if got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "x", "y")); got.State != queue.Pending || got.Dead || got.ID != eid {
			t.Fatalf("Reserve of a retrying key = %+v", got)
		}
	}},
	{"SettleDead", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		eid, tok := ledgerEnqueue(t, l, clock, "k")
		ledgerMustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		ledgerMustSettle(t, l, "k", eid, tok, "w1", ledgerRetry("t2"), queue.Recorded)
		ledgerMustBegin(t, l, "k", eid, "t2", "p2", "w1", true)
		clock.Add(time.Minute)
		s := ledgerDeadSettlement(clock, "dlq-7")
		s.Attempts = 99 // the ledger counts tries itself
		ledgerMustSettle(t, l, "k", eid, "t2", "w2", s, queue.NotOwner)
		ledgerWantStats(t, l, 1, 0, first)
		ledgerMustSettle(t, l, "k", eid, "t2", "w1", s, queue.Recorded)
		ks := ledgerWantState(t, l, "k", queue.StateDeadLettered)
		if ks.Attempts != 2 || ks.EventID != eid || ks.Status != 0 {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantStats(t, l, 0, 1, time.Time{})
		ledgerWantTTL(t, l, "k", ledgerNoTTL)
		key, pos, err := l.Dead(ledgerCtx, ledgerTestRoute, eid, "")
		if err != nil || key != "k" || pos != "dlq-7" {
			t.Fatalf("Dead = %q, %q, %v", key, pos, err)
		}
		_, _, err = l.Dead(ledgerCtx, ledgerTestRoute, "other", "")
		ledgerWantErr(t, "Dead of an unknown event", err, queue.ErrNotFound)
		list := ledgerListAllDead(t, l, 10)
		want := queue.DeadEntry{ID: eid, Key: "k", Reason: "rejected:400", Status: 400, Attempts: 2,
			Error: "bad request", FirstSeen: first, DiedAt: clock.Now()}
		if len(list) != 1 || !ledgerDeadEqual(list[0], want) {
			t.Fatalf("ListDead = %+v, want [%+v]", list, want)
		}
		ledgerMustBegin(t, l, "k", eid, "t2", "p2", "w1", false)
		ledgerMustSettle(t, l, "k", eid, "t2", "w1", s, queue.Stale)
		got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "x", "y"))
		if got.State != queue.Pending || !got.Dead || got.ID != eid || got.Fingerprint != "fp-k" || got.Copies != 2 {
			t.Fatalf("Reserve of a dead key = %+v", got)
		}
	}},
	{"Replay", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		first := clock.Now()
		eid := ledgerKill(t, l, clock, "k", "dlq-1")
		ledgerWantErr(t, "Replay at another DLQ position", l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-2", "r1"), queue.ErrNotFound)
		ledgerWantErr(t, "Replay of an unknown event", l.Replay(ledgerCtx, ledgerTestRoute, "other", "dlq-1", "r1"), queue.ErrNotFound)
		ledgerWantStats(t, l, 0, 1, time.Time{})
		if err := l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-1", "r1"); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if ks := ledgerWantState(t, l, "k", queue.StateQueued); ks.Attempts != 1 || ks.EventID != eid {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantStats(t, l, 1, 0, first)
		ledgerWantTTL(t, l, "k", ledgerNoTTL)
		_, _, err := l.Dead(ledgerCtx, ledgerTestRoute, eid, "")
		ledgerWantErr(t, "Dead after a replay", err, queue.ErrNotFound)
		ledgerWantErr(t, "Replay twice", l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-1", "r2"), queue.ErrNotFound)
		ledgerWantErr(t, "Purge after a replay", l.Purge(ledgerCtx, ledgerTestRoute, eid, ledgerRetain), queue.ErrNotFound)
		if list := ledgerListAllDead(t, l, 10); len(list) != 0 {
			t.Fatalf("ListDead after a replay = %+v", list)
		}
		if got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "x", "y")); got.State != queue.Pending || got.Dead {
			t.Fatalf("Reserve of a replayed key = %+v", got)
		}
		// The replayed record begins anew (its begun position was
		// cleared): this round's tries restart, the total goes on.
		ledgerMustBegin(t, l, "k", eid, "r2", "q1", "w1", false)
		b := ledgerMustBegin(t, l, "k", eid, "r1", "q1", "w1", true)
		if b != (Begun{Fingerprint: "fp-k", FirstSeen: first, Try: 1, Total: 2}) {
			t.Fatalf("Begin after a replay = %+v", b)
		}
		// It can die again, and its listing shows this death only.
		clock.Add(time.Hour)
		s := ledgerDeadSettlement(clock, "dlq-9")
		s.Reason, s.Status, s.Error = "exhausted", 0, ""
		ledgerMustSettle(t, l, "k", eid, "r1", "w1", s, queue.Recorded)
		list := ledgerListAllDead(t, l, 10)
		want := queue.DeadEntry{ID: eid, Key: "k", Reason: "exhausted", Attempts: 2, FirstSeen: first, DiedAt: clock.Now()}
		if len(list) != 1 || !ledgerDeadEqual(list[0], want) {
			t.Fatalf("ListDead = %+v, want [%+v]", list, want)
		}
		ledgerWantErr(t, "Replay at the old position", l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-1", "r3"), queue.ErrNotFound)
		if err := l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-9", "r3"); err != nil {
			t.Fatalf("Replay again: %v", err)
		}
	}},
	{"Purge", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		eid := ledgerKill(t, l, clock, "k", "dlq-1")
		ledgerWantErr(t, "Purge of an unknown event", l.Purge(ledgerCtx, ledgerTestRoute, "other", ledgerRetain), queue.ErrNotFound)
		if err := l.Purge(ledgerCtx, ledgerTestRoute, eid, ledgerRetain); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if ks := ledgerWantState(t, l, "k", queue.StateDeadLettered); ks.EventID != eid || ks.Attempts != 1 {
			t.Fatalf("Get = %+v", ks)
		}
		ledgerWantTTL(t, l, "k", ledgerRetain)
		ledgerWantStats(t, l, 0, 0, time.Time{})
		_, _, err := l.Dead(ledgerCtx, ledgerTestRoute, eid, "")
		ledgerWantErr(t, "Dead after a purge", err, queue.ErrNotFound)
		ledgerWantErr(t, "Replay after a purge", l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-1", "r1"), queue.ErrNotFound)
		ledgerWantErr(t, "Purge twice", l.Purge(ledgerCtx, ledgerTestRoute, eid, ledgerRetain), queue.ErrNotFound)
		if list := ledgerListAllDead(t, l, 10); len(list) != 0 {
			t.Fatalf("ListDead after a purge = %+v", list)
		}
		// Provider retries still find it dead-lettered, until the
		// retention runs out.
		if got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "x", "y")); got.State != queue.Pending || !got.Dead || got.ID != eid {
			t.Fatalf("Reserve of a purged key = %+v", got)
		}
		l.expire(t, ledgerTestRoute, "k")
		ledgerWantState(t, l, "k", queue.StateAbsent)
		if got := ledgerMustReserve(t, l, ledgerRes(clock, "k", "x", "y")); got.State != queue.Enqueued {
			t.Fatalf("Reserve after the retention = %+v", got)
		}
	}},
	{"Delete", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		del := func(key, state string) queue.KeyState {
			t.Helper()
			ks, err := l.Delete(ledgerCtx, ledgerTestRoute, key)
			if err != nil || ks.State != state {
				t.Fatalf("Delete %s = %+v, %v; want state %s", key, ks, err, state)
			}
			ledgerWantState(t, l, key, queue.StateAbsent)
			return ks
		}
		del("absent", queue.StateAbsent)

		ledgerMustReserve(t, l, ledgerRes(clock, "enq", "e0", "t0"))
		if ks := del("enq", queue.StateQueued); ks.EventID != "e0" || ks.Copies != 1 {
			t.Fatalf("Delete = %+v", ks)
		}
		ledgerMustConfirm(t, l, "enq", "t0", false)

		eid, tok := ledgerEnqueue(t, l, clock, "queued")
		ledgerMustBegin(t, l, "queued", eid, tok, "p1", "w1", true)
		if ks := del("queued", queue.StateQueued); ks.EventID != eid || ks.Attempts != 1 {
			t.Fatalf("Delete = %+v", ks)
		}
		ledgerWantStats(t, l, 0, 0, time.Time{})
		ledgerMustSettle(t, l, "queued", eid, tok, "w1", ledgerDoneSettlement("queued"), queue.Stale)
		ledgerMustBegin(t, l, "queued", eid, tok, "p1", "w1", false)

		dead := ledgerKill(t, l, clock, "dead", "dlq-1")
		if ks := del("dead", queue.StateDeadLettered); ks.EventID != dead {
			t.Fatalf("Delete = %+v", ks)
		}
		ledgerWantStats(t, l, 0, 0, time.Time{})
		_, _, err := l.Dead(ledgerCtx, ledgerTestRoute, dead, "")
		ledgerWantErr(t, "Dead after a delete", err, queue.ErrNotFound)
		ledgerWantErr(t, "Replay after a delete", l.Replay(ledgerCtx, ledgerTestRoute, dead, "dlq-1", "r"), queue.ErrNotFound)

		eid, tok = ledgerEnqueue(t, l, clock, "done")
		ledgerMustBegin(t, l, "done", eid, tok, "p1", "w1", true)
		ledgerMustSettle(t, l, "done", eid, tok, "w1", ledgerDoneSettlement("done"), queue.Recorded)
		if ks := del("done", queue.StateFinished); ks.Status != 201 || ks.EventID != eid {
			t.Fatalf("Delete = %+v", ks)
		}
		if got := ledgerMustReserve(t, l, ledgerRes(clock, "done", "e9", "t9")); got.State != queue.Enqueued || got.Copies != 1 {
			t.Fatalf("Reserve after a delete = %+v", got)
		}
	}},
	{"ListDeadPages", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		// More than a small hash holds (Redis switches its encoding past
		// 128 entries), with a few gone from the index.
		const n = 300
		want := map[string]bool{}
		for i := range n {
			key := fmt.Sprintf("k%03d", i)
			eid := ledgerKill(t, l, clock, key, "dlq-"+key)
			switch i % 50 {
			case 7:
				if err := l.Purge(ledgerCtx, ledgerTestRoute, eid, ledgerRetain); err != nil {
					t.Fatal(err)
				}
			case 8:
				if err := l.Replay(ledgerCtx, ledgerTestRoute, eid, "dlq-"+key, "r"); err != nil {
					t.Fatal(err)
				}
			default:
				want[eid] = true
			}
		}
		ledgerWantStats(t, l, n/50, int64(len(want)), clock.Now())
		for _, limit := range []int{1, 7, 100, 1000} {
			list := ledgerListAllDead(t, l, limit)
			seen := map[string]bool{}
			for _, e := range list {
				if !want[e.ID] || seen[e.ID] {
					t.Fatalf("ListDead(limit %d) lists %q (dead %v, twice %v)", limit, e.ID, want[e.ID], seen[e.ID])
				}
				if e.Key != "k"+e.ID[len("e-k"):] || e.Attempts != 1 || e.Status != 400 {
					t.Fatalf("ListDead entry %+v", e)
				}
				seen[e.ID] = true
			}
			if len(seen) != len(want) {
				t.Fatalf("ListDead(limit %d) listed %d of %d events", limit, len(seen), len(want))
			}
		}
		for _, bad := range []string{"x", "-1", "/e", "1.5/e"} {
			_, _, err := l.ListDead(ledgerCtx, ledgerTestRoute, bad, 10)
			ledgerWantErr(t, fmt.Sprintf("ListDead(cursor %q)", bad), err, queue.ErrBadCursor)
		}
		// A limit below one lists one.
		if list, _, err := l.ListDead(ledgerCtx, ledgerTestRoute, "", 0); err != nil || len(list) != 1 {
			t.Fatalf("ListDead(limit 0) = %d entries, %v", len(list), err)
		}
	}},
	{"StatsOldest", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		ledgerWantStats(t, l, 0, 0, time.Time{})
		t0 := clock.Now()
		// Reserved in one order, first seen in another.
		var toks [3]string
		for i, off := range []time.Duration{2 * time.Second, 0, time.Second} {
			r := ledgerRes(clock, "k"+strconv.Itoa(i), "e"+strconv.Itoa(i), "t"+strconv.Itoa(i))
			r.FirstSeen = t0.Add(off)
			ledgerMustReserve(t, l, r)
			toks[i] = r.Token
			ledgerMustConfirm(t, l, r.Key, r.Token, true)
		}
		ledgerWantStats(t, l, 3, 0, t0)
		ledgerMustBegin(t, l, "k1", "e1", toks[1], "p", "w", true)
		ledgerMustSettle(t, l, "k1", "e1", toks[1], "w", ledgerDoneSettlement("k1"), queue.Recorded)
		ledgerWantStats(t, l, 2, 0, t0.Add(time.Second))
		ledgerMustBegin(t, l, "k2", "e2", toks[2], "p", "w", true)
		ledgerMustSettle(t, l, "k2", "e2", toks[2], "w", ledgerDeadSettlement(clock, "d"), queue.Recorded)
		ledgerWantStats(t, l, 1, 1, t0.Add(2*time.Second))
		// Other routes are apart.
		st, err := l.Stats(ledgerCtx, "other")
		if err != nil || st != (queue.Stats{}) {
			t.Fatalf("Stats of another route = %+v, %v", st, err)
		}
	}},
	{"RoutesApart", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		eid, tok := ledgerEnqueue(t, l, clock, "k")
		r := ledgerRes(clock, "k", "e2", "t2")
		r.Route = "other"
		if got := ledgerMustReserve(t, l, r); got.State != queue.Enqueued {
			t.Fatalf("Reserve of the key on another route = %+v", got)
		}
		if _, ok, err := l.Begin(ledgerCtx, "other", "k", eid, tok, "p", "w"); ok || err != nil {
			t.Fatalf("Begin on another route = %v, %v", ok, err)
		}
		if ks := ledgerMustGet(t, l, "k"); ks.EventID != eid {
			t.Fatalf("Get = %+v", ks)
		}
	}},
	{"ConcurrentReserve", func(t *testing.T, l ledgerUnderTest, clock *ledgerClock) {
		const n = 1000
		var wg sync.WaitGroup
		states := make([]Reserved, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				states[i], errs[i] = l.Reserve(ledgerCtx, ledgerRes(clock, "k", "e"+strconv.Itoa(i), "t"+strconv.Itoa(i)))
			})
		}
		wg.Wait()
		enqueued := -1
		copies := map[int64]bool{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Reserve %d: %v", i, errs[i])
			}
			switch states[i].State {
			case queue.Enqueued:
				if enqueued >= 0 {
					t.Fatalf("Reserves %d and %d both reserved the key", enqueued, i)
				}
				enqueued = i
			case queue.InFlight:
			default:
				t.Fatalf("Reserve %d = %+v", i, states[i])
			}
			copies[states[i].Copies] = true
		}
		if enqueued < 0 {
			t.Fatal("no Reserve reserved the key")
		}
		for i := range n {
			if states[i].State == queue.InFlight && states[i].ID != "e"+strconv.Itoa(enqueued) {
				t.Fatalf("Reserve %d = %+v, reserved by %d", i, states[i], enqueued)
			}
		}
		if len(copies) != n || !copies[1] || !copies[n] {
			t.Fatalf("copies counted: %d distinct of %d", len(copies), n)
		}
		if ks := ledgerMustGet(t, l, "k"); ks.Copies != n || ks.EventID != "e"+strconv.Itoa(enqueued) {
			t.Fatalf("Get = %+v", ks)
		}
	}},
}

func ledgerReservedEqual(a, b Reserved) bool {
	return a.State == b.State && a.ID == b.ID && a.Fingerprint == b.Fingerprint && a.Dead == b.Dead &&
		a.Copies == b.Copies && ledgerSameOutcome(a.Outcome, b.Outcome)
}

func ledgerDeadEqual(a, b queue.DeadEntry) bool {
	return a.ID == b.ID && a.Key == b.Key && a.Reason == b.Reason && a.Status == b.Status &&
		a.Attempts == b.Attempts && a.Error == b.Error && a.FirstSeen.Equal(b.FirstSeen) && a.DiedAt.Equal(b.DiedAt)
}

// --- Redis only ---

// TestLedgerRedisLayout checks the key names and contents others (and
// operators) rely on, on a Cluster so that every script's keys must share
// a slot.
func TestLedgerRedisLayout(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
	t.Cleanup(func() { _ = cc.Close() })
	clock := newLedgerClock()
	l := NewRedisLedger(cc, "p:", ledgerOpTimeout)
	l.Now = clock.Now
	ctx := ledgerCtx
	const tag = "{kq:" + ledgerTestRoute + "}"
	kh, age, dead := "p:webhook_kkey:"+tag+"k", "p:webhook_kage:"+tag, "p:webhook_kdead:"+tag
	ledgerMustReserve(t, l, ledgerRes(clock, "k", "e1", "t1"))
	h := cc.HGetAll(ctx, kh).Val()
	if h["st"] != "enq" || h["eid"] != "e1" || h["tok"] != "t1" || h["fp"] != "fp-k" || h["n"] != "1" ||
		h["first"] != strconv.FormatInt(clock.Now().UnixMilli(), 10) {
		t.Fatalf("key hash after Reserve = %v", h)
	}
	ledgerMustConfirm(t, l, "k", "t1", true)
	if s, err := cc.ZScore(ctx, age, "e1").Result(); err != nil || int64(s) != clock.Now().UnixMilli() {
		t.Fatalf("age score = %v, %v", s, err)
	}
	ledgerMustBegin(t, l, "k", "e1", "t1", "p1", "w1", true)
	if h := cc.HGetAll(ctx, kh).Val(); h["pos"] != "p1" || h["owner"] != "w1" || h["qa"] != "1" || h["qt"] != "1" {
		t.Fatalf("key hash after Begin = %v", h)
	}
	ledgerMustSettle(t, l, "k", "e1", "t1", "w1", ledgerDeadSettlement(clock, "d1"), queue.Recorded)
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
	c := ledgerRedisClient(t, redistest.Start(t))
	clock := newLedgerClock()
	l := NewRedisLedger(c, "b:", ledgerOpTimeout)
	var calls atomic.Int64
	l.UseBatcher(func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		calls.Add(1)
		return s.Run(ctx, c, keys, args...)
	})
	eid := ledgerKill(t, l, clock, "k", "d")
	if err := l.Replay(ledgerCtx, ledgerTestRoute, eid, "d", "r"); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d scripts went through the runner, want 5", n)
	}
}

// TestLedgerRedisCorrupt: data Redis holds but the ledger cannot read is
// queue.ErrCorrupt.
func TestLedgerRedisCorrupt(t *testing.T) {
	c := ledgerRedisClient(t, redistest.Start(t))
	clock := newLedgerClock()
	l := NewRedisLedger(c, "c:", ledgerOpTimeout)
	ctx := ledgerCtx
	// A key hash in a state no ledger writes.
	c.HSet(ctx, l.keyHash(ledgerTestRoute, "odd"), "st", "weird", "eid", "e", "n", "1")
	_, err := l.Get(ctx, ledgerTestRoute, "odd")
	ledgerWantErr(t, "Get of an odd state", err, queue.ErrCorrupt)
	_, err = l.Reserve(ctx, ledgerRes(clock, "odd", "e2", "t2"))
	ledgerWantErr(t, "Reserve of an odd state", err, queue.ErrCorrupt)
	_, err = l.Delete(ctx, ledgerTestRoute, "odd")
	ledgerWantErr(t, "Delete of an odd state", err, queue.ErrCorrupt)
	// A finished key whose record is damaged.
	c.HSet(ctx, l.keyHash(ledgerTestRoute, "bad"), "st", "done", "eid", "e", "rec", "garbage")
	_, err = l.Get(ctx, ledgerTestRoute, "bad")
	ledgerWantErr(t, "Get of a damaged record", err, queue.ErrCorrupt)
	_, err = l.Reserve(ctx, ledgerRes(clock, "bad", "e2", "t2"))
	ledgerWantErr(t, "Reserve of a damaged record", err, queue.ErrCorrupt)
	// Keys of the wrong type.
	c.Set(ctx, l.keyHash(ledgerTestRoute, "str"), "x", 0)
	_, err = l.Reserve(ctx, ledgerRes(clock, "str", "e2", "t2"))
	ledgerWantErr(t, "Reserve of a string key", err, queue.ErrCorrupt)
	_, err = l.Get(ctx, ledgerTestRoute, "str")
	ledgerWantErr(t, "Get of a string key", err, queue.ErrCorrupt)
	c.Set(ctx, l.ageSet(ledgerTestRoute), "x", 0)
	c.Set(ctx, l.deadIndex(ledgerTestRoute), "x", 0)
	_, err = l.Stats(ctx, ledgerTestRoute)
	ledgerWantErr(t, "Stats of string indexes", err, queue.ErrCorrupt)
	_, _, err = l.ListDead(ctx, ledgerTestRoute, "", 10)
	ledgerWantErr(t, "ListDead of a string index", err, queue.ErrCorrupt)
	// A count that is not a number.
	c.HSet(ctx, l.keyHash(ledgerTestRoute, "nan"), "st", "queued", "eid", "e", "n", "many")
	_, err = l.Reserve(ctx, ledgerRes(clock, "nan", "e2", "t2"))
	ledgerWantErr(t, "Reserve with a bad count", err, queue.ErrCorrupt)
}

// TestLedgerRedisOddReplies: replies no script gives are queue.ErrCorrupt
// (or read as something harmless), never a panic.
func TestLedgerRedisOddReplies(t *testing.T) {
	replies := []any{nil, int64(7), int64(-1), "x", []any{}, []any{int64(1)}, []any{int64(0), "x"},
		[]any{"a", int64(1), nil}, []any{int64(2), "x"}, []any{int64(2), int64(1), int64(3)},
		[]any{int64(1), int64(1), int64(1), "fp", "notanumber"}, []any{int64(1), "k"}, []any{"1", "", "e"},
		[]any{"", "", "e", "k", "r", "s", "q", "e", "f", "d"}, []any{int64(1), int64(2), 3.5},
		[]any{int64(1), "st", "eid"}, []any{[]any{}, "x"}, redis.Nil, errors.New("boom")}
	clock := newLedgerClock()
	// The scripts never reach a server: the runner answers.
	nowhere := ledgerRedisClient(t, "127.0.0.1:1")
	for i, reply := range replies {
		l := NewRedisLedger(nowhere, "", 0)
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
			if err != nil && !errors.Is(err, queue.ErrCorrupt) && !errors.Is(err, queue.ErrNotFound) &&
				!errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("reply %d (%v): %s: unexpected error %v", i, reply, op, err)
			}
			if _, isErr := reply.(error); isErr && err == nil {
				t.Errorf("reply %d (%v): %s passed", i, reply, op)
			}
		}
		_, err := l.Reserve(ledgerCtx, ledgerRes(clock, "k", "e", "t"))
		check("Reserve", err)
		_, err = l.Confirm(ledgerCtx, "r", "k", "t")
		check("Confirm", err)
		check("Abort", l.Abort(ledgerCtx, "r", "k", "t"))
		_, _, err = l.Begin(ledgerCtx, "r", "k", "e", "t", "p", "o")
		check("Begin", err)
		_, err = l.Settle(ledgerCtx, "r", "k", "e", "t", "o", ledgerDoneSettlement("k"))
		check("Settle", err)
		_, _, err = l.Dead(ledgerCtx, "r", "e", "")
		check("Dead", err)
		check("Replay", l.Replay(ledgerCtx, "r", "e", "d", "t"))
		check("Purge", l.Purge(ledgerCtx, "r", "e", time.Hour))
		_, _, err = l.ListDead(ledgerCtx, "r", "", 1)
		check("ListDead", err)
		_, err = l.Delete(ledgerCtx, "r", "k")
		check("Delete", err)
		_, err = l.Stats(ledgerCtx, "r")
		check("Stats", err)
	}
	// Spot checks of exact answers.
	l := NewRedisLedger(nowhere, "", 0)
	l.UseBatcher(func(ctx context.Context, _ *redis.Script, _ []string, _ ...any) *redis.Cmd {
		cmd := redis.NewCmd(ctx)
		cmd.SetVal(int64(7))
		return cmd
	})
	_, err := l.Settle(ledgerCtx, "r", "k", "e", "t", "o", ledgerDoneSettlement("k"))
	ledgerWantErr(t, "Settle replying 7", err, queue.ErrCorrupt)
	_, err = l.Reserve(ledgerCtx, ledgerRes(clock, "k", "e", "t"))
	ledgerWantErr(t, "Reserve replying 7", err, queue.ErrCorrupt)
	_, err = l.Stats(ledgerCtx, "r")
	ledgerWantErr(t, "Stats replying 7", err, queue.ErrCorrupt)
}

// TestLedgerRedisUnavailable: a Redis that does not answer is
// queue.ErrUnavailable from every method.
func TestLedgerRedisUnavailable(t *testing.T) {
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	clock := newLedgerClock()
	l := NewRedisLedger(c, "u:", ledgerOpTimeout)
	ledgerKill(t, l, clock, "k", "d") // it works while Redis runs
	srv.Stop()
	for name, call := range ledgerAllCalls(l, clock) {
		if err := call(); !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("%s against a stopped Redis: %v, want ErrUnavailable", name, err)
		}
	}
	// A paused Redis runs into the timeout.
	srv.Start()
	srv.Pause()
	t.Cleanup(srv.Resume)
	l = NewRedisLedger(c, "u:", 100*time.Millisecond)
	for name, call := range ledgerAllCalls(l, clock) {
		if err := call(); !errors.Is(err, queue.ErrUnavailable) {
			t.Errorf("%s against a paused Redis: %v, want ErrUnavailable", name, err)
		}
	}
}

func ledgerAllCalls(l Ledger, clock *ledgerClock) map[string]func() error {
	return map[string]func() error{
		"Reserve": func() error { _, err := l.Reserve(ledgerCtx, ledgerRes(clock, "k2", "e", "t")); return err },
		"Confirm": func() error { _, err := l.Confirm(ledgerCtx, ledgerTestRoute, "k", "t"); return err },
		"Abort":   func() error { return l.Abort(ledgerCtx, ledgerTestRoute, "k", "t") },
		"Begin": func() error {
			_, _, err := l.Begin(ledgerCtx, ledgerTestRoute, "k", "e", "t", "p", "o")
			return err
		},
		"Settle": func() error {
			_, err := l.Settle(ledgerCtx, ledgerTestRoute, "k", "e", "t", "o", ledgerDoneSettlement("k"))
			return err
		},
		"Dead":     func() error { _, _, err := l.Dead(ledgerCtx, ledgerTestRoute, "e-k", ""); return err },
		"Replay":   func() error { return l.Replay(ledgerCtx, ledgerTestRoute, "e-k", "d", "r") },
		"Purge":    func() error { return l.Purge(ledgerCtx, ledgerTestRoute, "e-k", time.Hour) },
		"ListDead": func() error { _, _, err := l.ListDead(ledgerCtx, ledgerTestRoute, "", 10); return err },
		"Get":      func() error { _, err := l.Get(ledgerCtx, ledgerTestRoute, "k"); return err },
		"Delete":   func() error { _, err := l.Delete(ledgerCtx, ledgerTestRoute, "k"); return err },
		"Stats":    func() error { _, err := l.Stats(ledgerCtx, ledgerTestRoute); return err },
	}
}

// TestLedgerRedisRealExpiry lets Redis itself end a short lease.
func TestLedgerRedisRealExpiry(t *testing.T) {
	c := ledgerRedisClient(t, redistest.Start(t))
	clock := newLedgerClock()
	l := NewRedisLedger(c, "x:", ledgerOpTimeout)
	r := ledgerRes(clock, "k", "e1", "t1")
	r.Lease = 20 * time.Millisecond
	ledgerMustReserve(t, l, r)
	ledgerWaitFor(t, "the lease to end", func() bool {
		ks, err := l.Get(ledgerCtx, ledgerTestRoute, "k")
		return err == nil && ks.State == queue.StateAbsent
	})
	ledgerMustConfirm(t, l, "k", "t1", false)
}

// TestLedgerMemorySweep: keys whose time is up are forgotten even when
// nobody looks at them again.
func TestLedgerMemorySweep(t *testing.T) {
	clock := newLedgerClock()
	m := NewMemoryLedger(clock.Now)
	for i := range 10 {
		ledgerMustReserve(t, m, ledgerRes(clock, "k"+strconv.Itoa(i), "e", "t"))
	}
	clock.Add(ledgerLease + ledgerSweepEvery)
	ledgerMustReserve(t, m, ledgerRes(clock, "other", "e", "t"))
	m.mu.Lock()
	n := len(m.routes[ledgerTestRoute].keys)
	m.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d keys kept, want 1", n)
	}
}

func BenchmarkLedger(b *testing.B) {
	kinds := []struct {
		name string
		make func(b *testing.B) Ledger
	}{
		{"memory", func(*testing.B) Ledger { return NewMemoryLedger(nil) }},
		{"redis", func(b *testing.B) Ledger {
			return NewRedisLedger(ledgerRedisClient(b, redistest.Start(b)), "bench:", 0)
		}},
	}
	for _, kind := range kinds {
		b.Run(kind.name, func(b *testing.B) {
			l := kind.make(b)
			clock := newLedgerClock()
			done := ledgerDoneSettlement("k")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := "k" + strconv.Itoa(i)
				eid, tok := "e"+strconv.Itoa(i), "t"+strconv.Itoa(i)
				i++
				got, err := l.Reserve(ledgerCtx, ledgerRes(clock, key, eid, tok))
				if err != nil || got.State != queue.Enqueued {
					b.Fatalf("Reserve = %+v, %v", got, err)
				}
				if _, ok, err := l.Begin(ledgerCtx, ledgerTestRoute, key, eid, tok, "p", "w"); !ok || err != nil {
					b.Fatalf("Begin = %v, %v", ok, err)
				}
				if s, err := l.Settle(ledgerCtx, ledgerTestRoute, key, eid, tok, "w", done); s != queue.Recorded || err != nil {
					b.Fatalf("Settle = %v, %v", s, err)
				}
			}
		})
	}
}
