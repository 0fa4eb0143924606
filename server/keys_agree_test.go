package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/store/redistest"
)

// syncYAML is c's config with its route turned into a sync one.
func syncYAML(c qConf) string {
	return toSync(c.yaml())
}

// Regression: `keys get` said "attempts: 5" for an event sent 5 times
// while `keys reset` on the same key said "1 attempt": get added this
// instance's local window (the copies it replayed without asking the
// store) and reset did not. Both now read the key through one path, on
// sync and queue routes, memory and Redis.
func TestKeysGetAndResetAgreeOnAttempts(t *testing.T) {
	for _, mode := range []string{"sync", "queue"} {
		for _, be := range []string{"memory", "redis"} {
			t.Run(mode+"/"+be, func(t *testing.T) {
				up := newQUpstream(t)
				c := qConf{upstream: up.srv.URL}
				if be == "redis" {
					c.redis = redistest.Start(t)
				}
				y := c.yaml()
				if mode == "sync" {
					y = syncYAML(c)
				}
				in := startFile(t, y, nil)
				url := "http://" + in.Addr().String() + "/webhook/order"
				for i := range 5 {
					a := qPost(url, "evt-5")
					if a.status/100 != 2 {
						t.Fatalf("copy %d: %d %q %v", i+1, a.status, a.raw, a.err)
					}
					if mode == "queue" && i == 0 {
						// Let the first copy be delivered, so the others
						// meet a finished key.
						up.waitCompleted(t, []string{"evt-5"}, 10*time.Second)
					}
				}
				qi := &qInstance{Server: in.Server, t: t}
				// The upstream's 2xx comes a moment before the queue
				// settles it.
				qEventually(t, 10*time.Second, func() bool { return qi.keyState("evt-5").State == "finished" },
					func() string { return fmt.Sprintf("evt-5: %+v, want finished", qi.keyState("evt-5")) })
				got := qi.keyState("evt-5")
				var reset admin.ResetResult
				if code := qi.adminJSON("DELETE", "/admin/keys/orders/evt-5", &reset); code != 200 {
					t.Fatalf("DELETE: %d %+v", code, reset)
				}
				// A sync key counts its deliveries; a queue key counts its
				// event's tries (one: the upstream took it).
				want := int64(5)
				if mode == "queue" {
					want = 1
				}
				if got.State != "finished" || got.Attempts != want || reset.Forgot.Attempts != got.Attempts || reset.Forgot.State != got.State {
					t.Fatalf("get says %s with %d attempts, reset forgot %s with %d attempts; want both finished with %d",
						got.State, got.Attempts, reset.Forgot.State, reset.Forgot.Attempts, want)
				}
				if after := qi.keyState("evt-5"); after.State != "absent" || after.Attempts != 0 {
					t.Fatalf("after the reset get says %s with %d attempts, want absent with 0", after.State, after.Attempts)
				}
			})
		}
	}
}
