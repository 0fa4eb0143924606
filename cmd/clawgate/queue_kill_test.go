//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/store/redistest"
)

// killTry is one try of an event as the upstream saw it.
type killTry struct {
	inst       string // "a" or "b": the instance that sent it
	attempt    int64  // X-Clawgate-Attempt
	start, end time.Time
}

// killUpstream completes every try (200) after 20 to 50 ms, and records
// each with the instance that sent it: each instance has a listener of
// its own.
type killUpstream struct {
	mu       sync.Mutex
	tries    map[string][]killTry
	inFlight map[string]*atomic.Int64
	srvs     map[string]*httptest.Server
}

func (tr killTry) String() string {
	return fmt.Sprintf("{%s attempt %d %s-%s}", tr.inst, tr.attempt, tr.start.Format("15:04:05.000"), tr.end.Format("15:04:05.000"))
}

func newKillUpstream(t *testing.T) *killUpstream {
	u := &killUpstream{tries: map[string][]killTry{}, inFlight: map[string]*atomic.Int64{}, srvs: map[string]*httptest.Server{}}
	ended := make(chan struct{}) // closed when the test ends, before the servers close
	for _, inst := range []string{"a", "b"} {
		u.inFlight[inst] = &atomic.Int64{}
		u.srvs[inst] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u.inFlight[inst].Add(1)
			defer u.inFlight[inst].Add(-1)
			io.Copy(io.Discard, r.Body)
			tr := killTry{inst: inst, start: time.Now()}
			tr.attempt, _ = strconv.ParseInt(r.Header.Get("X-Clawgate-Attempt"), 10, 64)
			// Fault injection, not a wait: each try takes a while, so
			// that some are in flight when an instance is killed.
			select {
			case <-time.After(time.Duration(20+rand.IntN(31)) * time.Millisecond):
			case <-ended:
			}
			tr.end = time.Now()
			key := r.Header.Get("Idempotency-Key")
			u.mu.Lock()
			u.tries[key] = append(u.tries[key], tr)
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"ok":true}`))
		}))
		t.Cleanup(u.srvs[inst].Close)
	}
	t.Cleanup(func() { close(ended) })
	return u
}

func (u *killUpstream) of(key string) []killTry {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]killTry(nil), u.tries[key]...)
}

// killGateway is one `clawgate serve` process.
type killGateway struct {
	name            string
	cmd             *exec.Cmd
	done            chan struct{}
	url, admin      string
	logPath         string
	inFlightAtDeath int64
}

func (g *killGateway) tail() string {
	b, _ := os.ReadFile(g.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// startKillGateway runs the binary on a config of its own: the queue route
// "orders" on Redis at redisAddr, forwarding to upstream, with more of the
// route's YAML in routeYAML (each line indented as the route's fields).
func startKillGateway(t *testing.T, bin, name, redisAddr, queueYAML, routeYAML, upstream string) *killGateway {
	t.Helper()
	dir := t.TempDir()
	listen, adm := freePort(t), freePort(t)
	y := fmt.Sprintf(`listen: %q
admin: { listen: %q }
store: { backend: redis, redis: { addrs: [%q] } }
%s
dedupe: { lock_ttl: 5s }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %s
    delivery: queue
    timeout: 2s
    workers: 8
    retry: { max_attempts: 10, initial: 100ms, max: 1s }
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
%s`, listen, adm, redisAddr, queueYAML, upstream, routeYAML)
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &killGateway{name: name, url: "http://" + listen + "/webhook/order", admin: "http://" + adm, logPath: filepath.Join(dir, "clawgate.log")}
	logf, err := os.Create(g.logPath)
	if err != nil {
		t.Fatal(err)
	}
	g.cmd = exec.Command(bin, "serve", "-config", cfg, "-log-flush", "0", "-log-level", "warn")
	g.cmd.Stdout, g.cmd.Stderr = logf, logf
	// The kernel kills the gateway if this test process dies first.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	g.done = make(chan struct{})
	go func() { g.cmd.Wait(); logf.Close(); close(g.done) }()
	t.Cleanup(func() { g.kill() })
	eventually.Within(t, 20*time.Second, func() bool {
		var resp *http.Response
		if resp, err = http.Get(g.admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		select {
		case <-g.done:
			t.Fatalf("gateway %s exited at start:\n%s", name, g.tail())
		default:
		}
		return false
	}, func() string { return fmt.Sprintf("gateway %s: /readyz not 200 (%v):\n%s", name, err, g.tail()) })
	return g
}

// kill SIGKILLs the process and waits until it is gone.
func (g *killGateway) kill() {
	select {
	case <-g.done:
		return
	default:
	}
	g.cmd.Process.Kill()
	<-g.done
}

func (g *killGateway) alive() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// metric reads one sample from the gateway's /metrics.
func (g *killGateway) metric(sample string) (float64, error) {
	resp, err := http.Get(g.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, nil // not exported yet: none counted
}

// keyState reads a key of "orders" through the gateway's admin API.
func (g *killGateway) keyState(key string) string {
	resp, err := http.Get(g.admin + "/admin/keys/orders/" + key)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	i := strings.Index(string(b), `"state": "`)
	if resp.StatusCode != 200 || i < 0 {
		return fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	s := string(b[i+len(`"state": "`):])
	return s[:strings.IndexByte(s, '"')]
}

// Two instances share a queue route on Redis; a provider sends every
// event to both. One instance is SIGKILLed mid-run: the survivor takes
// over what the dead one held, every acknowledged event reaches the
// upstream, and only a try the kill caught between the upstream's answer
// and its record is made again, by a later attempt.
func TestQueueKilledInstanceTakenOver(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two gateway processes for about ten seconds")
	}
	bin := buildBinary(t)
	// Redis Streams: the survivor takes the dead instance's entries over
	// after lock_ttl. Kafka: the group gives the survivor the dead
	// instance's partitions after the session timeout, and it reads their
	// uncommitted records again.
	for _, be := range []struct{ name, queue string }{
		{"redis", ""},
		{"kafka", ""},
	} {
		t.Run(be.name, func(t *testing.T) {
			queueYAML := be.queue
			if be.name == "kafka" {
				queueYAML = fmt.Sprintf("queue: { backend: kafka, kafka: { brokers: [%q], partitions: 4, replication_factor: 1 } }",
					kafkatest.Start(t).Addrs()[0])
			}
			killAndTakeOver(t, bin, be.name, queueYAML)
		})
	}
}

func killAndTakeOver(t *testing.T, bin, backend, queueYAML string) {
	redisAddr := redistest.Start(t)
	up := newKillUpstream(t)
	a := startKillGateway(t, bin, "a", redisAddr, queueYAML, "", up.srvs["a"].URL)
	b := startKillGateway(t, bin, "b", redisAddr, queueYAML, "", up.srvs["b"].URL)

	const events = 1000
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 64, DialContext: (&net.Dialer{Timeout: time.Second}).DialContext}}
	defer client.CloseIdleConnections()
	send := func(g *killGateway, key string) (int, error) {
		resp, err := client.Post(g.url, "application/json", strings.NewReader(`{"id":"`+key+`"}`))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var acked atomic.Int64
	ackedBy := make([]string, events) // who acknowledged each event first ("" never)
	var fails []string
	var failMu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				key := fmt.Sprintf("kill-%04d", i)
				order := []*killGateway{a, b}
				if rand.IntN(2) == 1 {
					order = []*killGateway{b, a}
				}
				for _, g := range order {
					if code, err := send(g, key); err == nil && code >= 200 && code <= 299 && ackedBy[i] == "" {
						ackedBy[i] = g.name
					}
				}
				// A provider retries until someone acknowledges (on Kafka,
				// a key whose record a was producing when it died answers
				// 409 until its 10 s reservation ends).
				if ackedBy[i] == "" {
					eventually.Poll(20*time.Second, func() bool {
						if code, err := send(b, key); err == nil && code >= 200 && code <= 299 {
							ackedBy[i] = b.name
						}
						return ackedBy[i] != ""
					})
				}
				if ackedBy[i] == "" {
					failMu.Lock()
					fails = append(fails, key)
					failMu.Unlock()
					continue
				}
				acked.Add(1)
			}
		})
	}
	// Kill a once 300 events are acknowledged.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		eventually.Poll(time.Minute, func() bool { return acked.Load() >= 300 })
		a.kill()
		// A try still at the upstream now was held by a when it died.
		a.inFlightAtDeath = up.inFlight["a"].Load()
	}()
	for i := range events {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	<-killed
	if len(fails) > 0 {
		t.Fatalf("%d events never acknowledged by either instance, e.g. %v:\n%s", len(fails), fails[:min(5, len(fails))], b.tail())
	}
	if !b.alive() {
		t.Fatalf("gateway b died:\n%s", b.tail())
	}

	// Every acknowledged event reaches the upstream, and its key reads
	// finished: no try of it can follow, the counts below are final.
	deadline := time.Now().Add(60 * time.Second)
	for i := range events {
		key := fmt.Sprintf("kill-%04d", i)
		var st string
		eventually.Within(t, time.Until(deadline), func() bool {
			st = b.keyState(key)
			return st == "finished" && len(up.of(key)) > 0
		}, func() string {
			return fmt.Sprintf("%s (acknowledged by %s) not delivered 60s after the provider finished: state %s, tries %v\n%s", key, ackedBy[i], st, up.of(key), b.tail())
		})
	}

	// doubles by the instance whose completed try was made again
	doubles := map[string]int{}
	var byA, byB int
	for i := range events {
		key := fmt.Sprintf("kill-%04d", i)
		if ackedBy[i] == "a" {
			byA++
		} else {
			byB++
		}
		tries := up.of(key)
		sort.Slice(tries, func(x, y int) bool { return tries[x].start.Before(tries[y].start) })
		for j, tr := range tries {
			if j > 0 && tr.attempt <= tries[j-1].attempt {
				t.Errorf("%s: try %d carried X-Clawgate-Attempt %d after %d: %v", key, j+1, tr.attempt, tries[j-1].attempt, tries)
			}
		}
		if len(tries) > 1 {
			doubles[tries[0].inst]++
			t.Logf("%s completed %d times: %v", key, len(tries), tries)
		}
	}
	reclaimed, err := b.metric(`webhook_queue_reclaimed_total{route="orders"}`)
	if err != nil {
		t.Fatal(err)
	}
	retried, err := b.metric(`webhook_delivery_attempts_total{outcome="retried",route="orders"}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events acknowledged (first by a: %d, by b: %d); a killed with %d tries at the upstream; b reclaimed %v entries, retried %v tries; doubles: %d (first completed by a: %d, by b: %d)",
		events, byA, byB, a.inFlightAtDeath, reclaimed, retried, doubles["a"]+doubles["b"], doubles["a"], doubles["b"])
	// The killed instance's workers (8) held at most 8 entries: only a try
	// of those, cut between the upstream's 2xx and its record, is made
	// again.
	if doubles["a"] > 8 {
		t.Errorf("%d events completed by the killed instance were completed again; its 8 workers held at most 8", doubles["a"])
	}
	// The survivor makes a completed try again only when it did not get
	// the answer in time (the route's timeout, on a very busy machine):
	// each such double is one of its retried tries.
	if float64(doubles["b"]) > retried {
		t.Errorf("%d events completed by the surviving instance were completed again, but it retried only %v tries", doubles["b"], retried)
	}
	if backend == "redis" && a.inFlightAtDeath > 0 && reclaimed == 0 {
		t.Errorf("the killed instance held %d tries at the upstream, but the survivor reclaimed nothing", a.inFlightAtDeath)
	}
}
