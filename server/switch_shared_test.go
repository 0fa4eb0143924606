package server

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store/redistest"
)

// switchConfigs starts what backend be needs ("memory", "redis",
// "cluster" or "kafka") and returns a gateway config on it whose route
// "orders" is a queue route, and the same with "orders" a sync route; the
// local window is 1 ms, so that copies reach the store.
func switchConfigs(t *testing.T, be, upstream string) (queued, synced string) {
	t.Helper()
	var c qConf
	switch be {
	case "redis":
		c.redis = redistest.Start(t)
	case "cluster":
		c.redis = "CLUSTER"
	case "kafka":
		c = qBackends[1].conf(t)
	}
	c.upstream = upstream
	queued = strings.Replace(c.yaml(), "dedupe: { lock_ttl: 5s }", "dedupe: { lock_ttl: 5s, window: 1ms }", 1)
	if be == "cluster" {
		nodes := redistest.StartCluster(t)
		queued = strings.Replace(queued, `addrs: ["CLUSTER"]`, `addrs: ["`+strings.Join(nodes, `", "`)+`"]`, 1)
	}
	return queued, toSync(queued)
}

// toSync turns the queue route of a qConf's config into a sync route.
func toSync(queued string) string {
	return strings.NewReplacer("    delivery: queue\n", "", "    workers: 8\n", "",
		"    retry: { max_attempts: 6, initial: 20ms, max: 1s }\n", "").Replace(queued)
}

// Regression (issue 20): only the process that reloaded a route from sync
// to queue knew of the switch, so an instance started afterwards with the
// queue route (a restart, a new pod) queued and delivered again a retry
// of an event the sync route had finished, on a Redis Cluster and on
// Kafka (where the enqueue does not read the sync record itself). The
// route's delivery modes are now recorded in the store, shared by every
// instance and kept across restarts.
func TestSwitchKnownAfterARestart(t *testing.T) {
	for _, be := range []string{"cluster", "kafka"} {
		t.Run(be, func(t *testing.T) {
			up := newQUpstream(t)
			queued, syncY := switchConfigs(t, be, up.srv.URL)
			a := startQueueYAML(t, syncY, nil)
			if ans := qPost(a.url(), "before-1"); ans.status != 200 || ans.replayed {
				t.Fatalf("on the sync route: %d %q", ans.status, ans.raw)
			}
			a.stop(time.Second)
			// A new process, started with the queue route.
			b := startQueueYAML(t, queued, nil)
			ans := qPost(b.url(), "before-1")
			if ans.status != 200 || !ans.replayed || !strings.Contains(ans.raw, `"upstream":200`) {
				t.Fatalf("a retry of an event the sync route finished, on an instance started as a queue route: %d replayed=%v %q, want the stored 200 replayed", ans.status, ans.replayed, ans.raw)
			}
			if ans := qPost(b.url(), "after-1"); ans.status != 202 {
				t.Fatalf("a new event: %d %q", ans.status, ans.raw)
			}
			up.waitCompleted(t, []string{"after-1"}, 10*time.Second)
			b.stop(time.Second)
			checkOnce(t, up, []string{"before-1", "after-1"})
		})
	}
}

// A route switched from sync to queue under load on two instances, one
// reload after the other (a rolling config change): every event's copies
// go to both instances all along, and each event reaches the upstream
// exactly once, whichever mode each instance ran when its copies arrived.
// On one Redis server (the enqueue's script reads the sync record) and a
// Redis Cluster (the gateway reads it first).
func TestModeSwitchUnderLoadWithTwoInstances(t *testing.T) {
	for _, be := range []string{"redis", "cluster"} {
		t.Run(be, func(t *testing.T) {
			up := newQUpstream(t)
			queued, syncY := switchConfigs(t, be, up.srv.URL)
			a := startFile(t, syncY, nil)
			b := startFile(t, syncY, nil)
			urls := []string{"http://" + a.Addr().String() + "/webhook/order", "http://" + b.Addr().String() + "/webhook/order"}

			// Three waves of events, each event's two copies sent to both
			// instances together: before any switch, with a switched and
			// b not, and after both switched.
			var keys []string
			var mu sync.Mutex
			answers := map[string][]int{}
			waves := 0
			wave := func(n int) {
				mu.Lock()
				waves++
				ks := qKeys(fmt.Sprintf("w%d-", waves), n)
				mu.Unlock()
				sent := qSendAll(ks, urls, 8)
				mu.Lock()
				for k, as := range sent.answers {
					for _, a := range as {
						answers[k] = append(answers[k], a.status)
					}
				}
				keys = append(keys, ks...)
				mu.Unlock()
			}
			var load sync.WaitGroup
			stop := make(chan struct{})
			// Copies keep coming while the reloads happen.
			load.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					wave(10)
				}
			})
			wave(20)
			a.rewrite(queued)
			if err := a.Reload(a.path); err != nil {
				t.Fatalf("reload a: %v", err)
			}
			wave(20)
			b.rewrite(queued)
			if err := b.Reload(b.path); err != nil {
				t.Fatalf("reload b: %v", err)
			}
			wave(20)
			close(stop)
			load.Wait()
			// Every copy was answered 2xx (the sync route's 200, the queue's
			// 202 or a stored answer replayed).
			for k, st := range answers {
				for _, s := range st {
					if s/100 != 2 {
						t.Errorf("%s: a copy answered %d", k, s)
					}
				}
			}
			up.waitCompleted(t, keys, 30*time.Second)
			a.stop(time.Second)
			b.stop(time.Second)
			checkOnce(t, up, keys)
		})
	}
}

// reloadWhenDrained reloads in's file into a config where a queue route
// becomes a sync route. The upstream's 2xx reaches the test a moment
// before the queue settles the event, and until then the reload is
// refused with ErrQueueNotDrained (as an operator's would be); any other
// error fails at once.
func reloadWhenDrained(t *testing.T, in *instance, bound time.Duration) {
	t.Helper()
	var err error
	qEventually(t, bound, func() bool {
		err = in.Reload(in.path)
		if err != nil && !errors.Is(err, ErrQueueNotDrained) {
			t.Fatalf("reload to a sync route: %v", err)
		}
		return err == nil
	}, func() string { return fmt.Sprintf("the reload to a sync route, once the queue drained: %v", err) })
}
