package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/server"
	"github.com/clawgate/clawgate/verify"
)

// demoConfig is the demo's gateway: one route in front of the built-in
// upstream, generic HMAC signatures, the memory store, a 1 s upstream timeout.
const demoConfig = `
listen: "127.0.0.1:0"
admin: { listen: "" }
store: { backend: memory }
dedupe: { lock_ttl: 5s }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %s
    timeout: 1s
    idempotency: { key: ["json:id", "header:Idempotency-Key"] }
    verify:
      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: demo, secret: demo-secret-change-me }]
`

// cmdDemo replays the incident clawgate exists for: a provider pushes the same
// signed order event 17 times; the upstream is too slow on the first attempt,
// so the gateway answers 504 and the upstream abandons that attempt. It
// exits 0 when the upstream completed the event exactly once.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", stdout, stderr)
	times := fs.Int("times", 17, "how many `deliveries` of the event the provider makes")
	verbose := fs.Bool("v", false, "also print the gateway's JSON log lines on stderr")
	queueAct := fs.Bool("queue", false, "run the delivery queue's act instead: fast 202, retries with growing gaps, a dead-letter queue and a replay, an out-of-order burst delivered in order per object")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	if *times < 2 {
		fmt.Fprintln(stderr, "clawgate demo: -times must be at least 2")
		return 2
	}
	logOut := io.Discard
	if *verbose {
		logOut = stderr
	}
	log := slog.New(slog.NewJSONHandler(logOut, nil))
	if *queueAct {
		return cmdDemoQueue(stdout, stderr, log)
	}

	// The service behind the gateway: it deducts points once per event it
	// completes. The first attempt takes longer than the route's timeout.
	var received, completed, abandoned atomic.Int64
	upstream := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if received.Add(1) == 1 {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
				abandoned.Add(1)
				return
			}
		}
		completed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order":"ord_1001","points_deducted":100,"attempt_seen":%q}`+"\n", r.Header.Get("X-Clawgate-Attempt"))
	})}
	d, err := startDemo(demoConfig, upstream, log)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate demo: %v\n", err)
		return 1
	}
	defer d.stop()
	// The provider: one signed event, delivered again and again.
	inst, reg, route, signer, uln := d.inst, d.reg, d.route, d.signer, d.uln
	body := []byte(`{"id":"evt_1001","type":"order.paid","data":{"order_id":"ord_1001","points":100}}`)
	url := "http://" + inst.Addr().String() + route.Match.Path
	client := &http.Client{Timeout: 10 * time.Second}
	fmt.Fprintf(stdout, "clawgate demo: one signed order event (evt_1001) delivered %d times\n", *times)
	fmt.Fprintf(stdout, "gateway %s -> upstream %s (timeout %s, memory store)\n\n", url, uln.Addr(), route.Timeout)
	fmt.Fprintf(stdout, "%-8s %-7s %-10s %s\n", "attempt", "status", "result", "answer")
	forwarded, replayed := 0, 0
	for i := 1; i <= *times; i++ {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "evt_1001")
		if err := signer.Sign(req.Header, body, time.Now()); err != nil {
			fmt.Fprintf(stderr, "clawgate demo: sign: %v\n", err)
			return 1
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate demo: delivery %d: %v\n", i, err)
			return 1
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		result := "forwarded"
		switch {
		case resp.Header.Get("Idempotent-Replayed") == "true":
			result = "replayed"
			replayed++
		case resp.StatusCode == http.StatusGatewayTimeout:
			result = "timeout"
		case resp.StatusCode < 300:
			forwarded++
		default:
			result = "refused"
		}
		fmt.Fprintf(stdout, "%-8d %-7d %-10s %s\n", i, resp.StatusCode, result, bytes.TrimSpace(answer))
	}
	// The abandoned first attempt is noticed by the upstream asynchronously.
	for deadline := time.Now().Add(5 * time.Second); abandoned.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	dups, _ := gatherSum(reg, "webhook_duplicate_requests_total")
	ratio, _ := gatherSum(reg, "idempotency_cache_hit_ratio")
	fmt.Fprintf(stdout, "\nupstream: %d received, %d abandoned (the timed-out attempt), %d completed\n",
		received.Load(), abandoned.Load(), completed.Load())
	fmt.Fprintf(stdout, "gateway:  %d forwarded, %d replayed without touching the upstream\n", forwarded, replayed)
	fmt.Fprintf(stdout, "metrics:  webhook_duplicate_requests_total %g, idempotency_cache_hit_ratio{route=\"orders\"} %.3f\n", dups, ratio)
	if completed.Load() != 1 {
		fmt.Fprintf(stdout, "\nFAIL: the upstream completed the event %d times\n", completed.Load())
		return 1
	}
	fmt.Fprintln(stdout, "\nok: points were deducted exactly once")
	return 0
}

// demoRun is a demo's gateway in front of its upstream, on loopback.
type demoRun struct {
	inst   *server.Server
	reg    *prometheus.Registry
	route  config.Route
	signer verify.Signer
	uln    net.Listener
	stop   func()
}

// startDemo serves upstream on a loopback port, starts a gateway with
// cfgYAML (its %s is the upstream's URL) and a signer for its first route.
func startDemo(cfgYAML string, upstream *http.Server, log *slog.Logger) (*demoRun, error) {
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go upstream.Serve(uln)
	cfg, err := config.Parse([]byte(fmt.Sprintf(cfgYAML, "http://"+uln.Addr().String())), "demo.yaml", ".", func(string) string { return "" })
	if err != nil {
		upstream.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	inst, err := server.Start(cfg, server.Options{Logger: log, Registry: reg, Version: version})
	if err != nil {
		upstream.Close()
		return nil, err
	}
	stop := func() {
		inst.Shutdown(5 * time.Second)
		upstream.Close()
	}
	signer, err := verify.NewSigner(cfg.Routes[0].Verify, verify.Env{Dir: "."}, nil)
	if err != nil {
		stop()
		return nil, err
	}
	return &demoRun{inst: inst, reg: reg, route: cfg.Routes[0], signer: signer, uln: uln, stop: stop}, nil
}

// gatherSum adds up every series of one metric family.
func gatherSum(g prometheus.Gatherer, name string) (float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum, nil
}
