package config

import (
	"crypto/tls"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// parseGood parses a good file as gateway.yaml and fails on any error.
func parseGood(t *testing.T, file string) *Config {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, "gateway.yaml", filepath.Dir(file), getenv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	for _, r := range cfg.Routes {
		if r.UpstreamURL == nil || r.Key == nil || r.Verifier == nil {
			t.Errorf("route %q not compiled: upstream %v, key %v, verifier %v", r.Name, r.UpstreamURL, r.Key, r.Verifier)
		}
	}
	assertNoSecrets(t, strings.Join(cfg.Warnings, "\n"))
	return cfg
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// route returns the route named name.
func route(t *testing.T, cfg *Config, name string) *Route {
	t.Helper()
	for i := range cfg.Routes {
		if cfg.Routes[i].Name == name {
			return &cfg.Routes[i]
		}
	}
	t.Fatalf("no route %q", name)
	return nil
}

// goodChecks asserts the values each testdata/good file loads to; every
// good file must have an entry.
var goodChecks = map[string]func(t *testing.T, cfg *Config){
	"acme.yaml": func(t *testing.T, cfg *Config) {
		// Names are lower-cased without their final dot; the cache sits
		// beside the config; HTTP-01 listens on :80.
		eq(t, "tls.acme", cfg.TLS.ACME, ACME{Domains: []string{"hooks.example.com", "webhooks.example.com"}, Email: "ops@example.com",
			CacheDir: filepath.Join(cfg.Dir, "acme"), DirectoryURL: DefaultACMEDirectory, HTTPListen: ":80"})
		eq(t, "tls.acme.On", cfg.TLS.ACME.On(), true)
	},
	"minimal.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "listen", cfg.Listen, ":8080")
		eq(t, "tls", cfg.TLS, TLS{})
		eq(t, "admin", cfg.Admin, Admin{Listen: "127.0.0.1:9090", TokenEnv: "CLAWGATE_ADMIN_TOKEN"})
		eq(t, "store", cfg.Store, Store{
			Backend: "memory",
			Memory:  Memory{MaxBytes: 256 << 20},
			Redis:   Redis{Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: "clawgate:", WaitTimeout: 100 * time.Millisecond},
			OnError: "reject",
		})
		eq(t, "dedupe", cfg.Dedupe, Dedupe{
			Window: 10 * time.Second, CacheSize: 100000, LockTTL: 30 * time.Second,
			Retention: 72 * time.Hour, ReplayBodyLimit: 64 << 10, History: 50,
		})
		eq(t, "queue", cfg.Queue, Queue{
			Backend: "memory", MaxDepth: 100000, MaxDLQ: DefaultQueueMaxDLQ, MaxDLQBytes: DefaultQueueMaxDLQBytes, Shards: 1, ReplayRate: 50,
			Kafka: Kafka{
				TopicPrefix: "clawgate.", ClientID: "clawgate", Group: "clawgate",
				Partitions: 3, ReplicationFactor: -1, CreateTopics: true,
			},
		})
		eq(t, "trusted_proxies", cfg.TrustedProxies, []string(nil))
		eq(t, "trusted nets", cfg.TrustedNets, []netip.Prefix(nil))
		eq(t, "alerts", cfg.Alerts, Alerts{MaxAttempts: 3})
		eq(t, "warnings", cfg.Warnings, []string(nil))
		eq(t, "path", cfg.Path, "gateway.yaml")
		eq(t, "dir", cfg.Dir, "testdata/good")
		eq(t, "routes", len(cfg.Routes), 1)
		r := cfg.Routes[0]
		eq(t, "name", r.Name, "orders")
		eq(t, "line", r.Line, 3)
		eq(t, "match", r.Match, Match{Path: "/webhook/order", Methods: []string{"POST"}})
		eq(t, "upstream", r.UpstreamURL.String(), "http://127.0.0.1:9000")
		eq(t, "dedupe.mode", r.Dedupe.Mode, "enforce")
		eq(t, "strip_prefix", r.StripPrefix, "")
		eq(t, "timeout", r.Timeout, 10*time.Second)
		eq(t, "retention", r.Retention, 72*time.Hour)
		eq(t, "replay guard", r.ReplayGuard, false)
		eq(t, "max_body", r.MaxBody, ByteSize(1<<20))
		eq(t, "idempotency", r.Idempotency, Idempotency{Required: true, Key: []string{"header:Idempotency-Key"}})
		eq(t, "verify.scheme", r.Verify.Scheme, "none")
		eq(t, "verify.tolerance", r.Verify.Tolerance, 5*time.Minute)
		eq(t, "verify.algorithm", r.Verify.Algorithm, "sha256")
		eq(t, "verify.encoding", r.Verify.Encoding, "hex")
		eq(t, "delivery", r.Delivery, "sync")
		eq(t, "queued", r.Queued(), false)
		eq(t, "ack_status", r.AckStatus, 202)
		eq(t, "workers", r.Workers, 8)
		eq(t, "retry", r.Retry, Retry{MaxAttempts: 16, Initial: 5 * time.Second, Max: time.Hour})
	},
	"full.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "listen", cfg.Listen, "127.0.0.1:8443")
		eq(t, "admin", cfg.Admin, Admin{Listen: "[::1]:9191", TokenEnv: "ADMIN_TOKEN", Token: testEnv["ADMIN_TOKEN"]})
		eq(t, "trusted_proxies", cfg.TrustedProxies, []string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32", "::ffff:198.51.100.0/120", "::ffff:203.0.113.9", "172.16.5.4/12"})
		eq(t, "trusted nets", cfg.TrustedNets, []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32"),
			netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.9/32"), netip.MustParsePrefix("172.16.0.0/12"),
		})
		eq(t, "store", cfg.Store, Store{
			Backend: "redis",
			Memory:  Memory{MaxBytes: 64 << 20},
			Redis: Redis{
				Addrs:      []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
				MasterName: "mymaster", Username: "clawgate", PasswordEnv: "REDIS_PASSWORD",
				DB: 2, KeyPrefix: "cg:", TLS: true, Password: testEnv["REDIS_PASSWORD"],
				WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond,
			},
			OnError: "forward",
		})
		eq(t, "queue", cfg.Queue, Queue{
			Backend: "redis", MaxDepth: 2000, MaxDLQ: DefaultQueueMaxDLQ, MaxDLQBytes: DefaultQueueMaxDLQBytes, Shards: 16, ReplayRate: 12.5,
			Kafka: withKafkaDefaults(Kafka{Brokers: []string{"10.0.1.1:9092", "10.0.1.2:9092"}, TopicPrefix: "cg."}),
		})
		eq(t, "dedupe", cfg.Dedupe, Dedupe{
			Window: 5 * time.Second, CacheSize: 5000, LockTTL: time.Minute,
			Retention: 96 * time.Hour, ReplayBodyLimit: 128 << 10, History: 200,
		})
		eq(t, "alerts", cfg.Alerts, Alerts{MaxAttempts: 5, WebhookURLEnv: "ALERT_URL", WebhookURL: testEnv["ALERT_URL"],
			PagerDutyRoutingKeyEnv: "PD_ROUTING_KEY", PagerDutyRoutingKey: testEnv["PD_ROUTING_KEY"]})
		eq(t, "warnings", cfg.Warnings, []string(nil))

		o := route(t, cfg, "orders")
		eq(t, "orders.match", o.Match, Match{Path: "/webhook/order", Host: "orders.example.com", Methods: []string{"POST", "PUT"}})
		eq(t, "orders.upstream", o.UpstreamURL.String(), "https://orders.internal:8443/base/")
		eq(t, "orders.dedupe.mode", o.Dedupe.Mode, "shadow")
		eq(t, "orders.strip_prefix", o.StripPrefix, "/webhook")
		eq(t, "orders.timeout", o.Timeout, 45*time.Second)
		eq(t, "orders.retention", o.Retention, 120*time.Hour)
		eq(t, "orders.replay guard", o.ReplayGuard, false)
		eq(t, "orders.max_body", o.MaxBody, 2*MiB)
		eq(t, "orders.idempotency", o.Idempotency, Idempotency{
			Required: false, AllowUnsignedKey: true,
			Key: []string{"json:data.object.id", "header:Idempotency-Key", "template:{json:type}:{json:id}"},
		})
		v := o.Verify
		eq(t, "orders.verify", [...]string{v.Scheme, v.Header, v.Algorithm, v.Encoding, v.Prefix}, [...]string{"hmac", "X-Signature", "sha512", "base64", "sha512="})
		eq(t, "orders.verify.tolerance", v.Tolerance, 2*time.Minute)
		eq(t, "orders.verify.secrets", len(v.Secrets), 2)
		eq(t, "orders.verify.secrets[1].not_after", v.Secrets[1].NotAfter, time.Date(2030, 12, 1, 0, 0, 0, 0, time.UTC))
		eq(t, "orders.delivery", o.Delivery, "sync")

		p := route(t, cfg, "payments")
		eq(t, "payments.match", p.Match, Match{PathPrefix: "/pay/", Methods: []string{"POST"}})
		eq(t, "payments.dedupe.mode", p.Dedupe.Mode, "off")
		eq(t, "payments.max_body", p.MaxBody, ByteSize(1000000))
		eq(t, "payments.idempotency", p.Idempotency, Idempotency{Required: true, Key: []string{"body:sha256"}})
		eq(t, "payments.verify.tolerance", p.Verify.Tolerance, 10*time.Minute)
		eq(t, "payments.retention", p.Retention, 96*time.Hour)
		eq(t, "payments.replay guard", p.ReplayGuard, false)
	},
	"queue.yaml": func(t *testing.T, cfg *Config) {
		// queue.backend is not written: it follows store.backend.
		eq(t, "queue", cfg.Queue, Queue{
			Backend: "redis", MaxDepth: 5000, MaxDLQ: 500, MaxDLQBytes: 8 * MiB, Shards: 1, ReplayRate: 2.5,
			Kafka: Default().Queue.Kafka,
		})
		eq(t, "warnings", cfg.Warnings, []string(nil))
		type queued struct {
			Queued    bool
			AckStatus int
			Workers   int
			Retry     Retry
			Timeout   time.Duration
		}
		defaults := Retry{MaxAttempts: 16, Initial: 5 * time.Second, Max: time.Hour}
		for name, want := range map[string]queued{
			"orders":   {true, 202, 8, defaults, 10 * time.Second},
			"invoices": {true, 200, 32, Retry{MaxAttempts: 1, Initial: time.Second, Max: time.Second}, 20 * time.Second},
			"refunds":  {true, 202, 8, Retry{MaxAttempts: 1000, Initial: 5 * time.Second, Max: 24 * time.Hour}, 10 * time.Second},
			"payments": {false, 202, 8, defaults, 10 * time.Second},
		} {
			r := route(t, cfg, name)
			eq(t, name, queued{r.Queued(), r.AckStatus, r.Workers, r.Retry, r.Timeout}, want)
			eq(t, name+".replay guard", r.ReplayGuard, false)
		}
		eq(t, "orders.delivery", route(t, cfg, "orders").Delivery, DeliveryQueue)
		eq(t, "payments.delivery", route(t, cfg, "payments").Delivery, DeliverySync)
	},
	"queue_warnings.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "queue.backend", cfg.Queue.Backend, QueueMemory)
		eq(t, "config warnings", configWarnings(cfg), []string{
			`gateway.yaml:8: route "slack": delivery: Slack's url_verification handshake needs the upstream's answer now; a queue route answers 202 instead`,
			`gateway.yaml:20: route "github": idempotency.key: the first key source "header:X-GitHub-Delivery" is not covered by the github signature (header X-GitHub-Delivery is not signed) and idempotency.allow_unsigned_key is set, so nothing guards the route: a captured delivery sent again with a fresh key is forwarded again`,
			`gateway.yaml:3: store.on_error: forward does not apply to queue routes (slack, github): they answer 503 while the queue backend is unreachable`,
		})
		eq(t, "github.ack_status", route(t, cfg, "github").AckStatus, 204)
		eq(t, "github.replay guard", route(t, cfg, "github").ReplayGuard, false)
		eq(t, "slack-sync.queued", route(t, cfg, "slack-sync").Queued(), false)
	},
	"kafka.yaml": func(t *testing.T, cfg *Config) {
		q := cfg.Queue
		tc := q.Kafka.TLSConfig
		if tc == nil || tc.ServerName != "kafka.internal" || tc.MinVersion != tls.VersionTLS12 || tc.RootCAs != nil || len(tc.Certificates) != 0 {
			t.Fatalf("tls config %+v", tc)
		}
		q.Kafka.TLSConfig = nil
		eq(t, "queue", q, Queue{
			Backend: QueueKafka, MaxDepth: 20000, MaxDLQ: DefaultQueueMaxDLQ, MaxDLQBytes: DefaultQueueMaxDLQBytes, Shards: 1, ReplayRate: 50,
			Kafka: Kafka{
				Brokers:     []string{"kafka-1:9092", "kafka-2.internal:9093", "[2001:db8::7]:9092"},
				TopicPrefix: "prod.webhooks.", ClientID: "clawgate-prod", Group: "clawgate-prod",
				Partitions: 12, ReplicationFactor: 3, CreateTopics: false,
				TLS: KafkaTLS{Enabled: true, ServerName: "kafka.internal"},
				SASL: KafkaSASL{Mechanism: SASLScramSHA512, Username: "clawgate", PasswordEnv: "KAFKA_PASSWORD",
					Password: testEnv["KAFKA_PASSWORD"]},
			},
		})
		eq(t, "warnings", cfg.Warnings, []string(nil))
		eq(t, "orders_v2.eu-west.queued", route(t, cfg, "orders_v2.eu-west").Queued(), true)
	},
	"kafka_defaults.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "queue", cfg.Queue, Queue{
			Backend: QueueKafka, MaxDepth: 100000, MaxDLQ: DefaultQueueMaxDLQ, MaxDLQBytes: DefaultQueueMaxDLQBytes, Shards: 1, ReplayRate: 50,
			Kafka: withKafkaDefaults(Kafka{
				Brokers: []string{"127.0.0.1:9092"},
				SASL:    KafkaSASL{Mechanism: SASLPlain, Username: "clawgate", PasswordEnv: "KAFKA_PASSWORD", Password: testEnv["KAFKA_PASSWORD"]},
			}),
		})
		eq(t, "tls config", cfg.Queue.Kafka.TLSConfig, (*tls.Config)(nil))
		eq(t, "config warnings", configWarnings(cfg), []string{
			`gateway.yaml:5: queue.backend: kafka with store.backend: memory keeps the state of the events' keys in this process only: run a single instance (several would not share it; use store.backend: redis)`,
			`gateway.yaml:8: queue.kafka.sasl: mechanism plain without queue.kafka.tls.enabled sends the password in clear to the brokers; set tls.enabled: true`,
		})
	},
	"sizes.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "replay_body_limit", cfg.Dedupe.ReplayBodyLimit, ByteSize(0))
		want := map[string]ByteSize{
			"a": 512, "b": 10000, "c": 1000000, "d": 1 << 30,
			"e": 4096, "f": 3 << 19, "g": 64 << 10, "h": 256,
		}
		for name, size := range want {
			eq(t, name+".max_body", route(t, cfg, name).MaxBody, size)
		}
	},
	"anchors.yaml": func(t *testing.T, cfg *Config) {
		orders, refunds, invoices := route(t, cfg, "orders"), route(t, cfg, "refunds"), route(t, cfg, "invoices")
		eq(t, "refunds.path", refunds.Match.Path, "/webhook/refund")
		eq(t, "refunds.upstream", refunds.Upstream, orders.Upstream)
		eq(t, "refunds.timeout", refunds.Timeout, 5*time.Second)
		eq(t, "refunds.verify", refunds.Verify, orders.Verify)
		eq(t, "refunds.line", refunds.Line, 12)
		eq(t, "invoices.verify", invoices.Verify, orders.Verify)
		eq(t, "invoices.timeout", invoices.Timeout, 10*time.Second)
		eq(t, "orders.verify.header", orders.Verify.Header, "X-Signature")
	},
	"warnings.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "config warnings", configWarnings(cfg), warningsYAML)
		eq(t, "verify warnings", verifyWarnings(cfg), []string{`gateway.yaml:25: route "demo": verify: secrets[0] is inline`})
		eq(t, "pubsub.replay guard", route(t, cfg, "pubsub").ReplayGuard, false)
	},
	"replay_guard.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "config warnings", configWarnings(cfg), []string{
			`gateway.yaml:92: route "allowed": idempotency.key: the first key source "header:X-GitHub-Delivery" is not covered by the github signature (header X-GitHub-Delivery is not signed) and idempotency.allow_unsigned_key is set, so nothing guards the route: a captured delivery sent again with a fresh key is forwarded again`,
		})
		want := map[string]bool{
			"github-delivery": true, "github-delivery-then-body": true, "github-body": false,
			"shopify-id": true, "webhook-id": false, "svix-id": true, "stripe-json": false,
			"slack-signed-template": false, "slack-mixed-template": true,
			"hmac-query": true, "hmac-form": false, "jwt-bound-json": false, "jwt-bound-header": true,
			"none-header": false, "shadow": true, "off": false, "allowed": false,
		}
		eq(t, "routes", len(cfg.Routes), len(want))
		for name, guard := range want {
			eq(t, name+".replay guard", route(t, cfg, name).ReplayGuard, guard)
		}
	},
	"queue_replay_guard.yaml": func(t *testing.T, cfg *Config) {
		eq(t, "config warnings", configWarnings(cfg), []string{
			`gateway.yaml:32: route "allowed": idempotency.key: the first key source "header:X-GitHub-Delivery" is not covered by the github signature (header X-GitHub-Delivery is not signed) and idempotency.allow_unsigned_key is set, so nothing guards the route: a captured delivery sent again with a fresh key is forwarded again`,
		})
		want := map[string]bool{
			"github-delivery": true, "hmac-idempotency-key": true, "hmac-query": true,
			"github-body": false, "allowed": false, "shadow": true,
		}
		eq(t, "routes", len(cfg.Routes), len(want))
		for name, guard := range want {
			r := route(t, cfg, name)
			eq(t, name+".queued", r.Queued(), true)
			eq(t, name+".replay guard", r.ReplayGuard, guard)
		}
		eq(t, "shadow.dedupe.mode", route(t, cfg, "shadow").Dedupe.Mode, ModeShadow)
	},
}

// warningsYAML are the warnings of testdata/good/warnings.yaml that config
// itself gives.
var warningsYAML = []string{
	`gateway.yaml:2: trusted_proxies[1]: "0.0.0.0/0" trusts every client: anyone can set X-Forwarded-For; list only the addresses of your proxies`,
	`gateway.yaml:2: trusted_proxies[2]: "::/0" trusts every client: anyone can set X-Forwarded-For; list only the addresses of your proxies`,
	`gateway.yaml:13: route "pubsub": idempotency.key: the first key source "json:message.messageId" is not covered by the jwt signature (without jwt.body_hash_claim no part of the body is signed) and idempotency.allow_unsigned_key is set, so nothing guards the route: a captured delivery sent again with a fresh key is forwarded again`,
}

// configWarnings returns the warnings config gives itself, and
// verifyWarnings those verify gave (which the real package words its own
// way).
func configWarnings(cfg *Config) []string {
	var own []string
	for _, w := range cfg.Warnings {
		if !strings.Contains(w, ": verify: ") {
			own = append(own, w)
		}
	}
	return own
}

func verifyWarnings(cfg *Config) []string {
	var out []string
	for _, w := range cfg.Warnings {
		if strings.Contains(w, ": verify: ") {
			out = append(out, w)
		}
	}
	return out
}

// TestGood loads every testdata/good file with the fake verify and dedupe
// and asserts the values it loads to.
func TestGood(t *testing.T) {
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			useFakes(t)
			check := goodChecks[filepath.Base(file)]
			if check == nil {
				t.Fatalf("no entry in goodChecks")
			}
			check(t, parseGood(t, file))
		})
	}
}
