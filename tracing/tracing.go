// Package tracing sets up OpenTelemetry for the gateway: the SDK's tracer
// provider, sampled by tracing.sample_ratio, exporting over OTLP (HTTP with
// protobuf, or gRPC) in batches. The spans themselves are made in proxy;
// this package only builds and stops what exports them.
//
// A nil *Provider is tracing switched off: its Tracer is nil, which proxy
// takes as "make no spans at all", and its Shutdown does nothing.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
)

// ServiceName is the service.name of the gateway's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise.
const ServiceName = "clawgate"

// InstrumentationName is the name of the tracer the spans come from.
const InstrumentationName = "github.com/clawgate/clawgate/proxy"

// Options are what New needs besides the tracing block.
type Options struct {
	// Version is the service.version of the spans.
	Version string
	// Logger receives the start-up line and the exporter's failures. Nil:
	// slog.Default().
	Logger *slog.Logger
	// Exporter replaces the OTLP exporter the block describes (tests use
	// the SDK's in-memory exporter). Nil: OTLP.
	Exporter sdktrace.SpanExporter
	// Sync exports each span as it ends rather than in batches (tests).
	Sync bool
}

// Provider owns the tracer provider and its exporter from New to Shutdown.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New returns the provider the resolved tracing block c describes, or nil
// when tracing is off (c.Enabled false). It does not connect: the exporter
// dials the collector when it first sends, and a collector that cannot be
// reached costs dropped spans and a logged error, never a delivery.
func New(ctx context.Context, c config.Tracing, o Options) (*Provider, error) {
	if !c.Enabled {
		return nil, nil
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	exp := o.Exporter
	if exp == nil {
		var err error
		if exp, err = NewExporter(ctx, c); err != nil {
			return nil, err
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", ServiceName),
			attribute.String("service.version", o.Version)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		// Last, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
		// override the attributes above.
		resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// Export failures are reported by the SDK through the global handler;
	// the batcher sends at most one batch every few seconds, so a collector
	// that is away costs a log line per batch, not per delivery.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: exporting spans failed", "error", err.Error())
	}))
	proc := sdktrace.WithBatcher(exp)
	if o.Sync {
		proc = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(
		proc,
		sdktrace.WithResource(res),
		// The gateway decides for itself which deliveries are traced: a
		// caller's sampled flag neither forces nor stops recording.
		sdktrace.WithSampler(sdktrace.TraceIDRatioBased(c.SampleRatio)),
	)
	log.Info("tracing on", "by", c.EnabledBy, "protocol", c.Protocol,
		"endpoint", describeEndpoint(c), "sample_ratio", c.SampleRatio)
	return &Provider{tp: tp, tracer: tp.Tracer(InstrumentationName)}, nil
}

// Tracer returns the tracer deliveries make their spans with; nil when p
// is nil (tracing off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Shutdown exports the spans still queued, waiting at most until ctx is
// done, and stops the exporter. Nothing when p is nil.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// NewExporter returns the OTLP exporter of the resolved tracing block c.
// With c.Endpoint empty the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// or OTEL_EXPORTER_OTLP_ENDPOINT itself, else sends to localhost. Other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, certificate,
// compression) are read by the exporter.
func NewExporter(ctx context.Context, c config.Tracing) (sdktrace.SpanExporter, error) {
	var u *url.URL
	if c.Endpoint != "" {
		var err error
		if u, err = url.Parse(c.Endpoint); err != nil {
			return nil, errors.New("tracing: tracing.endpoint is not a URL")
		}
	}
	switch c.Protocol {
	case config.TracingGRPC:
		var opts []otlptracegrpc.Option
		if u != nil {
			opts = append(opts, otlptracegrpc.WithEndpoint(u.Host))
			if u.Scheme == "http" {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
		}
		return otlptracegrpc.New(ctx, opts...)
	case config.TracingHTTP, "":
		var opts []otlptracehttp.Option
		if u != nil {
			opts = append(opts, otlptracehttp.WithEndpoint(u.Host),
				otlptracehttp.WithURLPath(strings.TrimSuffix(u.Path, "/")+"/v1/traces"))
			if u.Scheme == "http" {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("tracing: protocol %q is not http/protobuf or grpc", c.Protocol)
}

// describeEndpoint names where spans go, for the start-up line: the
// configured endpoint or the variable it comes from, without its userinfo,
// path or query.
func describeEndpoint(c config.Tracing) string {
	s, from := c.Endpoint, ""
	if s == "" {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if s = os.Getenv(v); s != "" {
				from = " (" + v + ")"
				break
			}
		}
	}
	if s == "" {
		if c.Protocol == config.TracingGRPC {
			return "localhost:4317 (default)"
		}
		return "localhost:4318 (default)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "unparsable" + from
	}
	return u.Scheme + "://" + u.Host + from
}

// ShutdownTimeout is how long Shutdown may take to flush at the gateway's
// stop: short, because it comes after the grace period and a collector
// that is away would otherwise hold the exit for its retries.
const ShutdownTimeout = 2 * time.Second
