package server

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/internal/ordertest"
	"github.com/clawgate/clawgate/store/redistest"
)

// orderUpstream is an ordered route's upstream: it answers 500 at random
// to an event's first two tries, and records every try by the order value
// the key starts with ("v07-0012": value v07).
type orderUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	rnd *rand.Rand
	// tries by value, in the order they started.
	tries    map[string][]*ordertest.Try
	inFlight atomic.Int64
	// hang, while set, holds every new try until unhang is closed or the
	// gateway hangs up.
	hang   atomic.Bool
	unhang chan struct{}
}

func newOrderUpstream(t *testing.T) *orderUpstream {
	u := &orderUpstream{rnd: rand.New(rand.NewPCG(7, 21)), tries: map[string][]*ordertest.Try{}, unhang: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *orderUpstream) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	v, _, _ := strings.Cut(key, "-")
	attempt := r.Header.Get("X-Clawgate-Attempt")
	tr := &ordertest.Try{Key: key, Start: time.Now()}
	u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	u.mu.Lock()
	u.tries[v] = append(u.tries[v], tr)
	fail := (attempt == "1" || attempt == "2") && u.rnd.IntN(10) < 3
	u.mu.Unlock()
	// A try takes a moment, so that two tries of a value at once would
	// overlap here.
	var wait <-chan struct{}
	if u.hang.Load() {
		wait = u.unhang
	}
	select {
	case <-time.After(5 * time.Millisecond):
		if wait != nil {
			select {
			case <-wait:
			case <-r.Context().Done():
			}
		}
	case <-r.Context().Done():
	}
	status := 200
	if fail {
		status = 500
	}
	u.mu.Lock()
	tr.End = time.Now()
	tr.Cut = r.Context().Err() != nil
	tr.Accepted = status == 200 && !tr.Cut
	u.mu.Unlock()
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"upstream":%d}`, status)
}

// oPost delivers event key of order value v with stale value ts to url.
func oPost(url, key, v string, ts int) (int, string, error) {
	body := fmt.Sprintf(`{"id":%q,"obj":{"id":%q},"ts":%d}`, key, v, ts)
	resp, err := qClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// The load test: 1,000 events over 50 order values, sent to two
// instances (each value's events one after another, each sent once its
// predecessor was acknowledged, alternating instances), random upstream
// failures, one instance stopped half-way with its tries cut. Per value:
// the upstream accepted the events in acknowledgement order, no two tries
// of a value overlapped (unless one was cut by the stop: a request on its
// way cannot be recalled), every fifth event, older (ts) than the one
// before it, was skipped and never reached the upstream; every event
// finished. On Redis Streams and on Kafka (kfake, keys in Redis).
func TestOrderLoad(t *testing.T) {
	forEachQueueBackend(t, testOrderLoad)
	// On a Redis Cluster with the route's queue over 4 shards: each
	// value's events in the shard (slot) its value names.
	t.Run("cluster", func(t *testing.T) {
		nodes := redistest.StartCluster(t)
		addrs := make([]string, len(nodes))
		for i, a := range nodes {
			addrs[i] = strconv.Quote(a)
		}
		testOrderLoad(t, "cluster", qConf{extra: fmt.Sprintf("store: { backend: redis, redis: { addrs: [%s] } }\nqueue: { shards: 4 }\n", strings.Join(addrs, ", "))})
	})
}

func testOrderLoad(t *testing.T, be string, c qConf) {
	const values, perValue = 50, 20
	up := newOrderUpstream(t)
	c.upstream = up.srv.URL
	c.route = "order: { by: \"json:obj.id\", stale: \"json:ts\" }"
	a, b := startQueue(t, c, nil), startQueue(t, c, nil)
	var acked atomic.Int64
	var bStopped atomic.Bool
	stopB := make(chan struct{})
	go func() {
		for acked.Load() < values*perValue/2 {
			time.Sleep(5 * time.Millisecond)
		}
		// Tries now hang at the upstream, so that B stops with some
		// on their way.
		up.hang.Store(true)
		bStopped.Store(true)
		eventually.Poll(5*time.Second, func() bool { return up.inFlight.Load() >= 6 })
		t.Logf("stopping B at %d acked, %d tries under way", acked.Load(), up.inFlight.Load())
		// B's workers stop at once: its tries on their way are cut
		// (their requests canceled) and their entries handed back, for
		// A to take; then B shuts down.
		b.queue.Close(time.Millisecond)
		b.stop(time.Second)
		up.hang.Store(false)
		close(up.unhang)
		close(stopB)
	}()
	wl := ordertest.Workload{Values: values, PerValue: perValue}
	keys, _, skipped := wl.Events()
	errs := wl.Send(1000, 10*time.Millisecond, func(v, key string, ts, j, try int) (bool, string) {
		url := a.url()
		if (j+try)%2 == 1 && !bStopped.Load() {
			url = b.url()
		}
		status, body, err := oPost(url, key, v, ts)
		// A 202, or a replay of a copy another instance stored before it
		// answered (or before it stopped).
		ok := err == nil && (status == 202 || status == 200 && strings.Contains(body, "upstream"))
		if ok {
			acked.Add(1)
		}
		return ok, fmt.Sprintf("%d %s %v", status, body, err)
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	<-stopB
	// A key read that the store answered too late on a loaded machine
	// (503) is read again at the next poll (regression: TestOrderLoad/kafka
	// failed in CI on one such 503 while every event was delivered). The
	// bound is wide: on a loaded machine (-race, two CPUs) a value's 16
	// deliveries with their retries took close to a minute, and a
	// hand-back whose ledger call timed out after taking effect waits for
	// the sweeper (regression: TestOrderLoad/kafka failed in CI with every
	// event delivered a few seconds after a 60 s bound).
	qEventually(t, 120*time.Second, func() bool {
		for _, k := range keys {
			if ks, ok := a.pollKeyState(k); !ok || ks.State != "finished" {
				return false
			}
		}
		return true
	}, func() string {
		var left []string
		for _, k := range keys {
			if ks, ok := a.pollKeyState(k); !ok || ks.State != "finished" {
				left = append(left, k+":"+ks.State)
			}
		}
		return fmt.Sprintf("%d events not finished, e.g. %v", len(left), left[:min(5, len(left))])
	})
	for _, k := range skipped {
		var ks admin.KeyState
		qEventually(t, 30*time.Second, func() bool {
			var ok bool
			ks, ok = a.pollKeyState(k)
			return ok
		}, func() string { return "GET /admin/keys/orders/" + k + " kept answering 503" })
		if ks.Status != 200 {
			t.Errorf("skipped %s: %+v, want finished 200", k, ks)
		}
		v, n, _ := strings.Cut(k, "-")
		j, _ := strconv.Atoi(n)
		if status, body, _ := oPost(a.url(), k, v, wl.TS(j)); status != 200 || !strings.Contains(body, `"skipped"`) {
			t.Errorf("a copy of skipped %s answered %d %s, want the stored skipped answer", k, status, body)
		}
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	// A stopped instance's hung-up try may end after its successor began.
	res := wl.Check(up.tries, true)
	for _, f := range res.Failures {
		t.Error(f)
	}
	cuts, dups := res.Cuts, res.Twice
	if dups > cuts {
		t.Errorf("%d events accepted twice, more than the %d tries the stop cut", dups, cuts)
	}
	t.Logf("%s: %d events over %d values, %d skipped stale; %d tries cut by the stop, %d accepted twice", be, len(keys), values, len(skipped), cuts, dups)
}
