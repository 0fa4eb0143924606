package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
	"github.com/clawgate/clawgate/store/storetest"
)

// The sync finish records an outcome: with store.redis.wait_replicas it
// waits for the replicas, its script and WAIT in one round trip.

func TestRedisFinishWaitsForReplica(t *testing.T) {
	ctx := context.Background()
	master := redistest.StartServer(t)
	replica := redistest.StartReplica(t, master)
	var shortfalls atomic.Int64
	// A wait far above what an acknowledgement takes, even on a loaded
	// machine (the default 100 ms was missed under CI's parallel tests):
	// WAIT returns as soon as the replica acknowledges.
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{master.Addr}, WaitReplicas: 1, WaitTimeout: 5 * time.Second, OpTimeout: 10 * time.Second,
		OnReplicaShortfall: func() { shortfalls.Add(1) }})
	// The first Finish loads the script (EVALSHA, NOSCRIPT, then EVAL with
	// WAIT again); the next ones send one EVALSHA and one WAIT.
	c := storetest.MustClaim(t, r, "orders:0", storetest.FpA, time.Minute, store.Claimed)
	if err := r.Finish(ctx, "orders:0", c.Token, storetest.Outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	before := redistest.Calls(t, master.Addr, "wait")
	c = storetest.MustClaim(t, r, "orders:1", storetest.FpA, time.Minute, store.Claimed)
	if err := r.Finish(ctx, "orders:1", c.Token, storetest.Outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := shortfalls.Load(); n != 0 {
		t.Fatalf("%d shortfalls with the one replica asked for", n)
	}
	if after := redistest.Calls(t, master.Addr, "wait"); after != before+1 {
		t.Fatalf("the master ran WAIT %d times, then %d; want one more", before, after)
	}
	// WAIT returned, so the replica has the record already.
	rec, err := redistest.Command(replica.Addr, "HGET", keyHash(r, "orders:1"), "rec")
	if err != nil || rec == "" {
		t.Fatalf("record on the replica = %q, %v", rec, err)
	}
	if out, err := store.DecodeOutcome([]byte(rec)); err != nil || out.Status != 200 {
		t.Fatalf("replica's record = %+v, %v", out, err)
	}

	// Not the owner: nothing recorded, nothing to wait for.
	c = storetest.MustClaim(t, r, "orders:2", storetest.FpA, time.Minute, store.Claimed)
	if err := r.Finish(ctx, "orders:2", c.Token+"x", storetest.Outcome(200, "ok"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Finish by a non-owner = %v, want store.ErrNotOwner", err)
	}
	if n := shortfalls.Load(); n != 0 {
		t.Fatalf("a refused Finish reported a shortfall")
	}

	// A restarted (or flushed) script cache: EVAL loads it, WAIT follows.
	if _, err := redistest.Command(master.Addr, "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(ctx, "orders:2", c.Token, storetest.Outcome(201, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish after SCRIPT FLUSH: %v", err)
	}
	if fin := storetest.MustClaim(t, r, "orders:2", storetest.FpA, time.Minute, store.Finished); fin.Outcome.Status != 201 {
		t.Fatalf("claim = %+v", fin)
	}
	if n := shortfalls.Load(); n != 0 {
		t.Fatalf("%d shortfalls", n)
	}
}

func TestRedisFinishReportsReplicaShortfall(t *testing.T) {
	ctx := context.Background()
	master := redistest.StartServer(t)
	redistest.StartReplica(t, master)
	var shortfalls atomic.Int64
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{master.Addr}, WaitReplicas: 2, OnReplicaShortfall: func() { shortfalls.Add(1) }})
	c := storetest.MustClaim(t, r, "orders:1", storetest.FpA, time.Minute, store.Claimed)
	if err := r.Finish(ctx, "orders:1", c.Token, storetest.Outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish with one replica of two: %v, want success (the record is on the master)", err)
	}
	if n := shortfalls.Load(); n != 1 {
		t.Fatalf("OnReplicaShortfall called %d times, want 1", n)
	}
	if fin := storetest.MustClaim(t, r, "orders:1", storetest.FpA, time.Minute, store.Finished); fin.Outcome.Status != 200 {
		t.Fatalf("claim = %+v", fin)
	}
}

// On a Cluster, the script and WAIT go to the master that owns the key's
// slot (a wrong node would answer MOVED). The test cluster has no
// replicas, so every WAIT falls short.
func TestRedisFinishWaitOnCluster(t *testing.T) {
	ctx := context.Background()
	var shortfalls atomic.Int64
	r := newTestRedis(t, store.RedisOptions{Addrs: redistest.StartCluster(t), WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond,
		OnReplicaShortfall: func() { shortfalls.Add(1) }})
	const n = 30
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("orders:%d", i)
		c := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed)
		if err := r.Finish(ctx, key, c.Token, storetest.Outcome(200, key), time.Hour); err != nil {
			t.Fatalf("Finish %s: %v", key, err)
		}
		if fin := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Finished); string(fin.Outcome.Body) != key {
			t.Fatalf("%s: %+v", key, fin)
		}
	}
	if got := shortfalls.Load(); got != n {
		t.Fatalf("%d shortfalls, want %d", got, n)
	}
}
