package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/store/redistest"
)

// A reload that would turn a queue route into a sync one, or remove it,
// while its queue still holds undelivered or dead-lettered events is
// refused, naming the route and the counts (the reload's error, the log
// line, POST /admin/reload's 400), and the route stays a queue route
// until they drain and the dead-lettered ones are purged; then the
// reload goes through. Memory and Redis.
func TestReloadRefusesToParkQueuedEvents(t *testing.T) {
	for _, be := range []string{"memory", "redis"} {
		t.Run(be, func(t *testing.T) {
			up := newQUpstream(t)
			c := qConf{upstream: up.srv.URL, timeout: "10s", lockTTL: "15s"}
			if be == "redis" {
				c.redis = redistest.Start(t)
			}
			queued := c.yaml()
			sync := syncYAML(c)
			removed := strings.Replace(queued, "name: orders", "name: orders-v2", 1)
			in := startFile(t, queued, nil)
			qi := &qInstance{Server: in.Server, t: t}
			url := qi.url()

			// Two events dead-lettered (the upstream refuses them), three
			// held undelivered at the upstream.
			up.setAnswer(func(key string, n int) int {
				if strings.HasPrefix(key, "dead-") {
					return 400
				}
				return 200
			})
			for _, k := range []string{"dead-1", "dead-2"} {
				if a := qPost(url, k); a.status != 202 {
					t.Fatalf("%s: %d %q %v", k, a.status, a.raw, a.err)
				}
			}
			qEventually(t, 10*time.Second, func() bool { return len(qi.dlq().Entries) == 2 }, func() string { return "2 dead-lettered events" })
			up.hold()
			held := []string{"held-1", "held-2", "held-3"}
			for _, k := range held {
				if a := qPost(url, k); a.status != 202 {
					t.Fatalf("%s: %d %q %v", k, a.status, a.raw, a.err)
				}
			}
			qEventually(t, 10*time.Second, func() bool { return up.held.Load() == 3 }, func() string { return "3 tries held" })

			for _, tc := range []struct{ name, yaml, what, undelivered string }{
				{"to sync", sync, "become a sync route", "3 undelivered"},
				// The copy posted after the first refusal is held too.
				{"removed", removed, "be removed", "4 undelivered"},
			} {
				in.rewrite(tc.yaml)
				err := in.Reload(in.path)
				var ce *config.Error
				if !errors.Is(err, ErrQueueNotDrained) || !errors.As(err, &ce) {
					t.Fatalf("reload %s with events queued: %v, want ErrQueueNotDrained", tc.name, err)
				}
				msg := err.Error()
				for _, want := range []string{`route "orders"`, tc.what, tc.undelivered, "2 dead-lettered"} {
					if !strings.Contains(msg, want) {
						t.Fatalf("reload %s: the error %q does not say %q", tc.name, msg, want)
					}
				}
				if !strings.Contains(in.log.String(), "config reload refused") {
					t.Fatalf("reload %s: no log line:\n%s", tc.name, in.log.String())
				}
				if a := qPost(url, "after-refused-"+tc.name); a.status != 202 {
					t.Fatalf("after the refused reload %s the route is not a queue route: %d %q", tc.name, a.status, a.raw)
				}
			}
			// The admin API's reload answers 400 with the same lines.
			in.rewrite(sync)
			var res admin.ReloadResult
			if code := qi.adminJSON("POST", "/admin/reload", &res); code != 400 || res.Status != "failed" ||
				len(res.Errors) != 1 || !strings.Contains(res.Errors[0], `route "orders"`) || !strings.Contains(res.Errors[0], "2 dead-lettered") {
				t.Fatalf("POST /admin/reload: %d %+v", code, res)
			}

			// Drained: the held tries delivered, the dead-lettered purged.
			up.release()
			up.waitCompleted(t, append(held, "after-refused-to sync", "after-refused-removed"), 20*time.Second)
			// The upstream's answers are in; the queue settles each a moment
			// later.
			var err error
			qEventually(t, 10*time.Second, func() bool {
				if err = in.Reload(in.path); !errors.Is(err, ErrQueueNotDrained) {
					t.Fatalf("reload with only dead-lettered events left: %v, want ErrQueueNotDrained", err)
				}
				return strings.Contains(err.Error(), "0 undelivered (queued or retrying) and 2 dead-lettered")
			}, func() string { return fmt.Sprintf("reload with only dead-lettered events left: %v", err) })
			purgeDLQ(t, qi, qi.dlq())
			reloadWhenDrained(t, in, 10*time.Second)
			if a := qPost(url, "sync-after"); a.status != 200 {
				t.Fatalf("after the reload to sync: %d %q", a.status, a.raw)
			}
			checkOnce(t, up, append(held, "sync-after"))
		})
	}
}

// Regression: a route switched from sync to queue by a reload delivered
// again an event the sync path had delivered before the switch, when the
// provider retried it after (the queue's enqueue did not look at the sync
// store's record). Now the retry gets the stored answer, replayed, and a
// copy of an event whose sync copy is still being forwarded gets 409. On
// the memory store, on one Redis server (the enqueue's script reads the
// sync record) and on a Redis Cluster (the gateway reads it first, for the
// sync route's retention after the switch). The local window is 1 ms, so
// the retries reach the store.
func TestSyncToQueueSwitchDoesNotDeliverAgain(t *testing.T) {
	for _, be := range []string{"memory", "redis", "cluster"} {
		t.Run(be, func(t *testing.T) {
			up := newQUpstream(t)
			queued, sync := switchConfigs(t, be, up.srv.URL)
			in := startFile(t, sync, nil)
			url := "http://" + in.Addr().String() + "/webhook/order"

			if a := qPost(url, "before-1"); a.status != 200 || a.replayed {
				t.Fatalf("on the sync route: %d replayed=%v %q %v", a.status, a.replayed, a.raw, a.err)
			}
			// A sync copy held at the upstream across the switch.
			up.hold()
			heldDone := make(chan qAnswer, 1)
			go func() { heldDone <- qPost(url, "held-1") }()
			qEventually(t, 10*time.Second, func() bool { return up.held.Load() == 1 }, func() string { return "the sync copy held" })

			in.rewrite(queued)
			if err := in.Reload(in.path); err != nil {
				t.Fatalf("reload to a queue route: %v", err)
			}
			waitWindowForgets(t, in.Server, "before-1", "held-1")
			if a := qPost(url, "held-1"); a.status != 409 {
				t.Fatalf("a copy of the event whose sync copy is in flight: %d %q, want 409", a.status, a.raw)
			}
			up.release()
			if a := <-heldDone; a.status != 200 {
				t.Fatalf("the held sync copy: %d %q", a.status, a.raw)
			}
			for _, k := range []string{"before-1", "held-1"} {
				a := qPost(url, k)
				if a.status != 200 || !a.replayed || !strings.Contains(a.raw, `"upstream":200`) {
					t.Fatalf("a retry of %s, delivered on the sync route, after the switch: %d replayed=%v %q, want its stored 200 replayed", k, a.status, a.replayed, a.raw)
				}
			}
			if a := qPost(url, "after-1"); a.status != 202 {
				t.Fatalf("a new event after the switch: %d %q", a.status, a.raw)
			}
			up.waitCompleted(t, []string{"after-1"}, 10*time.Second)
			checkOnce(t, up, []string{"before-1", "held-1", "after-1"})

			// The key API reads the sync record too, and a reset forgets
			// it: the next copy is queued and delivered, as asked.
			qi := &qInstance{Server: in.Server, t: t}
			if ks := qi.keyState("before-1"); ks.State != "finished" || ks.Status != 200 {
				t.Fatalf("keys get of a key finished before the switch: %+v, want finished 200", ks)
			}
			var reset admin.ResetResult
			if code := qi.adminJSON("DELETE", "/admin/keys/orders/before-1", &reset); code != 200 || reset.Forgot.State != "finished" {
				t.Fatalf("keys reset: %d %+v, want it to forget a finished key", code, reset)
			}
			waitWindowForgets(t, in.Server, "before-1")
			if a := qPost(url, "before-1"); a.status != 202 || a.replayed {
				t.Fatalf("the key after its reset: %d replayed=%v %q, want 202 queued anew", a.status, a.replayed, a.raw)
			}
			qEventually(t, 10*time.Second, func() bool { return up.completions("before-1") == 2 }, func() string { return "the reset key delivered again" })
		})
	}
}

// Regression (issue 20): a route switched from queue to sync by a reload
// forwarded again an event the queue had delivered, when the provider
// retried it after the switch (the sync path's store claim did not look
// at the queue's key records). Now the retry gets the queue's stored
// answer, replayed, and the store records it; a retry of an event the
// queue dead-lettered (and an operator purged, so the reload could go
// through) gets the queue route's acknowledgement, replayed, and is not
// forwarded either; a new event is forwarded as usual. Both front doors,
// on the memory store and on Redis. The local window is 1 ms, so the
// retries reach the store.
func TestQueueToSyncSwitchDoesNotDeliverAgain(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		for _, be := range []string{"memory", "redis"} {
			t.Run(be, func(t *testing.T) {
				up := newQUpstream(t)
				up.setAnswer(func(key string, n int) int {
					if strings.HasPrefix(key, "dead-") {
						return 400
					}
					return 200
				})
				c := qConf{upstream: up.srv.URL}
				if be == "redis" {
					c.redis = redistest.Start(t)
				}
				queued := strings.Replace(c.yaml(), "dedupe: { lock_ttl: 5s }", "dedupe: { lock_ttl: 5s, window: 1ms }", 1)
				sync := toSync(queued)
				in := startFile(t, queued, nil)
				checkDoor(t, in.Server)
				qi := &qInstance{Server: in.Server, t: t}
				url := qi.url()

				for _, k := range []string{"e-1", "dead-1"} {
					if a := qPost(url, k); a.status != 202 {
						t.Fatalf("%s on the queue route: %d %q %v", k, a.status, a.raw, a.err)
					}
				}
				up.waitCompleted(t, []string{"e-1"}, 10*time.Second)
				var dead admin.DLQPage
				qEventually(t, 10*time.Second, func() bool { dead = qi.dlq(); return len(dead.Entries) == 1 }, func() string { return "dead-1 dead-lettered" })
				purgeDLQ(t, qi, dead)

				in.rewrite(sync)
				reloadWhenDrained(t, in, 10*time.Second)
				waitWindowForgets(t, in.Server, "e-1", "dead-1")
				// The second copy is answered by the store.
				for i := range 2 {
					a := qPost(url, "e-1")
					if a.status != 200 || !a.replayed || !strings.Contains(a.raw, `"upstream":200`) {
						t.Fatalf("retry %d of e-1, delivered by the queue, after the switch: %d replayed=%v %q, want its stored 200 replayed", i+1, a.status, a.replayed, a.raw)
					}
				}
				deadTries := len(up.tries("dead-1"))
				if a := qPost(url, "dead-1"); a.status != 202 || !a.replayed {
					t.Fatalf("a retry of dead-1, dead-lettered by the queue, after the switch: %d replayed=%v %q, want 202 replayed", a.status, a.replayed, a.raw)
				}
				if n := len(up.tries("dead-1")); n != deadTries {
					t.Fatalf("dead-1 was forwarded after the switch: %d tries, want %d", n, deadTries)
				}
				if a := qPost(url, "f-1"); a.status != 200 || a.replayed {
					t.Fatalf("a new event after the switch: %d replayed=%v %q, want 200 forwarded", a.status, a.replayed, a.raw)
				}
				checkOnce(t, up, []string{"e-1", "f-1"})
				if ks := qi.keyState("e-1"); ks.State != "finished" || ks.Status != 200 {
					t.Fatalf("keys get of e-1 after its replay on the sync route: %+v, want finished 200 in the store", ks)
				}
			})
		}
	})
}

// waitWindowForgets waits until s's local window (1 ms in these tests)
// holds none of keys of the route "orders", so that their next copies
// reach the store.
func waitWindowForgets(t *testing.T, s *Server, keys ...string) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("the local window to forget %v", keys), func() bool {
		for _, k := range keys {
			if _, _, ok := s.gw.WindowState("orders:" + k); ok {
				return false
			}
		}
		return true
	})
}

// purgeDLQ purges every dead-lettered event of page through the admin API.
func purgeDLQ(t *testing.T, qi *qInstance, page admin.DLQPage) {
	t.Helper()
	for _, e := range page.Entries {
		req, _ := http.NewRequest("DELETE", qi.admin()+"/admin/dlq/orders/"+e.ID, nil)
		req.Header.Set(admin.Header, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("purge %s: %d", e.ID, resp.StatusCode)
		}
	}
}
