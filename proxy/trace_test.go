package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/internal/eventually"
)

// callerTraceparent is a provider's traceparent: its trace and span ids.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// tracedHarness is a harness whose gateway traces every delivery into an
// in-memory exporter, span by span as each ends.
func tracedHarness(t *testing.T, sampler sdktrace.Sampler, opts ...harnessOpt) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	return newHarness(t, nil, append(opts, withTracer(tp.Tracer("test")))...), exp
}

// waitSpans waits, a bounded time, until the exporter holds a delivery
// span (kind server) for each of n deliveries, and returns every span.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, n int) tracetest.SpanStubs {
	t.Helper()
	var spans tracetest.SpanStubs
	roots := 0
	eventually.Within(t, 5*time.Second, func() bool {
		spans, roots = exp.GetSpans(), 0
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				roots++
			}
		}
		return roots >= n
	}, func() string { return fmt.Sprintf("%d delivery spans, want %d: %v", roots, n, names(spans)) })
	return spans
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// byName returns the only span called name.
func byName(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q in %v, want 1", len(found), name, names(spans))
	}
	return found[0]
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// accessLine returns the nth access line (msg "delivery").
func (h *harness) accessLine(t *testing.T, n int) map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range h.logs.Lines() {
		if l["msg"] == "delivery" {
			lines = append(lines, l)
		}
	}
	if n >= len(lines) {
		t.Fatalf("%d access lines, want line %d", len(lines), n)
	}
	return lines[n]
}

// A forwarded delivery is one server span continuing the provider's trace,
// with verify, claim, forward (client) and settle as its children; the
// upstream is told the forward span is its parent.
func TestTracingForwardedDeliveryContinuesTheCallersTrace(t *testing.T) {
	doortest.ForEach(t, testTracingForwardedDeliveryContinuesTheCallersTrace)
}

func testTracingForwardedDeliveryContinuesTheCallersTrace(t *testing.T) {
	h, exp := tracedHarness(t, sdktrace.AlwaysSample())
	r := h.post(t, "/webhook/order", "evt_tr", event, func(r *http.Request) {
		r.Header.Set("Traceparent", callerTraceparent)
		r.Header.Set("User-Agent", "Stripe/1.0")
	})
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	spans := waitSpans(t, exp, 1)
	if got := strings.Join(names(spans), ","); got != "verify,claim,forward,settle,POST /webhook/order" {
		t.Fatalf("spans in the order they ended: %s", got)
	}
	root := byName(t, spans, "POST /webhook/order")
	if root.SpanKind != trace.SpanKindServer {
		t.Errorf("delivery span kind %v", root.SpanKind)
	}
	if root.SpanContext.TraceID().String() != callerTraceID {
		t.Errorf("trace id %s, want the caller's %s", root.SpanContext.TraceID(), callerTraceID)
	}
	if !root.Parent.IsRemote() || root.Parent.SpanID().String() != callerSpanID {
		t.Errorf("parent %v (remote %v), want the caller's span %s", root.Parent.SpanID(), root.Parent.IsRemote(), callerSpanID)
	}
	for k, want := range map[string]any{
		"http.request.method": "POST", "http.route": "/webhook/order", "http.response.status_code": int64(200),
		"clawgate.route": "orders", "clawgate.outcome": "forwarded", "clawgate.idempotency_key": "evt_tr",
		"clawgate.secret_id": "k1", "client.address": "127.0.0.1", "user_agent.original": "Stripe/1.0",
		"http.request.body.size": int64(len(event)), "http.response.body.size": int64(len(`{"ok":true}`)),
	} {
		if got := attr(root, k).AsInterface(); got != want {
			t.Errorf("delivery span %s = %v, want %v", k, got, want)
		}
	}
	for _, name := range []string{"verify", "claim", "forward", "settle"} {
		s := byName(t, spans, name)
		if s.Parent.SpanID() != root.SpanContext.SpanID() || s.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("%s: parent %s in trace %s, want the delivery span %s", name, s.Parent.SpanID(), s.SpanContext.TraceID(), root.SpanContext.SpanID())
		}
		want := trace.SpanKindInternal
		if name == "forward" {
			want = trace.SpanKindClient
		}
		if s.SpanKind != want {
			t.Errorf("%s: kind %v, want %v", name, s.SpanKind, want)
		}
	}
	fwd := byName(t, spans, "forward")
	if got := attr(fwd, "http.response.status_code").AsInt64(); got != 200 {
		t.Errorf("forward span status %d", got)
	}
	if got := attr(fwd, "url.full").AsString(); got != h.up.URL+"/webhook/order" {
		t.Errorf("forward span url.full %q, want %q", got, h.up.URL+"/webhook/order")
	}
	if got := attr(fwd, "server.address").AsString(); got != "127.0.0.1" {
		t.Errorf("forward span server.address %q", got)
	}
	if got := attr(byName(t, spans, "claim"), "clawgate.claim.verdict").AsString(); got != "proceed" {
		t.Errorf("claim verdict %q", got)
	}
	if got := attr(byName(t, spans, "settle"), "clawgate.settle").AsString(); got != "finish" {
		t.Errorf("settle %q", got)
	}
	if got := attr(byName(t, spans, "verify"), "clawgate.secret_id").AsString(); got != "k1" {
		t.Errorf("verify secret_id %q", got)
	}

	h.mu.Lock()
	sent := h.upReqs[0].Header.Get("Traceparent")
	h.mu.Unlock()
	if want := "00-" + callerTraceID + "-" + fwd.SpanContext.SpanID().String() + "-01"; sent != want {
		t.Errorf("upstream got traceparent %q, want %q (the forward span as parent)", sent, want)
	}
	if got := h.accessLine(t, 0)["trace_id"]; got != callerTraceID {
		t.Errorf("access line trace_id %v, want %s", got, callerTraceID)
	}
}

// Without a valid traceparent the delivery span starts the trace: its
// trace id is the access line's trace_id and the request id.
func TestTracingStartsATraceWithoutAValidTraceparent(t *testing.T) {
	doortest.ForEach(t, testTracingStartsATraceWithoutAValidTraceparent)
}

func testTracingStartsATraceWithoutAValidTraceparent(t *testing.T) {
	for _, tc := range []struct{ name, header string }{
		{"none", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{"malformed", "00-" + callerTraceID + "-xyz-01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, exp := tracedHarness(t, sdktrace.AlwaysSample())
			r := h.post(t, "/webhook/order", "evt_new", event, func(r *http.Request) {
				if tc.header != "" {
					r.Header.Set("Traceparent", tc.header)
				}
			})
			if r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			spans := waitSpans(t, exp, 1)
			root := byName(t, spans, "POST /webhook/order")
			if root.Parent.IsValid() {
				t.Errorf("delivery span has parent %v, want none", root.Parent)
			}
			tid := root.SpanContext.TraceID().String()
			if tid == callerTraceID {
				t.Errorf("an invalid traceparent was continued")
			}
			if got := h.accessLine(t, 0)["trace_id"]; got != tid {
				t.Errorf("access line trace_id %v, want %s", got, tid)
			}
			if got := r.header.Get("X-Request-Id"); got != tid {
				t.Errorf("X-Request-Id %q, want the trace id %s", got, tid)
			}
			fwd := byName(t, spans, "forward")
			h.mu.Lock()
			sent := h.upReqs[0].Header.Get("Traceparent")
			h.mu.Unlock()
			if want := "00-" + tid + "-" + fwd.SpanContext.SpanID().String() + "-01"; sent != want {
				t.Errorf("upstream got traceparent %q, want %q", sent, want)
			}
		})
	}
}

// A duplicate answered from the local window has a claim span saying so,
// and no forward; a refused signature has a failed verify span and no
// claim.
func TestTracingDuplicateAndUnauthorized(t *testing.T) {
	doortest.ForEach(t, testTracingDuplicateAndUnauthorized)
}

func testTracingDuplicateAndUnauthorized(t *testing.T) {
	h, exp := tracedHarness(t, sdktrace.AlwaysSample())
	h.post(t, "/webhook/order", "evt_dup", event)
	waitSpans(t, exp, 1)
	exp.Reset()
	if r := h.post(t, "/webhook/order", "evt_dup", event); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not replayed: %d", r.status)
	}
	spans := waitSpans(t, exp, 1)
	if got := strings.Join(names(spans), ","); got != "verify,claim,POST /webhook/order" {
		t.Fatalf("spans %s", got)
	}
	claim := byName(t, spans, "claim")
	if l, v := attr(claim, "clawgate.claim.layer").AsString(), attr(claim, "clawgate.claim.verdict").AsString(); l != "cache" || v != "replay" {
		t.Errorf("claim layer %q verdict %q, want cache replay", l, v)
	}
	if got := attr(byName(t, spans, "POST /webhook/order"), "clawgate.outcome").AsString(); got != "replayed" {
		t.Errorf("outcome %q", got)
	}

	exp.Reset()
	h.post(t, "/webhook/order", "evt_bad", event, func(r *http.Request) { r.Header.Set("X-Signature", "sha256=00") })
	spans = waitSpans(t, exp, 1)
	if got := strings.Join(names(spans), ","); got != "verify,POST /webhook/order" {
		t.Fatalf("spans %s", got)
	}
	v := byName(t, spans, "verify")
	if v.Status.Code != codes.Error || attr(v, "clawgate.verify.reason").AsString() != "mismatch" {
		t.Errorf("verify span status %v reason %q", v.Status, attr(v, "clawgate.verify.reason").AsString())
	}
	root := byName(t, spans, "POST /webhook/order")
	if root.Status.Code == codes.Error || attr(root, "http.response.status_code").AsInt64() != 401 {
		t.Errorf("delivery span status %v code %d: a 401 is the caller's error, not the gateway's", root.Status, attr(root, "http.response.status_code").AsInt64())
	}
}

// On a route with a replay guard the signed request's claim is a span
// inside the delivery's claim, and its record a settle span of its own.
func TestTracingReplayGuard(t *testing.T) { doortest.ForEach(t, testTracingReplayGuard) }

func testTracingReplayGuard(t *testing.T) {
	h, exp := tracedHarness(t, sdktrace.AlwaysSample(), withRouteYAML(`    idempotency: { key: ["header:Idempotency-Key"] }`))
	if r := h.post(t, "/webhook/order", "evt_g", event); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	spans := waitSpans(t, exp, 1)
	claim, sig := byName(t, spans, "claim"), byName(t, spans, "claim signature")
	if sig.Parent.SpanID() != claim.SpanContext.SpanID() {
		t.Errorf("claim signature's parent %s, want the claim span %s", sig.Parent.SpanID(), claim.SpanContext.SpanID())
	}
	root := byName(t, spans, "POST /webhook/order")
	settle := byName(t, spans, "settle signature")
	if settle.Parent.SpanID() != root.SpanContext.SpanID() || attr(settle, "clawgate.settle").AsString() != "finish" {
		t.Errorf("settle signature: parent %s settle %q", settle.Parent.SpanID(), attr(settle, "clawgate.settle").AsString())
	}

	// The same signed request under another key: 422, answered in the claim.
	exp.Reset()
	if r := h.post(t, "/webhook/order", "evt_other", event); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("replay: status %d", r.status)
	}
	spans = waitSpans(t, exp, 1)
	if got := strings.Join(names(spans), ","); got != "verify,claim signature,claim,POST /webhook/order" {
		t.Fatalf("spans %s", got)
	}
	if got := attr(byName(t, spans, "claim"), "clawgate.claim.verdict").AsString(); got != "conflict" {
		t.Errorf("claim verdict %q, want conflict", got)
	}
}

// A delivery the sampler leaves out records nothing, and still passes a
// traceparent upstream in the caller's trace, marked not sampled.
func TestTracingUnsampledDelivery(t *testing.T) { doortest.ForEach(t, testTracingUnsampledDelivery) }

func testTracingUnsampledDelivery(t *testing.T) {
	h, exp := tracedHarness(t, sdktrace.NeverSample())
	if r := h.post(t, "/webhook/order", "evt_ns", event, func(r *http.Request) { r.Header.Set("Traceparent", callerTraceparent) }); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported, want none", n)
	}
	h.mu.Lock()
	sent := h.upReqs[0].Header.Get("Traceparent")
	h.mu.Unlock()
	if !strings.HasPrefix(sent, "00-"+callerTraceID+"-") || !strings.HasSuffix(sent, "-00") || strings.Contains(sent, callerSpanID) {
		t.Errorf("upstream got traceparent %q, want the caller's trace, a new parent, not sampled", sent)
	}
	if got := h.accessLine(t, 0)["trace_id"]; got != callerTraceID {
		t.Errorf("access line trace_id %v", got)
	}
}

// With tracing off the caller's traceparent goes upstream as it came, and
// its trace id is the access line's trace_id.
func TestTracingOffKeepsTheCallersTraceparent(t *testing.T) {
	doortest.ForEach(t, testTracingOffKeepsTheCallersTraceparent)
}

func testTracingOffKeepsTheCallersTraceparent(t *testing.T) {
	h := newHarness(t, nil)
	h.post(t, "/webhook/order", "evt_off", event, func(r *http.Request) { r.Header.Set("Traceparent", callerTraceparent) })
	h.mu.Lock()
	sent := h.upReqs[0].Header.Get("Traceparent")
	h.mu.Unlock()
	if sent != callerTraceparent {
		t.Errorf("upstream got traceparent %q, want %q", sent, callerTraceparent)
	}
	if got := h.accessLine(t, 0)["trace_id"]; got != callerTraceID {
		t.Errorf("access line trace_id %v", got)
	}
}
