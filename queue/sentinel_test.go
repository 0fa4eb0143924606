package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

// TestRedisSentinelFailover runs the queue through a Sentinel-managed
// master, fails it over to its replica, and checks that what was
// delivered before stays delivered and that new events are queued and
// delivered once on the new master.
func TestRedisSentinelFailover(t *testing.T) {
	master := redistest.StartServer(t)
	redistest.StartReplica(t, master)
	sen := redistest.StartSentinel(t, master)
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: sen.MasterName, SentinelAddrs: []string{sen.Addr}, Protocol: 2,
		MaxRetries: -1, DialTimeout: time.Second,
	})
	t.Cleanup(func() { client.Close() })
	b := NewRedis(client, "sentinel:", time.Second)
	sender := newSender(func(context.Context, string, int64) Result { return answer(200) })
	route := testQueueRoute()
	route.LockTTL = 5 * time.Second // room to retry a settle cut by the switch
	env := startManager(t, b, sender, route)

	before := keyNames(30, "before-")
	env.enqueue(t, before...)
	waitFor(t, "30 deliveries before the failover", func() bool { return sender.successes() == 30 })
	// The replica has every write before the failover is asked for.
	if n, err := client.Do(context.Background(), "WAIT", 1, 2000).Int64(); err != nil || n < 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	newMaster := sen.Failover(t, master.Addr)
	t.Logf("failed over from %s to %s", master.Addr, newMaster)
	// Writes the old master took after the promotion would be dropped when
	// it becomes a replica (Redis's asynchronous replication: the README
	// says a failover can lose the last writes); the provider's events
	// below come once it has.
	// The sentinel turns it into one at its next look (every 10 s).
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := redistest.Command(master.Addr, "INFO", "replication")
		if err == nil && strings.Contains(info, "role:slave") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old master is not a replica 40 s after the failover: %v %s", err, info)
		}
	}

	// A provider retries until it is acknowledged; the client finds the new
	// master through the sentinel.
	after := keyNames(30, "after-")
	for _, k := range after {
		waitFor(t, "an acknowledgement of "+k+" on the new master", func() bool {
			ack, err := env.m.Enqueue(context.Background(), testEntry(k, "fp-"+k))
			return err == nil && (ack.State == Enqueued || ack.State == Pending)
		})
	}
	waitFor(t, "60 deliveries", func() bool { return sender.successes() >= 60 })
	for k, calls := range sender.byKey() {
		ok := 0
		for _, c := range calls {
			if c.status == 200 {
				ok++
			}
		}
		if ok != 1 {
			t.Errorf("%s delivered %d times", k, ok)
		}
	}
	// The events delivered before the failover are still known as such.
	for _, k := range before[:5] {
		ack, err := env.m.Enqueue(context.Background(), testEntry(k, "fp-"+k))
		if err != nil || ack.State != Delivered {
			t.Errorf("copy of %s after the failover: %+v, %v", k, ack, err)
		}
	}
}
