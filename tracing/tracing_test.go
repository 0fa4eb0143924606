package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/tracing"
)

// receiver collects what an OTLP receiver was sent.
type receiver struct {
	mu    sync.Mutex
	reqs  []*coltracepb.ExportTraceServiceRequest
	paths []string
}

func (rc *receiver) add(path string, req *coltracepb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.paths = append(rc.paths, path)
	rc.reqs = append(rc.reqs, req)
}

// spans returns the names of the spans received, and the service.name of
// their resources.
func (rc *receiver) spans() (names, services []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, req := range rc.reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					services = append(services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}
	return names, services
}

// httpReceiver is an OTLP/HTTP receiver on loopback: it decodes the
// protobuf posted to .../v1/traces.
func httpReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	rc := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.add(r.URL.Path, req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// grpcTraceService is the collector's TraceService.
type grpcTraceService struct {
	coltracepb.UnimplementedTraceServiceServer
	rc *receiver
}

func (s grpcTraceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.rc.add("grpc", req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// grpcReceiver is an OTLP/gRPC receiver on 127.0.0.1.
func grpcReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcTraceService{rc: rc})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return rc, "http://" + ln.Addr().String()
}

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// A span ended before Shutdown reaches a real receiver over each protocol:
// Shutdown flushes the batch.
func TestSpansReachAnOTLPReceiver(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		start    func(*testing.T) (*receiver, string)
		path     string // endpoint path written in the config
		wantPath string // path the receiver saw
	}{
		{config.TracingHTTP, httpReceiver, "", "/v1/traces"},
		{config.TracingHTTP, httpReceiver, "/otlp/", "/otlp/v1/traces"},
		{config.TracingGRPC, grpcReceiver, "", "grpc"},
	} {
		t.Run(tc.protocol+tc.path, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", "")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
			rc, endpoint := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := tracing.New(ctx, config.Tracing{
				Enabled: true, Endpoint: endpoint + tc.path, Protocol: tc.protocol, SampleRatio: 1,
			}, tracing.Options{Version: "test", Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.Tracer().Start(ctx, "POST /webhook/order")
			span.End()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			names, services := rc.spans()
			if len(names) != 1 || names[0] != "POST /webhook/order" {
				t.Fatalf("receiver got spans %v", names)
			}
			if len(services) != 1 || services[0] != tracing.ServiceName {
				t.Errorf("service.name %v, want %s", services, tracing.ServiceName)
			}
			rc.mu.Lock()
			path := rc.paths[0]
			rc.mu.Unlock()
			if path != tc.wantPath {
				t.Errorf("posted to %q, want %q", path, tc.wantPath)
			}
		})
	}
}

// OTEL_SERVICE_NAME names the service, and a sample ratio of 0 records
// nothing.
func TestServiceNameAndSampleRatio(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "clawgate-eu")
	rc, endpoint := httpReceiver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ratio := range []float64{0, 1} {
		p, err := tracing.New(ctx, config.Tracing{Enabled: true, Endpoint: endpoint, Protocol: config.TracingHTTP, SampleRatio: ratio},
			tracing.Options{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		_, span := p.Tracer().Start(ctx, "ratio")
		if span.SpanContext().IsSampled() != (ratio == 1) || !span.SpanContext().IsValid() {
			t.Errorf("ratio %v: sampled %v, valid %v", ratio, span.SpanContext().IsSampled(), span.SpanContext().IsValid())
		}
		span.End()
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	names, services := rc.spans()
	if len(names) != 1 {
		t.Fatalf("receiver got %v, want the one sampled span", names)
	}
	if services[0] != "clawgate-eu" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", services[0])
	}
}

// Tracing off is a nil provider: no tracer, and a Shutdown that does
// nothing.
func TestOffIsNil(t *testing.T) {
	p, err := tracing.New(context.Background(), config.Tracing{Enabled: false, Endpoint: "http://127.0.0.1:1"}, tracing.Options{})
	if err != nil || p != nil {
		t.Fatalf("New = %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil {
		t.Error("a nil provider has a tracer")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}
