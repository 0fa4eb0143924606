package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

func TestRedisFinishWaitsForReplica(t *testing.T) {
	ctx := context.Background()
	master := redistest.StartServer(t)
	replica := redistest.StartReplica(t, master)
	var shortfalls atomic.Int64
	// A wait far above what an acknowledgement takes, even on a loaded
	// machine (the default 100 ms was missed under CI's parallel tests):
	// WAIT returns as soon as the replica acknowledges.
	r := newTestRedis(t, RedisOptions{Addrs: []string{master.Addr}, WaitReplicas: 1, WaitTimeout: 5 * time.Second, OpTimeout: 10 * time.Second,
		OnReplicaShortfall: func() { shortfalls.Add(1) }})
	// The first Finish loads the script (EVALSHA, NOSCRIPT, then EVAL with
	// WAIT again); the next ones send one EVALSHA and one WAIT.
	c := mustClaim(t, r, "orders:0", fpA, time.Minute, Claimed)
	if err := r.Finish(ctx, "orders:0", c.Token, outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	before := redistest.Calls(t, master.Addr, "wait")
	c = mustClaim(t, r, "orders:1", fpA, time.Minute, Claimed)
	if err := r.Finish(ctx, "orders:1", c.Token, outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := shortfalls.Load(); n != 0 {
		t.Fatalf("%d shortfalls with the one replica asked for", n)
	}
	if after := redistest.Calls(t, master.Addr, "wait"); after != before+1 {
		t.Fatalf("the master ran WAIT %d times, then %d; want one more", before, after)
	}
	// WAIT returned, so the replica has the record already.
	rec, err := redistest.Command(replica.Addr, "GET", r.keys("orders:1")[1])
	if err != nil || rec == "" {
		t.Fatalf("record on the replica = %q, %v", rec, err)
	}
	if out, err := decodeRecord([]byte(rec)); err != nil || out.Status != 200 {
		t.Fatalf("replica's record = %+v, %v", out, err)
	}

	// Not the owner: nothing recorded, nothing to wait for.
	c = mustClaim(t, r, "orders:2", fpA, time.Minute, Claimed)
	if err := r.Finish(ctx, "orders:2", c.Token+"x", outcome(200, "ok"), time.Hour); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Finish by a non-owner = %v, want ErrNotOwner", err)
	}
	if n := shortfalls.Load(); n != 0 {
		t.Fatalf("a refused Finish reported a shortfall")
	}

	// A restarted (or flushed) script cache: EVAL loads it, WAIT follows.
	if _, err := redistest.Command(master.Addr, "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(ctx, "orders:2", c.Token, outcome(201, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish after SCRIPT FLUSH: %v", err)
	}
	if fin := mustClaim(t, r, "orders:2", fpA, time.Minute, Finished); fin.Outcome.Status != 201 {
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
	r := newTestRedis(t, RedisOptions{Addrs: []string{master.Addr}, WaitReplicas: 2, OnReplicaShortfall: func() { shortfalls.Add(1) }})
	c := mustClaim(t, r, "orders:1", fpA, time.Minute, Claimed)
	if err := r.Finish(ctx, "orders:1", c.Token, outcome(200, "ok"), time.Hour); err != nil {
		t.Fatalf("Finish with one replica of two: %v, want success (the record is on the master)", err)
	}
	if n := shortfalls.Load(); n != 1 {
		t.Fatalf("OnReplicaShortfall called %d times, want 1", n)
	}
	if fin := mustClaim(t, r, "orders:1", fpA, time.Minute, Finished); fin.Outcome.Status != 200 {
		t.Fatalf("claim = %+v", fin)
	}
}

// On a Cluster, the script and WAIT go to the master that owns the key's
// slot (a wrong node would answer MOVED). The test cluster has no
// replicas, so every WAIT falls short.
func TestRedisFinishWaitOnCluster(t *testing.T) {
	ctx := context.Background()
	var shortfalls atomic.Int64
	r := newTestRedis(t, RedisOptions{Addrs: redistest.StartCluster(t), WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond,
		OnReplicaShortfall: func() { shortfalls.Add(1) }})
	const n = 30
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("orders:%d", i)
		c := mustClaim(t, r, key, fpA, time.Minute, Claimed)
		if err := r.Finish(ctx, key, c.Token, outcome(200, key), time.Hour); err != nil {
			t.Fatalf("Finish %s: %v", key, err)
		}
		if fin := mustClaim(t, r, key, fpA, time.Minute, Finished); string(fin.Outcome.Body) != key {
			t.Fatalf("%s: %+v", key, fin)
		}
	}
	if got := shortfalls.Load(); got != n {
		t.Fatalf("%d shortfalls, want %d", got, n)
	}
}

func TestNewRedisValidatesWait(t *testing.T) {
	for _, opts := range []RedisOptions{
		{WaitReplicas: -1},
		{WaitReplicas: 1, WaitTimeout: -1},
		{WaitReplicas: 1, WaitTimeout: time.Second, OpTimeout: time.Second},
		{WaitReplicas: 1, OpTimeout: DefaultWaitTimeout},
	} {
		if _, err := NewRedis(opts); err == nil {
			t.Errorf("%+v accepted", opts)
		}
	}
	r, err := NewRedis(RedisOptions{WaitReplicas: 1})
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	_ = r.Close()
}

// RunDurable (the queue's acknowledging writes) sends its script and a
// WAIT together, reports a shortfall only for a script that ran, and is
// RunScript (no WAIT) without WaitReplicas.
func TestRedisRunDurable(t *testing.T) {
	ctx := context.Background()
	master := redistest.StartServer(t)
	redistest.StartReplica(t, master)
	var shortfalls atomic.Int64
	set := redis.NewScript(`redis.call('SET', KEYS[1], ARGV[1]) return 1`)
	bad := redis.NewScript(`return redis.error_reply('ERR refused')`)
	// Two replicas asked, one there: every WAIT falls short (after 10ms).
	r := newTestRedis(t, RedisOptions{Addrs: []string{master.Addr}, WaitReplicas: 2, WaitTimeout: 10 * time.Millisecond,
		OnReplicaShortfall: func() { shortfalls.Add(1) }})
	before := redistest.Calls(t, master.Addr, "wait")
	for i := range 2 { // the first loads the script (NOSCRIPT, then EVAL and WAIT again)
		if n, err := r.RunDurable(ctx, set, []string{"q:{a}"}, i).Int64(); err != nil || n != 1 {
			t.Fatalf("RunDurable = %d, %v", n, err)
		}
	}
	if got := redistest.Calls(t, master.Addr, "wait") - before; got != 3 {
		t.Fatalf("%d WAITs for two scripts, the first loaded; want 3", got)
	}
	if n := shortfalls.Load(); n != 2 {
		t.Fatalf("%d shortfalls, want 2", n)
	}
	if err := r.RunDurable(ctx, bad, []string{"q:{a}"}).Err(); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("failing script: %v", err)
	}
	if n := shortfalls.Load(); n != 2 {
		t.Fatalf("a failed script reported a shortfall")
	}

	plain := newTestRedis(t, RedisOptions{Addrs: []string{master.Addr}, OnReplicaShortfall: func() { shortfalls.Add(1) }})
	before = redistest.Calls(t, master.Addr, "wait")
	if n, err := plain.RunDurable(ctx, set, []string{"q:{b}"}, 1).Int64(); err != nil || n != 1 {
		t.Fatalf("RunDurable without WaitReplicas = %d, %v", n, err)
	}
	if got := redistest.Calls(t, master.Addr, "wait") - before; got != 0 {
		t.Fatalf("%d WAITs without WaitReplicas", got)
	}
}
