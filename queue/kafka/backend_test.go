package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// The Kafka backend against kfake (an in-process Kafka cluster listening
// on 127.0.0.1) and both ledgers. Nothing here asserts a duration: waits
// are bounded polls, and what is checked is what happened and in which
// order.

const (
	testRoute = "hooks"
	// testGroup is Options.Group: the main topic's group is testGroup.testRoute.
	testGroup  = "cg"
	mainGroup  = testGroup + "." + testRoute
	testPrefix = "t."
	mainTopic  = testPrefix + testRoute
	// bound limits every wait for a condition.
	bound = 20 * time.Second
)

// eventually polls cond until it holds, failing the test with what() once
// bound has passed.
func eventually(t testing.TB, bound time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", bound, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLog is a logger writing to the test's output.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newLedger returns a fresh ledger of kind "memory" or "redis" (its own
// redis-server).
func newLedger(t testing.TB, kind string) ledger.Ledger {
	t.Helper()
	switch kind {
	case "memory":
		return ledger.NewMemory(nil)
	case "redis":
		return newRedisLedger(t, redistest.Start(t))
	}
	t.Fatalf("no ledger %q", kind)
	return nil
}

// newRedisLedger is a ledger.Redis on the redis-server at addr.
func newRedisLedger(t testing.TB, addr string) ledger.Ledger {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return ledger.NewRedis(c, "test:", 2*time.Second)
}

// forEachLedger runs f as a subtest on each ledger, each with its own
// kfake cluster.
func forEachLedger(t *testing.T, f func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger)) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f(t, kafkatest.Start(t), newLedger(t, kind))
		})
	}
}

// newBackend returns a Backend on kc with route testRoute prepared; set
// adjusts its options. It is closed when the test ends (Close is
// idempotent).
func newBackend(t testing.TB, kc *kafkatest.Cluster, l ledger.Ledger, set func(*Options)) *Backend {
	t.Helper()
	o := Options{
		Brokers: kc.Addrs(), TopicPrefix: testPrefix, ClientID: "kafka-test", Group: testGroup,
		Partitions: 2, Replication: 1, CreateTopics: true, Ledger: l, Lease: 5 * time.Second,
		DrainWait: 5 * time.Second, Log: testLog(t),
	}
	if set != nil {
		set(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(b.Close)
	eventually(t, bound, func() bool { return b.Prepare(t.Context(), testRoute, 1) == nil }, func() string {
		return fmt.Sprintf("Prepare: %v", b.Prepare(t.Context(), testRoute, 1))
	})
	return b
}

func entry(key string) queue.Entry {
	return queue.Entry{Route: testRoute, Key: key, Fingerprint: "fp-" + key, Payload: []byte("payload " + key),
		FirstSeen: time.UnixMilli(time.Now().UnixMilli())}
}

func mustEnqueue(t testing.TB, b *Backend, key string, want queue.AckState) queue.Ack {
	t.Helper()
	ack, err := b.Enqueue(t.Context(), entry(key), 100000)
	if err != nil {
		t.Fatalf("Enqueue %s: %v", key, err)
	}
	if ack.State != want {
		t.Fatalf("Enqueue %s: %+v, want state %d", key, ack, want)
	}
	return ack
}

func mustGet(t testing.TB, b *Backend, key string) queue.KeyState {
	t.Helper()
	ks, err := b.Get(t.Context(), testRoute, key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return ks
}

// readN reads until it holds n leases (more may come with the last read:
// all are returned), failing after bound.
func readN(t testing.TB, b *Backend, consumer string, n int) []queue.Lease {
	t.Helper()
	var got []queue.Lease
	var lastErr error
	eventually(t, bound, func() bool {
		ls, err := b.Read(t.Context(), testRoute, 0, consumer, n-len(got), 100*time.Millisecond)
		if err != nil {
			lastErr = err
		}
		got = append(got, ls...)
		return len(got) >= n
	}, func() string { return fmt.Sprintf("read %d of %d records (last error %v)", len(got), n, lastErr) })
	return got
}

func readOne(t testing.TB, b *Backend, consumer string) queue.Lease {
	t.Helper()
	ls := readN(t, b, consumer, 1)
	if len(ls) != 1 {
		t.Fatalf("Read(n=1) gave %d leases: %+v", len(ls), ls)
	}
	return ls[0]
}

func mustBegin(t testing.TB, b *Backend, l queue.Lease) queue.Job {
	t.Helper()
	j, ok, err := b.Begin(t.Context(), l)
	if err != nil || !ok {
		t.Fatalf("Begin %+v: ok=%v err=%v, want a job", l, ok, err)
	}
	return j
}

func mustSettle(t testing.TB, b *Backend, consumer string, j queue.Job, s queue.Settlement) {
	t.Helper()
	got, err := b.Settle(t.Context(), consumer, j, s)
	if err != nil || got != queue.Recorded {
		t.Fatalf("Settle %s (%d): %v %v, want Recorded", j.Key, s.Kind, got, err)
	}
}

func delivered(body string) queue.Settlement {
	return queue.Settlement{Kind: queue.SettleDelivered, Retention: time.Hour, At: time.Now(),
		Outcome: store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(body)}}
}

func deadSettlement() queue.Settlement {
	return queue.Settlement{Kind: queue.SettleDead, Reason: "exhausted", Status: 500, Error: "upstream said no", At: time.Now()}
}

// TestKafkaEnqueueDeliver: an event goes Enqueue -> Read -> Begin ->
// Settle delivered; a copy is Pending while it waits and Delivered after.
func TestKafkaEnqueueDeliver(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		ack := mustEnqueue(t, b, "k1", queue.Enqueued)
		if ack.ID == "" {
			t.Fatalf("Enqueue: no event id: %+v", ack)
		}
		if cp := mustEnqueue(t, b, "k1", queue.Pending); cp.ID != ack.ID || cp.Dead || cp.Fingerprint != "fp-k1" || cp.Copies != 2 {
			t.Fatalf("copy while queued: %+v, want Pending of %s, fp-k1, 2 copies", cp, ack.ID)
		}
		if ks := mustGet(t, b, "k1"); ks.State != queue.StateQueued || ks.EventID != ack.ID {
			t.Fatalf("Get: %+v, want queued %s", ks, ack.ID)
		}
		if st, err := b.Stats(t.Context(), testRoute); err != nil || st.Depth != 1 {
			t.Fatalf("Stats: %+v %v, want depth 1", st, err)
		}

		ls := readOne(t, b, "c1")
		if ls.Key != "k1" || ls.EventID != ack.ID || ls.Route != testRoute {
			t.Fatalf("lease %+v, want k1 of %s", ls, ack.ID)
		}
		j := mustBegin(t, b, ls)
		if string(j.Payload) != "payload k1" || j.Try != 1 || j.Total != 1 || j.Fingerprint != "fp-k1" {
			t.Fatalf("job %+v, want the payload, try 1 of 1, fp-k1", j)
		}
		mustSettle(t, b, "c1", j, delivered(`{"ok":true}`))

		cp := mustEnqueue(t, b, "k1", queue.Delivered)
		if cp.Outcome.Status != 200 || string(cp.Outcome.Body) != `{"ok":true}` {
			t.Fatalf("copy after delivery: %+v, want the stored 200", cp)
		}
		if ks := mustGet(t, b, "k1"); ks.State != queue.StateFinished || ks.Status != 200 || ks.Attempts != 1 {
			t.Fatalf("Get after delivery: %+v, want finished, 200, 1 attempt", ks)
		}
		if st, err := b.Stats(t.Context(), testRoute); err != nil || st.Depth != 0 {
			t.Fatalf("Stats after delivery: %+v %v, want depth 0", st, err)
		}
		// Nothing else comes out of the main topic.
		if more, err := b.Read(t.Context(), testRoute, 0, "c1", 10, 300*time.Millisecond); err != nil || len(more) != 0 {
			t.Fatalf("Read after delivery: %+v %v, want nothing", more, err)
		}
	})
}

// TestKafkaRetry: a try settled retry comes back (through a retry tier
// and Promote) with its try counted, and not before it was due.
func TestKafkaRetry(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		ack := mustEnqueue(t, b, "r1", queue.Enqueued)
		j := mustBegin(t, b, readOne(t, b, "c1"))
		if j.Try != 1 || j.Total != 1 {
			t.Fatalf("first job %+v, want try 1", j)
		}
		settled := time.Now()
		due := settled.Add(30 * time.Millisecond)
		mustSettle(t, b, "c1", j, queue.Settlement{Kind: queue.SettleRetry, Due: due, Status: 503, Error: "busy", At: settled})
		if ks := mustGet(t, b, "r1"); ks.State != queue.StateQueued {
			t.Fatalf("Get while waiting to retry: %+v, want queued", ks)
		}
		if cp := mustEnqueue(t, b, "r1", queue.Pending); cp.ID != ack.ID || cp.Dead {
			t.Fatalf("copy while waiting to retry: %+v, want Pending %s", cp, ack.ID)
		}

		promotes, promoted := 0, 0
		var again []queue.Lease
		eventually(t, bound, func() bool {
			n, err := b.Promote(t.Context(), testRoute, 0, time.Now())
			promotes++
			if err != nil {
				t.Logf("Promote: %v", err)
			}
			promoted += n
			ls, err := b.Read(t.Context(), testRoute, 0, "c1", 10, 50*time.Millisecond)
			if err != nil {
				t.Logf("Read: %v", err)
			}
			again = append(again, ls...)
			return len(again) > 0
		}, func() string {
			return fmt.Sprintf("the retry never came back (%d promotes moved %d)", promotes, promoted)
		})
		readAt := time.Now()
		if len(again) != 1 || again[0].Key != "r1" || again[0].EventID != ack.ID {
			t.Fatalf("after Promote read %+v, want r1 once", again)
		}
		if promoted < 1 {
			t.Errorf("Promote reported %d records moved, want at least 1", promoted)
		}
		if readAt.Before(due) {
			t.Errorf("the retry was read back at %v, before it was due at %v", readAt, due)
		}
		t.Logf("retry due 30ms after settle came back after %v (%d promotes)", readAt.Sub(settled), promotes)
		j2 := mustBegin(t, b, again[0])
		if j2.Try != 2 || j2.Total != 2 || string(j2.Payload) != "payload r1" {
			t.Fatalf("second job %+v, want try 2 of 2 with the payload", j2)
		}
		mustSettle(t, b, "c1", j2, delivered("{}"))
		if ks := mustGet(t, b, "r1"); ks.State != queue.StateFinished || ks.Attempts != 2 {
			t.Fatalf("Get: %+v, want finished after 2 attempts", ks)
		}
		// The retry record was moved once: nothing more comes back.
		if n, err := b.Promote(t.Context(), testRoute, 0, time.Now().Add(time.Hour)); err != nil || n != 0 {
			t.Errorf("Promote after delivery: %d %v, want 0", n, err)
		}
		if ls, err := b.Read(t.Context(), testRoute, 0, "c1", 10, 200*time.Millisecond); err != nil || len(ls) != 0 {
			t.Errorf("Read after delivery: %+v %v, want nothing", ls, err)
		}
	})
}

// TestKafkaDeadLetter: a dead-lettered event is listed, Get says
// dead_lettered, a copy is Pending+Dead; Replay makes it readable with
// its round's tries reset; Purge takes it off the list for good.
func TestKafkaDeadLetter(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		ack := mustEnqueue(t, b, "d1", queue.Enqueued)
		mustSettle(t, b, "c1", mustBegin(t, b, readOne(t, b, "c1")), deadSettlement())

		list := func() []queue.DeadEntry {
			t.Helper()
			es, next, err := b.ListDLQ(t.Context(), testRoute, "", 100)
			if err != nil || next != "" {
				t.Fatalf("ListDLQ: %v next %q", err, next)
			}
			return es
		}
		es := list()
		if len(es) != 1 || es[0].ID != ack.ID || es[0].Key != "d1" || es[0].Reason != "exhausted" || es[0].Status != 500 || es[0].Attempts != 1 {
			t.Fatalf("DLQ %+v, want d1 (%s), exhausted, 500, 1 attempt", es, ack.ID)
		}
		if ks := mustGet(t, b, "d1"); ks.State != queue.StateDeadLettered {
			t.Fatalf("Get: %+v, want dead_lettered", ks)
		}
		if cp := mustEnqueue(t, b, "d1", queue.Pending); !cp.Dead || cp.ID != ack.ID {
			t.Fatalf("copy of a dead letter: %+v, want Pending, Dead", cp)
		}
		if st, err := b.Stats(t.Context(), testRoute); err != nil || st.DLQ != 1 || st.Depth != 0 {
			t.Fatalf("Stats: %+v %v, want DLQ 1, depth 0", st, err)
		}

		// Replay: readable again, this round's tries reset.
		if err := b.Replay(t.Context(), testRoute, ack.ID); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if es := list(); len(es) != 0 {
			t.Fatalf("DLQ after Replay: %+v, want empty", es)
		}
		j := mustBegin(t, b, readOne(t, b, "c1"))
		if j.Key != "d1" || j.EventID != ack.ID || j.Try != 1 || j.Total != 2 || string(j.Payload) != "payload d1" {
			t.Fatalf("replayed job %+v, want d1, try 1, 2 in all, the payload", j)
		}
		// Dies again, then is purged.
		mustSettle(t, b, "c1", j, deadSettlement())
		if es := list(); len(es) != 1 || es[0].Attempts != 2 {
			t.Fatalf("DLQ after the second death: %+v, want d1 with 2 attempts", es)
		}
		if err := b.Purge(t.Context(), testRoute, ack.ID, time.Hour); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if es := list(); len(es) != 0 {
			t.Fatalf("DLQ after Purge: %+v, want empty", es)
		}
		if ks := mustGet(t, b, "d1"); ks.State != queue.StateDeadLettered {
			t.Fatalf("Get after Purge: %+v, want dead_lettered", ks)
		}
		if err := b.Replay(t.Context(), testRoute, ack.ID); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Replay after Purge: %v, want ErrNotFound", err)
		}
		if err := b.Purge(t.Context(), testRoute, ack.ID, time.Hour); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Purge twice: %v, want ErrNotFound", err)
		}
		if ls, err := b.Read(t.Context(), testRoute, 0, "c1", 10, 200*time.Millisecond); err != nil || len(ls) != 0 {
			t.Fatalf("Read after Purge: %+v %v, want nothing", ls, err)
		}
	})
}

// TestKafkaProduceFails: while the broker fails every produce to the main
// topic, Enqueue answers unavailable and stores nothing; once it takes
// them again the same event is stored and delivered.
func TestKafkaProduceFails(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, nil)
		f := kc.FailProduce(-1, mainTopic)
		_, err := b.Enqueue(t.Context(), entry("p1"), 100000)
		if !errors.Is(err, queue.ErrUnavailable) {
			t.Fatalf("Enqueue with produce failing: %v, want ErrUnavailable", err)
		}
		if f.Hits() < 1 {
			t.Fatalf("the fault failed %d produce requests", f.Hits())
		}
		if ks := mustGet(t, b, "p1"); ks.State != queue.StateAbsent {
			t.Fatalf("Get after the failed enqueue: %+v, want absent", ks)
		}
		if st, err := b.Stats(t.Context(), testRoute); err != nil || st.Depth != 0 {
			t.Fatalf("Stats: %+v %v, want depth 0", st, err)
		}
		f.Remove()
		// The provider sends it again.
		ack := mustEnqueue(t, b, "p1", queue.Enqueued)
		ls := readN(t, b, "c1", 1)
		if len(ls) != 1 || ls[0].EventID != ack.ID {
			t.Fatalf("read %+v, want only the stored event %s", ls, ack.ID)
		}
		mustSettle(t, b, "c1", mustBegin(t, b, ls[0]), delivered("{}"))
	})
}

// TestKafkaCommitFailsRedelivered: the offset of a delivered record could
// not be committed; the next consumer of the group reads the record again
// and Begin drops it, since its key is finished. Its offset is then
// committed.
func TestKafkaCommitFailsRedelivered(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		f := kc.FailOffsetCommit(-1, mainGroup)
		first := newBackend(t, kc, l, nil)
		ack := mustEnqueue(t, first, "c1", queue.Enqueued)
		mustSettle(t, first, "w1", mustBegin(t, first, readOne(t, first, "w1")), delivered("{}"))
		eventually(t, bound, func() bool { return f.Hits() > 0 }, func() string { return "no offset commit was tried" })
		first.Close()
		f.Remove()

		second := newBackend(t, kc, l, nil)
		ls := readOne(t, second, "w2")
		if ls.Key != "c1" || ls.EventID != ack.ID {
			t.Fatalf("read %+v, want c1 again", ls)
		}
		if j, ok, err := second.Begin(t.Context(), ls); err != nil || ok {
			t.Fatalf("Begin of a record already delivered: %+v ok=%v err=%v, want it dropped", j, ok, err)
		}
		if ks := mustGet(t, second, "c1"); ks.State != queue.StateFinished || ks.Attempts != 1 {
			t.Fatalf("Get: %+v, want finished after 1 attempt", ks)
		}
		// The dropped record's offset is committed: the group has caught up.
		adm := kc.Admin(t)
		eventually(t, bound, func() bool {
			lags, err := adm.Lag(t.Context(), mainGroup)
			return err == nil && lags.Error() == nil && lags[mainGroup].Lag.Total() == 0
		}, func() string {
			lags, err := adm.Lag(t.Context(), mainGroup)
			return fmt.Sprintf("the group's lag: %+v %v, want 0", lags[mainGroup].Lag, err)
		})
	})
}

// TestKafkaBrokerRestart: the broker restarts (same address, same data
// directory) under a running backend; every event enqueued and not yet
// delivered is read and delivered after it, once, and the ones delivered
// before are not.
func TestKafkaBrokerRestart(t *testing.T) {
	t.Parallel()
	kc := kafkatest.StartPersistent(t)
	b := newBackend(t, kc, ledger.NewMemory(nil), nil)
	var keys []string
	for i := range 20 {
		k := fmt.Sprintf("b%02d", i)
		mustEnqueue(t, b, k, queue.Enqueued)
		keys = append(keys, k)
	}
	before := map[string]bool{}
	for _, ls := range readN(t, b, "w", 5) {
		j, ok, err := b.Begin(t.Context(), ls)
		if err != nil || !ok {
			t.Fatalf("Begin %+v: %v %v", ls, ok, err)
		}
		mustSettle(t, b, "w", j, delivered("{}"))
		before[j.Key] = true
	}
	// Read records that were not begun are forgotten with the restart's
	// rebalance or stay leased here; either way they come out again.
	kc.Restart()

	begun := map[string]int{}
	dropped := 0
	eventually(t, bound, func() bool {
		ls, err := b.Read(t.Context(), testRoute, 0, "w", 20, 100*time.Millisecond)
		if err != nil {
			return false
		}
		rl, _ := b.Reclaim(t.Context(), testRoute, 0, "w", 0)
		for _, l := range append(ls, rl...) {
			j, ok, err := b.Begin(t.Context(), l)
			if err != nil {
				continue // the broker or the ledger is not back yet: reclaimed later
			}
			if !ok {
				dropped++
				continue
			}
			begun[j.Key]++
			if got, err := b.Settle(t.Context(), "w", j, delivered("{}")); err != nil || got != queue.Recorded {
				t.Errorf("Settle %s: %v %v", j.Key, got, err)
			}
		}
		return len(begun)+len(before) >= len(keys)
	}, func() string {
		return fmt.Sprintf("after the restart %d events begun (%d dropped), %d delivered before, want %d in all", len(begun), dropped, len(before), len(keys))
	})
	for _, k := range keys {
		switch {
		case before[k] && begun[k] > 0:
			t.Errorf("%s delivered before the restart was begun again after it", k)
		case !before[k] && begun[k] != 1:
			t.Errorf("%s begun %d times after the restart, want 1", k, begun[k])
		}
		if ks := mustGet(t, b, k); ks.State != queue.StateFinished {
			t.Errorf("%s: %+v, want finished", k, ks)
		}
	}
	t.Logf("after the restart: %d begun, %d leftovers dropped", len(begun), dropped)
}

// recSender is a queue.Sender that records each send by key and answers
// 200; while slow is set every send first sleeps, so that tries are in
// flight when the group rebalances.
type recSender struct {
	mu    sync.Mutex
	sends map[string][]string // key -> instance of each send
	slow  atomic.Bool
	name  string
	into  *recSender // the shared log (name differs per instance)
	total atomic.Int64
}

func (s *recSender) Send(_ context.Context, _ string, payload []byte, _ int64) queue.Result {
	if s.into.slow.Load() {
		time.Sleep(50 * time.Millisecond)
	}
	key := strings.TrimPrefix(string(payload), "payload ")
	s.into.mu.Lock()
	s.into.sends[key] = append(s.into.sends[key], s.name)
	s.into.mu.Unlock()
	s.into.total.Add(1)
	return queue.Result{Status: 200, Outcome: store.Outcome{Status: 200, Body: []byte("{}")}}
}

// nopRecorder is a queue.Recorder counting attempt outcomes.
type nopRecorder struct {
	mu       sync.Mutex
	attempts map[string]int
}

func (r *nopRecorder) QueueAttempt(_, outcome string) {
	r.mu.Lock()
	if r.attempts == nil {
		r.attempts = map[string]int{}
	}
	r.attempts[outcome]++
	r.mu.Unlock()
}
func (*nopRecorder) QueueDelay(string, float64)                  {}
func (*nopRecorder) QueueReclaimed(string, int)                  {}
func (*nopRecorder) DLQReplayed(string, int)                     {}
func (*nopRecorder) DLQPurged(string, int)                       {}
func (*nopRecorder) SetQueueStats(string, int64, int64, float64) {}
func (*nopRecorder) ForgetQueueRoute(string)                     {}

// TestKafkaTwoInstancesRebalance: two instances (a Backend and a Manager
// each, one Redis ledger) on one route; the second starts while the first
// is delivering, so the group rebalances mid-run. Every event is
// delivered, none twice.
func TestKafkaTwoInstancesRebalance(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t)
	addr := redistest.Start(t)
	const events = 300
	log := &recSender{sends: map[string][]string{}}
	log.into = log
	log.slow.Store(true)
	rec := &nopRecorder{}
	qroute := queue.Route{Name: testRoute, Workers: 4, Retry: queue.Retry{MaxAttempts: 5, Initial: 50 * time.Millisecond, Max: time.Second},
		MaxDepth: 100000, Retention: time.Hour, LockTTL: 5 * time.Second, Shards: 1}
	start := func(name string) (*queue.Manager, *Backend) {
		b := newBackend(t, kc, newRedisLedger(t, addr), func(o *Options) { o.Partitions = 4; o.ClientID = name })
		m := queue.New(queue.Options{Backend: b, Sender: &recSender{name: name, into: log}, Metrics: rec, Log: testLog(t),
			Consumer: name, Block: 200 * time.Millisecond, StatsEvery: time.Second})
		if err := m.Apply(t.Context(), []queue.Route{qroute}); err != nil {
			t.Fatalf("Apply %s: %v", name, err)
		}
		t.Cleanup(func() { m.Close(time.Second) })
		return m, b
	}
	ma, _ := start("a")
	var keys []string
	for i := range events {
		k := fmt.Sprintf("e%03d", i)
		keys = append(keys, k)
		ack, err := ma.Enqueue(t.Context(), entry(k))
		if err != nil || ack.State != queue.Enqueued {
			t.Fatalf("Enqueue %s: %+v %v", k, ack, err)
		}
	}
	eventually(t, bound, func() bool { return log.total.Load() >= 10 }, func() string { return "the first instance delivered nothing" })
	start("b")
	if err := kc.WaitGroupMembers(t.Context(), mainGroup, 2, bound); err != nil {
		t.Logf("the group never had both instances: %v", err)
	}
	atRebalance := log.total.Load()
	log.slow.Store(false)

	missing := func() []string {
		log.mu.Lock()
		defer log.mu.Unlock()
		var out []string
		for _, k := range keys {
			if len(log.sends[k]) == 0 {
				out = append(out, k)
			}
		}
		return out
	}
	eventually(t, 2*bound, func() bool { return len(missing()) == 0 }, func() string {
		m := missing()
		return fmt.Sprintf("%d of %d events never delivered, e.g. %v", len(m), events, m[:min(5, len(m))])
	})
	// Once every key is finished no try can start: the counts are final.
	l := newRedisLedger(t, addr)
	for _, k := range keys {
		eventually(t, bound, func() bool {
			ks, err := l.Get(t.Context(), testRoute, k)
			return err == nil && ks.State == queue.StateFinished
		}, func() string {
			ks, err := l.Get(t.Context(), testRoute, k)
			return fmt.Sprintf("%s: %+v %v", k, ks, err)
		})
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	by := map[string]int{}
	for _, k := range keys {
		if len(log.sends[k]) != 1 {
			t.Errorf("%s sent %d times (by %v), want once", k, len(log.sends[k]), log.sends[k])
		}
		for _, in := range log.sends[k] {
			by[in]++
		}
	}
	rec.mu.Lock()
	t.Logf("%d events: %d delivered before the rebalance; sends by instance %v; attempt outcomes %v", events, atRebalance, by, rec.attempts)
	rec.mu.Unlock()
	if atRebalance >= events {
		t.Errorf("the first instance delivered every event before the second joined: no rebalance mid-run")
	}
	if by["b"] == 0 {
		t.Errorf("the second instance delivered nothing: the group never gave it partitions with work")
	}
}

// TestKafkaReplayWhileConsuming: DLQ replays while the route's consumer
// reads (as the workers do, all the time): every replayed event is begun
// again, none is dropped as a leftover and left queued with no record.
func TestKafkaReplayWhileConsuming(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, func(o *Options) { o.Partitions = 3 })
		const n = 5
		var ids []string
		for i := range n {
			ids = append(ids, mustEnqueue(t, b, fmt.Sprintf("rp%d", i), queue.Enqueued).ID)
		}
		for _, ls := range readN(t, b, "c", n) {
			mustSettle(t, b, "c", mustBegin(t, b, ls), deadSettlement())
		}
		var mu sync.Mutex
		begun := map[string]int{}
		var dropped []string
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ls, _ := b.Read(t.Context(), testRoute, 0, "c", 10, 50*time.Millisecond)
				for _, l := range ls {
					_, ok, err := b.Begin(t.Context(), l)
					mu.Lock()
					switch {
					case ok:
						begun[l.Key]++
					case err == nil:
						dropped = append(dropped, l.Key)
					}
					mu.Unlock()
				}
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for _, id := range ids {
			if err := b.Replay(t.Context(), testRoute, id); err != nil {
				t.Errorf("Replay %s: %v", id, err)
			}
		}
		eventually(t, bound, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(begun) == n
		}, func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("replayed %d events; begun again %v, dropped as leftovers %v", n, begun, dropped)
		})
		mu.Lock()
		defer mu.Unlock()
		for k, c := range begun {
			if c != 1 {
				t.Errorf("%s begun %d times after its replay, want 1", k, c)
			}
		}
	})
}

// TestKafkaRetryOrderByDue: two retries wait in the same partition of the
// shortest tier, the one written first due later: the one due first is
// ready first, not held behind the other.
func TestKafkaRetryOrderByDue(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t)
	b := newBackend(t, kc, ledger.NewMemory(nil), func(o *Options) { o.Partitions = 1 })
	mustEnqueue(t, b, "late", queue.Enqueued)
	mustEnqueue(t, b, "soon", queue.Enqueued)
	jobs := map[string]queue.Job{}
	for _, l := range readN(t, b, "c", 2) {
		jobs[l.Key] = mustBegin(t, b, l)
	}
	now := time.Now()
	// Written first, due last.
	mustSettle(t, b, "c", jobs["late"], queue.Settlement{Kind: queue.SettleRetry, Due: now.Add(900 * time.Millisecond), Status: 503, At: now})
	mustSettle(t, b, "c", jobs["soon"], queue.Settlement{Kind: queue.SettleRetry, Due: now.Add(30 * time.Millisecond), Status: 503, At: now})
	var order []string
	eventually(t, bound, func() bool {
		if _, err := b.Promote(t.Context(), testRoute, 0, time.Now()); err != nil {
			t.Logf("Promote: %v", err)
		}
		ls, _ := b.Read(t.Context(), testRoute, 0, "c", 10, 20*time.Millisecond)
		for _, l := range ls {
			order = append(order, l.Key)
			mustSettle(t, b, "c", mustBegin(t, b, l), delivered("{}"))
		}
		return len(order) >= 2
	}, func() string { return fmt.Sprintf("read back %v, want both retries", order) })
	if len(order) != 2 || order[0] != "soon" {
		t.Errorf("retries read back in the order %v, want [soon late]: the one due in 30ms waited behind the one due in 900ms", order)
	}
}
