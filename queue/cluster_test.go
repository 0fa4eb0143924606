package queue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

// waitNextMillis returns once the clock has moved on by two milliseconds,
// so that two DLQ entries made on either side get distinct stream ids
// whatever shard (and node) they are on.
func waitNextMillis(t *testing.T) {
	t.Helper()
	start := time.Now().UnixMilli()
	waitFor(t, "the clock to move on", func() bool { return time.Now().UnixMilli() >= start+2 })
}

// listAllDLQ pages through route's DLQ limit entries at a time.
func listAllDLQ(t *testing.T, b Backend, route string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("ListDLQ(limit %d) did not end", limit)
		}
		list, next, err := b.ListDLQ(context.Background(), route, cursor, limit)
		if err != nil {
			t.Fatalf("ListDLQ(limit %d, cursor %q): %v", limit, cursor, err)
		}
		if len(list) > limit {
			t.Fatalf("ListDLQ(limit %d) returned %d entries", limit, len(list))
		}
		for _, d := range list {
			ids = append(ids, d.ID)
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

func TestRedisClusterShards(t *testing.T) {
	addrs := redistest.StartCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Protocol: 2})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := context.Background()
	const route, shards = "clustered", 4
	b := NewRedis(cc, "test:", 0)
	if err := b.Prepare(ctx, route, shards); err != nil {
		t.Fatalf("Prepare with %d shards: %v", shards, err)
	}
	if got := b.Shards(route); got != shards {
		t.Fatalf("Shards = %d", got)
	}

	const n = 200
	perShard := make([]int, shards)
	deadKeys := map[string]bool{}
	for i := range n {
		k := fmt.Sprintf("key-%03d", i)
		e := testEntry(k, "fp")
		e.Route = route
		ack, err := b.Enqueue(ctx, e, n)
		if err != nil || ack.State != Enqueued {
			t.Fatalf("Enqueue %s = %+v, %v", k, ack, err)
		}
		s, ok := shardOfID(ack.ID, shards)
		if !ok || s != b.shardOf(route, k) {
			t.Fatalf("event id %s names shard %d (ok %v), the key's shard is %d", ack.ID, s, ok, b.shardOf(route, k))
		}
		perShard[s]++
		if perShard[s] <= 2 {
			deadKeys[k] = true // two per shard
		}
	}
	for s, c := range perShard {
		if c == 0 {
			t.Fatalf("shard %d got no key: %v", s, perShard)
		}
	}
	if st, err := b.Stats(ctx, route); err != nil || st.Depth != n {
		t.Fatalf("Stats = %+v, %v; want Depth %d", st, err, n)
	}

	tries := map[string]int{}
	var died []string
	for s := range shards {
		for {
			ls, err := b.Read(ctx, route, s, "c", 50, 10*time.Millisecond)
			if err != nil {
				t.Fatalf("Read shard %d: %v", s, err)
			}
			if len(ls) == 0 {
				break
			}
			for _, l := range ls {
				if l.Shard != s {
					t.Fatalf("lease of shard %d read from shard %d", l.Shard, s)
				}
				j := mustBegin(t, b, l)
				tries[j.Key]++
				if deadKeys[j.Key] {
					waitNextMillis(t)
					mustSettle(t, b, "c", j, dead("rejected:422", 422, msNow()), Recorded)
					died = append(died, j.EventID)
					continue
				}
				mustSettle(t, b, "c", j, delivered(200, "", "fp"), Recorded)
			}
		}
	}
	if len(tries) != n {
		t.Fatalf("%d keys tried, want %d", len(tries), n)
	}
	for k, c := range tries {
		if c != 1 {
			t.Fatalf("key %s tried %d times", k, c)
		}
	}
	st, err := b.Stats(ctx, route)
	if err != nil || st.Depth != 0 || st.DLQ != int64(len(died)) {
		t.Fatalf("Stats = %+v, %v; want Depth 0, DLQ %d", st, err, len(died))
	}
	for _, limit := range []int{1, 3, 1000} {
		if got := listAllDLQ(t, b, route, limit); !slices.Equal(got, died) {
			t.Fatalf("ListDLQ by %d: %v\nwant (died order) %v", limit, got, died)
		}
	}
	checkInvariant(t, cc, "test:", route)
	// Dead finds each event on its shard from its id, with its payload.
	for _, id := range died {
		d, payload, err := b.Dead(ctx, route, id)
		if err != nil || d.ID != id || !deadKeys[d.Key] || d.Status != 422 || string(payload) != string(testEntry(d.Key, "fp").Payload) {
			t.Fatalf("Dead(%s) = %+v, %q, %v", id, d, payload, err)
		}
	}

	// Replay and purge find the event's shard from its id.
	if err := b.Replay(ctx, route, died[0]); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if err := b.Purge(ctx, route, died[1], time.Hour); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	checkInvariant(t, cc, "test:", route)

	for _, other := range []*Redis{b, NewRedis(cc, "test:", 0)} {
		err := other.Prepare(ctx, route, 3)
		if err == nil || !strings.Contains(err.Error(), "shards") {
			t.Fatalf("Prepare with 3 shards after 4 = %v, want an error about shards", err)
		}
	}
}

// Two shards' DLQ streams can hold the same stream id (each stream draws
// its ids from the clock on its own: two events dead-lettered on two
// shards within one millisecond both get "<ms>-0"). Paging must still
// list each of them once.
func TestRedisListDLQAcrossShardsWithEqualIDs(t *testing.T) {
	c := newRedisClient(t, redistest.Start(t))
	ctx := context.Background()
	b := NewRedis(c, "test:", 0)
	if err := b.Prepare(ctx, testRoute, 2); err != nil {
		t.Fatal(err)
	}
	// Make the equal ids certain rather than likely: both DLQ streams
	// continue from the same last id, so their next entries are
	// <future>-1, <future>-2, ... on both.
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) + "-0"
	for s := range 2 {
		q := b.dlq(testRoute, s)
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: q, ID: future, Values: []string{"e", "seed"}}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.XDel(ctx, q, future).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var keys [2][]string
	for i := 0; len(keys[0]) < 2 || len(keys[1]) < 2; i++ {
		k := fmt.Sprintf("k%d", i)
		s := b.shardOf(testRoute, k)
		keys[s] = append(keys[s], k)
	}
	var all []string
	for i := range 2 {
		for s := range 2 {
			k := keys[s][i]
			ack := mustEnqueue(t, b, testEntry(k, "fp"), 100)
			ls, err := b.Read(ctx, testRoute, s, "c", 1, 10*time.Millisecond)
			if err != nil || len(ls) != 1 {
				t.Fatalf("Read shard %d = %+v, %v", s, ls, err)
			}
			mustSettle(t, b, "c", mustBegin(t, b, ls[0]), dead("exhausted", 500, msNow()), Recorded)
			all = append(all, ack.ID)
		}
	}
	if got := listAllDLQ(t, b, testRoute, 1000); len(got) != 4 {
		t.Fatalf("one page lists %d entries, want 4", len(got))
	}
	for _, limit := range []int{1, 3} {
		got := listAllDLQ(t, b, testRoute, limit)
		slices.Sort(got)
		want := slices.Clone(all)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("pages of %d listed %v, want all 4 %v once each: an entry with the cursor's id on another shard is skipped", limit, got, want)
		}
	}
}
