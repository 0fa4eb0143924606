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
