package server

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store/redistest"
)

// The upgrade fixture: every Redis key a gateway wrote on a store, as
// DUMP payloads, taken from a build of an earlier commit. The test below
// loads it into a fresh redis-server and runs this build on it, so that a
// change to the key layout that would misread what a running fleet wrote
// fails here. Regenerate it only when the schema version changes, from
// the commit before the change:
//
//	CLAWGATE_WRITE_UPGRADE_FIXTURE=1 go test ./server -run TestWriteUpgradeFixture
const upgradeFixture = "testdata/upgrade/schema1.json"

// upgradeYAML: a queue route (orders) and a sync route (pay) on one
// Redis, keyed on the body's id; retries every 20-200ms without end.
func upgradeYAML(addr, upstream string) string {
	return `listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
store: { backend: redis, redis: { addrs: ["` + addr + `"] } }
dedupe: { lock_ttl: 5s, window: 1ms }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: ` + upstream + `
    delivery: queue
    timeout: 2s
    workers: 4
    retry: { max_attempts: 1000, initial: 20ms, max: 200ms }
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
  - name: pay
    match: { path: /webhook/pay }
    upstream: ` + upstream + `
    timeout: 2s
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`
}

// What the fixture holds, by key: on the queue route three finished
// events, two dead-lettered (one of them purged since) and three still
// retrying when the gateway stopped; on the sync route three finished.
var (
	upgradeQueueDone  = []string{"done-1", "done-2", "done-3"}
	upgradeQueueDead  = []string{"dead-1", "dead-2"}
	upgradeQueueWait  = []string{"wait-1", "wait-2", "wait-3"}
	upgradeSyncDone   = []string{"sdone-1", "sdone-2", "sdone-3"}
	upgradeQueuePurge = "dead-2"
)

// TestWriteUpgradeFixture writes upgradeFixture with this build; it runs
// only when asked to (see upgradeFixture).
func TestWriteUpgradeFixture(t *testing.T) {
	if os.Getenv("CLAWGATE_WRITE_UPGRADE_FIXTURE") == "" {
		t.Skip("writes the upgrade fixture; set CLAWGATE_WRITE_UPGRADE_FIXTURE=1 to regenerate it")
	}
	addr := redistest.Start(t)
	up := newQUpstream(t)
	up.setAnswer(func(key string, n int) int {
		switch {
		case strings.HasPrefix(key, "dead-"):
			return 400
		case strings.HasPrefix(key, "wait-"):
			return 503
		}
		return 200
	})
	in := startFile(t, upgradeYAML(addr, up.srv.URL), nil)
	qi := &qInstance{Server: in.Server, t: t}
	base := "http://" + in.Addr().String()
	for _, k := range append(append(append([]string{}, upgradeQueueDone...), upgradeQueueDead...), upgradeQueueWait...) {
		if a := qPost(base+"/webhook/order", k); a.status != 202 {
			t.Fatalf("%s: %d %q %v", k, a.status, a.raw, a.err)
		}
	}
	for _, k := range upgradeSyncDone {
		if a := qPost(base+"/webhook/pay", k); a.status != 200 {
			t.Fatalf("%s: %d %q %v", k, a.status, a.raw, a.err)
		}
	}
	up.waitCompleted(t, upgradeQueueDone, 10*time.Second)
	qEventually(t, 10*time.Second, func() bool { return len(qi.dlq().Entries) == len(upgradeQueueDead) }, func() string { return "the dead-lettered events" })
	qEventually(t, 10*time.Second, func() bool {
		for _, k := range upgradeQueueWait {
			if len(up.tries(k)) < 2 {
				return false
			}
		}
		return true
	}, func() string { return "two tries of each retrying event" })
	for _, e := range qi.dlq().Entries {
		if e.Key == upgradeQueuePurge {
			purgeDLQ(t, qi, admin.DLQPage{Entries: []queue.DeadEntry{e}})
		}
	}
	in.stop(time.Second)
	d := redistest.WriteSnapshot(t, addr, upgradeFixture)
	t.Logf("wrote %d keys to %s", len(d.Keys), upgradeFixture)
}

// A store written by an earlier build (the fixture: finished keys on a
// sync and a queue route, dead-lettered events, one purged, events
// retrying when that gateway stopped, the consumer group with its
// pending entries) is read by this build as it was meant: the retrying
// events are delivered once each, the finished keys answer their copies
// with the stored answer without forwarding, the dead-lettered events
// are listed and replayed once, the purged one stays refused, and the
// store is moved to schema version 2 (the sync route's finished keys are
// read from their version-1 records).
func TestUpgradeReadsRecordsOfTheEarlierBuild(t *testing.T) {
	addr := redistest.Start(t)
	d := redistest.LoadSnapshot(t, addr, upgradeFixture)
	t.Logf("fixture: %d keys written by commit %.12s on redis %s", len(d.Keys), d.Commit, d.Redis)

	up := newQUpstream(t)
	in := startFile(t, upgradeYAML(addr, up.srv.URL), nil)
	qi := &qInstance{Server: in.Server, t: t}
	base := "http://" + in.Addr().String()

	// The events retrying when the old gateway stopped: delivered once.
	up.waitCompleted(t, upgradeQueueWait, 20*time.Second)

	// Finished keys: their copies get the stored answer, nothing forwarded.
	for _, tc := range []struct {
		path string
		keys []string
	}{{"/webhook/order", upgradeQueueDone}, {"/webhook/pay", upgradeSyncDone}} {
		for _, k := range tc.keys {
			a := qPost(base+tc.path, k)
			if a.status != 200 || !a.replayed {
				t.Errorf("a copy of %s (finished by the earlier build) on %s: %d replayed=%v %q %v, want the stored 200, replayed", k, tc.path, a.status, a.replayed, a.raw, a.err)
			}
			if n := len(up.tries(k)); n != 0 {
				t.Errorf("%s was forwarded again after the upgrade (%d tries)", k, n)
			}
		}
	}
	// A copy of a retrying event delivered since: the stored answer.
	for _, k := range upgradeQueueWait {
		if a := qPost(base+"/webhook/order", k); a.status != 200 || !a.replayed {
			t.Errorf("a copy of %s after its delivery: %d replayed=%v %q", k, a.status, a.replayed, a.raw)
		}
	}

	// The DLQ: the event dead-lettered and not purged is listed, with its
	// reason, and a replay delivers it once.
	page := qi.dlq()
	if len(page.Entries) != 1 || page.Entries[0].Key != "dead-1" || page.Entries[0].Reason != "rejected:400" {
		t.Fatalf("the DLQ after the upgrade: %+v, want dead-1 (rejected:400) alone", page.Entries)
	}
	var res admin.DLQResult
	if code := qi.adminJSON("POST", "/admin/dlq/orders/"+page.Entries[0].ID+"/replay", &res); code != 200 || !res.Replayed {
		t.Fatalf("replay of dead-1: %d %+v", code, res)
	}
	up.waitCompleted(t, []string{"dead-1"}, 20*time.Second)

	// The purged event's key is still dead-lettered: its copy is not
	// delivered.
	if a := qPost(base+"/webhook/order", upgradeQueuePurge); a.status/100 != 2 || a.status == 200 {
		t.Errorf("a copy of the purged %s: %d %q, want it acknowledged and not delivered", upgradeQueuePurge, a.status, a.raw)
	}
	if ks := qi.keyState(upgradeQueuePurge); ks.State != "dead_lettered" {
		t.Errorf("%s after the upgrade: %+v, want dead_lettered", upgradeQueuePurge, ks)
	}
	if ks := qi.keyState("done-1"); ks.State != "finished" || ks.Status != 200 {
		t.Errorf("done-1 after the upgrade: %+v, want finished 200", ks)
	}

	// Nothing was delivered twice, and nothing that was not due.
	in.stop(time.Second)
	checkOnce(t, up, append(append([]string{}, upgradeQueueWait...), "dead-1"))
	for _, k := range append(append(append([]string{}, upgradeQueueDone...), upgradeSyncDone...), upgradeQueuePurge) {
		if n := len(up.tries(k)); n != 0 {
			t.Errorf("%s reached the upstream %d times after the upgrade, want 0", k, n)
		}
	}
	if v, err := redistest.Command(addr, "GET", "clawgate:webhook_schema"); err != nil || v != "2" {
		t.Errorf("schema version after the upgrade: %q %v, want 2", v, err)
	}
}
