package proxy_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

const testSecret = "test-secret"

// baseConfig is one hmac route; %UPSTREAM% and %EXTRA% are filled per test.
const baseConfig = `
listen: "127.0.0.1:0"
admin: { listen: "" }
dedupe: { lock_ttl: 5s }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    timeout: 2s
    max_body: 1KiB
%EXTRA%
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: k1, secret: test-secret }]
`

// harness is a gateway between a test client and an httptest upstream, all
// on loopback.
type harness struct {
	t        *testing.T
	gw       *proxy.Gateway
	srv      *gwServer
	up       *httptest.Server
	upCalls  atomic.Int64
	reg      *prometheus.Registry
	logs     *syncBuffer
	upstream http.HandlerFunc
	mu       sync.Mutex
	upReqs   []*http.Request
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

type harnessOpt func(*harnessConf)

type harnessConf struct {
	extra        string
	yaml         string
	store        store.Store
	alerter      proxy.Alerter
	writeTimeout time.Duration
	limits       func(*proxy.Limits)
	tracer       trace.Tracer
	queue        queue.Backend
}

func withRouteYAML(extra string) harnessOpt  { return func(c *harnessConf) { c.extra = extra } }
func withConfig(y string) harnessOpt         { return func(c *harnessConf) { c.yaml = y } }
func withStore(s store.Store) harnessOpt     { return func(c *harnessConf) { c.store = s } }
func withAlerter(a proxy.Alerter) harnessOpt { return func(c *harnessConf) { c.alerter = a } }
func withWriteTimeout(d time.Duration) harnessOpt {
	return func(c *harnessConf) { c.writeTimeout = d }
}
func withLimits(f func(*proxy.Limits)) harnessOpt { return func(c *harnessConf) { c.limits = f } }
func withTracer(tr trace.Tracer) harnessOpt       { return func(c *harnessConf) { c.tracer = tr } }

// withQueue runs the config's delivery: queue routes on b.
func withQueue(b queue.Backend) harnessOpt { return func(c *harnessConf) { c.queue = b } }

func newHarness(t *testing.T, upstream http.HandlerFunc, opts ...harnessOpt) *harness {
	t.Helper()
	hc := harnessConf{yaml: baseConfig}
	for _, o := range opts {
		o(&hc)
	}
	h := &harness{t: t, reg: prometheus.NewRegistry(), logs: &syncBuffer{}, upstream: upstream}
	h.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request is recorded before it is counted: a test that waits
		// for the count then reads upReqs[n-1] (recording it after let a
		// test index an empty slice while holding h.mu, and the panic left
		// the lock held: the next upstream call hung the test binary).
		r2 := r.Clone(r.Context())
		h.mu.Lock()
		h.upReqs = append(h.upReqs, r2)
		h.mu.Unlock()
		h.upCalls.Add(1)
		if h.upstream != nil {
			h.upstream(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(h.up.Close)
	if !strings.Contains(hc.extra, "idempotency:") {
		// The tests send one body under many keys; the replay guard (tested
		// on its own) would take those for replays.
		hc.extra = strings.TrimPrefix(hc.extra+"\n", "\n") + `    idempotency: { allow_unsigned_key: true }`
	}
	y := strings.ReplaceAll(hc.yaml, "%UPSTREAM%", h.up.URL)
	y = strings.ReplaceAll(y, "%EXTRA%", hc.extra)
	cfg, err := config.Parse([]byte(y), "test.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	st := hc.store
	if st == nil {
		st = ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 10000})
	}
	m := metrics.New(h.reg)
	log := slog.New(slog.NewJSONHandler(h.logs, nil))
	var qm *queue.Manager
	var q proxy.Queue
	if hc.queue != nil {
		qm = queue.New(queue.Options{Backend: hc.queue, Metrics: m, Log: log, PromoteEvery: 5 * time.Millisecond, Block: 50 * time.Millisecond})
		q = qm
	}
	h.gw = proxy.New(cfg, proxy.Options{
		Store:        st,
		Metrics:      m,
		Logger:       log,
		Alerter:      hc.alerter,
		WriteTimeout: hc.writeTimeout,
		Tracer:       hc.tracer,
		Queue:        q,
	})
	if qm != nil {
		qm.SetSender(h.gw)
		var routes []queue.Route
		for _, r := range cfg.Routes {
			if r.Queued() {
				routes = append(routes, queue.Route{Name: r.Name, Workers: r.Workers, MaxDepth: cfg.Queue.MaxDepth,
					Retention: r.Retention, LockTTL: cfg.Dedupe.LockTTL, Shards: 1,
					Retry:   queue.Retry{MaxAttempts: r.Retry.MaxAttempts, Initial: r.Retry.Initial, Max: r.Retry.Max},
					Ordered: r.Ordered(), OrderHold: r.Order.OnDead == config.OnDeadHold})
			}
		}
		if err := qm.Apply(t.Context(), routes); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { qm.Close(time.Second) })
	}
	l := proxy.DefaultLimits
	if hc.limits != nil {
		hc.limits(&l)
	}
	h.srv = serveDoor(t, h.gw, l, log)
	return h
}

// Every HTTP-level test runs once on each front door (doortest.ForEach),
// and serveDoor serves the gateway on the one the test's name says.

// gwServer is a gateway served on loopback by a front door.
type gwServer struct {
	URL  string // "http://127.0.0.1:port"
	Addr string // "127.0.0.1:port"
	door proxy.Door
}

func (s *gwServer) Close() { s.door.Close() }

// serveDoor serves gw on a loopback port with the test's front door,
// until the test ends.
func serveDoor(t testing.TB, gw *proxy.Gateway, l proxy.Limits, log *slog.Logger) *gwServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &gwServer{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(),
		door: proxy.NewDoor(doortest.Of(t), gw, l, nil, log)}
	go s.door.Serve(ln)
	t.Cleanup(s.Close)
	return s
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(testSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

type result struct {
	status int
	header http.Header
	body   string
}

// post sends a signed delivery with an Idempotency-Key (none when key is "").
func (h *harness) post(t testing.TB, path, key string, body []byte, mutate ...func(*http.Request)) result {
	t.Helper()
	return deliver(t, h.srv.URL+path, key, body, mutate...)
}

// deliver sends one signed delivery to url.
func deliver(t testing.TB, url, key string, body []byte, mutate ...func(*http.Request)) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", sign(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for _, m := range mutate {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, string(b)}
}

// metric returns the value of the series of name whose labels include want.
func (h *harness) metric(name string, want map[string]string) float64 {
	h.t.Helper()
	return gatheredSum(h.t, h.reg, name, want)
}

// gatheredSum is the sum of reg's series of name whose labels include
// want (a histogram counts its observations).
func gatheredSum(t testing.TB, reg prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				if labelValue(m, k) != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
