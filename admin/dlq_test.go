package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// statusSender answers each try with the status written in the event's
// payload ("400", "500", "200"), or 200 once fixed is set: the upstream
// was repaired.
type statusSender struct{ fixed atomic.Bool }

func (s *statusSender) Send(_ context.Context, _ string, payload []byte, _ int64) queue.Result {
	code, _ := strconv.Atoi(string(payload))
	if s.fixed.Load() {
		code = 200
	}
	res := queue.Result{Status: code}
	if code >= 200 && code <= 299 {
		res.Outcome = store.Outcome{Status: code, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
	}
	return res
}

// nopRecorder drops the queue's metrics.
type nopRecorder struct{}

func (nopRecorder) QueueAttempt(string, string)                 {}
func (nopRecorder) QueueDelay(string, float64)                  {}
func (nopRecorder) QueueReclaimed(string, int)                  {}
func (nopRecorder) DLQReplayed(string, int)                     {}
func (nopRecorder) DLQPurged(string, int)                       {}
func (nopRecorder) SetQueueStats(string, int64, int64, float64) {}
func (nopRecorder) ForgetQueueRoute(string)                     {}

// dlqEnv is an admin listener over a real queue.Manager on the memory
// backend: route "hooks" is a queue route, "orders" a sync one.
type dlqEnv struct {
	t      *testing.T
	srv    *httptest.Server
	mgr    *queue.Manager
	sender *statusSender
}

// newDLQEnv starts the queue route "hooks": one try per event (a 5xx is
// retried after an hour, so its key stays queued), whole-DLQ replays at
// rate events per second.
func newDLQEnv(t *testing.T, rate float64) *dlqEnv {
	t.Helper()
	return newDLQEnvToken(t, rate, token)
}

// newDLQEnvToken is newDLQEnv with the admin token tok ("" for none).
func newDLQEnvToken(t *testing.T, rate float64, tok string) *dlqEnv {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	e := &dlqEnv{t: t, sender: &statusSender{}}
	e.mgr = queue.New(queue.Options{Backend: queue.NewMemory(), Sender: e.sender, Metrics: nopRecorder{}, Log: log,
		ReplayRate: rate, PromoteEvery: 10 * time.Millisecond, Block: 50 * time.Millisecond})
	err := e.mgr.Apply(context.Background(), []queue.Route{{Name: "hooks", Workers: 2,
		Retry:    queue.Retry{MaxAttempts: 3, Initial: time.Hour, Max: time.Hour},
		MaxDepth: 100, Retention: time.Hour, LockTTL: 30 * time.Second, Shards: 1}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}, {Name: "hooks", Delivery: config.DeliveryQueue}}}
	e.srv = httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}), Gateway: stubGateway{cfg},
		Queue: e.mgr, Token: tok, Logger: log,
	}))
	t.Cleanup(func() { e.srv.Close(); e.mgr.Close(time.Second) })
	return e
}

// enqueue queues an event on "hooks" whose upstream answers status.
func (e *dlqEnv) enqueue(key string, status int) string {
	e.t.Helper()
	ack, err := e.mgr.Enqueue(context.Background(), queue.Entry{Route: "hooks", Key: key, Fingerprint: "fp-" + key,
		Payload: []byte(strconv.Itoa(status)), FirstSeen: time.Now()})
	if err != nil || ack.State != queue.Enqueued {
		e.t.Fatalf("enqueue %s: %+v %v", key, ack, err)
	}
	return ack.ID
}

// waitDLQ waits (bounded) until the DLQ of "hooks" holds n events, and
// returns them.
func (e *dlqEnv) waitDLQ(n int) []queue.DeadEntry {
	e.t.Helper()
	var got []queue.DeadEntry
	eventually.Within(e.t, 5*time.Second, func() bool {
		got, _, _ = e.mgr.ListDLQ(context.Background(), "hooks", "", 1000)
		return len(got) == n
	}, func() string { return fmt.Sprintf("the DLQ holds %d events, want %d", len(got), n) })
	return got
}

// waitKey waits (bounded) until key's state on "hooks" is state.
func (e *dlqEnv) waitKey(key, state string) admin.KeyState {
	e.t.Helper()
	return e.waitKeyTries(key, state, -1)
}

// waitKeyTries waits (bounded) until key's state on "hooks" is state
// with attempts tries (-1: any).
func (e *dlqEnv) waitKeyTries(key, state string, attempts int64) admin.KeyState {
	e.t.Helper()
	var ks admin.KeyState
	eventually.Within(e.t, 5*time.Second, func() bool {
		ks = admin.KeyState{}
		code, body := e.do("GET", "/admin/keys/hooks/"+key, token)
		json.Unmarshal(body, &ks)
		return code == 200 && ks.State == state && (attempts < 0 || ks.Attempts == attempts)
	}, func() string { return fmt.Sprintf("key %s: %+v, want state %s", key, ks, state) })
	return ks
}

func (e *dlqEnv) do(method, path, tok string) (int, []byte) {
	e.t.Helper()
	code, body, _ := doAdmin(e.t, method, e.srv.URL+path, tok)
	return code, body
}

func doAdmin(t *testing.T, method, url, tok string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set(admin.Header, "1")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func errorOf(body []byte) string {
	var e struct{ Error string }
	json.Unmarshal(body, &e)
	return e.Error
}

// ids lists the DLQ of "hooks" through the API, one page of at most 1000.
func (e *dlqEnv) ids() []string {
	e.t.Helper()
	code, body := e.do("GET", "/admin/dlq/hooks", token)
	var p admin.DLQPage
	if err := json.Unmarshal(body, &p); code != 200 || err != nil {
		e.t.Fatalf("list: %d %s", code, body)
	}
	var out []string
	for _, d := range p.Entries {
		out = append(out, d.ID)
	}
	return out
}

func TestDLQListPaginates(t *testing.T) {
	e := newDLQEnv(t, 1000)
	// An empty DLQ lists [], not null.
	if code, body := e.do("GET", "/admin/dlq/hooks", token); code != 200 || !strings.Contains(string(body), `"entries": []`) || !strings.Contains(string(body), `"next": ""`) {
		t.Fatalf("empty DLQ: %d %s", code, body)
	}
	var want []string
	for i := range 3 {
		want = append(want, e.enqueue(fmt.Sprintf("evt_%d", i), 400))
		e.waitDLQ(i + 1) // one at a time, so that the DLQ's order is known
	}
	var got []string
	cursor, pages := "", 0
	for {
		code, body := e.do("GET", "/admin/dlq/hooks?limit=1&cursor="+cursor, token)
		var p admin.DLQPage
		if err := json.Unmarshal(body, &p); code != 200 || err != nil || p.Route != "hooks" || len(p.Entries) > 1 {
			t.Fatalf("page %d: %d %s", pages, code, body)
		}
		pages++
		for _, d := range p.Entries {
			if d.Key == "" || d.Reason != "rejected:400" || d.Status != 400 || d.Attempts != 1 || d.FirstSeen.IsZero() || d.DiedAt.IsZero() {
				t.Fatalf("entry: %+v", d)
			}
			got = append(got, d.ID)
		}
		if p.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		cursor = p.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged ids %v, want %v (oldest first)", got, want)
	}
	// The default limit holds them all; a limit past the most is served
	// as the most.
	if ids := e.ids(); strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("one page: %v", ids)
	}
	if code, body := e.do("GET", "/admin/dlq/hooks?limit=5000", token); code != 200 || strings.Count(string(body), `"id"`) != 3 {
		t.Fatalf("limit=5000: %d %s", code, body)
	}
}

func TestDLQReplayAndPurgeOne(t *testing.T) {
	e := newDLQEnv(t, 1000)
	a, b := e.enqueue("evt_a", 400), e.enqueue("evt_b", 400)
	e.waitDLQ(2)
	if ks := e.waitKey("evt_a", "dead_lettered"); ks.ID != a || ks.Attempts != 1 {
		t.Fatalf("dead key: %+v", ks)
	}

	// The upstream is repaired: the replayed event is delivered.
	e.sender.fixed.Store(true)
	code, body := e.do("POST", "/admin/dlq/hooks/"+a+"/replay", token)
	var res admin.DLQResult
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || res != (admin.DLQResult{Route: "hooks", ID: a, Replayed: true}) {
		t.Fatalf("replay: %d %s", code, body)
	}
	if ks := e.waitKey("evt_a", "finished"); ks.Status != 200 || ks.Attempts != 2 || ks.ID != a {
		t.Fatalf("replayed key: %+v", ks)
	}
	if code, body := e.do("POST", "/admin/dlq/hooks/"+a+"/replay", token); code != 404 || errorOf(body) != fmt.Sprintf("no dead-lettered event %q on route \"hooks\"", a) {
		t.Fatalf("replay twice: %d %s", code, body)
	}
	if code, body := e.do("POST", "/admin/dlq/hooks/0-000000000000000000000000/replay", token); code != 404 || errorOf(body) != `no dead-lettered event "0-000000000000000000000000" on route "hooks"` {
		t.Fatalf("replay unknown id: %d %s", code, body)
	}
	// An id spelled "replay" is just an unknown id.
	if code, body := e.do("POST", "/admin/dlq/hooks/replay/replay", token); code != 404 || errorOf(body) != `no dead-lettered event "replay" on route "hooks"` {
		t.Fatalf("replay id \"replay\": %d %s", code, body)
	}

	code, body = e.do("DELETE", "/admin/dlq/hooks/"+b, token)
	res = admin.DLQResult{}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || res != (admin.DLQResult{Route: "hooks", ID: b, Purged: true}) {
		t.Fatalf("purge: %d %s", code, body)
	}
	if code, body := e.do("DELETE", "/admin/dlq/hooks/"+b, token); code != 404 || errorOf(body) != fmt.Sprintf("no dead-lettered event %q on route \"hooks\"", b) {
		t.Fatalf("purge twice: %d %s", code, body)
	}
	if code, _ := e.do("POST", "/admin/dlq/hooks/"+b+"/replay", token); code != 404 {
		t.Fatalf("replay a purged event: %d", code)
	}
	if ids := e.ids(); len(ids) != 0 {
		t.Fatalf("DLQ after replay and purge: %v", ids)
	}
	// A purged event's key stays dead-lettered, so that the provider's
	// retries are not delivered.
	if ks := e.waitKey("evt_b", "dead_lettered"); ks.ID != b {
		t.Fatalf("purged key: %+v", ks)
	}
}

func TestDLQReplayAll(t *testing.T) {
	e := newDLQEnv(t, 1000)
	for i := range 3 {
		e.enqueue(fmt.Sprintf("evt_%d", i), 400)
	}
	e.waitDLQ(3)
	e.sender.fixed.Store(true)
	code, body := e.do("POST", "/admin/dlq/hooks/replay", token)
	var st queue.ReplayStatus
	if err := json.Unmarshal(body, &st); code != 202 || err != nil || st.Route != "hooks" || st.Total != 3 || st.Rate != 1000 || st.Started.IsZero() {
		t.Fatalf("replay-all: %d %s", code, body)
	}
	eventually.Within(t, 5*time.Second, func() bool {
		code, body = e.do("GET", "/admin/dlq/hooks/replay", token)
		if err := json.Unmarshal(body, &st); code != 200 || err != nil {
			t.Fatalf("status: %d %s", code, body)
		}
		return st.State != "running"
	}, func() string { return fmt.Sprintf("replay-all still running: %+v", st) })
	if st.State != "done" || st.Replayed != 3 || st.Total != 3 {
		t.Fatalf("replay-all ended: %+v", st)
	}
	for i := range 3 {
		e.waitKey(fmt.Sprintf("evt_%d", i), "finished")
	}
	if ids := e.ids(); len(ids) != 0 {
		t.Fatalf("DLQ after the replay: %v", ids)
	}
	// Cancelling a replay that ended reports how it ended.
	if code, body := e.do("DELETE", "/admin/dlq/hooks/replay", token); code != 200 || !strings.Contains(string(body), `"state": "done"`) {
		t.Fatalf("cancel after the end: %d %s", code, body)
	}
}

func TestDLQReplayAllConflictAndCancel(t *testing.T) {
	e := newDLQEnv(t, 0.01) // the first event at once, the next 100s later
	for i := range 3 {
		e.enqueue(fmt.Sprintf("evt_%d", i), 400)
	}
	before := e.waitDLQ(3)
	for _, m := range []string{"GET", "DELETE"} {
		if code, body := e.do(m, "/admin/dlq/hooks/replay", token); code != 404 || errorOf(body) != `no replay of route "hooks"'s DLQ was started on this instance` {
			t.Fatalf("%s before any replay: %d %s", m, code, body)
		}
	}
	e.sender.fixed.Store(true)
	if code, body := e.do("POST", "/admin/dlq/hooks/replay", token); code != 202 || !strings.Contains(string(body), `"state": "running"`) {
		t.Fatalf("replay-all: %d %s", code, body)
	}
	code, body := e.do("POST", "/admin/dlq/hooks/replay", token)
	var conflict struct {
		queue.ReplayStatus
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &conflict); code != 409 || err != nil || conflict.State != "running" || conflict.Total != 3 ||
		conflict.Error != `a replay of route "hooks"'s DLQ is already running; cancel it with DELETE /admin/dlq/hooks/replay` {
		t.Fatalf("second replay-all: %d %s", code, body)
	}
	// The first event is replayed at once; wait for it, then cancel.
	e.waitKey(before[0].Key, "finished")
	code, body = e.do("DELETE", "/admin/dlq/hooks/replay", token)
	var st queue.ReplayStatus
	if err := json.Unmarshal(body, &st); code != 200 || err != nil || st.State != "cancelled" || st.Replayed != 1 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if code, body := e.do("GET", "/admin/dlq/hooks/replay", token); code != 200 || !strings.Contains(string(body), `"state": "cancelled"`) {
		t.Fatalf("status after cancel: %d %s", code, body)
	}
	if ids := e.ids(); strings.Join(ids, ",") != before[1].ID+","+before[2].ID {
		t.Fatalf("DLQ after the cancelled replay: %v", ids)
	}
}

// Bad requests answer 4xx and change nothing.
func TestDLQBadRequestsChangeNothing(t *testing.T) {
	e := newDLQEnv(t, 1000)
	id := e.enqueue("evt_bad", 400)
	e.waitDLQ(1)
	for _, tc := range []struct {
		method, path, tok string
		code              int
		err               string
	}{
		{"GET", "/admin/dlq/hooks?limit=0", token, 400, `limit must be a positive integer (at most 1000), got "0"`},
		{"GET", "/admin/dlq/hooks?limit=-1", token, 400, `limit must be a positive integer (at most 1000), got "-1"`},
		{"GET", "/admin/dlq/hooks?limit=abc", token, 400, `limit must be a positive integer (at most 1000), got "abc"`},
		{"GET", "/admin/dlq/hooks?limit=", token, 400, `limit must be a positive integer (at most 1000), got ""`},
		{"GET", "/admin/dlq/hooks?limit=1.5", token, 400, `limit must be a positive integer (at most 1000), got "1.5"`},
		{"GET", "/admin/dlq/hooks?cursor=not-a-cursor", token, 400, "bad cursor: pass the next of a previous page of this DLQ, or none for the first page"},
		{"GET", "/admin/dlq/hooks", "wrong", 401, "missing or wrong admin token"},
		{"GET", "/admin/dlq/hooks", "", 401, "missing or wrong admin token"},
		{"POST", "/admin/dlq/hooks/" + id + "/replay", "wrong", 401, "missing or wrong admin token"},
		{"DELETE", "/admin/dlq/hooks/" + id, "wrong", 401, "missing or wrong admin token"},
		{"POST", "/admin/dlq/hooks/replay", "wrong", 401, "missing or wrong admin token"},
		{"GET", "/admin/dlq/hooks/replay", "", 401, "missing or wrong admin token"},
		{"DELETE", "/admin/dlq/hooks/replay", "wrong", 401, "missing or wrong admin token"},
		{"GET", "/admin/dlq/orders", token, 404, `route "orders" is not a delivery: queue route`},
		{"POST", "/admin/dlq/orders/" + id + "/replay", token, 404, `route "orders" is not a delivery: queue route`},
		{"DELETE", "/admin/dlq/orders/" + id, token, 404, `route "orders" is not a delivery: queue route`},
		{"POST", "/admin/dlq/orders/replay", token, 404, `route "orders" is not a delivery: queue route`},
		{"GET", "/admin/dlq/orders/replay", token, 404, `route "orders" is not a delivery: queue route`},
		{"DELETE", "/admin/dlq/orders/replay", token, 404, `route "orders" is not a delivery: queue route`},
		{"GET", "/admin/dlq/nope", token, 404, `unknown route "nope"`},
		{"POST", "/admin/dlq/nope/" + id + "/replay", token, 404, `unknown route "nope"`},
		{"DELETE", "/admin/dlq/nope/" + id, token, 404, `unknown route "nope"`},
		{"POST", "/admin/dlq/nope/replay", token, 404, `unknown route "nope"`},
		{"GET", "/admin/keys/nope/k", token, 404, `unknown route "nope"`},
		{"DELETE", "/admin/keys/nope/k", token, 404, `unknown route "nope"`},
		{"PUT", "/admin/dlq/hooks/replay", token, 404, "not found"},
	} {
		code, body := e.do(tc.method, tc.path, tc.tok)
		if code != tc.code || errorOf(body) != tc.err {
			t.Errorf("%s %s token %q: %d %s, want %d %q", tc.method, tc.path, tc.tok, code, body, tc.code, tc.err)
		}
		if strings.Contains(string(body), token) {
			t.Errorf("%s %s: the answer shows the token: %s", tc.method, tc.path, body)
		}
	}
	if ids := e.ids(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("DLQ after the bad requests: %v, want [%s]", ids, id)
	}
	if code, _ := e.do("GET", "/admin/dlq/hooks/replay", token); code != 404 {
		t.Fatalf("a replay was started: %d", code)
	}
	if ks := e.waitKey("evt_bad", "dead_lettered"); ks.ID != id {
		t.Fatalf("key after the bad requests: %+v", ks)
	}
}

// Without a queue (no queue routes), every DLQ endpoint answers 404.
func TestDLQWithoutQueue(t *testing.T) {
	srv := adminServer(t, token, ledger.NewMemoryStore(store.MemoryOptions{}))
	for _, p := range []string{"GET /admin/dlq/orders", "POST /admin/dlq/orders/replay", "GET /admin/dlq/orders/replay",
		"DELETE /admin/dlq/orders/replay", "GET /admin/dlq/orders/0-000000000000000000000000", "POST /admin/dlq/orders/0-000000000000000000000000/replay", "DELETE /admin/dlq/orders/0-000000000000000000000000"} {
		method, path, _ := strings.Cut(p, " ")
		code, body, _ := doAdmin(t, method, srv.URL+path, token)
		if code != 404 || errorOf(body) != `route "orders" is not a delivery: queue route` {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	// The key API still reads the store.
	if code, body, _ := doAdmin(t, "GET", srv.URL+"/admin/keys/orders/k", token); code != 200 || !strings.Contains(string(body), `"state": "absent"`) || strings.Contains(string(body), `"id"`) {
		t.Fatalf("keys get: %d %s", code, body)
	}
}

func TestQueueKeyStates(t *testing.T) {
	e := newDLQEnv(t, 1000)
	queued, dead, done := e.enqueue("evt_retry", 500), e.enqueue("evt_dead", 400), e.enqueue("evt_done", 200)
	e.waitDLQ(1)
	// Its first try failed with 500: it waits an hour to retry.
	if ks := e.waitKeyTries("evt_retry", "queued", 1); ks.ID != queued || ks.Fingerprint != "fp-evt_retry" || ks.FirstSeen == nil || ks.LastSeen == nil {
		t.Fatalf("queued: %+v", ks)
	}
	if ks := e.waitKey("evt_dead", "dead_lettered"); ks.ID != dead || ks.Attempts != 1 || ks.Status != 0 {
		t.Fatalf("dead_lettered: %+v", ks)
	}
	if ks := e.waitKey("evt_done", "finished"); ks.ID != done || ks.Attempts != 1 || ks.Status != 200 || ks.Fingerprint != "fp-evt_done" {
		t.Fatalf("finished: %+v", ks)
	}
	if code, body := e.do("GET", "/admin/keys/hooks/never", token); code != 200 || !strings.Contains(string(body), `"state": "absent"`) || strings.Contains(string(body), `"id"`) {
		t.Fatalf("absent: %d %s", code, body)
	}

	// Reset cancels the queued delivery and forgets the key.
	code, body := e.do("DELETE", "/admin/keys/hooks/evt_retry", token)
	var res admin.ResetResult
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || !res.Reset || res.Forgot.State != "queued" || res.Forgot.ID != queued || res.Forgot.Attempts != 1 {
		t.Fatalf("reset queued: %d %s", code, body)
	}
	e.waitKey("evt_retry", "absent")
	// A dead-lettered key's reset drops its DLQ entry too.
	code, body = e.do("DELETE", "/admin/keys/hooks/evt_dead", token)
	res = admin.ResetResult{}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || res.Forgot.State != "dead_lettered" || res.Forgot.ID != dead {
		t.Fatalf("reset dead_lettered: %d %s", code, body)
	}
	if ids := e.ids(); len(ids) != 0 {
		t.Fatalf("DLQ after resetting its key: %v", ids)
	}
	// The key is new again: a delivery is queued, not answered as a copy.
	if id := e.enqueue("evt_retry", 200); id == queued {
		t.Fatal("the reset key's event id came back")
	}
	e.waitKey("evt_retry", "finished")
}

// downQueue is a queue whose backend never answers.
type downQueue struct{}

var errDown = fmt.Errorf("%w: dial tcp 10.0.0.5:6379: connection refused", queue.ErrUnavailable)

func (downQueue) IsRoute(string) bool { return true }
func (downQueue) ListDLQ(context.Context, string, string, int) ([]queue.DeadEntry, string, error) {
	return nil, "", errDown
}
func (downQueue) Dead(context.Context, string, string) (queue.DeadEntry, []byte, error) {
	return queue.DeadEntry{}, nil, errDown
}
func (downQueue) Replay(context.Context, string, string) error       { return errDown }
func (downQueue) Stats(context.Context, string) (queue.Stats, error) { return queue.Stats{}, errDown }
func (downQueue) Purge(context.Context, string, string) error        { return errDown }
func (downQueue) Get(context.Context, string, string) (queue.KeyState, error) {
	return queue.KeyState{}, errDown
}
func (downQueue) Delete(context.Context, string, string) (queue.KeyState, error) {
	return queue.KeyState{}, errDown
}
func (downQueue) ReplayAll(string) (queue.ReplayStatus, error)   { return queue.ReplayStatus{}, errDown }
func (downQueue) Replaying(string) (queue.ReplayStatus, bool)    { return queue.ReplayStatus{}, false }
func (downQueue) CancelReplay(string) (queue.ReplayStatus, bool) { return queue.ReplayStatus{}, false }

func TestDLQUnavailableAnswers503RetryAfter(t *testing.T) {
	cfg := &config.Config{Routes: []config.Route{{Name: "hooks", Delivery: config.DeliveryQueue}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}), Gateway: stubGateway{cfg},
		Queue: downQueue{}, Token: token, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}))
	defer srv.Close()
	for _, p := range []string{"GET /admin/dlq/hooks", "GET /admin/dlq/hooks/0-000000000000000000000000", "POST /admin/dlq/hooks/replay", "POST /admin/dlq/hooks/0-000000000000000000000000/replay",
		"DELETE /admin/dlq/hooks/0-000000000000000000000000", "GET /admin/keys/hooks/k", "DELETE /admin/keys/hooks/k"} {
		method, path, _ := strings.Cut(p, " ")
		code, body, h := doAdmin(t, method, srv.URL+path, token)
		if code != 503 || h.Get("Retry-After") != "1" || errorOf(body) != errDown.Error() {
			t.Errorf("%s: %d Retry-After %q %s", p, code, h.Get("Retry-After"), body)
		}
	}
}
