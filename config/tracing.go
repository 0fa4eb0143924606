package config

import "strings"

// Tracing protocols: tracing.protocol, or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// and OTEL_EXPORTER_OTLP_PROTOCOL when it is not written.
const (
	TracingHTTP = "http/protobuf" // OTLP over HTTP, POST {endpoint}/v1/traces
	TracingGRPC = "grpc"          // OTLP over gRPC
)

// Defaults of the tracing block.
const (
	DefaultTracingProtocol    = TracingHTTP
	DefaultTracingSampleRatio = 1.0
)

// The OTEL_* variables the tracing block reads. The OTLP exporter reads
// the other OTEL_EXPORTER_OTLP_* variables itself (headers, timeout,
// certificates, compression), and OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service.
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// checkTracing validates the tracing block and resolves it against the
// OTEL_* variables:
//
//   - Enabled ends up true when tracing.enabled is true, or
//     OTEL_TRACES_EXPORTER is "otlp", or OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and not empty; and false,
//     whatever else is set, when OTEL_SDK_DISABLED is "true" or
//     OTEL_TRACES_EXPORTER is "none". EnabledBy says which of these decided.
//   - Protocol, when not written, is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
//     else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
//   - SampleRatio, when not written, is 1.
//
// The written fields are checked whether or not tracing is on; the
// variables only when they are used (tracing on, nothing written instead).
func (b *builder) checkTracing() {
	t := &b.cfg.Tracing
	block := lookup(b.loc.root, "tracing")
	written := func(field string) bool {
		v := lookup(block, field)
		return v != nil && !isNull(v)
	}

	if t.Enabled {
		t.EnabledBy = "tracing.enabled"
	}
	exporter := strings.ToLower(strings.TrimSpace(b.getenv(envTracesExporter)))
	switch exporter {
	case "":
	case "otlp":
		t.Enabled, t.EnabledBy = true, envTracesExporter+"=otlp"
	case "none":
		t.Enabled, t.EnabledBy = false, envTracesExporter+"=none"
	default:
		b.ps.add(b.line("tracing"), "tracing", "%s is %q: clawgate exports traces over OTLP only; set it to otlp or none, or unset it",
			envTracesExporter, clip(exporter))
	}
	if exporter == "" && !t.Enabled {
		for _, v := range []string{envTracesEndpoint, envEndpoint} {
			if b.getenv(v) != "" {
				t.Enabled, t.EnabledBy = true, v
				break
			}
		}
	}
	if strings.EqualFold(strings.TrimSpace(b.getenv(envSDKDisabled)), "true") {
		t.Enabled, t.EnabledBy = false, envSDKDisabled+"=true"
	}

	switch {
	case written("protocol"):
		b.checkTracingProtocol(b.line("tracing", "protocol"), "", t.Protocol)
	case b.getenv(envTracesProtocol) != "":
		t.Protocol = strings.TrimSpace(b.getenv(envTracesProtocol))
		if t.Enabled {
			b.checkTracingProtocol(b.line("tracing"), envTracesProtocol, t.Protocol)
		}
	case b.getenv(envProtocol) != "":
		t.Protocol = strings.TrimSpace(b.getenv(envProtocol))
		if t.Enabled {
			b.checkTracingProtocol(b.line("tracing"), envProtocol, t.Protocol)
		}
	default:
		t.Protocol = DefaultTracingProtocol
	}

	if !written("sample_ratio") {
		t.SampleRatio = DefaultTracingSampleRatio
	} else if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		b.ps.add(b.line("tracing", "sample_ratio"), "tracing.sample_ratio",
			"must be between 0 and 1 (the share of deliveries traced: 1 traces all, 0.1 one in ten), got %v", t.SampleRatio)
	}

	if t.Endpoint != "" {
		b.checkTracingEndpoint(b.line("tracing", "endpoint"), "", t.Endpoint, t.Protocol)
		return
	}
	if !t.Enabled {
		return
	}
	// The exporter reads these itself; they are checked here because it
	// ignores a value it cannot parse and sends to localhost instead.
	for _, v := range []string{envTracesEndpoint, envEndpoint} {
		if s := b.getenv(v); s != "" {
			b.checkTracingEndpoint(b.line("tracing"), v, s, t.Protocol)
		}
	}
}

// checkTracingProtocol checks a protocol written at line, or read from the
// variable env when env is not empty.
func (b *builder) checkTracingProtocol(line int, env, p string) {
	if p == TracingHTTP || p == TracingGRPC {
		return
	}
	hint := ""
	if p == "http/json" {
		hint = " (http/json is not supported)"
	}
	if env != "" {
		b.ps.add(line, "tracing.protocol", "%s is %q: must be http/protobuf or grpc%s", env, clip(p), hint)
		return
	}
	b.ps.add(line, "tracing.protocol", "must be http/protobuf or grpc, got %q%s", clip(p), hint)
}

// checkTracingEndpoint checks an OTLP endpoint written at line, or read
// from the variable env when env is not empty: an http or https URL with a
// host (http: plain text, https: TLS). A gRPC endpoint has no path. The
// URL is never repeated in a message (it may carry a credential).
func (b *builder) checkTracingEndpoint(line int, env, s, protocol string) {
	field, what := "tracing.endpoint", ""
	if env != "" {
		what = "the value of " + env + " "
	}
	if !strings.Contains(s, "://") {
		b.ps.add(line, field, "%s%v: it has no scheme, as in http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc)", what, errNotHTTPURL)
		return
	}
	u, err := httpURL(s)
	if err != nil {
		b.ps.add(line, field, "%s%v", what, err)
		return
	}
	if u.RawQuery != "" || u.Fragment != "" {
		b.ps.add(line, field, "%smust not have a query or fragment", what)
		return
	}
	if protocol == TracingGRPC && env == "" && strings.Trim(u.Path, "/") != "" {
		b.ps.add(line, field, "%smust not have a path with protocol grpc, got %q", what, clip(u.Path))
	}
}
