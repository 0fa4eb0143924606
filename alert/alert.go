// Package alert posts clawgate's retry-storm alerts.
//
// When one idempotency key is delivered more often than alerts.max_attempts,
// the gateway counts webhook_attempts_exceeded_total, logs one warning and
// calls Sender.Alert. The Sender then POSTs one PagerDuty Events API v2
// "trigger" event for that key to the URL named by alerts.webhook_url_env:
//
//	{"routing_key": "...",            // alerts.pagerduty_routing_key_env, when set
//	 "event_action": "trigger",
//	 "dedup_key": "clawgate:<route>:<key>",
//	 "payload": {
//	   "summary": "clawgate: key <key> on route <route> delivered <n> times (max_attempts <m>)",
//	   "source": "<hostname>", "severity": "warning", "timestamp": "<RFC 3339>",
//	   "component": "clawgate", "group": "<route>", "class": "webhook_retry_storm",
//	   "custom_details": {"route": ..., "key": ..., "attempts": n, "max_attempts": m}}}
//
// The same JSON is accepted by PagerDuty (POST to
// https://events.pagerduty.com/v2/enqueue with a routing key) and is easy to
// read for a generic receiver (an Alertmanager webhook bridge, a Slack
// relay, a test server).
//
// Guarantees:
//
//   - Once per key: the Sender remembers the last 10,000 (route, key) pairs it
//     was told about and ignores repeats, whatever became of the first alert
//     (sent, failed or dropped).
//   - Alert never blocks a delivery: it does a non-blocking send to a
//     buffered queue (Options.QueueSize). A full queue drops the alert,
//     counted webhook_alerts_total{result="dropped"}.
//   - One background goroutine posts. Transport errors, 408, 425, 429 and
//     5xx answers are retried Options.Retries times with doubling backoff;
//     any 2xx counts result="sent"; anything else, once retries are spent
//     (or at once for a permanent 4xx such as 400 invalid event), counts
//     result="failed".
//   - Close drains the queue until its context ends, then abandons what is
//     left (counted "dropped"), interrupting a backoff or request in flight.
//
// Logs name the alert endpoint by host only: the URL (Slack and other hooks
// carry a credential in the path or query) and the routing key never appear.
//
// A Sender built with an empty URL is disabled: Alert does nothing and no
// goroutine runs, so the caller may build one unconditionally from
// alerts.webhook_url_env (the log line and metric of the gateway remain the
// alert in that case).
package alert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for the zero values of Options.
const (
	DefaultQueueSize = 1024
	DefaultRetries   = 3
	DefaultBackoff   = 500 * time.Millisecond
	DefaultTimeout   = 5 * time.Second
)

// Values of the result label of webhook_alerts_total.
const (
	ResultSent    = "sent"
	ResultFailed  = "failed"
	ResultDropped = "dropped"
)

const (
	// rememberKeys bounds the set of (route, key) pairs already alerted.
	rememberKeys = 10000
	// maxBackoff caps the doubling (unless Options.Backoff is larger).
	maxBackoff = 30 * time.Second
	// PagerDuty Events v2 limits.
	maxDedupKey = 255
	maxSummary  = 1024
	// drainLimit is how much of a response body is read for connection reuse.
	drainLimit = 64 << 10
)

// Options configures a Sender.
type Options struct {
	// URL receives the alerts (the value of alerts.webhook_url_env).
	// Empty: the Sender is disabled and Alert does nothing.
	URL string
	// RoutingKey is sent as routing_key (the PagerDuty integration key,
	// the value of alerts.pagerduty_routing_key_env). Empty: the field is
	// omitted. Never logged.
	RoutingKey string
	// MaxAttempts is the config's alerts.max_attempts, quoted in the alert
	// text. Zero or less: attempts-1, which is what the gateway's threshold
	// is when it calls Alert on the delivery that crosses it.
	MaxAttempts int
	// Client posts the alerts. Nil: a client with a 5 s timeout.
	Client *http.Client
	// Sent counts alerts by result (sent, failed, dropped); normally
	// metrics.Metrics.AlertsSent. May be nil.
	Sent *prometheus.CounterVec
	// Logger receives one line per alert outcome. Nil: slog.Default().
	Logger *slog.Logger
	// QueueSize is how many alerts may wait for the worker. Zero or less:
	// 1024.
	QueueSize int
	// Retries is how many times a failed post is tried again. Zero: 3;
	// negative: no retry.
	Retries int
	// Backoff is the wait before the first retry; it doubles for each
	// next one (capped at 30 s). Zero or less: 500 ms.
	Backoff time.Duration
	// Hostname is the event's payload.source. Empty: os.Hostname().
	Hostname string
}

// Sender posts retry-storm alerts in the background. It implements the
// gateway's Alerter. A nil or disabled *Sender is safe to use.
type Sender struct {
	url         *url.URL // nil when the configured URL does not parse
	rawURL      string
	host        string // for logs: never the path, query or user info
	routingKey  string
	maxAttempts int
	client      *http.Client
	sent        *prometheus.CounterVec
	log         *slog.Logger
	retries     int
	backoff     time.Duration
	hostname    string
	now         func() time.Time

	seen  *lru.Cache[string, struct{}]
	queue chan pending

	mu       sync.RWMutex // guards closed against Alert's enqueue
	closed   bool
	draining chan struct{} // closed by Close: finish the queue, then exit
	ctx      context.Context
	abort    context.CancelFunc // ends the request or backoff in flight
	done     chan struct{}      // closed when the worker has exited
	once     sync.Once

	dropping   atomic.Bool  // the queue was found full and has not accepted since
	droppedRun atomic.Int64 // alerts dropped while dropping
}

// pending is one queued alert.
type pending struct {
	route, key string
	attempts   int64
	at         time.Time
	// dlq: the alert of a route's DLQ (DeadLettered), with the event's
	// id and reason.
	dlq        bool
	id, reason string
}

// New returns a Sender and starts its worker, or a disabled Sender when
// o.URL is empty. Call Close to stop the worker.
func New(o Options) *Sender {
	s := &Sender{
		rawURL:      o.URL,
		routingKey:  o.RoutingKey,
		maxAttempts: o.MaxAttempts,
		client:      o.Client,
		sent:        o.Sent,
		log:         o.Logger,
		retries:     o.Retries,
		backoff:     o.Backoff,
		hostname:    o.Hostname,
		now:         time.Now,
		done:        make(chan struct{}),
		draining:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.sent != nil {
		// Series that alerting rules take increase() of exist from the start.
		for _, r := range []string{ResultSent, ResultFailed, ResultDropped} {
			s.sent.WithLabelValues(r)
		}
	}
	if o.URL == "" {
		close(s.done)
		return s
	}
	if u, err := url.Parse(o.URL); err == nil && u.Host != "" {
		s.url, s.host = u, u.Host
	} else {
		// Config validation rejects this; never echo the value, it may hold
		// a credential.
		s.log.Error("alert URL does not parse as an absolute URL; every alert will fail")
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: DefaultTimeout}
	}
	switch {
	case s.retries == 0:
		s.retries = DefaultRetries
	case s.retries < 0:
		s.retries = 0
	}
	if s.backoff <= 0 {
		s.backoff = DefaultBackoff
	}
	if s.hostname == "" {
		if h, err := os.Hostname(); err == nil && h != "" {
			s.hostname = h
		} else {
			s.hostname = "clawgate"
		}
	}
	size := o.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	s.queue = make(chan pending, size)
	s.seen, _ = lru.New[string, struct{}](rememberKeys) // only errors on size <= 0
	s.ctx, s.abort = context.WithCancel(context.Background())
	go s.run()
	return s
}

// Enabled reports whether the Sender posts alerts (a URL was configured).
func (s *Sender) Enabled() bool { return s != nil && s.queue != nil }

// Alert queues one alert for key on route, delivered attempts times. Only
// the first call for a (route, key) pair counts; repeats are ignored. It
// never blocks: with the queue full the alert is dropped and counted.
func (s *Sender) Alert(route, key string, attempts int64) {
	s.enqueue(route+"\x00"+key, pending{route: route, key: key, attempts: attempts})
}

// DeadLettered queues the alert of a delivery queue route whose DLQ got
// an event: one per route (dedup_key "clawgate/dlq/<route>"), not one per
// event, until DLQDrained says the route's DLQ is empty again.
func (s *Sender) DeadLettered(route, key, id, reason string) {
	s.enqueue("\x00dlq\x00"+route, pending{route: route, key: key, id: id, reason: reason, dlq: true})
}

// DLQDrained re-arms the DLQ alert of route, whose DLQ is now empty.
func (s *Sender) DLQDrained(route string) {
	if s.Enabled() {
		s.seen.Remove("\x00dlq\x00" + route)
	}
}

func (s *Sender) enqueue(seenKey string, p pending) {
	if !s.Enabled() {
		return
	}
	if seen, _ := s.seen.ContainsOrAdd(seenKey, struct{}{}); seen {
		return
	}
	route, key, attempts := p.route, p.key, p.attempts
	p.at = s.now()

	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		s.count(ResultDropped)
		s.log.Warn("alert dropped: the alert sender is closed",
			slog.String("route", route), slog.String("key", key), slog.Int64("attempts", attempts))
		return
	}
	select {
	case s.queue <- p:
		s.mu.RUnlock()
		if s.dropping.Load() && s.dropping.CompareAndSwap(true, false) {
			s.log.Info("alert queue accepting again",
				slog.Int64("dropped", s.droppedRun.Swap(0)), slog.String("alert_host", s.host))
		}
	default:
		s.mu.RUnlock()
		s.count(ResultDropped)
		s.droppedRun.Add(1)
		// One warning per episode of a full queue, not one per alert: a
		// storm against a dead endpoint must not flood the log too.
		if s.dropping.CompareAndSwap(false, true) {
			s.log.Warn("alert queue full: dropping alerts until it drains",
				slog.String("route", route), slog.String("key", key), slog.Int64("attempts", attempts),
				slog.Int("queue_size", cap(s.queue)), slog.String("alert_host", s.host))
		}
	}
}

// Close stops taking alerts, posts those already queued until ctx ends,
// then abandons the rest (counted dropped), interrupting a backoff or a
// request in flight, and returns once the worker has exited. It returns
// ctx.Err() when ctx ended first. Close may be called more than once.
func (s *Sender) Close(ctx context.Context) error {
	if !s.Enabled() {
		return nil
	}
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.draining)
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.abort()
		<-s.done
		return ctx.Err()
	}
}

// run is the worker: one alert at a time, until Close has been called and
// the queue is empty.
func (s *Sender) run() {
	defer close(s.done)
	defer s.abort()
	var abandoned int64
	post := func(p pending) {
		if !s.deliver(p) {
			abandoned++
		}
	}
	defer func() {
		if abandoned > 0 {
			s.log.Warn("alert sender closed before these alerts were posted",
				slog.Int64("abandoned", abandoned), slog.String("alert_host", s.host))
		}
	}()
	for {
		select {
		case p := <-s.queue:
			post(p)
		case <-s.draining:
			for {
				select {
				case p := <-s.queue:
					post(p)
				default:
					return
				}
			}
		}
	}
}

// deliver posts one alert with retries and counts its result. It returns
// false when Close abandoned it (counted dropped, not logged one by one).
func (s *Sender) deliver(p pending) bool {
	if s.ctx.Err() != nil {
		s.count(ResultDropped)
		return false
	}
	body, err := json.Marshal(s.event(p))
	if err != nil { // cannot happen: strings and integers only
		s.count(ResultFailed)
		s.log.Error("alert not encoded", slog.String("route", p.route), slog.String("key", p.key),
			slog.String("error", err.Error()))
		return true
	}
	var (
		status int
		perr   error
		tries  int
	)
	for try := 0; try <= s.retries; try++ {
		if try > 0 && !s.wait(s.backoffFor(try)) {
			s.count(ResultDropped)
			return false
		}
		tries++
		status, perr = s.post(body)
		if perr == nil && status >= 200 && status < 300 {
			s.count(ResultSent)
			s.log.Info("alert sent", slog.String("route", p.route), slog.String("key", p.key),
				slog.Int64("attempts", p.attempts), slog.Int("status", status),
				slog.Int("tries", tries), slog.String("alert_host", s.host))
			return true
		}
		if s.ctx.Err() != nil { // Close cut this attempt short
			s.count(ResultDropped)
			return false
		}
		if !retryable(status, perr) {
			break
		}
	}
	s.count(ResultFailed)
	attrs := []slog.Attr{slog.String("route", p.route), slog.String("key", p.key),
		slog.Int64("attempts", p.attempts), slog.Int("tries", tries), slog.String("alert_host", s.host)}
	if perr != nil {
		attrs = append(attrs, slog.String("error", perr.Error()))
	} else {
		attrs = append(attrs, slog.Int("status", status))
	}
	s.log.LogAttrs(context.Background(), slog.LevelError, "alert failed", attrs...)
	return true
}

// errBadURL stands for any error that would quote the configured URL.
var errBadURL = errors.New("alert URL is not a valid absolute URL")

// post sends one attempt. Its error never contains the URL.
func (s *Sender) post(body []byte) (int, error) {
	if s.url == nil {
		return 0, errBadURL
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, errBadURL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "clawgate-alert")
	resp, err := s.client.Do(req)
	if err != nil {
		// *url.Error quotes the full URL: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			return 0, ue.Err
		}
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// retryable: transport errors and answers that mean "try again later"
// (PagerDuty: 429 and 5xx). Other 4xx (400 invalid event, 401, 404) will
// not change on a retry.
func retryable(status int, err error) bool {
	if err != nil {
		return !errors.Is(err, errBadURL)
	}
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status >= 500
}

// backoffFor is the wait before retry number try (1-based): Backoff
// doubled try-1 times, capped at maxBackoff (or Backoff if larger).
func (s *Sender) backoffFor(try int) time.Duration {
	limit := max(maxBackoff, s.backoff)
	d := s.backoff
	for i := 1; i < try && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// wait sleeps d, or returns false at once when Close abandons the queue.
func (s *Sender) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *Sender) count(result string) {
	if s.sent != nil {
		s.sent.WithLabelValues(result).Inc()
	}
}

// event is a PagerDuty Events API v2 alert event.
type event struct {
	RoutingKey  string  `json:"routing_key,omitempty"`
	EventAction string  `json:"event_action"`
	DedupKey    string  `json:"dedup_key"`
	Payload     payload `json:"payload"`
}

type payload struct {
	Summary       string  `json:"summary"`
	Source        string  `json:"source"`
	Severity      string  `json:"severity"`
	Timestamp     string  `json:"timestamp,omitempty"`
	Component     string  `json:"component"`
	Group         string  `json:"group"`
	Class         string  `json:"class"`
	CustomDetails details `json:"custom_details"`
}

type details struct {
	Route       string `json:"route"`
	Key         string `json:"key"`
	Attempts    int64  `json:"attempts,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

func (s *Sender) event(p pending) event {
	if p.dlq {
		return event{
			RoutingKey:  s.routingKey,
			EventAction: "trigger",
			DedupKey:    truncate("clawgate/dlq/"+p.route, maxDedupKey),
			Payload: payload{
				Summary:   truncate("clawgate: route "+p.route+" dead-lettered event "+p.id+" (key "+p.key+", "+p.reason+"); see clawgate dlq list", maxSummary),
				Source:    s.hostname,
				Severity:  "warning",
				Timestamp: p.at.UTC().Format(time.RFC3339Nano),
				Component: "clawgate",
				Group:     p.route,
				Class:     "webhook_dead_letter",
				CustomDetails: details{
					Route: p.route, Key: p.key, EventID: p.id, Reason: p.reason,
				},
			},
		}
	}
	m := s.maxAttempts
	if m <= 0 {
		m = int(max(p.attempts-1, 0))
	}
	summary := "clawgate: key " + p.key + " on route " + p.route + " delivered " +
		strconv.FormatInt(p.attempts, 10) + " times (max_attempts " + strconv.Itoa(m) + ")"
	return event{
		RoutingKey:  s.routingKey,
		EventAction: "trigger",
		DedupKey:    DedupKey(p.route, p.key),
		Payload: payload{
			Summary:   truncate(summary, maxSummary),
			Source:    s.hostname,
			Severity:  "warning",
			Timestamp: p.at.UTC().Format(time.RFC3339Nano),
			Component: "clawgate",
			Group:     p.route,
			Class:     "webhook_retry_storm",
			CustomDetails: details{
				Route:       p.route,
				Key:         p.key,
				Attempts:    p.attempts,
				MaxAttempts: m,
			},
		},
	}
}

// DedupKey is the alert's dedup_key: "clawgate:<route>:<key>". PagerDuty
// caps it at 255 characters, so a longer one becomes
// "clawgate:<route>:sha256:<hex of key>", and if the route name alone is
// too long, "clawgate:sha256:<hex of route NUL key>". Either way it is
// stable for a (route, key) pair and distinct between pairs.
func DedupKey(route, key string) string {
	if k := "clawgate:" + route + ":" + key; len(k) <= maxDedupKey {
		return k
	}
	sum := sha256.Sum256([]byte(key))
	if k := "clawgate:" + route + ":sha256:" + hex.EncodeToString(sum[:]); len(k) <= maxDedupKey {
		return k
	}
	sum = sha256.Sum256([]byte(route + "\x00" + key))
	return "clawgate:sha256:" + hex.EncodeToString(sum[:])
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
