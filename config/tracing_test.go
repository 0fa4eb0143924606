package config

import (
	"errors"
	"strings"
	"testing"
)

// TestTracingResolvesAgainstOTELVariables: what turns tracing on and off,
// and where protocol, endpoint and sample ratio come from when the file
// does not say.
func TestTracingResolvesAgainstOTELVariables(t *testing.T) {
	for _, tt := range []struct {
		name string
		yaml string
		env  map[string]string
		want Tracing
	}{
		{"off by default", "", nil,
			Tracing{Protocol: "http/protobuf", SampleRatio: 1}},
		{"empty block", "tracing:\n", nil,
			Tracing{Protocol: "http/protobuf", SampleRatio: 1}},
		{"enabled in the file", "tracing: { enabled: true }\n", nil,
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Protocol: "http/protobuf", SampleRatio: 1}},
		{"every field written", "tracing: { enabled: true, endpoint: \"https://otlp.example.com:4317\", protocol: grpc, sample_ratio: 0 }\n", nil,
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Endpoint: "https://otlp.example.com:4317", Protocol: "grpc", SampleRatio: 0}},
		{"null sample ratio keeps the default", "tracing: { enabled: true, sample_ratio: ~ }\n", nil,
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Protocol: "http/protobuf", SampleRatio: 1}},
		{"OTEL_TRACES_EXPORTER=otlp", "", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			Tracing{Enabled: true, EnabledBy: "OTEL_TRACES_EXPORTER=otlp", Protocol: "http/protobuf", SampleRatio: 1}},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "tracing: { enabled: false }\n", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			Tracing{Enabled: true, EnabledBy: "OTEL_EXPORTER_OTLP_ENDPOINT", Protocol: "http/protobuf", SampleRatio: 1}},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
			Tracing{Enabled: true, EnabledBy: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Protocol: "http/protobuf", SampleRatio: 1}},
		{"OTEL_TRACES_EXPORTER=none wins over the file", "tracing: { enabled: true }\n",
			map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			Tracing{EnabledBy: "OTEL_TRACES_EXPORTER=none", Protocol: "http/protobuf", SampleRatio: 1}},
		{"OTEL_SDK_DISABLED wins over everything", "tracing: { enabled: true }\n",
			map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
			Tracing{EnabledBy: "OTEL_SDK_DISABLED=true", Protocol: "http/protobuf", SampleRatio: 1}},
		{"protocol from OTEL_EXPORTER_OTLP_PROTOCOL", "tracing: { enabled: true }\n",
			map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Protocol: "grpc", SampleRatio: 1}},
		{"the traces protocol variable wins over the general one", "tracing: { enabled: true }\n",
			map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Protocol: "grpc", SampleRatio: 1}},
		{"a written protocol wins over the variables", "tracing: { enabled: true, protocol: http/protobuf }\n",
			map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			Tracing{Enabled: true, EnabledBy: "tracing.enabled", Protocol: "http/protobuf", SampleRatio: 1}},
		{"variables of a tracing that is off are not checked", "",
			map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			Tracing{Protocol: "http/json", SampleRatio: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useFakes(t)
			cfg, err := Parse([]byte(tt.yaml+okRoute), "", "", func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			eq(t, "tracing", cfg.Tracing, tt.want)
		})
	}
}

// TestTracingVariableErrors: a variable that turns tracing on, or that
// tracing reads, is checked, and the message names it without repeating
// an endpoint (which may carry a credential).
func TestTracingVariableErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		yaml string
		env  map[string]string
		want string
	}{
		{"unknown exporter", "", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"},
			`gateway.yaml: tracing: OTEL_TRACES_EXPORTER is "zipkin": clawgate exports traces over OTLP only; set it to otlp or none, or unset it`},
		{"bad protocol variable", "tracing:\n  enabled: true\n", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			`gateway.yaml:1: tracing.protocol: OTEL_EXPORTER_OTLP_PROTOCOL is "http/json": must be http/protobuf or grpc (http/json is not supported)`},
		{"endpoint without a scheme", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "user:secret-token@collector:4318"},
			`gateway.yaml: tracing.endpoint: the value of OTEL_EXPORTER_OTLP_ENDPOINT must be an absolute http or https URL: it has no scheme, as in http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc)`},
		{"traces endpoint with another scheme", "", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "unix://secret-token/collector"},
			`gateway.yaml: tracing.endpoint: the value of OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an absolute http or https URL: its scheme is "unix"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useFakes(t)
			_, err := Parse([]byte(tt.yaml+okRoute), "", "", func(k string) string { return tt.env[k] })
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want *Error", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("the endpoint's value reached the message: %s", err)
			}
		})
	}
}
