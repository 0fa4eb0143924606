package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// A sync route's copies and the Redis Streams queue's meet on one key
// record (SyncPlace): on a Cluster, over several shards, whichever mode
// saw the key first.
func TestRedisSyncPlaceSharesTheRecord(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := context.Background()
	const route, shards = "switched", 4
	b := NewRedis(cc, "test:", 0)
	if err := b.Prepare(ctx, route, shards); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		return s.Run(ctx, cc, keys, args...)
	}
	sync := ledger.NewSyncRedis(b.SyncPlace(), ledger.SyncOptions{}, run, nil, 0)
	out := store.Outcome{Status: 200, Body: []byte("ok"), Fingerprint: "fp"}
	for i := range 8 {
		k := fmt.Sprintf("key-%d", i)
		// Sync first: the queue finds the lock, then the outcome.
		c, err := sync.Claim(ctx, route, k, "fp", time.Minute)
		if err != nil || c.State != store.Claimed {
			t.Fatalf("Claim %s = %+v, %v", k, c, err)
		}
		e := testEntry(k, "fp")
		e.Route = route
		if ack, err := b.Enqueue(ctx, e, 100); err != nil || ack.State != InFlight {
			t.Fatalf("Enqueue of %s a sync copy holds = %+v, %v", k, ack, err)
		}
		if ks, err := b.Get(ctx, route, k); err != nil || ks.State != ledger.StateInFlight {
			t.Fatalf("Get %s = %+v, %v", k, ks, err)
		}
		if err := sync.Finish(ctx, route, k, c.Token, out, time.Hour); err != nil {
			t.Fatalf("Finish %s: %v", k, err)
		}
		if ack, err := b.Enqueue(ctx, e, 100); err != nil || ack.State != Delivered || ack.Outcome.Status != 200 {
			t.Fatalf("Enqueue of %s a sync copy finished = %+v, %v", k, ack, err)
		}
		// Queue first: the sync path finds the queued event.
		q := "queued-" + k
		e = testEntry(q, "fp")
		e.Route = route
		ack, err := b.Enqueue(ctx, e, 100)
		if err != nil || ack.State != Enqueued {
			t.Fatalf("Enqueue %s = %+v, %v", q, ack, err)
		}
		if c, err := sync.Claim(ctx, route, q, "fp", time.Minute); err != nil || c.State != store.Queued || c.EventID != ack.ID {
			t.Fatalf("Claim of queued %s = %+v, %v; want Queued with %s", q, c, err, ack.ID)
		}
	}
}

// The enqueue reads a schema-1 sync record (CheckSyncRecords) only while
// such records may live (CheckSyncRecordsWhile).
func TestRedisEnqueueReadsSchema1SyncRecordsWhileOpen(t *testing.T) {
	ctx := context.Background()
	c := newRedisClient(t, redistest.Start(t))
	b := NewRedis(c, "test:", 0)
	if err := b.Prepare(ctx, testRoute, 1); err != nil {
		t.Fatal(err)
	}
	old := func(kind, key string) string { return "test:webhook_" + kind + ":{" + testRoute + ":" + key + "}" }
	b.CheckSyncRecords(func(route, key string) (string, string, string) {
		return old("lock", key), old("done", key), old("attempts", key)
	})
	open := true
	b.CheckSyncRecordsWhile(func() bool { return open })
	rec, err := store.EncodeOutcome(store.Outcome{Status: 200, Body: []byte("old"), Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if err := c.Set(ctx, old("done", k), rec, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ack, err := b.Enqueue(ctx, testEntry("a", "fp"), 100); err != nil || ack.State != Delivered || string(ack.Outcome.Body) != "old" {
		t.Fatalf("Enqueue while schema-1 records may live = %+v, %v; want the old record's answer", ack, err)
	}
	open = false
	if ack, err := b.Enqueue(ctx, testEntry("b", "fp"), 100); err != nil || ack.State != Enqueued {
		t.Fatalf("Enqueue after = %+v, %v; want enqueued (not looked up)", ack, err)
	}
}
