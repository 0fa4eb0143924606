package server

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/store/redistest"
)

// store.redis.wait_replicas covers every write that acknowledges an event
// or records an outcome, on sync and queue routes alike. It used to cover
// only the sync finish: 20 queue events sent no WAIT, and with the
// replica detached a queue event got its 202 at once, its keys on the
// master only.
func TestWaitReplicasCoversQueueWrites(t *testing.T) {
	for _, be := range []string{"redis", "kafka"} {
		t.Run(be, func(t *testing.T) { testWaitReplicasCoversQueueWrites(t, be) })
	}
}

func testWaitReplicasCoversQueueWrites(t *testing.T, be string) {
	master := redistest.StartServer(t)
	replica := redistest.StartReplica(t, master)
	up := newQUpstream(t)
	queueBlock := ""
	if be == "kafka" {
		queueBlock = fmt.Sprintf("queue: { backend: kafka, kafka: { brokers: [%q], topic_prefix: \"clawgate.wait.\", create_topics: true, partitions: 1, replication_factor: 1 } }\n",
			kafkatest.Start(t).Addrs()[0])
	}
	// wait_timeout well above an acknowledgement on a loaded machine (WAIT
	// returns as soon as the replica answers) and below the 500ms a Redis
	// call may take.
	y := fmt.Sprintf(`listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
store: { backend: redis, redis: { addrs: [%q], wait_replicas: 1, wait_timeout: 400ms } }
dedupe: { lock_ttl: 5s }
%sroutes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %s
    delivery: queue
    timeout: 2s
    workers: 1
    retry: { max_attempts: 6, initial: 20ms, max: 1s }
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
  - name: payments
    match: { path: /webhook/payment }
    upstream: %s
    timeout: 2s
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`, master.Addr, queueBlock, up.srv.URL, up.srv.URL)
	cfg, err := config.Parse([]byte(y), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg, Version: "wait-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(time.Second) })
	base := "http://" + s.Addr().String()
	syncURL, queueURL := base+"/webhook/payment", base+"/webhook/order"
	shortfalls := func() int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "clawgate_store_replica_shortfalls_total")
		if err != nil || n != 1 {
			t.Fatalf("clawgate_store_replica_shortfalls_total: %d series, %v", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "clawgate_store_replica_shortfalls_total" {
				return int(mf.GetMetric()[0].GetCounter().GetValue())
			}
		}
		panic("unreachable")
	}
	post := func(url, id string, want int) {
		t.Helper()
		if a := qPost(url, id); a.err != nil || a.status != want {
			t.Fatalf("POST %s %s: %d %v %s, want %d", url, id, a.status, a.err, a.raw, want)
		}
	}
	// settled waits until every key's event was delivered and its
	// outcome recorded.
	settled := func(keys []string) {
		t.Helper()
		qEventually(t, 20*time.Second, func() bool {
			for _, k := range keys {
				var ks struct {
					State string `json:"state"`
				}
				if code := adminGet(t, s, "/admin/keys/orders/"+k, &ks); code != 200 || ks.State != "finished" {
					return false
				}
			}
			return true
		}, func() string {
			return fmt.Sprintf("the %d events not all settled; upstream saw %v", len(keys), up.missing(keys, false))
		})
	}

	// One of each first, so that the scripts are loaded (a NOSCRIPT reply
	// sends the script and its WAIT again).
	post(syncURL, "warm", 200)
	post(queueURL, "warm", 202)
	settled([]string{"warm"})

	before := redistest.Calls(t, master.Addr, "wait")
	for _, k := range qKeys("sync", 20) {
		post(syncURL, k, 200)
	}
	if got := redistest.Calls(t, master.Addr, "wait") - before; got != 20 {
		t.Fatalf("20 sync events sent %d WAITs, want 20 (one per finish)", got)
	}
	before = redistest.Calls(t, master.Addr, "wait")
	keys := qKeys("queue", 20)
	for _, k := range keys {
		post(queueURL, k, 202)
	}
	settled(keys)
	if got := redistest.Calls(t, master.Addr, "wait") - before; got != 40 {
		t.Fatalf("20 queue events sent %d WAITs, want 40 (one per acknowledgement, one per settle)", got)
	}

	// The replica stops answering; the upstream holds every try, so no
	// settle can run. The 202 comes only after the enqueue's WAIT gave up
	// (the shortfall is counted first), as a sync finish does.
	up.hold()
	defer up.release()
	replica.Pause()
	defer replica.Resume()
	before, short := redistest.Calls(t, master.Addr, "wait"), shortfalls()
	post(queueURL, "detached", 202)
	if got := redistest.Calls(t, master.Addr, "wait") - before; got != 1 {
		t.Fatalf("an acknowledged queue event sent %d WAITs before its 202, want 1", got)
	}
	if got := shortfalls() - short; got != 1 {
		t.Fatalf("%d replica shortfalls counted when the 202 arrived with the replica detached, want 1", got)
	}
}

// adminGet decodes the JSON answer of the admin API's GET path into v.
func adminGet(t *testing.T, s *Server, path string, v any) int {
	t.Helper()
	in := &qInstance{Server: s, t: t}
	return in.adminJSON("GET", path, v)
}
