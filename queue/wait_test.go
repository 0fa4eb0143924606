package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// scriptLog records which scripts a runner sent, by name.
type scriptLog struct {
	mu    sync.Mutex
	names []string
}

func (l *scriptLog) runner(c redis.UniversalClient, names map[*redis.Script]string) ScriptRunner {
	return func(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
		l.mu.Lock()
		l.names = append(l.names, names[s])
		l.mu.Unlock()
		return s.Run(ctx, c, keys, args...)
	}
}

func (l *scriptLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.names
	l.names = nil
	return out
}

// The writes that acknowledge an event or record an outcome (enqueue,
// settle, replay, purge) go through UseDurable's runner, which waits for
// store.redis.wait_replicas; the others through the batcher. They used
// to go through the batcher alone, with no WAIT.
func TestRedisDurableWrites(t *testing.T) {
	ctx := context.Background()
	b := newRedisBackend(t, 0)
	names := map[*redis.Script]string{
		enqueueScript: "enqueue", beginScript: "begin", settleScript: "settle", promoteScript: "promote",
		replayScript: "replay", purgeScript: "purge", handBackScript: "hand back", deleteScript: "delete", requeueScript: "requeue", dlqEntriesScript: "dlq entries",
	}
	var durable, batched scriptLog
	b.UseBatcher(batched.runner(b.client, names))
	b.UseDurable(durable.runner(b.client, names))
	step := func(what string, wantDurable, wantBatched []string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d, bt := durable.take(), batched.take(); !slices.Equal(d, wantDurable) || !slices.Equal(bt, wantBatched) {
			t.Fatalf("%s sent %q through the durable runner and %q through the batcher; want %q and %q", what, d, bt, wantDurable, wantBatched)
		}
	}
	var job Job
	begin := func() error {
		ls, err := b.Read(ctx, testRoute, 0, "c1", 1, time.Millisecond)
		if err != nil || len(ls) != 1 {
			t.Fatalf("Read = %v, %v", ls, err)
		}
		j, ok, err := b.Begin(ctx, ls[0])
		if !ok {
			t.Fatalf("Begin refused %+v", ls[0])
		}
		job = j
		return err
	}
	settle := func(s Settlement) func() error {
		return func() error {
			got, err := b.Settle(ctx, "c1", job, s)
			if err == nil && got != Recorded {
				t.Fatalf("Settle = %v", got)
			}
			return err
		}
	}
	dead := Settlement{Kind: SettleDead, Reason: "rejected:400", Status: 400, At: msNow()}
	var id string
	step("Enqueue", []string{"enqueue"}, nil, func() error {
		a, err := b.Enqueue(ctx, testEntry("k1", "fp"), 100)
		id = a.ID
		return err
	})
	step("Enqueue of a copy", []string{"enqueue"}, nil, func() error { _, err := b.Enqueue(ctx, testEntry("k1", "fp"), 100); return err })
	step("Begin", nil, []string{"begin"}, begin)
	step("Settle (retry)", []string{"settle"}, nil, settle(Settlement{Kind: SettleRetry, Due: msNow()}))
	step("Promote", nil, []string{"promote"}, func() error { _, err := b.Promote(ctx, testRoute, 0, msNow().Add(time.Second)); return err })
	step("Begin", nil, []string{"begin"}, begin)
	step("Settle (dead)", []string{"settle"}, nil, settle(dead))
	step("Replay", []string{"replay"}, nil, func() error { return b.Replay(ctx, testRoute, id) })
	step("Begin", nil, []string{"begin"}, begin)
	step("Settle (dead)", []string{"settle"}, nil, settle(dead))
	step("Purge", []string{"purge"}, nil, func() error { return b.Purge(ctx, testRoute, id, time.Hour) })
	step("Enqueue", []string{"enqueue"}, nil, func() error { _, err := b.Enqueue(ctx, testEntry("k2", "fp"), 100); return err })
	step("Begin", nil, []string{"begin"}, begin)
	step("Settle (delivered)", []string{"settle"}, nil, settle(Settlement{Kind: SettleDelivered, Retention: time.Hour}))
}

// On a Cluster, each durable write and its WAIT go to the master that
// owns the event's shard (a wrong node would answer MOVED). The test
// cluster has no replicas, so every WAIT falls short and is counted;
// every write still succeeds.
func TestRedisDurableWritesOnCluster(t *testing.T) {
	ctx := context.Background()
	var shortfalls atomic.Int64
	st, err := store.NewRedis(store.RedisOptions{Addrs: redistest.StartCluster(t), KeyPrefix: "w:", WaitReplicas: 1,
		WaitTimeout: 10 * time.Millisecond, OnReplicaShortfall: func() { shortfalls.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := NewRedis(st.Client(), st.KeyPrefix(), st.OpTimeout())
	b.UseBatcher(st.RunScript)
	b.UseDurable(st.RunDurable)
	const route, shards, n = "clustered", 4, 20
	if err := b.Prepare(ctx, route, shards); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := Entry{Route: route, Key: fmt.Sprintf("k%d", i), Fingerprint: "fp", Payload: []byte("x"), FirstSeen: msNow()}
		if a, err := b.Enqueue(ctx, e, 1000); err != nil || a.State != Enqueued {
			t.Fatalf("Enqueue %s = %+v, %v", e.Key, a, err)
		}
	}
	if got := shortfalls.Load(); got != n {
		t.Fatalf("%d shortfalls for %d enqueues with no replica, want %d", got, n, n)
	}
	settled := 0
	for s := range shards {
		ls, err := b.Read(ctx, route, s, "c1", n, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			j, ok, err := b.Begin(ctx, l)
			if err != nil || !ok {
				t.Fatalf("Begin %+v = %v, %v", l, ok, err)
			}
			if got, err := b.Settle(ctx, "c1", j, Settlement{Kind: SettleDelivered, Retention: time.Hour}); err != nil || got != Recorded {
				t.Fatalf("Settle %s = %v, %v", l.Key, got, err)
			}
			settled++
		}
	}
	if settled != n || shortfalls.Load() != 2*n {
		t.Fatalf("%d settled, %d shortfalls; want %d and %d", settled, shortfalls.Load(), n, 2*n)
	}
}
