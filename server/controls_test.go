package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/store/redistest"
)

// routeInfo reads "orders" from the instance's GET /admin/routes.
func (in *qInstance) routeInfo() admin.RouteInfo {
	in.t.Helper()
	var page admin.RoutesPage
	if code := in.adminJSON("GET", "/admin/routes", &page); code != 200 {
		in.t.Fatalf("GET /admin/routes: %d", code)
	}
	for _, r := range page.Routes {
		if r.Name == "orders" {
			return r
		}
	}
	in.t.Fatalf("GET /admin/routes does not list orders: %+v", page)
	return admin.RouteInfo{}
}

// counter reads the route's counter name with label to (the breaker's
// transitions).
func (in *qInstance) counter(name, to string) float64 {
	in.t.Helper()
	mfs, err := in.reg.Gather()
	if err != nil {
		in.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == "orders" && labels["to"] == to {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// noTries checks that the upstream gets no try of keys for a while: a
// paused route, or one whose breaker is open, must not deliver. The
// workers look again every quarter second; the check covers several of
// their rounds.
func noTries(t *testing.T, up *qUpstream, keys []string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, k := range keys {
			if tr := up.tries(k); len(tr) > 0 {
				t.Fatalf("%s reached the upstream while it should not: %+v", k, tr)
			}
		}
		time.Sleep(20 * time.Millisecond) // watching for what must not happen: no condition to poll for
	}
}

// A paused queue route keeps acknowledging and delivers nothing, on
// every instance; the pause outlasts a restart of the instance that
// paused it (on a shared store), and a resume on another instance
// delivers every event once. Memory (one instance, no restart), Redis
// Streams and Kafka.
func TestPauseHoldsEveryInstanceAndOutlastsARestart(t *testing.T) {
	backends := append([]qBackend{{"memory", func(*testing.T) qConf { return qConf{} }}}, qBackends...)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			c := be.conf(t)
			up := newQUpstream(t)
			c.upstream = up.srv.URL
			a := startQueue(t, c, nil)
			insts := []*qInstance{a}
			if be.name != "memory" {
				insts = append(insts, startQueue(t, c, nil))
			}
			var res admin.PauseResult
			if code := a.adminJSON("POST", "/admin/routes/orders/pause", &res); code != 200 || !res.Paused || !res.Changed || res.PausedSince == nil {
				t.Fatalf("pause: %d %+v", code, res)
			}
			if code := a.adminJSON("POST", "/admin/routes/orders/pause", &res); code != 200 || !res.Paused || res.Changed {
				t.Fatalf("pause again: %d %+v, want unchanged", code, res)
			}
			keys := qKeys("paused", 12)
			urls := make([]string, len(insts))
			for i, in := range insts {
				urls[i] = in.url()
			}
			checkAcks(t, qSendAll(keys, urls, 4), len(urls))
			for _, in := range insts {
				if ri := in.routeInfo(); !ri.Paused || ri.Depth == nil || *ri.Depth != int64(len(keys)) {
					t.Fatalf("GET /admin/routes while paused: %+v, want paused with %d queued", ri, len(keys))
				}
			}
			noTries(t, up, keys)

			last := insts[len(insts)-1]
			if be.name != "memory" {
				// The instance that paused the route restarts: still paused.
				a.stop(time.Second)
				a2 := startQueue(t, c, nil)
				if ri := a2.routeInfo(); !ri.Paused {
					t.Fatalf("after a restart: %+v, want still paused", ri)
				}
				noTries(t, up, keys)
				insts = []*qInstance{a2, last}
			}
			if code := last.adminJSON("POST", "/admin/routes/orders/resume", &res); code != 200 || res.Paused || !res.Changed {
				t.Fatalf("resume: %d %+v", code, res)
			}
			up.waitCompleted(t, keys, 20*time.Second)
			for _, in := range insts {
				in.stop(time.Second)
			}
			checkOnce(t, up, keys)
		})
	}
}

// Pause and resume refuse what they cannot do: an unknown route (404), a
// sync route (400); GET /admin/routes lists every route with its mode.
func TestPauseRefusals(t *testing.T) {
	up := newQUpstream(t)
	c := qConf{upstream: up.srv.URL}
	c.extra = ""
	y := c.yaml() + `  - name: pay
    match: { path: /webhook/pay }
    upstream: ` + up.srv.URL + `
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
    timeout: 2s
    breaker: { failures: 3 }
`
	in := startFile(t, y, nil)
	qi := &qInstance{Server: in.Server, t: t}
	var body map[string]string
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/admin/routes/nope/pause", 404, `unknown route "nope"`},
		{"/admin/routes/pay/pause", 400, `route "pay" is not a delivery: queue route: only a queue route can pause (a sync route forwards while the provider waits)`},
		{"/admin/routes/pay/resume", 400, `route "pay" is not a delivery: queue route: only a queue route can resume (a sync route forwards while the provider waits)`},
	} {
		if code := qi.adminJSON("POST", tc.path, &body); code != tc.code || body["error"] != tc.want {
			t.Errorf("POST %s: %d %q, want %d %q", tc.path, code, body["error"], tc.code, tc.want)
		}
	}
	// A simple cross-site POST (no admin header) changes nothing.
	resp, err := http.Post(qi.admin()+"/admin/routes/orders/pause", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatalf("a cross-site simple POST paused the route")
	}
	var page admin.RoutesPage
	if code := qi.adminJSON("GET", "/admin/routes", &page); code != 200 || len(page.Routes) != 2 {
		t.Fatalf("GET /admin/routes: %d %+v", code, page)
	}
	o, p := page.Routes[0], page.Routes[1]
	if o.Name != "orders" || o.Delivery != "queue" || o.Paused || o.Depth == nil || o.Breaker != "" {
		t.Errorf("orders: %+v", o)
	}
	if p.Name != "pay" || p.Delivery != "sync" || p.Depth != nil || p.Breaker != "closed" {
		t.Errorf("pay: %+v", p)
	}
}

// The breaker of a sync route: three failed tries in a row (over both
// instances) open it; every instance then answers 503 with Retry-After
// without forwarding or claiming the key; after the cooldown one
// delivery probes, and its 2xx closes the breaker. Memory (one instance)
// and Redis (two).
func TestBreakerOnASyncRoute(t *testing.T) {
	for _, be := range []string{"memory", "redis"} {
		t.Run(be, func(t *testing.T) {
			up := newQUpstream(t)
			var down atomic.Bool
			down.Store(true)
			up.setAnswer(func(string, int) int {
				if down.Load() {
					return 500
				}
				return 200
			})
			c := qConf{upstream: up.srv.URL}
			if be == "redis" {
				c.redis = redistest.Start(t)
			}
			y := toSync(c.yaml()) +
				"    breaker: { failures: 3, cooldown: 1s }\n"
			a := startQueueYAML(t, y, nil)
			b := a
			if be == "redis" {
				b = startQueueYAML(t, y, nil)
			}
			for i, in := range []*qInstance{a, b, a} {
				k := "down-" + string(rune('1'+i))
				if ans := qPost(in.url(), k); ans.status != 500 {
					t.Fatalf("%s with the upstream down: %d %q", k, ans.status, ans.raw)
				}
			}
			// Open, on every instance: 503 at once, nothing forwarded.
			for _, in := range []*qInstance{a, b} {
				ans := qPost(in.url(), "while-open")
				if ans.status != 503 || ans.retry != "1" || !strings.Contains(ans.raw, "upstream circuit breaker open") {
					t.Fatalf("while open: %d Retry-After %q %q", ans.status, ans.retry, ans.raw)
				}
			}
			if n := len(up.tries("while-open")); n != 0 {
				t.Fatalf("a delivery went through the open breaker (%d tries)", n)
			}
			if ks := b.keyState("while-open"); ks.State != "absent" {
				t.Fatalf("the key of a delivery refused by the open breaker: %+v, want absent (not claimed)", ks)
			}
			if ri := b.routeInfo(); ri.Breaker != "open" || ri.BreakerOpenUntil == nil || ri.Failures != 3 {
				t.Fatalf("GET /admin/routes on the other instance: %+v", ri)
			}
			// After the cooldown the probe goes; the upstream is back.
			down.Store(false)
			qEventually(t, 10*time.Second, func() bool { return qPost(b.url(), "while-open").status == 200 },
				func() string { return "a delivery after the cooldown" })
			if ans := qPost(a.url(), "after"); ans.status != 200 {
				t.Fatalf("once closed: %d %q", ans.status, ans.raw)
			}
			if ri := a.routeInfo(); ri.Breaker != "closed" || ri.Failures != 0 {
				t.Fatalf("once closed: %+v", ri)
			}
			open, closed := 0.0, 0.0
			for _, in := range slices.Compact([]*qInstance{a, b}) {
				open += in.counter("webhook_breaker_transitions_total", "open")
				closed += in.counter("webhook_breaker_transitions_total", "closed")
			}
			if open != 1 || closed != 1 {
				t.Fatalf("transitions: open %v closed %v, want 1 and 1", open, closed)
			}
			checkOnce(t, up, []string{"while-open", "after"})
		})
	}
}

// The breaker of a queue route: once open, the route keeps
// acknowledging, and no try but one probe per cooldown reaches the
// upstream, so an outage does not push events into the DLQ; when the
// upstream is back every event is delivered once. Memory (one
// instance), Redis Streams and Kafka (two instances).
func TestBreakerOnAQueueRoute(t *testing.T) {
	forEachControlBackend(t, func(t *testing.T, c qConf, instances int) {
		up := newQUpstream(t)
		var down atomic.Bool
		down.Store(true)
		up.setAnswer(func(string, int) int {
			if down.Load() {
				return 503
			}
			return 200
		})
		c.upstream, c.retry, c.route = up.srv.URL, "{ max_attempts: 6, initial: 20ms, max: 100ms }", "breaker: { failures: 2, cooldown: 1s }"
		insts, urls := startInstances(t, c, instances)
		keys := qKeys("outage", 10)
		start := time.Now()
		checkAcks(t, qSendAll(keys, urls, 4), len(urls))
		qEventually(t, 10*time.Second, func() bool { return insts[0].routeInfo().Breaker != "closed" }, func() string { return "the breaker to open" })
		// A few cooldowns of outage: without the breaker every event would
		// spend its 6 tries in about a second and be dead-lettered.
		time.Sleep(2500 * time.Millisecond) // the outage itself: the fault lasts this long
		elapsed := time.Since(start)
		tries := 0
		for _, k := range keys {
			tries += len(up.tries(k))
		}
		// The 2 failures that open it, tries already in flight then (at most
		// a worker slot each), and one probe per cooldown.
		if most := 2 + instances*8 + int(elapsed/time.Second) + 1; tries > most {
			t.Fatalf("%d tries in %v of outage, want at most %d", tries, elapsed, most)
		}
		if dlq := insts[0].dlq(); len(dlq.Entries) != 0 {
			t.Fatalf("events dead-lettered while the breaker was open: %+v", dlq.Entries)
		}
		down.Store(false)
		up.waitCompleted(t, keys, 20*time.Second)
		for _, in := range insts {
			in.stop(time.Second)
		}
		checkOnce(t, up, keys)
	})
}

// forEachControlBackend runs f on the memory queue (one instance) and on
// each shared backend (two instances).
func forEachControlBackend(t *testing.T, f func(t *testing.T, c qConf, instances int)) {
	t.Run("memory", func(t *testing.T) { f(t, qConf{}, 1) })
	for _, be := range qBackends {
		t.Run(be.name, func(t *testing.T) { f(t, be.conf(t), 2) })
	}
}

// startInstances starts n instances on c and returns them with their
// delivery URLs.
func startInstances(t *testing.T, c qConf, n int) ([]*qInstance, []string) {
	t.Helper()
	var insts []*qInstance
	var urls []string
	for range n {
		in := startQueue(t, c, nil)
		insts = append(insts, in)
		urls = append(urls, in.url())
	}
	return insts, urls
}

// Pace bounds the tries of a route over every instance together: at 20
// tries a second, no half second holds more than 10 of them, plus one
// for the start and two for the jitter between a try's admission and its
// arrival at the upstream. Without pace the 40 events arrive within a few
// milliseconds. Memory (one instance), Redis Streams and Kafka (two).
func TestPaceIsSharedByTwoInstances(t *testing.T) {
	forEachControlBackend(t, func(t *testing.T, c qConf, instances int) {
		testPace(t, c, instances)
	})
}

func testPace(t *testing.T, c qConf, instances int) {
	up := newQUpstream(t)
	c.upstream, c.route = up.srv.URL, "pace: 20/s"
	_, urls := startInstances(t, c, instances)
	keys := qKeys("paced", 40)
	checkAcks(t, qSendAll(keys, urls, 8), len(urls))
	up.waitCompleted(t, keys, 30*time.Second)
	var at []time.Time
	for _, k := range keys {
		for _, tr := range up.tries(k) {
			at = append(at, tr.at)
		}
	}
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	const window, most = 500 * time.Millisecond, 10 + 1 + 2
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < window; j++ {
			n++
		}
		if n > most {
			t.Fatalf("%d tries within %v from %s, want at most %d at 20/s", n, window, at[i].Format("15:04:05.000"), most)
		}
	}
	checkOnce(t, up, keys)
}

// GET /admin/routes gives this instance's counts of each route's answers
// (every answer, forwarded, queued, replayed, refused) and a queue
// route's lag; a sync route has no lag.
func TestRoutesListingCountsAndLag(t *testing.T) {
	up := newQUpstream(t)
	in := consoleGateway(t, up, nil)
	if ri := in.routeInfo(); ri.Deliveries != 0 || ri.Queued != 0 || ri.LagSeconds == nil || *ri.LagSeconds != 0 {
		t.Fatalf("orders before any delivery: %+v, want no counts and lag 0", ri)
	}
	// Paused, so that the events wait in the queue.
	if code := in.adminJSON("POST", "/admin/routes/orders/pause", nil); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	keys := qKeys("counted", 3)
	for _, k := range keys {
		if a := qPost(in.url(), k); a.status != http.StatusAccepted {
			t.Fatalf("post %s: %d %s %v", k, a.status, a.raw, a.err)
		}
	}
	pay := "http://" + in.Addr().String() + "/webhook/pay"
	for i, want := range []int{200, 200} { // the second is a copy
		if a := qPost(pay, "pay-1"); a.status != want || a.replayed != (i == 1) {
			t.Fatalf("post pay-1 #%d: %d replayed %v %s", i+1, a.status, a.replayed, a.raw)
		}
	}
	resp, err := qClient.Post(pay, "application/json", strings.NewReader(`{"amount":1}`)) // no key
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("post without a key: %d, want 400", resp.StatusCode)
	}

	want := map[string]admin.RouteInfo{
		"orders":   {Deliveries: 3, Queued: 3},
		"payments": {Deliveries: 3, Forwarded: 1, Replayed: 1, Refused: 1},
	}
	var page admin.RoutesPage
	counts := func(r admin.RouteInfo) [5]int64 {
		return [5]int64{r.Deliveries, r.Forwarded, r.Queued, r.Replayed, r.Refused}
	}
	// A delivery is counted as its answer is written: poll briefly.
	qEventually(t, 5*time.Second, func() bool {
		page = admin.RoutesPage{}
		if code := in.adminJSON("GET", "/admin/routes", &page); code != 200 || len(page.Routes) != 2 {
			return false
		}
		for _, r := range page.Routes {
			if counts(r) != counts(want[r.Name]) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("GET /admin/routes: %+v, want the counts of %+v", page.Routes, want) })
	for _, r := range page.Routes {
		switch r.Name {
		case "orders":
			if r.Depth == nil || *r.Depth != 3 || r.LagSeconds == nil || *r.LagSeconds < 0 {
				t.Errorf("orders: depth %v lag %v, want 3 waiting and a lag", r.Depth, r.LagSeconds)
			}
		case "payments":
			if r.LagSeconds != nil || r.Depth != nil {
				t.Errorf("payments (sync): depth %v lag %v, want neither", r.Depth, r.LagSeconds)
			}
		}
	}
	// The JSON names the counts.
	var raw map[string][]map[string]any
	in.adminJSON("GET", "/admin/routes", &raw)
	for _, f := range []string{"deliveries", "forwarded", "queued", "replayed", "refused", "lag_seconds"} {
		if _, ok := raw["routes"][0][f]; !ok {
			t.Errorf("orders in GET /admin/routes has no %q: %v", f, raw["routes"][0])
		}
	}
	// Resumed, the events are delivered and the lag is back to 0.
	if code := in.adminJSON("POST", "/admin/routes/orders/resume", nil); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	up.waitCompleted(t, keys, 10*time.Second)
	qEventually(t, 5*time.Second, func() bool {
		ri := in.routeInfo()
		return ri.Depth != nil && *ri.Depth == 0 && ri.LagSeconds != nil && *ri.LagSeconds == 0
	}, func() string { return fmt.Sprintf("orders after the resume: %+v", in.routeInfo()) })
}
