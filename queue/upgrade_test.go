package queue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Records written by releases whose key hash kept neither the
// dead-letter details nor the begun entry under today's names.

const (
	testKeyHash = "test:webhook_qkey:{q:hooks:0}"
	testEvent   = "test:webhook_event:{q:hooks:0}"
)

// oldDeadLetter enqueues key, begins it, and dead-letters it as the
// earlier settle script did: the key hash says dead and names the begun
// entry "ent"; the DLQ position and the details are on the event hash.
// It returns the event id.
func oldDeadLetter(t *testing.T, b *Redis, c *redis.Client, key string, died time.Time) string {
	t.Helper()
	ctx := context.Background()
	j := mustBegin(t, b, readOne(t, b, "c"))
	if j.Key != key {
		t.Fatalf("read %q, want %q", j.Key, key)
	}
	kh, ev := testKeyHash+key, testEvent+j.EventID
	pipe := c.TxPipeline()
	pipe.XAck(ctx, testStream, Group, j.Entry)
	pipe.XDel(ctx, testStream, j.Entry)
	pipe.HSet(ctx, kh, "st", "dead", "ent", j.Entry)
	pipe.HDel(ctx, kh, "tok", "pos")
	dlq := pipe.XAdd(ctx, &redis.XAddArgs{Stream: "test:webhook_dlq:{q:hooks:0}", Values: []string{"e", j.EventID}})
	pipe.IncrBy(ctx, "test:webhook_dlq_bytes:{q:hooks:0}", int64(len(j.Payload)))
	pipe.ZRem(ctx, "test:webhook_age:{q:hooks:0}", j.EventID)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	err := c.HSet(ctx, ev, "dlq", dlq.Val(), "reason", "rejected:422", "status", "422", "err", "no such order",
		"died", died.UnixMilli(), "attempts", "1").Err()
	if err != nil {
		t.Fatal(err)
	}
	return j.EventID
}

// oldReplay replays a dead-lettered event as the earlier replay script
// did: the DLQ entry found on the event hash, the key's own fields
// untouched but for st, tok and qa.
func oldReplay(t *testing.T, c *redis.Client, key, id string) {
	t.Helper()
	ctx := context.Background()
	kh, ev := testKeyHash+key, testEvent+id
	e, err := c.HMGet(ctx, ev, "dlq", "first", "req").Result()
	if err != nil || e[0] == nil {
		t.Fatalf("the event of %s: %v, %v", key, e, err)
	}
	req, _ := e[2].(string)
	first, _ := strconv.ParseFloat(e[1].(string), 64)
	pipe := c.TxPipeline()
	pipe.XDel(ctx, "test:webhook_dlq:{q:hooks:0}", e[0].(string))
	pipe.DecrBy(ctx, "test:webhook_dlq_bytes:{q:hooks:0}", int64(len(req)))
	pipe.HDel(ctx, ev, "dlq", "reason", "status", "err", "died", "attempts")
	pipe.HSet(ctx, kh, "st", "queued", "tok", "old-tok", "qa", 0)
	pipe.Persist(ctx, kh)
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: testStream, Values: []string{"e", id, "t", "old-tok", "k", key}})
	pipe.ZAdd(ctx, "test:webhook_age:{q:hooks:0}", redis.Z{Score: first, Member: id})
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// An event dead-lettered by an earlier release is listed with its
// details, and can be replayed (then delivered), purged or deleted, with
// the DLQ and its byte count kept right.
func TestRedisDeadLettersOfEarlierReleases(t *testing.T) {
	ctx := context.Background()
	died := msNow()
	setup := func(t *testing.T) (*Redis, *redis.Client, func(string), string) {
		b, c, check := newInvariantRedis(t)
		mustEnqueue(t, b, testEntry("old", "fp"), 100)
		return b, c, check, oldDeadLetter(t, b, c, "old", died)
	}
	wantDLQ := func(t *testing.T, b *Redis, n, bytes int64) {
		t.Helper()
		if st := mustStats(t, b); st.DLQ != n || st.DLQBytes != bytes {
			t.Fatalf("DLQ %d events, %d bytes; want %d and %d", st.DLQ, st.DLQBytes, n, bytes)
		}
	}
	t.Run("listed", func(t *testing.T) {
		b, _, _, id := setup(t)
		list, _, err := b.ListDLQ(ctx, testRoute, "", 10)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListDLQ = %+v, %v", list, err)
		}
		e := list[0]
		if e.ID != id || e.Key != "old" || e.Reason != "rejected:422" || e.Status != 422 || e.Error != "no such order" ||
			e.Attempts != 1 || !e.DiedAt.Equal(died) || e.FirstSeen.IsZero() {
			t.Fatalf("listed %+v", e)
		}
		if ks := mustGet(t, b, "old"); ks.State != StateDeadLettered || ks.EventID != id || ks.Attempts != 1 {
			t.Fatalf("Get = %+v", ks)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		b, _, check, id := setup(t)
		if err := b.Replay(ctx, testRoute, id); err != nil {
			t.Fatal(err)
		}
		check("the replay")
		wantDLQ(t, b, 0, 0)
		j := mustBegin(t, b, readOne(t, b, "c"))
		if j.EventID != id || j.Try != 1 || j.Total != 2 {
			t.Fatalf("replayed job %+v", j)
		}
		mustSettle(t, b, "c", j, delivered(200, "", "fp"), Recorded)
		check("the delivery")
		if ks := mustGet(t, b, "old"); ks.State != StateFinished {
			t.Fatalf("Get = %+v", ks)
		}
	})
	t.Run("purged", func(t *testing.T) {
		b, _, check, id := setup(t)
		if err := b.Purge(ctx, testRoute, id, time.Hour); err != nil {
			t.Fatal(err)
		}
		check("the purge")
		wantDLQ(t, b, 0, 0)
		if err := b.Replay(ctx, testRoute, id); err == nil {
			t.Fatal("a purged event was replayed")
		}
		if a := mustEnqueue(t, b, testEntry("old", "fp"), 100); a.State != Pending || !a.Dead {
			t.Fatalf("a copy of the purged key: %+v", a)
		}
	})
	// Dead-lettered by this release, replayed and dead-lettered again by
	// an earlier one in a rolling upgrade: the key keeps the first
	// dead-letter's fields, the event names the live DLQ entry and
	// details.
	t.Run("dead again by an earlier release", func(t *testing.T) {
		b, c, check := newInvariantRedis(t)
		id := deadLetter(t, b, "k", died.Add(-time.Hour))
		oldReplay(t, c, "k", id)
		oldDeadLetter(t, b, c, "k", died)
		list, _, err := b.ListDLQ(ctx, testRoute, "", 10)
		if err != nil || len(list) != 1 || list[0].Reason != "rejected:422" || !list[0].DiedAt.Equal(died) {
			t.Fatalf("ListDLQ = %+v, %v", list, err)
		}
		if err := b.Replay(ctx, testRoute, id); err != nil {
			t.Fatal(err)
		}
		wantDLQ(t, b, 0, 0)
		mustSettle(t, b, "c", mustBegin(t, b, readOne(t, b, "c")), delivered(200, "", "fp"), Recorded)
		check("the delivery")
	})
	t.Run("deleted", func(t *testing.T) {
		b, _, check, _ := setup(t)
		if ks, err := b.Delete(ctx, testRoute, "old"); err != nil || ks.State != StateDeadLettered {
			t.Fatalf("Delete = %+v, %v", ks, err)
		}
		check("the delete")
		wantDLQ(t, b, 0, 0)
	})
}

// A key begun by an earlier release names its entry "ent": a recovery
// from a lost consumer group leaves it alone while that entry is still in
// the stream with the key's token (its owner may be delivering it).
func TestRedisRecoverKeepsEntryBegunByEarlierRelease(t *testing.T) {
	b, c, check := newInvariantRedis(t)
	ctx := context.Background()
	mustEnqueue(t, b, testEntry("old", "fp"), 100)
	j := mustBegin(t, b, readOne(t, b, "A"))
	if err := c.HDel(ctx, testKeyHash+"old", "pos").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, testKeyHash+"old", "ent", j.Entry).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XGroupDestroy(ctx, testStream, Group).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Read(ctx, testRoute, 0, "B", 10, 10*time.Millisecond); err == nil {
		t.Fatal("Read after the group was lost: no error")
	}
	if n := c.XLen(ctx, testStream).Val(); n != 1 {
		t.Fatalf("the stream holds %d entries after the recovery, want the begun one alone", n)
	}
	check("the recovery")
}
