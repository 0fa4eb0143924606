package server

import (
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
)

// A reload that turns a route into a queue route starts its workers, one
// that turns it back stops them, and one that changes its workers restarts
// them: every event acknowledged on the way is delivered once. On each
// front door.
func TestQueueRouteFollowsReload(t *testing.T) { doortest.ForEach(t, testQueueRouteFollowsReload) }

func testQueueRouteFollowsReload(t *testing.T) {
	up := newQUpstream(t)
	queued := qConf{upstream: up.srv.URL}.yaml()
	sync := toSync(queued)
	if sync == queued {
		t.Fatal("the sync config is the queue config")
	}
	in := startFile(t, sync, nil)
	url := "http://" + in.Addr().String() + "/webhook/order"

	if a := qPost(url, "sync-1"); a.status != 200 {
		t.Fatalf("sync route: %d %q %v", a.status, a.raw, a.err)
	}
	in.rewrite(queued)
	if err := in.Reload(in.path); err != nil {
		t.Fatalf("reload to a queue route: %v", err)
	}
	if a := qPost(url, "queued-1"); a.status != 202 {
		t.Fatalf("after the reload to a queue route: %d %q %v", a.status, a.raw, a.err)
	}
	up.waitCompleted(t, []string{"queued-1"}, 10*time.Second)

	in.rewrite(strings.Replace(queued, "workers: 8", "workers: 2", 1))
	if err := in.Reload(in.path); err != nil {
		t.Fatalf("reload with 2 workers: %v", err)
	}
	keys := qKeys("after-resize", 20)
	for _, k := range keys {
		if a := qPost(url, k); a.status != 202 {
			t.Fatalf("%s after the resize: %d %q %v", k, a.status, a.raw, a.err)
		}
	}
	up.waitCompleted(t, keys, 10*time.Second)

	in.rewrite(sync)
	reloadWhenDrained(t, in, 10*time.Second)
	if a := qPost(url, "sync-2"); a.status != 200 {
		t.Fatalf("back on sync: %d %q %v", a.status, a.raw, a.err)
	}
	checkOnce(t, up, append([]string{"sync-1", "queued-1", "sync-2"}, keys...))
}
