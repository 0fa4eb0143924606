package queue

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

// What the memory and Redis backends promise beyond the shared
// conformance suite (queue/queuetest), which checks only what every
// backend, Kafka's included, keeps.

// The memory and Redis backends list a DLQ in the order its events died,
// oldest first, whatever the page size (Backend.ListDLQ); the shared
// conformance suite checks only that a listing pages through every dead
// event once, which is all the Kafka backend promises.
func TestListDLQDiedOrder(t *testing.T) {
	run := func(t *testing.T, b Backend) {
		ctx := context.Background()
		var want []string
		base := msNow()
		for i := range 5 {
			want = append(want, deadLetter(t, b, fmt.Sprintf("k%d", i), base.Add(time.Duration(i)*time.Millisecond)))
		}
		var got []string
		var sizes []int
		cursor := ""
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatalf("ListDLQ did not end after %d pages", page)
			}
			list, next, err := b.ListDLQ(ctx, testRoute, cursor, 2)
			if err != nil {
				t.Fatalf("ListDLQ page %d: %v", page, err)
			}
			sizes = append(sizes, len(list))
			for _, d := range list {
				got = append(got, d.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if fmt.Sprint(sizes) != "[2 2 1]" {
			t.Fatalf("page sizes %v, want [2 2 1]", sizes)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v (died order)", got, want)
		}
		for _, limit := range []int{0, -1} {
			list, next, err := b.ListDLQ(ctx, testRoute, "", limit)
			if err != nil || len(list) != 1 || list[0].ID != want[0] || next == "" {
				t.Fatalf("ListDLQ(limit %d) = %d entries, next %q, %v; want the first to die, and a cursor", limit, len(list), next, err)
			}
		}
		for _, limit := range []int{1, 3, 100} {
			if got := listAllDLQ(t, b, testRoute, limit); !slices.Equal(got, want) {
				t.Fatalf("ListDLQ by %d: %v, want %v (died order)", limit, got, want)
			}
		}
		all, _, err := b.ListDLQ(ctx, testRoute, "", 100)
		if err != nil || len(all) != len(want) {
			t.Fatalf("ListDLQ(limit 100) = %d entries, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].DiedAt.Before(all[i-1].DiedAt) {
				t.Fatalf("entries out of died order: %+v", all)
			}
		}
	}
	forEachBackend(t, run)
	t.Run("cluster", func(t *testing.T) {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
		t.Cleanup(func() { _ = cc.Close() })
		b := NewRedis(cc, "test:", 0)
		if err := b.Prepare(context.Background(), testRoute, 1); err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		run(t, b)
	})
}

// The memory and Redis backends make a retry ready at the first Promote
// at its due time, readable at once, and count it there (Backend.Promote);
// the shared suite polls, since Kafka learns of retries in the
// background.
func TestPromoteAtDueReadyAtOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ctx := context.Background()
		mustEnqueue(t, b, testEntry("k", "fp"), 10)
		j := mustBegin(t, b, readOne(t, b, "c"))
		due := msNow().Add(time.Hour)
		mustSettle(t, b, "c", j, Settlement{Kind: SettleRetry, Due: due}, Recorded)
		if n, err := b.Promote(ctx, testRoute, 0, due.Add(-time.Millisecond)); err != nil || n != 0 {
			t.Fatalf("Promote before due = %d, %v; want 0", n, err)
		}
		if n, err := b.Promote(ctx, testRoute, 0, due); err != nil || n != 1 {
			t.Fatalf("first Promote at due = %d, %v; want 1", n, err)
		}
		if n, err := b.Promote(ctx, testRoute, 0, due); err != nil || n != 0 {
			t.Fatalf("second Promote at due = %d, %v; want 0", n, err)
		}
		ls := tryRead(t, b, "c", 10)
		if len(ls) != 1 || ls[0].EventID != j.EventID {
			t.Fatalf("read after the Promote = %+v, want the retry at once", ls)
		}
		j2 := mustBegin(t, b, ls[0])
		mustSettle(t, b, "c", j2, delivered(200, "", "fp"), Recorded)
		assertNoEntries(t, b)
	})
}

// The memory and Redis backends hand over the very entry at a takeover,
// its Entry id unchanged (Lease.Entry), whether it was handed back or
// idled past the lock TTL; the shared suite checks only that the same
// event of the same round is taken over.
func TestReclaimKeepsTheEntry(t *testing.T) {
	for _, how := range []string{"handed back", "idle"} {
		t.Run(how, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b Backend) {
				ctx := context.Background()
				mustEnqueue(t, b, testEntry("k", "fp"), 10)
				l := readOne(t, b, "A")
				idle := time.Hour
				if how == "handed back" {
					if err := b.HandBack(ctx, "A", []Lease{l}, idle); err != nil {
						t.Fatalf("HandBack: %v", err)
					}
				} else {
					idle = 0
				}
				ls, err := b.Reclaim(ctx, testRoute, 0, "B", idle)
				if err != nil || len(ls) != 1 || ls[0].Entry != l.Entry || ls[0].EventID != l.EventID || ls[0].Consumer != "B" {
					t.Fatalf("Reclaim = %+v, %v; want A's entry %s, now B's", ls, err, l.Entry)
				}
				j := mustBegin(t, b, ls[0])
				mustSettle(t, b, "B", j, delivered(200, "", "fp"), Recorded)
				assertNoEntries(t, b)
			})
		})
	}
}

// On the memory and Redis backends a takeover moves the entry at once:
// the stale owner's settle is refused (NotOwner) from the Reclaim on,
// before the new owner begins its try, and changes nothing. (The shared
// suite checks the refusal once the new owner has begun, which is when
// the Kafka backend's takeover completes.)
func TestStaleSettleRefusedFromTheTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ctx := context.Background()
		mustEnqueue(t, b, testEntry("k", "fp"), 10)
		ja := mustBegin(t, b, readOne(t, b, "A"))
		var taken []Lease
		waitFor(t, "B to reclaim A's idle entry", func() bool {
			ls, err := b.Reclaim(ctx, testRoute, 0, "B", 20*time.Millisecond)
			if err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			taken = append(taken, ls...)
			return len(taken) > 0
		})
		if len(taken) != 1 || taken[0].Entry != ja.Entry {
			t.Fatalf("B reclaimed %+v, want A's entry %s", taken, ja.Entry)
		}
		for _, s := range []Settlement{delivered(200, "", "fp"), {Kind: SettleRetry, Due: msNow()}, dead("exhausted", 500, msNow())} {
			mustSettle(t, b, "A", ja, s, NotOwner)
		}
		if ks := mustGet(t, b, "k"); ks.State != StateQueued || ks.Attempts != 1 {
			t.Fatalf("Get after stale settles = %+v, want queued, 1 try", ks)
		}
		if st := mustStats(t, b); st.Depth != 1 || st.DLQ != 0 {
			t.Fatalf("Stats after stale settles = %+v", st)
		}
		jb := mustBegin(t, b, taken[0])
		if jb.Try != 2 {
			t.Fatalf("B's try = %d, want 2", jb.Try)
		}
		mustSettle(t, b, "B", jb, delivered(200, "", "fp"), Recorded)
		if ks := mustGet(t, b, "k"); ks.State != StateFinished {
			t.Fatalf("Get = %+v, want finished", ks)
		}
		assertNoEntries(t, b)
	})
}
