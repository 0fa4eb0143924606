package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

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
