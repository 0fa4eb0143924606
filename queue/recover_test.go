package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const testStream = "test:webhook_queue:{q:hooks:0}"

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
		ls, err := b.Read(ctx, testRoute, 0, "B", 100, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for _, l := range ls {
			j, ok, err := b.Begin(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				tries[j.Key]++
				mustSettle(t, b, "B", j, delivered(200, "", "fp"), Recorded)
			}
		}
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
