package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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

const dlqToken = "dlq-cli-test-token"

// dlqSender answers each try with the status in the event's payload, or
// 200 once fixed is set.
type dlqSender struct{ fixed atomic.Bool }

func (s *dlqSender) Send(_ context.Context, _ string, payload []byte, _ int64) queue.Result {
	code, _ := strconv.Atoi(string(payload))
	if s.fixed.Load() {
		code = 200
	}
	res := queue.Result{Status: code}
	if code == 200 {
		res.Outcome = store.Outcome{Status: 200}
	}
	return res
}

type dlqNopMetrics struct{}

func (dlqNopMetrics) QueueAttempt(string, string)                 {}
func (dlqNopMetrics) QueueDelay(string, float64)                  {}
func (dlqNopMetrics) QueueReclaimed(string, int)                  {}
func (dlqNopMetrics) DLQReplayed(string, int)                     {}
func (dlqNopMetrics) DLQPurged(string, int)                       {}
func (dlqNopMetrics) SetQueueStats(string, int64, int64, float64) {}
func (dlqNopMetrics) ForgetQueueRoute(string)                     {}

// dlqEnv is a real admin handler on loopback over a queue.Manager on the
// memory backend: "hooks" is a queue route, "orders" a sync one.
type dlqEnv struct {
	t      *testing.T
	url    string
	mgr    *queue.Manager
	sender *dlqSender
}

func newDLQEnv(t *testing.T, rate float64) *dlqEnv {
	t.Helper()
	t.Setenv("CLAWGATE_ADMIN_TOKEN", dlqToken)
	e := &dlqEnv{t: t, sender: &dlqSender{}}
	e.mgr = queue.New(queue.Options{Backend: queue.NewMemory(), Sender: e.sender, Metrics: dlqNopMetrics{}, Log: discardLogger(),
		ReplayRate: rate, PromoteEvery: 10 * time.Millisecond, Block: 50 * time.Millisecond})
	if err := e.mgr.Apply(context.Background(), []queue.Route{{Name: "hooks", Workers: 2,
		Retry:    queue.Retry{MaxAttempts: 2, Initial: time.Hour, Max: time.Hour}, // a 5xx waits to retry
		MaxDepth: 100, Retention: time.Hour, LockTTL: 30 * time.Second, Shards: 1}}); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}, {Name: "hooks", Delivery: config.DeliveryQueue}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}), Gateway: stubGateway{cfg},
		Queue: e.mgr, Token: dlqToken, Logger: discardLogger(),
	}))
	t.Cleanup(func() { srv.Close(); e.mgr.Close(time.Second) })
	e.url = srv.URL
	return e
}

// enqueue queues an event on "hooks" that the upstream answers status.
func (e *dlqEnv) enqueue(key string, status int) string {
	e.t.Helper()
	ack, err := e.mgr.Enqueue(context.Background(), queue.Entry{Route: "hooks", Key: key, Fingerprint: "fp",
		Payload: []byte(strconv.Itoa(status)), FirstSeen: time.Now()})
	if err != nil || ack.State != queue.Enqueued {
		e.t.Fatalf("enqueue %s: %+v %v", key, ack, err)
	}
	return ack.ID
}

// deadLetter queues events on "hooks" that the upstream rejects, one at
// a time so that the DLQ's order is theirs, and returns their ids.
func (e *dlqEnv) deadLetter(keys ...string) []string {
	e.t.Helper()
	var ids []string
	for _, k := range keys {
		ids = append(ids, e.enqueue(k, 400))
		e.waitDLQ(len(ids))
	}
	return ids
}

// waitDLQ waits (bounded) until the DLQ holds n events and returns their
// ids.
func (e *dlqEnv) waitDLQ(n int) []string {
	e.t.Helper()
	var ids []string
	eventually.Within(e.t, 5*time.Second, func() bool {
		got, _, _ := e.mgr.ListDLQ(context.Background(), "hooks", "", 1000)
		ids = ids[:0]
		for _, d := range got {
			ids = append(ids, d.ID)
		}
		return len(ids) == n
	}, func() string { return fmt.Sprintf("the DLQ holds %v, want %d events", ids, n) })
	return ids
}

// waitState waits (bounded) until key's state on "hooks" is state.
func (e *dlqEnv) waitState(key, state string) {
	e.t.Helper()
	var ks queue.KeyState
	eventually.Within(e.t, 5*time.Second, func() bool {
		ks, _ = e.mgr.Get(context.Background(), "hooks", key)
		return ks.State == state
	}, func() string { return fmt.Sprintf("key %s: %+v, want %s", key, ks, state) })
}

var tableHeader = regexp.MustCompile(`^ID +KEY +REASON +STATUS +ATTEMPTS +FIRST SEEN +DIED AT$`)

// tableIDs checks a listing's table and returns its ids, in order, and
// the lines after the table.
func tableIDs(t *testing.T, out string) (ids []string, tail []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !tableHeader.MatchString(lines[0]) {
		t.Fatalf("no table header:\n%s", out)
	}
	row := regexp.MustCompile(`^(0-[0-9a-f]{24}) +(evt_\w+) +rejected:400 +400 +1 +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) +(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$`)
	for i, l := range lines[1:] {
		m := row.FindStringSubmatch(l)
		if m == nil {
			return ids, lines[1+i:]
		}
		ids = append(ids, m[1])
	}
	return ids, nil
}

func TestDLQListTableAndJSON(t *testing.T) {
	e := newDLQEnv(t, 1000)
	if code, out, errOut := runCmd(t, "dlq", "list", "-admin", e.url, "hooks"); code != 0 || out != "no dead-lettered events on route \"hooks\"\n" || errOut != "" {
		t.Fatalf("empty: exit %d %q %q", code, out, errOut)
	}
	want := e.deadLetter("evt_a", "evt_b", "evt_c")

	code, out, errOut := runCmd(t, "dlq", "list", "-admin", e.url, "hooks")
	if ids, tail := tableIDs(t, out); code != 0 || errOut != "" || strings.Join(ids, ",") != strings.Join(want, ",") || tail != nil {
		t.Fatalf("list: exit %d %q %q", code, out, errOut)
	}

	// One page of two, with the hint naming the next cursor; that cursor
	// lists the third.
	code, out, _ = runCmd(t, "dlq", "list", "-admin", e.url, "-limit", "2", "hooks")
	ids, tail := tableIDs(t, out)
	hint := regexp.MustCompile(`^more events: clawgate dlq list -admin ` + regexp.QuoteMeta(e.url) + ` -limit 2 -cursor (\S+) hooks \(or -all for every page\)$`)
	if code != 0 || strings.Join(ids, ",") != strings.Join(want[:2], ",") || len(tail) != 1 || !hint.MatchString(tail[0]) {
		t.Fatalf("one page: exit %d %q", code, out)
	}
	cursor := hint.FindStringSubmatch(tail[0])[1]
	code, out, _ = runCmd(t, "dlq", "list", "-admin", e.url, "-limit", "2", "-cursor", cursor, "hooks")
	if ids, tail := tableIDs(t, out); code != 0 || strings.Join(ids, ",") != want[2] || tail != nil {
		t.Fatalf("next page: exit %d %q", code, out)
	}

	// -all follows the cursors.
	code, out, _ = runCmd(t, "dlq", "list", "-all", "-limit", "1", "-admin", e.url, "hooks")
	if ids, tail := tableIDs(t, out); code != 0 || strings.Join(ids, ",") != strings.Join(want, ",") || tail != nil {
		t.Fatalf("-all: exit %d %q", code, out)
	}
	code, out, _ = runCmd(t, "dlq", "list", "-all", "-json", "-limit", "1", "-admin", e.url, "hooks")
	var page admin.DLQPage
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || page.Route != "hooks" || page.Next != "" || len(page.Entries) != 3 {
		t.Fatalf("-all -json: exit %d %q", code, out)
	}
	for i, d := range page.Entries {
		if d.ID != want[i] || d.Reason != "rejected:400" || d.Status != 400 || d.Attempts != 1 || d.DiedAt.IsZero() {
			t.Fatalf("-json entry %d: %+v", i, d)
		}
	}
	// -json without -all is the API's page, next cursor included.
	code, out, _ = runCmd(t, "dlq", "list", "-json", "-limit", "2", "-admin", e.url, "hooks")
	page = admin.DLQPage{}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Entries) != 2 || page.Next != cursor {
		t.Fatalf("-json: exit %d %q", code, out)
	}
}

func TestDLQReplayAndPurgeOne(t *testing.T) {
	e := newDLQEnv(t, 1000)
	ids := e.deadLetter("evt_a", "evt_b")
	e.sender.fixed.Store(true)

	code, out, errOut := runCmd(t, "dlq", "replay", "-admin", e.url, "hooks", ids[0])
	if want := "replayed hooks " + ids[0] + ": the event is queued again, with a new round of tries\n"; code != 0 || out != want || errOut != "" {
		t.Fatalf("replay: exit %d %q %q, want %q", code, out, errOut, want)
	}
	e.waitState("evt_a", queue.StateFinished)
	code, out, errOut = runCmd(t, "dlq", "replay", "-admin", e.url, "hooks", ids[0])
	if want := fmt.Sprintf("clawgate dlq replay: no dead-lettered event %q on route \"hooks\"\n", ids[0]); code != 1 || out != "" || errOut != want {
		t.Fatalf("replay twice: exit %d %q %q, want %q", code, out, errOut, want)
	}

	code, out, errOut = runCmd(t, "dlq", "purge", "-admin", e.url, "hooks", ids[1])
	if want := "purged hooks " + ids[1] + ": the event is dropped; its key stays dead-lettered for the route's retention, so the provider's retries are not delivered\n"; code != 0 || out != want || errOut != "" {
		t.Fatalf("purge: exit %d %q %q, want %q", code, out, errOut, want)
	}
	code, out, errOut = runCmd(t, "dlq", "purge", "-admin", e.url, "hooks", ids[1])
	if want := fmt.Sprintf("clawgate dlq purge: no dead-lettered event %q on route \"hooks\"\n", ids[1]); code != 1 || out != "" || errOut != want {
		t.Fatalf("purge twice: exit %d %q %q, want %q", code, out, errOut, want)
	}
	e.waitDLQ(0)
}

func TestDLQReplayAllFollowsUntilDone(t *testing.T) {
	e := newDLQEnv(t, 1000)
	old := dlqPollEvery
	dlqPollEvery = 10 * time.Millisecond
	t.Cleanup(func() { dlqPollEvery = old })
	e.deadLetter("evt_a", "evt_b", "evt_c")
	e.sender.fixed.Store(true)

	code, out, errOut := runCmd(t, "dlq", "replay", "-admin", e.url, "-all", "hooks")
	if code != 0 || errOut != "" ||
		!strings.HasPrefix(out, "replaying the DLQ of hooks: 3 events at 1000 per second\n") ||
		!strings.HasSuffix(out, "\nreplay of the DLQ of hooks done: replayed 3 of 3 events\n") {
		t.Fatalf("replay -all: exit %d %q %q", code, out, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if !regexp.MustCompile(`^replayed [0-3]/3$|^replay of the DLQ`).MatchString(l) {
			t.Fatalf("progress line %q in:\n%s", l, out)
		}
	}
	e.waitDLQ(0)
	for _, k := range []string{"evt_a", "evt_b", "evt_c"} {
		e.waitState(k, queue.StateFinished)
	}

	// -detach starts the replay and returns.
	e.sender.fixed.Store(false)
	e.deadLetter("evt_d")
	e.sender.fixed.Store(true)
	code, out, errOut = runCmd(t, "dlq", "replay", "-all", "-detach", "-admin", e.url, "hooks")
	if want := "replaying the DLQ of hooks: 1 event at 1000 per second\ndetached: follow it with GET /admin/dlq/hooks/replay on this instance\n"; code != 0 || out != want || errOut != "" {
		t.Fatalf("-detach: exit %d %q %q, want %q", code, out, errOut, want)
	}
	e.waitState("evt_d", queue.StateFinished)
}

// SIGINT while following a replay cancels it on the gateway.
func TestDLQReplayAllCancelledBySignal(t *testing.T) {
	e := newDLQEnv(t, 0.01) // the first event at once, the next 100s later
	old := dlqPollEvery
	dlqPollEvery = 10 * time.Millisecond
	t.Cleanup(func() { dlqPollEvery = old })
	e.deadLetter("evt_a", "evt_b", "evt_c")
	e.sender.fixed.Store(true)

	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	var stdout lockedBuffer // read while the command runs
	go func() {
		var stderr bytes.Buffer
		code := run([]string{"dlq", "replay", "-admin", e.url, "-all", "hooks"}, &stdout, &stderr)
		done <- result{code, stdout.String(), stderr.String()}
	}()
	// The command catches SIGINT from before it starts the replay; send it
	// once the first event is replayed (the next one waits 100s) and the
	// command follows the replay (it read the POST's answer).
	eventually.True(t, "the replay's first event, followed by the command", func() bool {
		st, ok := e.mgr.Replaying("hooks")
		return ok && st.Replayed == 1 && strings.Contains(stdout.String(), "replaying the DLQ of hooks")
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not return after SIGINT")
	}
	if r.code != 1 || r.errOut != "" || !strings.HasSuffix(r.out, "\nreplay of the DLQ of hooks cancelled: replayed 1 of 3 events; the others stay in the DLQ\n") {
		t.Fatalf("after SIGINT: exit %d %q %q", r.code, r.out, r.errOut)
	}
	if st, _ := e.mgr.Replaying("hooks"); st.State != "cancelled" {
		t.Fatalf("the gateway's replay: %+v", st)
	}
	e.waitDLQ(2)

	// While a replay runs, another is refused with its progress.
	e.sender.fixed.Store(false)
	e.waitDLQ(2)
	code, out, errOut := runCmd(t, "dlq", "replay", "-all", "-detach", "-admin", e.url, "hooks")
	if code != 0 || !strings.HasPrefix(out, "replaying the DLQ of hooks: 2 events") {
		t.Fatalf("second replay: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "dlq", "replay", "-all", "-admin", e.url, "hooks")
	if code != 1 || errOut != "clawgate dlq replay: a replay of route \"hooks\"'s DLQ is already running; cancel it with DELETE /admin/dlq/hooks/replay\n" ||
		!regexp.MustCompile(`^replay of the DLQ of hooks running: replayed [01] of 2 events so far\n$`).MatchString(out) {
		t.Fatalf("replay while one runs: exit %d %q %q", code, out, errOut)
	}
	e.mgr.CancelReplay("hooks")
}

// Bad inputs print the admin API's error (never the token), exit
// non-zero and change nothing; usage errors exit 2 with the usage.
func TestDLQBadInputs(t *testing.T) {
	e := newDLQEnv(t, 1000)
	ids := e.deadLetter("evt_a")
	const unknownID = "0-000000000000000000000000"
	for _, tc := range []struct {
		args   []string
		code   int
		errOut string
	}{
		{[]string{"list", "nope"}, 1, `clawgate dlq list: unknown route "nope"`},
		{[]string{"replay", "nope", ids[0]}, 1, `clawgate dlq replay: unknown route "nope"`},
		{[]string{"replay", "-all", "nope"}, 1, `clawgate dlq replay: unknown route "nope"`},
		{[]string{"purge", "nope", ids[0]}, 1, `clawgate dlq purge: unknown route "nope"`},
		{[]string{"list", "orders"}, 1, `clawgate dlq list: route "orders" is not a delivery: queue route`},
		{[]string{"replay", "orders", ids[0]}, 1, `clawgate dlq replay: route "orders" is not a delivery: queue route`},
		{[]string{"replay", "-all", "orders"}, 1, `clawgate dlq replay: route "orders" is not a delivery: queue route`},
		{[]string{"purge", "orders", ids[0]}, 1, `clawgate dlq purge: route "orders" is not a delivery: queue route`},
		{[]string{"replay", "hooks", unknownID}, 1, `clawgate dlq replay: no dead-lettered event "` + unknownID + `" on route "hooks"`},
		{[]string{"purge", "hooks", unknownID}, 1, `clawgate dlq purge: no dead-lettered event "` + unknownID + `" on route "hooks"`},
		{[]string{"list", "-cursor", "bogus", "hooks"}, 1, `clawgate dlq list: bad cursor: pass the next of a previous page of this DLQ, or none for the first page`},
	} {
		args := append([]string{"dlq"}, tc.args...)
		args = append(args[:2:2], append([]string{"-admin", e.url}, args[2:]...)...)
		code, out, errOut := runCmd(t, args...)
		if code != tc.code || out != "" || errOut != tc.errOut+"\n" {
			t.Errorf("%q: exit %d %q %q, want %d %q", tc.args, code, out, errOut, tc.code, tc.errOut)
		}
	}

	// A wrong token: the server's message, and never the token.
	const wrong = "not-the-token-5f3a"
	t.Setenv("CLAWGATE_ADMIN_TOKEN", wrong)
	for _, args := range [][]string{{"list", "hooks"}, {"replay", "hooks", ids[0]}, {"replay", "-all", "hooks"}, {"purge", "hooks", ids[0]}} {
		code, out, errOut := runCmd(t, append([]string{"dlq", args[0], "-admin", e.url}, args[1:]...)...)
		want := "clawgate dlq " + args[0] + ": missing or wrong admin token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token\n"
		if code != 1 || out != "" || errOut != want || strings.Contains(out+errOut, wrong) {
			t.Errorf("%q with a wrong token: exit %d %q %q", args, code, out, errOut)
		}
	}
	t.Setenv("CLAWGATE_ADMIN_TOKEN", dlqToken)

	// No admin API there, or not one with the DLQ.
	if code, _, errOut := runCmd(t, "dlq", "list", "-admin", "http://127.0.0.1:1", "hooks"); code != 1 || !strings.HasPrefix(errOut, "clawgate dlq list: cannot reach the admin API at http://127.0.0.1:1: ") {
		t.Errorf("unreachable: exit %d %q", code, errOut)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if code, _, errOut := runCmd(t, "dlq", "purge", "-admin", other.URL, "hooks", ids[0]); code != 1 || errOut != "clawgate dlq purge: Not Found: no DLQ API at "+other.URL+" (not a clawgate admin listener, or an older gateway)\n" {
		t.Errorf("not an admin API: exit %d %q", code, errOut)
	}

	// Usage errors: exit 2, the message, then the usage.
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{}, ""},
		{[]string{"frob", "hooks"}, `clawgate dlq: unknown verb "frob": want list, replay or purge`},
		{[]string{"list"}, "clawgate dlq list: missing the ROUTE argument (want ROUTE)"},
		{[]string{"list", "hooks", "extra"}, "clawgate dlq list: unexpected argument \"extra\" (want ROUTE)"},
		{[]string{"list", "-limit", "0", "hooks"}, "clawgate dlq list: -limit must be a positive integer, got 0"},
		{[]string{"replay", "hooks"}, "clawgate dlq replay: missing the ID argument (want ROUTE ID, or ROUTE -all)"},
		{[]string{"replay"}, "clawgate dlq replay: missing the ROUTE and ID arguments (want ROUTE ID, or ROUTE -all)"},
		{[]string{"replay", "-all", "hooks", ids[0]}, "clawgate dlq replay: give an event ID or -all, not both"},
		{[]string{"replay", "-all"}, "clawgate dlq replay: missing the ROUTE argument (want ROUTE)"},
		{[]string{"replay", "-detach", "hooks", ids[0]}, "clawgate dlq replay: -detach goes with -all"},
		{[]string{"purge", "hooks"}, "clawgate dlq purge: missing the ID argument (want ROUTE ID)"},
		{[]string{"purge", "-all", "hooks", ids[0]}, "flag provided but not defined: -all"},
		{[]string{"list", "-admin", "ftp://x", "hooks"}, `clawgate dlq: -admin "ftp://x" is not an http(s) URL`},
	} {
		code, out, errOut := runCmd(t, append([]string{"dlq"}, tc.args...)...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, tc.msg) {
			t.Errorf("%q: exit %d %q %q, want 2 and %q", tc.args, code, out, errOut, tc.msg)
		}
		if !strings.Contains(tc.msg, "-admin") && !strings.Contains(errOut, "usage: clawgate dlq list|replay|purge [flags] ROUTE [ID]\n") {
			t.Errorf("%q: no usage in %q", tc.args, errOut)
		}
	}

	// Nothing changed.
	if got := e.waitDLQ(1); got[0] != ids[0] {
		t.Fatalf("DLQ after the bad inputs: %v", got)
	}
	if _, ok := e.mgr.Replaying("hooks"); ok {
		t.Fatal("a bad input started a replay")
	}
}

// keys get and reset on a queue route read and reset the queue's key.
func TestKeysOnAQueueRoute(t *testing.T) {
	e := newDLQEnv(t, 1000)
	dead := e.deadLetter("evt_dead")[0]
	queued := e.enqueue("evt_retry", 500)
	eventually.True(t, "the first try of evt_retry", func() bool {
		ks, _ := e.mgr.Get(context.Background(), "hooks", "evt_retry")
		return ks.Attempts == 1
	})
	code, out, errOut := runCmd(t, "keys", "get", "-admin", e.url, "hooks", "evt_dead")
	var ks admin.KeyState
	if err := json.Unmarshal([]byte(out), &ks); code != 0 || err != nil || ks.State != "dead_lettered" || ks.ID != dead || ks.Attempts != 1 {
		t.Fatalf("keys get: exit %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "keys", "reset", "-admin", e.url, "hooks", "evt_retry")
	if want := "reset hooks evt_retry: forgot queued (event " + queued + ", 1 attempt); its delivery is cancelled, and the next delivery is queued as a new event\n"; code != 0 || out != want {
		t.Fatalf("reset queued: exit %d %q %q, want %q", code, out, errOut, want)
	}
	code, out, errOut = runCmd(t, "keys", "reset", "-admin", e.url, "hooks", "evt_dead")
	if want := "reset hooks evt_dead: forgot dead_lettered (event " + dead + ", 1 attempt); it is dropped from the DLQ, and the next delivery is queued as a new event\n"; code != 0 || out != want {
		t.Fatalf("reset dead_lettered: exit %d %q %q, want %q", code, out, errOut, want)
	}
	e.waitDLQ(0)
	if code, out, _ := runCmd(t, "dlq", "list", "-admin", e.url, "hooks"); code != 0 || out != "no dead-lettered events on route \"hooks\"\n" {
		t.Fatalf("DLQ after the reset: exit %d %q", code, out)
	}
}

func TestDLQHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"dlq", "-h"}, {"dlq", "--help"}, {"help", "dlq"}, {"dlq", "list", "-h"}, {"dlq", "replay", "hooks", "-all", "-h"}, {"dlq", "purge", "-help"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
		if !strings.HasPrefix(out, "usage: clawgate dlq list|replay|purge [flags] ROUTE [ID]\n") || !strings.Contains(out, "-admin URL") {
			t.Errorf("%q: usage %q", args, out)
		}
	}
	_, out, _ := runCmd(t, "dlq", "list", "-h")
	for _, f := range []string{"-limit N", "-cursor C", "-all", "-json"} {
		if !strings.Contains(out, "\n  "+f) {
			t.Errorf("dlq list -h lacks %s:\n%s", f, out)
		}
	}
	_, out, _ = runCmd(t, "dlq", "replay", "-h")
	if !strings.Contains(out, "\n  -all") || !strings.Contains(out, "\n  -detach") || strings.Contains(out, "-limit") {
		t.Errorf("dlq replay -h:\n%s", out)
	}
}
