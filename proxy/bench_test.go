package proxy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/logging"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
)

// discardWriter is a reusable http.ResponseWriter, so the benchmark measures
// the gateway's handler, not a recorder.
// It keeps the status, so each benchmark checks it measured the path it
// names rather than an error answer.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }

func (w *discardWriter) expect(b *testing.B, code int) {
	if w.status != code {
		b.Fatalf("status %d, want %d", w.status, code)
	}
}

func benchGateway(b testing.TB) (*proxy.Gateway, []byte) {
	// One body under many keys: no replay guard.
	return benchGatewayWith(b, "    idempotency: { allow_unsigned_key: true }")
}

func benchGatewayWith(b testing.TB, extra string) (*proxy.Gateway, []byte) {
	return benchGatewayTraced(b, extra, nil)
}

// benchGatewayTraced is benchGatewayWith with tracer making the spans (nil:
// tracing off).
func benchGatewayTraced(b testing.TB, extra string, tracer trace.Tracer) (*proxy.Gateway, []byte) {
	y := strings.ReplaceAll(strings.ReplaceAll(baseConfig, "%UPSTREAM%", benchUpstream(b)), "%EXTRA%", extra)
	y = strings.Replace(y, "max_body: 1KiB", "max_body: 64KiB", 1)
	cfg, err := config.Parse([]byte(y), "bench.yaml", b.TempDir(), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	gw := proxy.New(cfg, proxy.Options{
		Store:   ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 1 << 20}),
		Metrics: metrics.New(prometheus.NewRegistry()),
		// The handler serve uses: slog.JSONHandler would add an allocation
		// per float attribute (it marshals floats with encoding/json).
		Logger: slog.New(logging.NewHandler(io.Discard, nil)),
		Tracer: tracer,
	})
	body := []byte(`{"id":"evt_bench","type":"order.paid","data":{"order_id":"ord_1","note":"` + strings.Repeat("x", 930) + `"}}`)
	return gw, body
}

// benchUpstream starts the benchmarks' upstream on loopback and returns its
// URL: a fasthttp server answering 200 {"ok":true} as JSON, with the
// headers net/http's server would send (Date, Content-Type,
// Content-Length). It runs in the benchmark's process, so what it
// allocates counts in allocs/op: once its connections are open, nothing
// (net/http's server, the upstream until 2026-12-05, allocated about 36
// objects per request), so allocs/op is the gateway's, its client
// included.
func benchUpstream(b testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler: func(c *fasthttp.RequestCtx) {
			c.SetContentType("application/json")
			c.SetBodyString(`{"ok":true}`)
		},
		NoDefaultServerHeader: true,
	}
	go srv.Serve(ln)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownWithContext(ctx)
	})
	return "http://" + ln.Addr().String()
}

func benchRequest(body []byte, key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Signature", sign(body))
	r.Header.Set("Idempotency-Key", key)
	return r
}

// benchDeliveries runs b.N signed deliveries of body through gw, each
// under key(i) (evt_dup for every i: the duplicate path), checking each is
// answered 200; every is called after every 1024 deliveries (nil: never).
// It runs once per front door: sub-benchmarks nethttp (the handler given a
// parsed *http.Request) and fasthttp (the handler given a parsed
// fasthttp request): each door's view, steps and answer, without its
// socket and parser.
func benchDeliveries(b *testing.B, gw *proxy.Gateway, body []byte, key func(i int) string, every func()) {
	b.Run("nethttp", func(b *testing.B) {
		sig := sign(body)
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", bytes.NewReader(body))
			r.Header.Set("X-Signature", sig)
			r.Header.Set("Idempotency-Key", key(i))
			clear(w.h)
			gw.ServeHTTP(w, r)
			w.expect(b, http.StatusOK)
			if every != nil && i%1024 == 1023 {
				every()
			}
		}
	})
	b.Run("fasthttp", func(b *testing.B) {
		sig := sign(body)
		var c fasthttp.RequestCtx
		conn := &benchConn{}
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.Init2(conn, nil, false)
			r := &c.Request
			r.Header.SetMethod(http.MethodPost)
			r.SetRequestURI("/webhook/order")
			r.Header.SetHost("gw")
			r.Header.Set("X-Signature", sig)
			r.Header.Set("Idempotency-Key", key(i))
			r.SetBody(body)
			gw.ServeFastHTTP(&c)
			if st := c.Response.StatusCode(); st != http.StatusOK {
				b.Fatalf("status %d, want 200", st)
			}
			c.Request.Reset()
			c.Response.Reset()
			if every != nil && i%1024 == 1023 {
				every()
			}
		}
	})
}

// benchConn is the connection of the fasthttp benchmarks: only its
// addresses are read.
type benchConn struct{ net.Conn }

var benchAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}

func (*benchConn) RemoteAddr() net.Addr { return benchAddr }
func (*benchConn) LocalAddr() net.Addr  { return benchAddr }

// uniqueKey is a key never used before in this process: the benchmark
// function runs several times (b.N grows, -count, each front door) on one
// gateway, so a key made from the loop index alone would come again and be
// answered from the window as a duplicate.
func uniqueKey(int) string { return "evt_" + strconv.FormatInt(benchSeq.Add(1), 10) }

var benchSeq atomic.Int64

// dupKey is the one key of the duplicate benchmarks; prime delivers it
// once first, so every timed delivery is a replay from the window.
func dupKey(int) string { return "evt_dup" }

func prime(gw *proxy.Gateway, body []byte) {
	gw.ServeHTTP(&discardWriter{h: http.Header{}}, benchRequest(body, "evt_dup"))
}

// BenchmarkDeliveryUnique: a new key each time, verified, claimed, forwarded
// over loopback to a real upstream and finished. 1 KiB body.
func BenchmarkDeliveryUnique(b *testing.B) {
	gw, body := benchGateway(b)
	benchDeliveries(b, gw, body, uniqueKey, nil)
}

// BenchmarkDeliveryUniqueGuarded: as BenchmarkDeliveryUnique on a route
// keyed on an unsigned header, so the replay guard claims and finishes each
// signed request too (two more store calls). Each body differs, and is
// signed inside the loop (about 1 µs).
func BenchmarkDeliveryUniqueGuarded(b *testing.B) {
	gw, body := benchGatewayWith(b, `    idempotency: { key: ["header:Idempotency-Key"] }`)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := strconv.Itoa(i)
		body := append([]byte(`{"n":"`+id+`",`), body[1:]...)
		r := httptest.NewRequest(http.MethodPost, "http://gw/webhook/order", bytes.NewReader(body))
		r.Header.Set("X-Signature", sign(body))
		r.Header.Set("Idempotency-Key", "evt_"+id)
		clear(w.h)
		gw.ServeHTTP(w, r)
		w.expect(b, http.StatusOK)
	}
}

// BenchmarkDeliveryDuplicate: the same key again, answered from the local
// window: no store and no upstream work.
func BenchmarkDeliveryDuplicate(b *testing.B) {
	gw, body := benchGateway(b)
	prime(gw, body)
	benchDeliveries(b, gw, body, dupKey, nil)
}

// tracedBench returns benchGateway's gateway with tracing on: the SDK's
// tracer provider with sampler, exporting in batches (as the gateway does)
// to an in-memory exporter, and a function that empties the exporter, to
// be called now and then so the benchmark's memory stays flat.
func tracedBench(b *testing.B, sampler sdktrace.Sampler) (*proxy.Gateway, []byte, func()) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sampler))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	gw, body := benchGatewayTraced(b, "    idempotency: { allow_unsigned_key: true }", tp.Tracer("bench"))
	return gw, body, exp.Reset
}

// BenchmarkDeliveryUniqueTraced: BenchmarkDeliveryUnique with every
// delivery traced (5 spans: the delivery, verify, claim, forward, settle).
func BenchmarkDeliveryUniqueTraced(b *testing.B) {
	gw, body, reset := tracedBench(b, sdktrace.AlwaysSample())
	benchDeliveries(b, gw, body, uniqueKey, reset)
}

// BenchmarkDeliveryUniqueTracedUnsampled: tracing on, but the sampler
// records nothing (sample_ratio: 0): the spans are made but not recorded,
// and a traceparent is still built for the upstream.
func BenchmarkDeliveryUniqueTracedUnsampled(b *testing.B) {
	gw, body, reset := tracedBench(b, sdktrace.NeverSample())
	benchDeliveries(b, gw, body, uniqueKey, reset)
}

// BenchmarkDeliveryDuplicateTraced: BenchmarkDeliveryDuplicate with every
// delivery traced (3 spans: the delivery, verify, claim).
func BenchmarkDeliveryDuplicateTraced(b *testing.B) {
	gw, body, reset := tracedBench(b, sdktrace.AlwaysSample())
	prime(gw, body)
	benchDeliveries(b, gw, body, dupKey, reset)
}
