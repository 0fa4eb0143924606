package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

// sendCall is one try the fake upstream saw.
type sendCall struct {
	key     string
	attempt int64
	at      time.Time // when the try started
	status  int       // 0: no answer
}

// fakeSender is an in-process upstream whose answer to each try is fn's.
type fakeSender struct {
	mu    sync.Mutex
	fn    func(ctx context.Context, key string, attempt int64) Result
	calls []sendCall
}

func newSender(fn func(ctx context.Context, key string, attempt int64) Result) *fakeSender {
	return &fakeSender{fn: fn}
}

func (s *fakeSender) set(fn func(ctx context.Context, key string, attempt int64) Result) {
	s.mu.Lock()
	s.fn = fn
	s.mu.Unlock()
}

func (s *fakeSender) Send(ctx context.Context, route string, payload []byte, attempt int64) Result {
	at := time.Now()
	s.mu.Lock()
	fn := s.fn
	s.mu.Unlock()
	res := fn(ctx, string(payload), attempt)
	s.mu.Lock()
	s.calls = append(s.calls, sendCall{key: string(payload), attempt: attempt, at: at, status: res.Status})
	s.mu.Unlock()
	return res
}

// byKey returns the tries of every key in the order they started.
func (s *fakeSender) byKey() map[string][]sendCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]sendCall{}
	for _, c := range s.calls {
		out[c.key] = append(out[c.key], c)
	}
	for _, cs := range out {
		sort.Slice(cs, func(i, j int) bool { return cs[i].at.Before(cs[j].at) })
	}
	return out
}

// successes counts the 2xx answers given.
func (s *fakeSender) successes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.status >= 200 && c.status <= 299 {
			n++
		}
	}
	return n
}

func answer(status int) Result {
	r := Result{Status: status}
	if status >= 200 && status <= 299 {
		r.Outcome = store.Outcome{Status: status, ContentType: "text/plain", Body: []byte("ok")}
	}
	return r
}

// recorder is a Recorder that counts what it is told.
type recorder struct {
	mu        sync.Mutex
	attempts  map[string]int // outcome -> tries
	delays    int
	reclaimed int
	replayed  int
	purged    int
	stats     int
	forgotten []string
}

var _ Recorder = (*recorder)(nil)

func newRecorder() *recorder { return &recorder{attempts: map[string]int{}} }

func (r *recorder) QueueAttempt(route, outcome string) {
	r.mu.Lock()
	r.attempts[outcome]++
	r.mu.Unlock()
}
func (r *recorder) QueueDelay(string, float64) { r.mu.Lock(); r.delays++; r.mu.Unlock() }
func (r *recorder) QueueReclaimed(_ string, n int) {
	r.mu.Lock()
	r.reclaimed += n
	r.mu.Unlock()
}
func (r *recorder) DLQReplayed(_ string, n int) { r.mu.Lock(); r.replayed += n; r.mu.Unlock() }
func (r *recorder) DLQPurged(_ string, n int)   { r.mu.Lock(); r.purged += n; r.mu.Unlock() }
func (r *recorder) SetQueueStats(string, int64, int64, float64) {
	r.mu.Lock()
	r.stats++
	r.mu.Unlock()
}
func (r *recorder) ForgetQueueRoute(route string) {
	r.mu.Lock()
	r.forgotten = append(r.forgotten, route)
	r.mu.Unlock()
}

func (r *recorder) attempt(outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[outcome]
}

// deadLog records OnDead calls.
type deadLog struct {
	mu    sync.Mutex
	calls []string // "key id reason"
}

func (d *deadLog) onDead(route, key, id, reason string) {
	d.mu.Lock()
	d.calls = append(d.calls, key+" "+id+" "+reason)
	d.mu.Unlock()
}

func (d *deadLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

func (d *deadLog) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// testQueueRoute is a route with short retries: 20ms doubling up to
// 200ms, five tries.
func testQueueRoute() Route {
	return Route{Name: testRoute, Workers: 20, Retry: Retry{MaxAttempts: 5, Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		MaxDepth: 1000, Retention: time.Hour, LockTTL: time.Second, Shards: 1}
}

type managerEnv struct {
	m      *Manager
	b      Backend
	sender *fakeSender
	rec    *recorder
	dead   *deadLog
}

// startManager runs a Manager over b with route, jitter factor 1.0 and
// quick loops; it is closed when the test ends.
func startManager(t *testing.T, b Backend, sender *fakeSender, route Route, adjust ...func(*Options)) *managerEnv {
	t.Helper()
	env := &managerEnv{b: b, sender: sender, rec: newRecorder(), dead: &deadLog{}}
	o := Options{Backend: b, Sender: sender, Metrics: env.rec, Log: slog.New(slog.DiscardHandler),
		OnDead: env.dead.onDead, Consumer: "manager-" + t.Name(), ReplayRate: 1000,
		StatsEvery: 20 * time.Millisecond, PromoteEvery: 5 * time.Millisecond, Block: 50 * time.Millisecond,
		Jitter: func() float64 { return 0.5 }}
	for _, f := range adjust {
		f(&o)
	}
	env.m = New(o)
	t.Cleanup(func() { env.m.Close(time.Second) })
	if err := env.m.Apply(context.Background(), []Route{route}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return env
}

func (env *managerEnv) enqueue(t *testing.T, keys ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, k := range keys {
		ack, err := env.m.Enqueue(context.Background(), testEntry(k, "fp-"+k))
		if err != nil || ack.State != Enqueued {
			t.Fatalf("Enqueue %q = %+v, %v", k, ack, err)
		}
		ids[k] = ack.ID
	}
	return ids
}

func keyNames(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// assertTries checks key's tries: their attempt numbers and statuses.
func assertTries(t *testing.T, calls []sendCall, key string, attempts []int64, statuses []int) {
	t.Helper()
	var gotA []int64
	var gotS []int
	for _, c := range calls {
		gotA = append(gotA, c.attempt)
		gotS = append(gotS, c.status)
	}
	if !slices.Equal(gotA, attempts) || !slices.Equal(gotS, statuses) {
		t.Fatalf("key %s: tries %v answered %v; want %v answered %v", key, gotA, gotS, attempts, statuses)
	}
}

func TestManagerRetriesWithGrowingGaps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		sender := newSender(func(_ context.Context, _ string, attempt int64) Result {
			if attempt <= 3 {
				return answer(503)
			}
			return answer(200)
		})
		// Gaps of 100, 200 and 400ms: on a busy machine a try can start tens
		// of milliseconds late, which gaps of 20, 40 and 80ms do not absorb.
		route := testQueueRoute()
		route.Retry.Initial, route.Retry.Max = 100*time.Millisecond, time.Second
		env := startManager(t, b, sender, route)
		keys := keyNames(20, "k")
		env.enqueue(t, keys...)
		waitFor(t, "20 deliveries", func() bool { return sender.successes() >= len(keys) })
		env.m.Close(time.Second)

		tries := sender.byKey()
		if len(tries) != len(keys) {
			t.Fatalf("%d keys tried, want %d", len(tries), len(keys))
		}
		for _, k := range keys {
			cs := tries[k]
			assertTries(t, cs, k, []int64{1, 2, 3, 4}, []int{503, 503, 503, 200})
			g1, g2, g3 := cs[1].at.Sub(cs[0].at), cs[2].at.Sub(cs[1].at), cs[3].at.Sub(cs[2].at)
			if !(g2 > g1 && g3 > g2) {
				t.Errorf("key %s: gaps between tries %v, %v, %v; want each longer than the last", k, g1, g2, g3)
			}
			if ks := mustGet(t, b, k); ks.State != StateFinished || ks.Attempts != 4 || ks.Status != 200 {
				t.Errorf("key %s: %+v, want finished after 4 tries", k, ks)
			}
		}
		if got := env.rec.attempt(metrics.AttemptDelivered); got != 20 {
			t.Errorf("delivered attempts recorded: %d, want 20", got)
		}
		if got := env.rec.attempt(metrics.AttemptRetried); got != 60 {
			t.Errorf("retried attempts recorded: %d, want 60", got)
		}
		if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 {
			t.Errorf("Stats = %+v, want empty", st)
		}
	})
}

func TestManagerDeadLettersThenReplays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		sender := newSender(func(context.Context, string, int64) Result { return answer(500) })
		route := testQueueRoute()
		route.Retry.MaxAttempts = 3
		env := startManager(t, b, sender, route)
		ids := env.enqueue(t, "k")
		waitFor(t, "the event to be dead-lettered", func() bool { return env.dead.count() > 0 })

		ctx := context.Background()
		list, _, err := env.m.ListDLQ(ctx, testRoute, "", 10)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListDLQ = %+v, %v; want one entry", list, err)
		}
		if d := list[0]; d.ID != ids["k"] || d.Reason != "exhausted" || d.Status != 500 || d.Attempts != 3 {
			t.Fatalf("DLQ entry %+v, want %s exhausted after 3 tries, status 500", d, ids["k"])
		}
		if got := env.dead.all(); len(got) != 1 || got[0] != "k "+ids["k"]+" exhausted" {
			t.Fatalf("OnDead calls %v", got)
		}
		if got := env.rec.attempt(metrics.AttemptDeadLettered); got != 1 {
			t.Fatalf("dead_lettered attempts recorded: %d, want 1", got)
		}

		sender.set(func(context.Context, string, int64) Result { return answer(200) })
		if err := env.m.Replay(ctx, testRoute, ids["k"]); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		waitFor(t, "the replayed event's delivery", func() bool { return sender.successes() > 0 })
		env.m.Close(time.Second)

		assertTries(t, sender.byKey()["k"], "k", []int64{1, 2, 3, 4}, []int{500, 500, 500, 200})
		if list, _, err := b.ListDLQ(ctx, testRoute, "", 10); err != nil || len(list) != 0 {
			t.Fatalf("DLQ after the replay = %+v, %v; want empty", list, err)
		}
		if ks := mustGet(t, b, "k"); ks.State != StateFinished {
			t.Fatalf("key after the replay: %+v", ks)
		}
		if env.dead.count() != 1 {
			t.Fatalf("OnDead called %d times, want once", env.dead.count())
		}
		env.rec.mu.Lock()
		replayed := env.rec.replayed
		env.rec.mu.Unlock()
		if replayed != 1 {
			t.Fatalf("DLQReplayed counted %d, want 1", replayed)
		}
	})
}

func TestManagerRejectsAtOnce(t *testing.T) {
	for _, status := range []int{400, 404, 301} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b Backend) {
				sender := newSender(func(context.Context, string, int64) Result { return answer(status) })
				env := startManager(t, b, sender, testQueueRoute())
				ids := env.enqueue(t, "k")
				waitFor(t, "the event to be dead-lettered", func() bool { return env.dead.count() > 0 })
				reason := fmt.Sprintf("rejected:%d", status)
				if got := env.dead.all(); got[0] != "k "+ids["k"]+" "+reason {
					t.Fatalf("OnDead calls %v, want reason %s", got, reason)
				}
				list, _, err := b.ListDLQ(context.Background(), testRoute, "", 10)
				if err != nil || len(list) != 1 || list[0].Reason != reason || list[0].Status != status || list[0].Attempts != 1 {
					t.Fatalf("ListDLQ = %+v, %v; want %s after one try", list, err, reason)
				}
				env.m.Close(time.Second)
				assertTries(t, sender.byKey()["k"], "k", []int64{1}, []int{status})
				if got := env.rec.attempt(metrics.AttemptRejected); got != 1 {
					t.Fatalf("rejected attempts recorded: %d, want 1", got)
				}
				if got := env.rec.attempt(metrics.AttemptDeadLettered); got != 0 {
					t.Fatalf("dead_lettered attempts recorded: %d, want 0 (rejected is its own outcome)", got)
				}
			})
		})
	}
}

// Close with a try that never ends: the try is cut after grace and its
// entry handed back; another instance delivers it. A grace of zero or less
// cuts at once: the server's Shutdown passes what is left of its grace
// period, nothing when the front door used it all, and Close(0) used to
// wait for every try then, so a hung upstream hung the shutdown
// (regression case "no grace left").
func TestManagerCloseHandsBack(t *testing.T) {
	for _, c := range []struct {
		name  string
		grace time.Duration
	}{{"grace", 50 * time.Millisecond}, {"no grace left", 0}, {"grace overrun", -time.Second}} {
		t.Run(c.name, func(t *testing.T) { testManagerCloseHandsBack(t, c.grace) })
	}
}

func testManagerCloseHandsBack(t *testing.T, grace time.Duration) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		started := make(chan struct{}, 1)
		sender := newSender(func(ctx context.Context, _ string, attempt int64) Result {
			if attempt == 1 {
				started <- struct{}{}
				<-ctx.Done()
				return Result{Err: ctx.Err()}
			}
			return answer(200)
		})
		a := startManager(t, b, sender, testQueueRoute(), func(o *Options) { o.Consumer = "A" })
		a.enqueue(t, "k")
		select {
		case <-started:
		case <-time.After(waitBound):
			t.Fatal("the first try never started")
		}
		closed := make(chan struct{})
		go func() {
			a.m.Close(grace)
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(waitBound):
			t.Fatalf("Close(%v) did not return within %v with a try blocked until cancelled", grace, waitBound)
		}
		if ks := mustGet(t, b, "k"); ks.State != StateQueued {
			t.Fatalf("key after Close: %+v, want still queued", ks)
		}

		startManager(t, b, sender, testQueueRoute(), func(o *Options) { o.Consumer = "B" })
		waitFor(t, "the other instance's delivery", func() bool { return sender.successes() > 0 })
		waitFor(t, "the key to be finished", func() bool { return mustGet(t, b, "k").State == StateFinished })
		assertTries(t, sender.byKey()["k"], "k", []int64{1, 2}, []int{0, 200})
	})
}

func TestManagerApply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ctx := context.Background()
		sender := newSender(func(context.Context, string, int64) Result { return answer(200) })
		route := testQueueRoute()
		route.Workers = 1
		env := startManager(t, b, sender, route)
		env.enqueue(t, keyNames(5, "a")...)
		waitFor(t, "5 deliveries", func() bool { return sender.successes() == 5 })

		route.Workers = 3
		if err := env.m.Apply(ctx, []Route{route}); err != nil {
			t.Fatalf("Apply with 3 workers: %v", err)
		}
		env.enqueue(t, keyNames(5, "b")...)
		waitFor(t, "5 more deliveries", func() bool { return sender.successes() == 10 })

		if err := env.m.Apply(ctx, nil); err != nil {
			t.Fatalf("Apply without the route: %v", err)
		}
		if env.m.IsRoute(testRoute) {
			t.Fatal("the removed route is still a queue route")
		}
		// The removed route's gauges go once its workers have stopped.
		waitFor(t, "ForgetQueueRoute", func() bool {
			env.rec.mu.Lock()
			defer env.rec.mu.Unlock()
			return slices.Equal(env.rec.forgotten, []string{testRoute})
		})
		if _, err := env.m.Enqueue(ctx, testEntry("late", "fp")); !errors.Is(err, ErrNoRoute) {
			t.Fatalf("Enqueue on the removed route = %v, want ErrNoRoute", err)
		}
		if _, _, err := env.m.ListDLQ(ctx, testRoute, "", 10); !errors.Is(err, ErrNoRoute) {
			t.Fatalf("ListDLQ on the removed route = %v, want ErrNoRoute", err)
		}

		// What is queued meanwhile waits for the route to come back.
		mustEnqueue(t, b, testEntry("meanwhile", "fp-meanwhile"), 100)
		if err := env.m.Apply(ctx, []Route{route}); err != nil {
			t.Fatalf("Apply with the route back: %v", err)
		}
		waitFor(t, "the delivery after the route came back", func() bool { return sender.successes() == 11 })
		env.m.Close(time.Second)
		for k, cs := range sender.byKey() {
			if len(cs) != 1 || cs[0].status != 200 {
				t.Errorf("key %s tried %d times, want once", k, len(cs))
			}
		}
		if st := mustStats(t, b); st.Depth != 0 {
			t.Fatalf("Depth = %d, want 0", st.Depth)
		}
	})
}

// deadLetterAll enqueues keys through env and waits until each is
// dead-lettered (the sender must reject their first tries).
func (env *managerEnv) deadLetterAll(t *testing.T, keys []string) {
	t.Helper()
	env.enqueue(t, keys...)
	waitFor(t, fmt.Sprintf("%d events dead-lettered", len(keys)), func() bool { return env.dead.count() == len(keys) })
	if st := mustStats(t, env.b); st.DLQ != int64(len(keys)) {
		t.Fatalf("DLQ = %d, want %d", st.DLQ, len(keys))
	}
}

// firstRejected is an upstream that rejects every event's first try and
// accepts the next.
func firstRejected(_ context.Context, _ string, attempt int64) Result {
	if attempt == 1 {
		return answer(400)
	}
	return answer(200)
}

func TestManagerReplayAll(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		sender := newSender(firstRejected)
		env := startManager(t, b, sender, testQueueRoute(), func(o *Options) { o.ReplayRate = 1000 })
		keys := keyNames(10, "k")
		env.deadLetterAll(t, keys)

		st, err := env.m.ReplayAll(testRoute)
		if err != nil || st.Total != 10 {
			t.Fatalf("ReplayAll = %+v, %v; want a run over 10 events", st, err)
		}
		waitFor(t, "the replay to end", func() bool {
			st, ok := env.m.Replaying(testRoute)
			return ok && st.State != "running"
		})
		st, _ = env.m.Replaying(testRoute)
		if st.State != "done" || st.Replayed != 10 || st.Total != 10 || st.Error != "" {
			t.Fatalf("replay ended %+v, want done with 10 of 10 replayed", st)
		}
		waitFor(t, "10 deliveries", func() bool { return sender.successes() == 10 })
		env.m.Close(time.Second)
		tries := sender.byKey()
		for _, k := range keys {
			assertTries(t, tries[k], k, []int64{1, 2}, []int{400, 200})
		}
		if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 {
			t.Fatalf("Stats = %+v, want empty", st)
		}
	})
}

func TestManagerCancelReplay(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		sender := newSender(firstRejected)
		env := startManager(t, b, sender, testQueueRoute(), func(o *Options) { o.ReplayRate = 1 })
		env.deadLetterAll(t, keyNames(10, "k"))

		if _, ok := env.m.Replaying(testRoute); ok {
			t.Fatal("Replaying reports a replay before any started")
		}
		if _, ok := env.m.CancelReplay(testRoute); ok {
			t.Fatal("CancelReplay reports a replay before any started")
		}
		st, err := env.m.ReplayAll(testRoute)
		if err != nil || st.State != "running" || st.Total != 10 {
			t.Fatalf("ReplayAll = %+v, %v", st, err)
		}
		if _, err := env.m.ReplayAll(testRoute); !errors.Is(err, ErrReplayRunning) {
			t.Fatalf("second ReplayAll = %v, want ErrReplayRunning", err)
		}
		// At one event a second, the run waits for its second event once it
		// replayed the first: cancel it there. (Cancelling it during a
		// backend call is TestManagerCancelReplayDuringABackendCall.)
		cancelAfterFirst := func() ReplayStatus {
			t.Helper()
			waitFor(t, "the first event replayed", func() bool {
				st, _ := env.m.Replaying(testRoute)
				return st.Replayed == 1 || st.State != "running"
			})
			st, ok := env.m.CancelReplay(testRoute)
			if !ok || st.State != "cancelled" || st.Replayed >= st.Total {
				t.Fatalf("CancelReplay = %+v, %v; want cancelled with fewer than %d replayed", st, ok, st.Total)
			}
			return st
		}
		st = cancelAfterFirst()
		if again, _ := env.m.Replaying(testRoute); again != st {
			t.Fatalf("Replaying after the cancel = %+v, want %+v", again, st)
		}
		// A new run may start once the last one ended.
		if _, err := env.m.ReplayAll(testRoute); err != nil {
			t.Fatalf("ReplayAll after a cancelled one: %v", err)
		}
		cancelAfterFirst()
	})
}

// slowDLQ is a backend whose ListDLQ waits until its context ends, as a
// Redis call in flight does when the context is cancelled.
type slowDLQ struct {
	Backend
	listing chan struct{}
}

func (s slowDLQ) ListDLQ(ctx context.Context, route, cursor string, limit int) ([]DeadEntry, string, error) {
	s.listing <- struct{}{}
	<-ctx.Done()
	return nil, "", fmt.Errorf("queue: list dlq: %w: %v", ErrUnavailable, ctx.Err())
}

// A replay cancelled while it waits for the backend ends cancelled, not
// failed.
func TestManagerCancelReplayDuringABackendCall(t *testing.T) {
	mem := NewMemory()
	b := slowDLQ{Backend: mem, listing: make(chan struct{}, 1)}
	sender := newSender(firstRejected)
	env := startManager(t, b, sender, testQueueRoute())
	env.deadLetterAll(t, keyNames(3, "k"))
	if _, err := env.m.ReplayAll(testRoute); err != nil {
		t.Fatalf("ReplayAll: %v", err)
	}
	select {
	case <-b.listing:
	case <-time.After(waitBound):
		t.Fatal("the replay never listed the DLQ")
	}
	st, ok := env.m.CancelReplay(testRoute)
	if !ok || st.State != "cancelled" {
		t.Fatalf("CancelReplay during a ListDLQ call = %+v; want state cancelled (the error is the cancellation itself)", st)
	}
}
