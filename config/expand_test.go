package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// envFunc returns a getenv reading env.
func envFunc(env map[string]string) func(string) string {
	return func(name string) string { return env[name] }
}

const expandYAML = `listen: "${LISTEN_HOST:-127.0.0.1}:${PORT}"
admin:
  listen: ${ADMIN_LISTEN:-127.0.0.1:9191}
  token_env: ADMIN_TOKEN
trusted_proxies: ["${LB_CIDR}"]
store:
  backend: ${STORE:-memory}
  on_error: ${ON_ERROR:-reject}
  redis:
    addrs: ["${REDIS_A}", "${REDIS_B:-10.0.0.2:26379}"]
    master_name: ${REDIS_MASTER}
    username: ${REDIS_USER:-}
    key_prefix: "${ENV}$$:"
queue:
  backend: ${QUEUE:-redis}
  kafka:
    brokers: ["${KAFKA_A}", "${KAFKA_B:-10.0.1.2:9092}"]
    topic_prefix: "${ENV}."
routes:
  - name: orders
    match: { path: /webhook/order, host: "orders.${DOMAIN}" }
    upstream: ${ORDERS_UPSTREAM}
    verify:
      scheme: hmac
      header: X-Signature
      secrets: [{ id: a, secret: &s "${ORDERS_UPSTREAM}-not-expanded" }]
  - name: refunds
    match: { path: /webhook/refund }
    upstream: &up ${REFUNDS_UPSTREAM:-http://127.0.0.1:9002}
    verify:
      scheme: hmac
      header: X-Signature
      secrets: [{ id: a, secret: *up }]
`

var expandEnv = map[string]string{
	"PORT":            "8443",
	"STORE":           "redis",
	"ON_ERROR":        "forward",
	"LB_CIDR":         "10.1.0.0/16",
	"REDIS_A":         "10.0.0.1:26379",
	"REDIS_MASTER":    "mymaster",
	"KAFKA_A":         "10.0.1.1:9092",
	"ENV":             "staging",
	"DOMAIN":          "staging.example.com",
	"ORDERS_UPSTREAM": "http://orders.staging.svc:9000",
	"ADMIN_TOKEN":     "admin-token-value-0123456789",
}

func TestExpandFields(t *testing.T) {
	useFakes(t)
	cfg, err := Parse([]byte(expandYAML), "gateway.yaml", t.TempDir(), envFunc(expandEnv))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "listen", cfg.Listen, "127.0.0.1:8443")
	eq(t, "admin.listen", cfg.Admin.Listen, "127.0.0.1:9191")
	eq(t, "trusted_proxies", cfg.TrustedProxies, []string{"10.1.0.0/16"})
	eq(t, "store.backend", cfg.Store.Backend, BackendRedis)
	eq(t, "store.on_error", cfg.Store.OnError, OnErrorForward)
	eq(t, "store.redis.addrs", cfg.Store.Redis.Addrs, []string{"10.0.0.1:26379", "10.0.0.2:26379"})
	eq(t, "store.redis.master_name", cfg.Store.Redis.MasterName, "mymaster")
	eq(t, "store.redis.username", cfg.Store.Redis.Username, "")
	eq(t, "store.redis.key_prefix", cfg.Store.Redis.KeyPrefix, "staging$:")
	eq(t, "queue.backend", cfg.Queue.Backend, QueueRedis)
	eq(t, "queue.kafka", cfg.Queue.Kafka, withKafkaDefaults(Kafka{Brokers: []string{"10.0.1.1:9092", "10.0.1.2:9092"}, TopicPrefix: "staging."}))
	o := route(t, cfg, "orders")
	eq(t, "orders.match.host", o.Match.Host, "orders.staging.example.com")
	eq(t, "orders.upstream", o.UpstreamURL.String(), "http://orders.staging.svc:9000")
	eq(t, "orders secret", o.Verify.Secrets[0].Secret, "${ORDERS_UPSTREAM}-not-expanded")
	r := route(t, cfg, "refunds")
	eq(t, "refunds.upstream", r.Upstream, "http://127.0.0.1:9002")
	// The secret refers to the upstream's anchor: it keeps the text as
	// written, only the upstream is expanded.
	eq(t, "refunds secret", r.Verify.Secrets[0].Secret, "${REFUNDS_UPSTREAM:-http://127.0.0.1:9002}")
}

// A variable's value is taken as it is: a "$" or "${...}" in it is not
// expanded again, and a value that looks like a number stays a string.
func TestExpandValueIsLiteral(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"${V}", "a${B}$$c"},
		{"x${N}", "x0123"},
		{"${N}", "0123"},
		{"$$${V}", "$a${B}$$c"},
		{"${UNSET:-$$}", "$$"},
		{"cost: 5$", "cost: 5$"},
		{"$1 $- $", "$1 $- $"},
		{"${UNSET:-}", ""},
		{"${UNSET:-a:b/c}", "a:b/c"},
	} {
		got, errs := expandString(c.in, envFunc(map[string]string{"V": "a${B}$$c", "N": "0123", "B": "no"}), "x")
		if len(errs) > 0 || got != c.want {
			t.Errorf("expand %q = %q %v, want %q", c.in, got, errs, c.want)
		}
	}
}

func TestExpandedNumberIsAString(t *testing.T) {
	useFakes(t)
	y := `store:
  redis: { key_prefix: "${PREFIX}" }
routes:
  - name: orders
    match: { path: /webhook/order, host: "${HOST}" }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
`
	cfg, err := Parse([]byte(y), "", "", envFunc(map[string]string{"PREFIX": "123", "HOST": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "key_prefix", cfg.Store.Redis.KeyPrefix, "123")
	eq(t, "match.host", cfg.Routes[0].Match.Host, "true")
}

// Load reads the process environment, and an unset variable's problem
// names the file, the line, the field and the variable.
func TestLoadExpandsTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	y := `routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: ${CLAWGATE_TEST_ORDERS_UPSTREAM}
    verify: { scheme: none }
`
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLAWGATE_TEST_ORDERS_UPSTREAM", "")
	_, err := Load(path)
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("Load with the variable unset: %v", err)
	}
	want := path + ":4: routes[0] (orders): upstream: ${CLAWGATE_TEST_ORDERS_UPSTREAM} is unset or empty; set it, or write ${CLAWGATE_TEST_ORDERS_UPSTREAM:-http://127.0.0.1:9000} to give it a default"
	if got := ce.Problems[0].Error(); got != want {
		t.Errorf("problem:\n%s\nwant:\n%s", got, want)
	}

	t.Setenv("CLAWGATE_TEST_ORDERS_UPSTREAM", "http://127.0.0.1:9555")
	realDeps(t)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "upstream", cfg.Routes[0].UpstreamURL.String(), "http://127.0.0.1:9555")
}

// Shape problems and expansion problems are reported together.
func TestExpandProblemsBesideShapeProblems(t *testing.T) {
	useFakes(t)
	y := `listen: ${NOPE}
dedupe: { window: soon }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
`
	_, err := Parse([]byte(y), "", "", envFunc(nil))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v", err)
	}
	got := strings.Join(ce.Lines(), "\n")
	for _, want := range []string{"gateway.yaml:1: listen: ${NOPE} is unset", "gateway.yaml:2: dedupe.window: expected a duration"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}

func TestExpandTracingEndpoint(t *testing.T) {
	useFakes(t)
	y := `tracing: { enabled: true, endpoint: "${COLLECTOR:-http://127.0.0.1:4318}" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    verify: { scheme: none }
`
	for env, want := range map[string]string{"": "http://127.0.0.1:4318", "http://otel.staging:4318": "http://otel.staging:4318"} {
		cfg, err := Parse([]byte(y), "", "", envFunc(map[string]string{"COLLECTOR": env}))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "tracing.endpoint", cfg.Tracing.Endpoint, want)
	}
}
