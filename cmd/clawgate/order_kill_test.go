//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/internal/ordertest"
	"github.com/clawgate/clawgate/store/redistest"
)

// oKillUpstream records every try by the order value in its body
// ("obj":{"id":V}); each instance has a listener of its own. While hang
// is set, instance a's tries are held until the gateway hangs up, so that
// a dies with tries of heads on their way.
type oKillUpstream struct {
	mu       sync.Mutex
	tries    map[string][]*ordertest.Try // by order value, in the order they began
	inFlight map[string]*atomic.Int64
	srvs     map[string]*httptest.Server
	hang     atomic.Bool
}

func newOKillUpstream(t *testing.T) *oKillUpstream {
	u := &oKillUpstream{tries: map[string][]*ordertest.Try{}, inFlight: map[string]*atomic.Int64{}, srvs: map[string]*httptest.Server{}}
	ended := make(chan struct{}) // closed when the test ends, before the servers close
	for _, inst := range []string{"a", "b"} {
		u.inFlight[inst] = &atomic.Int64{}
		u.srvs[inst] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.inFlight[inst].Add(1)
			defer u.inFlight[inst].Add(-1)
			var body struct {
				Obj struct{ ID string } `json:"obj"`
			}
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &body)
			tr := &ordertest.Try{Inst: inst, Key: r.Header.Get("Idempotency-Key"), Start: time.Now()}
			u.mu.Lock()
			u.tries[body.Obj.ID] = append(u.tries[body.Obj.ID], tr)
			u.mu.Unlock()
			// A try takes a moment, so that two tries of a value at once
			// would overlap here; a's are held while hang is set.
			var hold <-chan struct{}
			if inst == "a" && u.hang.Load() {
				hold = ended
			}
			select {
			case <-time.After(5 * time.Millisecond):
				if hold != nil {
					select {
					case <-hold:
					case <-r.Context().Done():
					}
				}
			case <-r.Context().Done():
			case <-ended:
			}
			u.mu.Lock()
			tr.End = time.Now()
			tr.Cut = r.Context().Err() != nil
			tr.Accepted = !tr.Cut
			u.mu.Unlock()
			w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(u.srvs[inst].Close)
	}
	t.Cleanup(func() { close(ended) })
	return u
}

// Per-object order survives a SIGKILL. Two gateway processes share an
// ordered queue route; each value's events are sent one after another
// (each once its predecessor was acknowledged), alternating instances.
// Half-way, instance a's tries are held at the upstream and a is killed
// with them on their way: the heads it held stay heads, their values wait
// for the lease (Redis Streams) or the group's rebalance (Kafka) and b
// delivers them first. Per value: the upstream accepted the events in
// acknowledgement order, no two tries overlapped, the stale events (every
// fifth, older than the one before it) never reached it, and every event
// finished.
func TestOrderedQueueKilledInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two gateway processes for about twenty seconds")
	}
	bin := buildBinary(t)
	for _, be := range []string{"redis", "kafka"} {
		t.Run(be, func(t *testing.T) {
			queueYAML := ""
			if be == "kafka" {
				queueYAML = fmt.Sprintf("queue: { backend: kafka, kafka: { brokers: [%q], partitions: 4, replication_factor: 1 } }",
					kafkatest.Start(t).Addrs()[0])
			}
			orderKill(t, bin, queueYAML)
		})
	}
}

func orderKill(t *testing.T, bin, queueYAML string) {
	const values, perValue = 20, 15
	redisAddr := redistest.Start(t)
	up := newOKillUpstream(t)
	route := "    order: { by: \"json:obj.id\", stale: \"json:ts\" }\n"
	a := startKillGateway(t, bin, "a", redisAddr, queueYAML, route, up.srvs["a"].URL)
	b := startKillGateway(t, bin, "b", redisAddr, queueYAML, route, up.srvs["b"].URL)
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	post := func(g *killGateway, key, v string, ts int) (int, string, error) {
		body := fmt.Sprintf(`{"id":%q,"obj":{"id":%q},"ts":%d}`, key, v, ts)
		resp, err := client.Post(g.url, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw), nil
	}

	var acked atomic.Int64
	var aDead atomic.Bool
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		eventually.Poll(time.Minute, func() bool { return acked.Load() >= values*perValue/2 })
		up.hang.Store(true)
		eventually.Poll(10*time.Second, func() bool { return up.inFlight["a"].Load() >= 3 })
		a.inFlightAtDeath = up.inFlight["a"].Load()
		aDead.Store(true)
		a.kill()
	}()

	wl := ordertest.Workload{Values: values, PerValue: perValue}
	keys, _, stale := wl.Events()
	// A provider retries until someone acknowledges: a 202, or the stored
	// answer of a copy another instance took.
	fails := wl.Send(400, 50*time.Millisecond, func(v, key string, ts, j, try int) (bool, string) {
		g := b
		if (j+try)%2 == 0 && !aDead.Load() {
			g = a
		}
		status, body, err := post(g, key, v, ts)
		ok := err == nil && (status == 202 || status == 200 && strings.Contains(body, `"ok"`) || status == 200 && strings.Contains(body, "skipped"))
		if ok {
			acked.Add(1)
		}
		return ok, fmt.Sprintf("%d %s %v", status, body, err)
	})
	<-killed
	if len(fails) > 0 {
		t.Fatalf("%d events never acknowledged, e.g. %v\n%s", len(fails), fails[:min(3, len(fails))], b.tail())
	}
	if !b.alive() {
		t.Fatalf("gateway b died:\n%s", b.tail())
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, k := range keys {
		var st string
		eventually.Within(t, time.Until(deadline), func() bool { st = b.keyState(k); return st == "finished" },
			func() string {
				return fmt.Sprintf("%s: state %s 60 s after the last acknowledgement\n%s", k, st, b.tail())
			})
	}

	up.mu.Lock()
	defer up.mu.Unlock()
	res := wl.Check(up.tries, false)
	for _, f := range res.Failures {
		t.Error(f)
	}
	cuts, dups := res.Cuts, res.Twice
	// Only a try the kill caught between the upstream's answer and its
	// record is made again.
	if int64(dups) > a.inFlightAtDeath {
		t.Errorf("%d events accepted twice, more than the %d tries a held when it died", dups, a.inFlightAtDeath)
	}
	t.Logf("%d events over %d values, %d stale skipped; a killed with %d tries at the upstream, %d cut, %d accepted twice",
		len(keys), values, len(stale), a.inFlightAtDeath, cuts, dups)
}
