package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gateway's proxy.Alerter, restated so this package's tests do not
// depend on the proxy package.
var _ interface {
	Alert(route, key string, attempts int64)
} = (*Sender)(nil)

// receiver is a loopback alert endpoint that records every POST.
type receiver struct {
	srv    *httptest.Server
	status func(hit int) int // answer for the hit-th request (1-based)

	mu     sync.Mutex
	bodies [][]byte
	ctypes []string
}

func newReceiver(t *testing.T, status func(hit int) int) *receiver {
	t.Helper()
	r := &receiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.ctypes = append(r.ctypes, req.Header.Get("Content-Type"))
		n := len(r.bodies)
		r.mu.Unlock()
		w.WriteHeader(r.status(n))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) posts() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies)
}

func always(code int) func(int) int { return func(int) int { return code } }

// newSent returns a webhook_alerts_total vec on a fresh registry, as
// metrics.New builds it.
func newSent(t *testing.T) (*prometheus.CounterVec, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_alerts_total",
		Help: "Retry alerts posted to alerts.webhook_url_env, by result (sent, failed, dropped).",
	}, []string{"result"})
	reg.MustRegister(v)
	return v, reg
}

func results(v *prometheus.CounterVec) (sent, failed, dropped float64) {
	return testutil.ToFloat64(v.WithLabelValues(ResultSent)),
		testutil.ToFloat64(v.WithLabelValues(ResultFailed)),
		testutil.ToFloat64(v.WithLabelValues(ResultDropped))
}

func wantResults(t *testing.T, v *prometheus.CounterVec, sent, failed, dropped float64) {
	t.Helper()
	s, f, d := results(v)
	if s != sent || f != failed || d != dropped {
		t.Errorf("webhook_alerts_total: sent=%v failed=%v dropped=%v, want sent=%v failed=%v dropped=%v",
			s, f, d, sent, failed, dropped)
	}
}

// syncBuffer is a log sink written by the worker and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// closeAll closes s and expects the queue to drain completely.
func closeAll(t *testing.T, s *Sender) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestOneAlertPerKey(t *testing.T) {
	rcv := newReceiver(t, always(http.StatusAccepted))
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{
		URL:         rcv.srv.URL + "/v2/enqueue",
		RoutingKey:  "R0123456789abcdef0123456789abcde",
		MaxAttempts: 3,
		Sent:        sent,
		Logger:      log,
		Hostname:    "gw-1",
	})
	before := time.Now().UTC()
	// Deliveries 4..8 of one key: the first is past max_attempts 3.
	for n := int64(4); n <= 8; n++ {
		s.Alert("orders", "evt_1", n)
	}
	closeAll(t, s)

	posts := rcv.posts()
	if len(posts) != 1 {
		t.Fatalf("receiver got %d POSTs, want 1", len(posts))
	}
	rcv.mu.Lock()
	ct := rcv.ctypes[0]
	rcv.mu.Unlock()
	if ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var got struct {
		RoutingKey  string `json:"routing_key"`
		EventAction string `json:"event_action"`
		DedupKey    string `json:"dedup_key"`
		Payload     struct {
			Summary       string         `json:"summary"`
			Source        string         `json:"source"`
			Severity      string         `json:"severity"`
			Timestamp     string         `json:"timestamp"`
			Component     string         `json:"component"`
			Group         string         `json:"group"`
			Class         string         `json:"class"`
			CustomDetails map[string]any `json:"custom_details"`
		} `json:"payload"`
	}
	dec := json.NewDecoder(bytes.NewReader(posts[0]))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("body %s: %v", posts[0], err)
	}
	check := func(field, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}
	check("routing_key", got.RoutingKey, "R0123456789abcdef0123456789abcde")
	check("event_action", got.EventAction, "trigger")
	check("dedup_key", got.DedupKey, "clawgate:orders:evt_1")
	p := got.Payload
	check("payload.summary", p.Summary, "clawgate: key evt_1 on route orders delivered 4 times (max_attempts 3)")
	check("payload.source", p.Source, "gw-1")
	check("payload.severity", p.Severity, "warning")
	check("payload.component", p.Component, "clawgate")
	check("payload.group", p.Group, "orders")
	check("payload.class", p.Class, "webhook_retry_storm")
	ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
	if err != nil || ts.Before(before.Add(-time.Second)) {
		t.Errorf("payload.timestamp = %q (%v), want the time of the Alert call", p.Timestamp, err)
	}
	wantDetails := map[string]any{
		"route": "orders", "key": "evt_1",
		"attempts": json.Number("4"), "max_attempts": json.Number("3"),
	}
	if len(p.CustomDetails) != len(wantDetails) {
		t.Errorf("custom_details = %v, want %v", p.CustomDetails, wantDetails)
	}
	for k, v := range wantDetails {
		if p.CustomDetails[k] != v {
			t.Errorf("custom_details.%s = %#v, want %#v", k, p.CustomDetails[k], v)
		}
	}
	wantResults(t, sent, 1, 0, 0)
}

func TestRoutingKeyOmittedAndDefaultMax(t *testing.T) {
	rcv := newReceiver(t, always(http.StatusOK))
	log, _ := newLogger()
	s := New(Options{URL: rcv.srv.URL, Logger: log}) // no routing key, no MaxAttempts, no metrics
	s.Alert("orders", "k", 6)
	closeAll(t, s)
	posts := rcv.posts()
	if len(posts) != 1 {
		t.Fatalf("receiver got %d POSTs, want 1", len(posts))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(posts[0], &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["routing_key"]; ok {
		t.Errorf("routing_key present without a RoutingKey: %s", posts[0])
	}
	if !strings.Contains(string(raw["payload"]), `delivered 6 times (max_attempts 5)`) ||
		!strings.Contains(string(raw["payload"]), `"max_attempts":5`) {
		t.Errorf("without MaxAttempts the threshold should be attempts-1: %s", raw["payload"])
	}
}

func TestOnePostPerKeyAcrossRoutes(t *testing.T) {
	rcv := newReceiver(t, always(http.StatusAccepted))
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{URL: rcv.srv.URL, MaxAttempts: 3, Sent: sent, Logger: log})
	pairs := [][2]string{{"orders", "a"}, {"orders", "b"}, {"orders", "c"}, {"payments", "a"}}
	// Many deliveries of each key, concurrently, as several requests might.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for _, p := range pairs {
				s.Alert(p[0], p[1], int64(4+g))
			}
		})
	}
	wg.Wait()
	closeAll(t, s)

	var keys []string
	for _, b := range rcv.posts() {
		var e struct {
			DedupKey string `json:"dedup_key"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.DedupKey)
	}
	slices.Sort(keys)
	want := []string{"clawgate:orders:a", "clawgate:orders:b", "clawgate:orders:c", "clawgate:payments:a"}
	if !slices.Equal(keys, want) {
		t.Errorf("dedup keys posted = %v, want %v", keys, want)
	}
	wantResults(t, sent, 4, 0, 0)
}

func TestRetryThenSuccess(t *testing.T) {
	rcv := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusAccepted
	})
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{URL: rcv.srv.URL, Sent: sent, Logger: log, Backoff: time.Millisecond})
	s.Alert("orders", "k1", 4)
	closeAll(t, s)
	posts := rcv.posts()
	if len(posts) != 3 {
		t.Fatalf("receiver got %d POSTs, want 3 (2 failures, then success)", len(posts))
	}
	if !bytes.Equal(posts[0], posts[2]) {
		t.Errorf("a retry changed the body:\n%s\n%s", posts[0], posts[2])
	}
	wantResults(t, sent, 1, 0, 0)
}

func TestFailingReceiver(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    int
		retries int
		tries   int
	}{
		{"5xx default retries", http.StatusServiceUnavailable, 0, DefaultRetries + 1},
		{"5xx two retries", http.StatusInternalServerError, 2, 3},
		{"429 is retried", http.StatusTooManyRequests, 1, 2},
		{"no retries", http.StatusBadGateway, -1, 1},
		{"400 is permanent", http.StatusBadRequest, 3, 1},
		{"404 is permanent", http.StatusNotFound, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, always(tc.code))
			sent, _ := newSent(t)
			log, buf := newLogger()
			s := New(Options{URL: rcv.srv.URL, Sent: sent, Logger: log, Retries: tc.retries, Backoff: time.Millisecond})
			s.Alert("orders", "k1", 4)
			s.Alert("orders", "k1", 5)
			closeAll(t, s)
			if n := len(rcv.posts()); n != tc.tries {
				t.Errorf("receiver got %d POSTs, want %d", n, tc.tries)
			}
			wantResults(t, sent, 0, 1, 0)
			if !strings.Contains(buf.String(), `"msg":"alert failed"`) ||
				!strings.Contains(buf.String(), `"status":`+strconv.Itoa(tc.code)) {
				t.Errorf("no failure line with the status in the log:\n%s", buf)
			}
		})
	}
}

func TestTransportErrorLogsHostOnly(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	base := down.URL
	host := down.Listener.Addr().String()
	down.Close() // nothing listens there now: connection refused

	sent, _ := newSent(t)
	log, buf := newLogger()
	s := New(Options{
		URL:        base + "/services/T0/B0/path-credential-0123?token=query-credential-4567",
		RoutingKey: "routing-key-credential-89ab",
		Sent:       sent, Logger: log, Retries: 1, Backoff: time.Millisecond,
	})
	s.Alert("orders", "k1", 4)
	closeAll(t, s)

	wantResults(t, sent, 0, 1, 0)
	out := buf.String()
	if !strings.Contains(out, `"msg":"alert failed"`) || !strings.Contains(out, `"alert_host":"`+host+`"`) {
		t.Errorf("want a failure line naming host %s:\n%s", host, out)
	}
	if !strings.Contains(out, `"tries":2`) {
		t.Errorf("want tries 2 (one retry) in:\n%s", out)
	}
	for _, secret := range []string{"path-credential", "query-credential", "routing-key-credential", "/services/"} {
		if strings.Contains(out, secret) {
			t.Errorf("log leaks %q:\n%s", secret, out)
		}
	}
}

func TestHangingReceiverNeverSlowsAlert(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: unblocks handlers so srv.Close returns

	sent, _ := newSent(t)
	log, buf := newLogger()
	s := New(Options{URL: srv.URL, Sent: sent, Logger: log})
	const keys = 10000
	for i := range keys {
		s.Alert("orders", "key-"+strconv.Itoa(i), 4)
	}
	// Reaching this line is the point: Alert returned 10,000 times while
	// the worker was stuck on the first POST.
	_, _, dropped := results(sent)
	if dropped == 0 {
		t.Errorf("dropped = 0 after %d alerts into a queue of %d with a hanging receiver", keys, DefaultQueueSize)
	}
	// One warning per episode of a full queue (an episode ends when the
	// worker makes room), not one per dropped alert.
	if n := strings.Count(buf.String(), "alert queue full"); n == 0 || float64(n) >= dropped/2 {
		t.Errorf("%d queue-full warnings for %v dropped alerts:\n%.2000s", n, dropped, buf)
	}
	if n := s.seen.Len(); n != rememberKeys {
		t.Errorf("remembered %d keys, want %d", n, rememberKeys)
	}
	s.Alert("orders", "one-more", 4)
	if n := s.seen.Len(); n != rememberKeys {
		t.Errorf("remembered %d keys after one more, want the bound %d", n, rememberKeys)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want context.DeadlineExceeded", err)
	}
	// Nothing got through: each alert was dropped at Alert, abandoned in
	// the queue, or cut off in flight.
	wantResults(t, sent, 0, 0, keys+1)
}

func TestCloseInterruptsBackoff(t *testing.T) {
	hit := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		select {
		case hit <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{URL: srv.URL, Sent: sent, Logger: log, Backoff: time.Hour})
	s.Alert("orders", "k1", 4)
	<-hit // the first try failed; the worker now waits an hour to retry

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want context.DeadlineExceeded", err)
	}
	wantResults(t, sent, 0, 0, 1)
}

func TestCloseDrainsQueue(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		var e struct {
			DedupKey string `json:"dedup_key"`
		}
		json.NewDecoder(r.Body).Decode(&e)
		mu.Lock()
		got = append(got, e.DedupKey)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{URL: srv.URL, Sent: sent, Logger: log, QueueSize: 16})
	const n = 10
	for i := range n {
		s.Alert("orders", "k"+strconv.Itoa(i), 4)
	}
	close(gate) // every alert is queued or in flight before Close starts
	closeAll(t, s)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Errorf("Close drained %d alerts, want %d: %v", len(got), n, got)
	}
	wantResults(t, sent, n, 0, 0)
}

func TestAlertAfterClose(t *testing.T) {
	rcv := newReceiver(t, always(http.StatusAccepted))
	sent, _ := newSent(t)
	log, _ := newLogger()
	s := New(Options{URL: rcv.srv.URL, Sent: sent, Logger: log})
	closeAll(t, s)
	s.Alert("orders", "late", 4) // must not panic or post
	closeAll(t, s)               // a second Close is fine
	if n := len(rcv.posts()); n != 0 {
		t.Errorf("receiver got %d POSTs after Close", n)
	}
	wantResults(t, sent, 0, 0, 1)
}

func TestDisabledSender(t *testing.T) {
	sent, reg := newSent(t)
	s := New(Options{Sent: sent})
	if s.Enabled() {
		t.Error("a Sender without URL reports Enabled")
	}
	s.Alert("orders", "k", 4)
	closeAll(t, s)
	wantResults(t, sent, 0, 0, 0)

	// The three result series exist from the start, at 0.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, mf := range mfs {
		if mf.GetName() != "webhook_alerts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels = append(labels, m.GetLabel()[0].GetValue())
		}
	}
	slices.Sort(labels)
	if want := []string{"dropped", "failed", "sent"}; !slices.Equal(labels, want) {
		t.Errorf("webhook_alerts_total results = %v, want %v", labels, want)
	}

	var nilSender *Sender
	nilSender.Alert("orders", "k", 4)
	if err := nilSender.Close(context.Background()); err != nil {
		t.Errorf("nil Sender Close = %v", err)
	}
}

func TestInvalidURLFailsWithoutLeaking(t *testing.T) {
	sent, _ := newSent(t)
	log, buf := newLogger()
	s := New(Options{URL: "::not a url/credential-xyz", Sent: sent, Logger: log, Backoff: time.Millisecond})
	s.Alert("orders", "k", 4)
	closeAll(t, s)
	wantResults(t, sent, 0, 1, 0)
	if strings.Contains(buf.String(), "credential-xyz") {
		t.Errorf("log leaks the URL:\n%s", buf)
	}
}

func TestDedupKey(t *testing.T) {
	if got := DedupKey("orders", "evt_1"); got != "clawgate:orders:evt_1" {
		t.Errorf("DedupKey = %q", got)
	}
	long1, long2 := strings.Repeat("a", 255), strings.Repeat("a", 254)+"b"
	k1, k2 := DedupKey("orders", long1), DedupKey("orders", long2)
	for _, k := range []string{k1, k2} {
		if len(k) > maxDedupKey || !strings.HasPrefix(k, "clawgate:orders:sha256:") {
			t.Errorf("long key: DedupKey = %q (%d bytes)", k, len(k))
		}
	}
	if k1 == k2 || k1 != DedupKey("orders", long1) {
		t.Error("hashed dedup keys must be stable and distinct")
	}
	route := strings.Repeat("r", 240)
	if k := DedupKey(route, long1); len(k) > maxDedupKey || !strings.HasPrefix(k, "clawgate:sha256:") {
		t.Errorf("long route: DedupKey = %q (%d bytes)", k, len(k))
	}
}

func TestSummaryLimit(t *testing.T) {
	s := &Sender{hostname: "h", maxAttempts: 3}
	e := s.event(pending{route: "orders", key: strings.Repeat("é", 1000), attempts: 4, at: time.Now()})
	if sum := e.Payload.Summary; len(sum) > maxSummary || !utf8.ValidString(sum) {
		t.Errorf("summary is %d bytes, valid UTF-8 %v", len(sum), utf8.ValidString(sum))
	}
	if got := truncate("aé", 2); got != "a" {
		t.Errorf("truncate split a rune: %q", got)
	}
}
