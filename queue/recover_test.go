package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

const testStream = "test:webhook_queue:{q:hooks:0}"

// deliverReady reads what is ready on shard 0 as consumer, begins each
// entry and settles it delivered, counting the tries per key in tries.
func deliverReady(t *testing.T, b Backend, consumer string, tries map[string]int) {
	t.Helper()
	for _, l := range tryRead(t, b, consumer, 100) {
		j, ok, err := b.Begin(context.Background(), l)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			tries[j.Key]++
			mustSettle(t, b, consumer, j, delivered(200, "", "fp"), Recorded)
		}
	}
}

func assertGroupExists(t *testing.T, c *redis.Client) {
	t.Helper()
	groups, err := c.XInfoGroups(context.Background(), testStream).Result()
	if err != nil {
		t.Fatalf("XINFO GROUPS after the recovery: %v", err)
	}
	for _, g := range groups {
		if g.Name == Group {
			return
		}
	}
	t.Fatalf("group %q missing after the recovery: %+v", Group, groups)
}

// Redis loses the ready stream (and its pending entries) mid-run: the
// next Read says so and requeues every queued event from its key record;
// each is then delivered exactly once.
func TestRedisRecoversALostStream(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	deadLetter(t, b, "dead", msNow())
	mustEnqueue(t, b, testEntry("done", "fp"), 100)
	mustSettle(t, b, "c", mustBegin(t, b, readOne(t, b, "c")), delivered(200, "", "fp"), Recorded)

	keys := keyNames(10, "k")
	for _, k := range keys {
		mustEnqueue(t, b, testEntry(k, "fp"), 100)
	}
	held := tryRead(t, b, "A", 4) // in the PEL
	if len(held) != 4 {
		t.Fatalf("read %d entries, want 4", len(held))
	}
	waiting := mustBegin(t, b, held[0])
	mustSettle(t, b, "A", waiting, Settlement{Kind: SettleRetry, Due: msNow().Add(time.Hour)}, Recorded)
	inFlight := mustBegin(t, b, held[1])
	check("set-up")

	if err := c.Del(ctx, testStream).Err(); err != nil {
		t.Fatal(err)
	}
	ls, err := b.Read(ctx, testRoute, 0, "B", 100, 10*time.Millisecond)
	if !errors.Is(err, ErrGroupLost) || len(ls) != 0 {
		t.Fatalf("Read after the stream was lost = %d entries, %v; want ErrGroupLost", len(ls), err)
	}
	assertGroupExists(t, c)
	check("the recovery")

	// The consumer that held an entry of the lost stream records nothing.
	mustSettle(t, b, "A", inFlight, delivered(200, "", "fp"), NotOwner)
	if ks := mustGet(t, b, inFlight.Key); ks.State != StateQueued {
		t.Fatalf("key %s after a settle of a lost entry: %+v", inFlight.Key, ks)
	}
	// Old leases (the lost stream's entries) are leftovers.
	for _, l := range held[2:] {
		if _, ok, err := b.Begin(ctx, l); err != nil || ok {
			t.Fatalf("Begin of a lost entry = ok %v, %v; want a leftover", ok, err)
		}
	}

	tries := map[string]int{}
	for round := 0; mustStats(t, b).Depth > 0; round++ {
		if round == 100 {
			t.Fatalf("events still queued after %d rounds: %+v", round, mustStats(t, b))
		}
		if _, err := b.Promote(ctx, testRoute, 0, msNow().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		deliverReady(t, b, "B", tries)
		check(fmt.Sprintf("delivery round %d", round))
	}
	for _, k := range keys {
		if tries[k] != 1 {
			t.Errorf("key %s tried %d times after the recovery, want once", k, tries[k])
		}
		if ks := mustGet(t, b, k); ks.State != StateFinished {
			t.Errorf("key %s: %+v, want finished", k, ks)
		}
	}
	if tries["dead"] != 0 || tries["done"] != 0 {
		t.Errorf("settled keys were tried again: %v", tries)
	}
	if st := mustStats(t, b); st.DLQ != 1 {
		t.Errorf("DLQ = %d, want the dead event still there", st.DLQ)
	}
	assertNoEntries(t, b)
}

// The same loss under a running Manager: every event waiting to retry
// is delivered once, with one 2xx each.
func TestRedisRecoversALostStreamUnderManager(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	sender := newSender(func(_ context.Context, _ string, attempt int64) Result {
		if attempt == 1 {
			return answer(503)
		}
		return answer(200)
	})
	route := testQueueRoute()
	// The retries wait long enough for the stream to be lost meanwhile;
	// the recovery puts them back at once.
	route.Retry.Initial, route.Retry.Max = 5*time.Second, 5*time.Second
	env := startManager(t, b, sender, route)
	keys := keyNames(20, "k")
	env.enqueue(t, keys...)
	waitFor(t, "every event waiting to retry", func() bool {
		return c.ZCard(ctx, "test:webhook_retry:{q:hooks:0}").Val() == int64(len(keys))
	})
	if err := c.Del(ctx, testStream).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every event delivered", func() bool { return sender.successes() == len(keys) })
	env.m.Close(time.Second)
	assertGroupExists(t, c)
	check("the deliveries")
	tried := sender.byKey()
	for _, k := range keys {
		assertTries(t, tried[k], k, []int64{1, 2}, []int{503, 200})
	}
	if st := mustStats(t, b); st.Depth != 0 {
		t.Fatalf("Depth = %d, want 0", st.Depth)
	}
}

// Redis restarted without persistence: the events that arrive next are
// in a stream without a group. One instance recreates the group and
// starts its recovery; another reads and begins an event before the
// recovery reaches it. The recovery must leave that event alone: a
// requeue would mint a second entry and make the first one's settle
// stale, so the event would be delivered twice. (Issue: recovery after
// Redis lost the ready stream doubled events that arrived after the loss.)
func TestRedisRecoverLeavesABegunEventAlone(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	if err := c.FlushAll(ctx).Err(); err != nil { // the restart
		t.Fatal(err)
	}
	mustEnqueue(t, b, testEntry("after", "fp"), 100)
	mustEnqueue(t, b, testEntry("ready", "fp"), 100)
	// Instance A's recovery has created the group...
	if err := b.createGroup(ctx, testRoute, 0); err != nil {
		t.Fatal(err)
	}
	// ... instance B reads the first event and begins it ...
	ls := tryRead(t, b, "B", 1)
	if len(ls) != 1 || ls[0].Key != "after" {
		t.Fatalf("B read %+v", ls)
	}
	j := mustBegin(t, b, ls[0])
	// ... and A's recovery goes on over the key records.
	if err := b.recover(ctx, testRoute, 0); !errors.Is(err, ErrGroupLost) {
		t.Fatalf("recover = %v", err)
	}
	check("the recovery")
	mustSettle(t, b, "B", j, delivered(200, "", "fp"), Recorded)
	tries := map[string]int{"after": 1}
	for round := 0; mustStats(t, b).Depth > 0; round++ {
		if round == 50 {
			t.Fatalf("events still queued after %d rounds: %+v", round, mustStats(t, b))
		}
		for _, l := range tryRead(t, b, "B", 10) {
			if j, ok, err := b.Begin(ctx, l); err != nil {
				t.Fatal(err)
			} else if ok {
				tries[j.Key]++
				mustSettle(t, b, "B", j, delivered(200, "", "fp"), Recorded)
			}
		}
	}
	if tries["after"] != 1 || tries["ready"] != 1 {
		t.Fatalf("tries after the recovery: %v, want each event once", tries)
	}
	check("the deliveries")
	assertNoEntries(t, b)
}

// The race itself, end to end: two instances on one redis-server without
// persistence, events arriving from four senders, Redis killed and
// restarted five times. No event is delivered twice, and every event
// acknowledged after the last restart is delivered exactly once (events
// acknowledged before a restart may be lost: Redis kept nothing). The
// race's window is narrow: without the fix this caught doubles in about
// half of its runs; TestRedisRecoverLeavesABegunEventAlone replays the
// interleaving every time.
func TestRedisRestartWithoutPersistenceWhileEventsArriveDeliversOnce(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	sender := newSender(func(ctx context.Context, _ string, _ int64) Result {
		sleep(ctx, time.Millisecond) // a try in flight for a moment
		return answer(200)
	})
	route := testQueueRoute()
	route.MaxDepth = 1 << 20
	route.LockTTL = 10 * time.Second // no reclaim during the test: doubles would be the recovery's
	var envs []*managerEnv
	for _, name := range []string{"A", "B"} {
		b := NewRedis(newRedisClient(t, srv.Addr), "test:", 0)
		if err := b.Prepare(ctx, testRoute, 1); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, startManager(t, b, sender, route, func(o *Options) {
			o.Consumer, o.Block = name, 20*time.Millisecond
			// The managers' warnings and errors (a backend failing, a
			// group recreated) go to the test's log, to read a failure by.
			o.Log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", name)
		}))
	}
	const restarts = 5
	var (
		epoch atomic.Int32 // restarts so far
		seq   atomic.Int64
		mu    sync.Mutex
		last  []string // acknowledged after the last restart
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%06d", seq.Add(1))
				before := epoch.Load()
				ack, err := envs[w%2].m.Enqueue(ctx, testEntry(key, "fp-"+key))
				if err != nil {
					time.Sleep(time.Millisecond) // Redis is down
					continue
				}
				if ack.State == Enqueued && before == restarts && epoch.Load() == restarts {
					mu.Lock()
					last = append(last, key)
					mu.Unlock()
				}
			}
		})
	}
	diag := newRedisClient(t, srv.Addr)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// What the queue looked like when the test gave up.
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		groups, gerr := diag.XInfoGroups(c, testStream).Result()
		n, lerr := diag.XLen(c, testStream).Result()
		t.Logf("at the end: %d sent, %d delivered, %d restarts; stream length %d (%v), groups %+v (%v)",
			seq.Load(), sender.successes(), epoch.Load(), n, lerr, groups, gerr)
	})
	for r := range restarts {
		want := sender.successes() + 200
		waitFor(t, fmt.Sprintf("deliveries before restart %d", r+1), func() bool { return sender.successes() >= want })
		srv.Stop()
		srv.Start()
		epoch.Add(1)
	}
	waitFor(t, "events acknowledged after the last restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(last) >= 1000
	})
	close(stop)
	wg.Wait()
	mu.Lock()
	keys := append([]string(nil), last...)
	mu.Unlock()
	waitFor(t, "every event acknowledged after the last restart delivered and settled", func() bool {
		st, err := envs[0].b.Stats(ctx, testRoute)
		if err != nil || st.Depth != 0 {
			return false
		}
		tried := sender.byKey()
		for _, k := range keys {
			if len(tried[k]) == 0 {
				return false
			}
		}
		return true
	})
	for _, e := range envs {
		e.m.Close(time.Second)
	}
	doubles := 0
	for k, calls := range sender.byKey() {
		if len(calls) > 1 {
			doubles++
			if doubles <= 10 {
				t.Errorf("key %s delivered %d times", k, len(calls))
			}
		}
	}
	t.Logf("%d events sent, %d acknowledged after the last restart, %d delivered twice", seq.Load(), len(keys), doubles)
}

// Regression: a recovery followed the events that kept arriving while it
// ran (it paged through the age set by rank up to its end, wherever that
// was by then), so with arrivals faster than its pass it never ended and
// no instance read the shard: a queue stalled after a Redis restart
// without persistence under load (TestRedisRestartWithoutPersistence...
// timed out with 250,000 events waiting and no consumer in the group).
// Now the pass covers the events queued when it began, in pages by score,
// and deliveries during it (which remove events from the age set) make
// it skip none.
func TestRedisRecoveryEndsWhileEventsKeepArriving(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	defer func(n int) { recoverPage, recoverPageHook = n, nil }(recoverPage)
	recoverPage = 5

	// 23 events queued an hour ago, 12 of them in the same millisecond
	// (more than a page share a score).
	old := keyNames(23, "old")
	past := msNow().Add(-time.Hour)
	for i, k := range old {
		e := testEntry(k, "fp")
		e.FirstSeen = past.Add(time.Duration(max(0, i-11)) * time.Millisecond)
		mustEnqueue(t, b, e, 1000)
	}
	if err := c.Del(ctx, testStream).Err(); err != nil {
		t.Fatal(err)
	}

	tries := map[string]int{}
	deliver := func() { deliverReady(t, b, "C", tries) }
	// After each page: five new events arrive, and what is ready is
	// delivered (requeued old events among them).
	pages, fresh := 0, 0
	recoverPageHook = func() {
		pages++
		if pages > 50 {
			return // the old pass: it would never end
		}
		for range 5 {
			fresh++
			mustEnqueue(t, b, testEntry(fmt.Sprintf("new%03d", fresh), "fp"), 1000)
		}
		deliver()
	}
	_, err := b.Read(ctx, testRoute, 0, "B", 100, 10*time.Millisecond)
	if !errors.Is(err, ErrGroupLost) {
		t.Fatalf("Read after the stream was lost: %v, want ErrGroupLost", err)
	}
	recoverPageHook = nil
	if want := 23/5 + 2; pages > want {
		t.Fatalf("the recovery read %d pages of 5 for 23 events queued before it (at most %d): it followed the new arrivals", pages, want)
	}
	if !strings.Contains(err.Error(), " 23 requeued") {
		t.Errorf("recovery: %v, want the 23 old events requeued", err)
	}
	check("the recovery")
	for round := 0; mustStats(t, b).Depth > 0; round++ {
		if round == 100 {
			t.Fatalf("events still queued after %d rounds: %+v", round, mustStats(t, b))
		}
		deliver()
	}
	for _, k := range old {
		if tries[k] != 1 {
			t.Errorf("old key %s tried %d times, want once", k, tries[k])
		}
	}
	for i := 1; i <= fresh; i++ {
		if k := fmt.Sprintf("new%03d", i); tries[k] != 1 {
			t.Errorf("new key %s tried %d times, want once", k, tries[k])
		}
	}
	check("the deliveries")
}
