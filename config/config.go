// Package config loads and validates gateway.yaml.
//
// Loading is strict (an unknown field is an error naming it and its line),
// applies defaults before decoding, runs every cross-field check, and
// compiles what the request path needs (upstream URLs, key sources,
// verifiers) so that a config that loads is a config that runs.
//
// Problems are reported together, as an *Error with one line per problem
// ("gateway.yaml:14: routes[0] (orders): timeout: ..."), in two passes: the
// document's shape first (YAML syntax, unknown or repeated fields, values
// of the wrong type), then, once the shape is right, the meaning (missing
// or conflicting settings, unset variables, verify and key source errors).
// Messages name variables and files, never the secrets they hold.
// Warnings that do not stop the gateway go to Config.Warnings.
package config

import (
	"crypto/tls"
	"net/netip"
	"net/url"
	"time"

	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/verify"
)

// Config is gateway.yaml. Field comments give the value an omitted field takes.
type Config struct {
	// Listen is the delivery listener's address. Default ":8080".
	Listen string `yaml:"listen"`
	// Server is the delivery listener's HTTP server, its front door:
	// "net/http" (the default: HTTP/1.1, and HTTP/2 over TLS, on Go's
	// standard server) or "fasthttp" (HTTP/1.1 only, on fasthttp's server:
	// the most deliveries per CPU second). Both run the same delivery
	// steps and give the same answers. The admin listener is always
	// net/http.
	Server ServerKind `yaml:"server"`
	// TLS serves deliveries over TLS (and, with server: net/http, HTTP/2)
	// when both files are set.
	TLS TLS `yaml:"tls"`
	// TrustedProxies lists the proxies in front of the gateway, as bare IP
	// addresses ("192.0.2.7") or CIDR prefixes ("10.0.0.0/8"). A request
	// from one of them keeps its X-Forwarded-For, extended with the
	// proxy's address. Empty (the default): nobody is trusted, and the
	// X-Forwarded-For a client sends is replaced by the client's address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Admin is the /metrics, /healthz, /readyz and /admin/ listener.
	Admin Admin `yaml:"admin"`
	// Store holds shared idempotency state.
	Store Store `yaml:"store"`
	// Queue holds the events of the routes with delivery: queue.
	Queue Queue `yaml:"queue"`
	// Dedupe tunes the local window, locks and retention.
	Dedupe Dedupe `yaml:"dedupe"`
	// Alerts raise retry storms.
	Alerts Alerts `yaml:"alerts"`
	// Tracing exports a span per delivery over OTLP. Off by default.
	Tracing Tracing `yaml:"tracing"`
	// Log says where log lines go besides stderr. Zero value: every line,
	// access lines included, goes to stderr.
	Log Log `yaml:"log"`
	// Routes: at least one. Matched like Nginx locations: an exact path
	// first, then the longest path_prefix (see proxy/route.go).
	Routes []Route `yaml:"routes"`

	// Path is the file the config was loaded from ("" when parsed from bytes).
	Path string `yaml:"-"`
	// Dir is the directory relative paths are resolved against.
	Dir string `yaml:"-"`
	// TrustedNets is TrustedProxies parsed: a bare address becomes a
	// single-address prefix, an IPv4-mapped IPv6 address or prefix its IPv4
	// form, and host bits are cleared. Nil when TrustedProxies is empty.
	TrustedNets []netip.Prefix `yaml:"-"`
	// Warnings are problems that do not stop the gateway, each naming its
	// line: inline, short, expired or group-readable secrets; jwt routes
	// that do not bind the body or bound a token's age; a key source the
	// signature does not cover, accepted with allow_unsigned_key; a trusted
	// proxy prefix that trusts everyone; a queue route verified with the
	// slack scheme; store.on_error forward beside queue routes;
	// queue.backend kafka with the memory store; Kafka SASL without TLS.
	Warnings []string `yaml:"-"`
}

// TLS files, relative to the config's directory. Both empty, and acme
// off: plain HTTP.
type TLS struct {
	// CertFile is the PEM certificate chain the delivery listener serves,
	// relative to the config's directory; a reload reads it again. Empty
	// (the default) with key_file empty and acme off: plain HTTP. Both or
	// neither.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key of cert_file. Empty (the default):
	// plain HTTP, with cert_file empty too (or acme on).
	KeyFile string `yaml:"key_file"`
	// ACME obtains and renews the delivery listener's certificate from an
	// ACME CA (Let's Encrypt by default) instead of cert_file and key_file,
	// which must then be empty. Zero value (no domains): off.
	ACME ACME `yaml:"acme"`
}

// Admin is the admin listener.
type Admin struct {
	// Listen is the admin listener's address. Default "127.0.0.1:9090";
	// the empty string disables the admin listener (no /metrics, probes or
	// admin API). Off loopback it needs a token.
	Listen string `yaml:"listen"`
	// TokenEnv names the variable holding the bearer token. Default
	// CLAWGATE_ADMIN_TOKEN; unset or empty variable: no token, which is
	// only allowed on a loopback listener.
	TokenEnv string `yaml:"token_env"`

	// Token is the resolved token ("" when none).
	Token string `yaml:"-"`
}

// Store selects and configures the shared store.
type Store struct {
	// Backend: memory (default) or redis.
	Backend Backend `yaml:"backend"`
	Memory  Memory  `yaml:"memory"`
	Redis   Redis   `yaml:"redis"`
	// OnError: reject (default; 503 + Retry-After) or forward (local
	// protection only, counted).
	OnError OnError `yaml:"on_error"`
}

// Memory store settings (store.backend: memory). Checked only with that
// backend.
type Memory struct {
	// MaxBytes bounds the memory the store's keys and stored answers take
	// (finished keys, the counters of released ones, live locks and reset
	// tombstones); past it the least recently used finished or released
	// keys are evicted first (live locks and tombstones count but stay).
	// The memory queue, and Kafka with this store, keep their keys in the
	// same records, so the finished keys of queue routes count against it
	// alike. Default 256MiB; must be positive.
	MaxBytes ByteSize `yaml:"max_bytes"`
}

// Redis connection settings (store.backend: redis).
type Redis struct {
	// Addrs are host:port addresses. Default ["127.0.0.1:6379"]. One
	// address: a single server; several: a Redis Cluster, unless
	// master_name is set (then they are Sentinel addresses). Must not be
	// empty.
	Addrs []string `yaml:"addrs"`
	// MasterName is the Sentinel master's name; the addresses are then the
	// Sentinels'. Empty (the default): no Sentinel.
	MasterName string `yaml:"master_name"`
	// Username is the Redis ACL user. Empty (the default): the default
	// user (password only, or no authentication).
	Username string `yaml:"username"`
	// PasswordEnv names the variable holding the password. Empty (the
	// default): no password.
	PasswordEnv string `yaml:"password_env"`
	// DB is the database number (a single server or Sentinel; a Redis
	// Cluster has only database 0). Default 0; must not be negative.
	DB int `yaml:"db"`
	// KeyPrefix starts every key the gateway writes, so that several
	// gateways (or environments) can share one Redis. Default "clawgate:";
	// empty: no prefix.
	KeyPrefix string `yaml:"key_prefix"`
	// TLS connects to Redis over TLS (1.2 or later), its certificate
	// checked against the system's certificate authorities. Default false:
	// plain text.
	TLS bool `yaml:"tls"`
	// WaitReplicas: after each write that records an outcome or
	// acknowledges an event (a sync route's finish; a queue route's
	// enqueue, before its 202, and its settles, DLQ replays and purges; on
	// Kafka the key's confirmation instead of the enqueue), wait (Redis
	// WAIT, in the same round trip) until this many replicas acknowledge
	// it, so that a failover does not lose it. A replica that does not
	// answer within WaitTimeout is counted and the write still succeeds.
	// Claims do not wait. Default 0: do not wait. Must not be negative.
	WaitReplicas int `yaml:"wait_replicas"`
	// WaitTimeout bounds each such wait. Default 100ms; must not be
	// negative, and must be positive when WaitReplicas is above 0 (it is
	// unused otherwise).
	WaitTimeout time.Duration `yaml:"wait_timeout"`

	// Password is the resolved password.
	Password string `yaml:"-"`
}

// Queue is the delivery queue of the routes with delivery: queue. Its
// settings are checked whether or not a route uses it; those of Kafka only
// with queue.backend kafka.
type Queue struct {
	// Backend: memory (this process only), redis (the store's Redis,
	// shared by every instance) or kafka (the events in Kafka topics, see
	// Kafka; the state of their keys in the store). Empty (the default)
	// follows store.backend (after loading it holds the effective value).
	// memory needs store.backend memory and redis needs store.backend
	// redis. kafka needs queue.kafka.brokers and works with store.backend
	// redis (several instances) or memory (one instance: the keys' state
	// is in that process only, and the gateway warns).
	Backend QueueBackend `yaml:"backend"`
	// MaxDepth bounds the events queued for one route; past it a new event
	// gets 503 with Retry-After. Default 100000; must be at least 1.
	MaxDepth int `yaml:"max_depth"`
	// MaxDLQ bounds the events one route keeps dead-lettered: while its
	// dead-letter queue holds as many, a new event gets 503 with
	// Retry-After (copies of known events are still answered) until an
	// operator replays or purges some. Events already queued that die
	// meanwhile are kept, so the DLQ can pass the bound by up to max_depth.
	// Default 10000; must be at least 1.
	MaxDLQ int `yaml:"max_dlq"`
	// MaxDLQBytes bounds, the same way, the payload bytes one route keeps
	// dead-lettered (memory and redis backends; on kafka the dead-lettered
	// events live in a topic and only max_dlq applies). Default 64MiB;
	// must be positive.
	MaxDLQBytes ByteSize `yaml:"max_dlq_bytes"`
	// Shards is how many Redis Cluster hash slots each route's queue is
	// spread over, from 1 to 256. Default 1. It is fixed once a route has
	// queued events: the gateway refuses to start when it differs from the
	// value the queued events were written with. Used by the redis backend
	// only.
	Shards int `yaml:"shards"`
	// ReplayRate is how many events per second a replay of a route's whole
	// dead-letter queue sends back to the queue. Default 50; must be
	// positive and finite.
	ReplayRate float64 `yaml:"replay_rate"`
	// Kafka is the cluster of queue.backend kafka; checked and compiled
	// only with that backend.
	Kafka Kafka `yaml:"kafka"`
}

// Kafka is queue.kafka: where the kafka backend keeps the events of the
// queue routes. Each queue route has a main topic named TopicPrefix + the
// route's name, and beside it retry and dead-letter topics named after
// the main topic with a suffix (the longest: ".retry.10m"), consumed by the
// consumer group Group + "." + the route's name.
type Kafka struct {
	// Brokers are the host:port addresses the client first connects to (it
	// learns the rest of the cluster from them). Default none; at least
	// one is required with queue.backend kafka.
	Brokers []string `yaml:"brokers"`
	// TopicPrefix starts the name of each topic. Default "clawgate.".
	// Letters, digits, '.', '_' and '-' only (the characters Kafka allows
	// in a topic name); empty: the topics are named after the routes
	// alone. The longest topic name, TopicPrefix + route + ".retry.10m",
	// must fit Kafka's 249 characters.
	TopicPrefix string `yaml:"topic_prefix"`
	// ClientID is the client.id the gateway gives the brokers (their logs
	// and quotas). Default "clawgate"; must not be empty.
	ClientID string `yaml:"client_id"`
	// Group starts the name of each route's consumer group: Group + "." +
	// the route's name. Default "clawgate"; must not be empty; letters,
	// digits, '.', '_' and '-' only.
	Group string `yaml:"group"`
	// Partitions is the partition count the gateway creates topics with,
	// from 1 to 10000. Default 3. Topics that exist keep theirs.
	Partitions int `yaml:"partitions"`
	// ReplicationFactor is the replica count the gateway creates topics
	// with: from 1 to 32767, or -1 for the broker's
	// default.replication.factor. Default -1; 0 is refused.
	ReplicationFactor int `yaml:"replication_factor"`
	// CreateTopics creates the topics a queue route needs and that are
	// missing, when the gateway starts. Default true. false: they must
	// exist, and the gateway refuses to start naming those that do not.
	CreateTopics bool `yaml:"create_topics"`
	// TLS connects to the brokers over TLS. Default off: plain text.
	TLS KafkaTLS `yaml:"tls"`
	// SASL authenticates to the brokers. Default: no authentication.
	SASL KafkaSASL `yaml:"sasl"`

	// TLSConfig is TLS compiled (the CA and the client certificate read,
	// minimum TLS 1.2); nil when TLS.Enabled is false.
	TLSConfig *tls.Config `yaml:"-"`
}

// KafkaTLS is queue.kafka.tls. Files are relative to the config's
// directory; after Parse they hold the resolved paths.
type KafkaTLS struct {
	// Enabled turns TLS on. Default false. The other fields need it.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities the brokers'
	// certificates are checked against. Empty (the default): the system's.
	CAFile string `yaml:"ca_file"`
	// CertFile is the client certificate, in PEM, for brokers that
	// authenticate clients by certificate (mutual TLS). Empty (the
	// default): no client certificate; set both cert_file and key_file,
	// or neither.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the private key of cert_file, in PEM. Empty (the
	// default): no client certificate.
	KeyFile string `yaml:"key_file"`
	// ServerName is the name the brokers' certificates must carry. Empty
	// (the default): the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

// KafkaSASL is queue.kafka.sasl.
type KafkaSASL struct {
	// Mechanism: plain, scram-sha-256 or scram-sha-512. Empty (the
	// default): no SASL; username and password_env must then be empty too.
	// Without TLS the exchange is not encrypted, and the gateway warns.
	Mechanism SASLMechanism `yaml:"mechanism"`
	// Username is required with a mechanism.
	Username string `yaml:"username"`
	// PasswordEnv names the variable holding the password; required with a
	// mechanism, and the variable must be set and not empty.
	PasswordEnv string `yaml:"password_env"`

	// Password is the resolved password ("" without SASL).
	Password string `yaml:"-"`
}

// Dedupe settings shared by all routes.
type Dedupe struct {
	// Window is how long each instance remembers recent outcomes in its
	// own memory (an LRU), answering duplicates without a store round
	// trip. Default 10s; must be positive.
	Window time.Duration `yaml:"window"`
	// CacheSize bounds the number of keys in that window. Default 100000;
	// must be positive.
	CacheSize int `yaml:"cache_size"`
	// LockTTL bounds how long one delivery holds its key; a lock whose
	// holder died expires after it, and the provider's retry goes through.
	// Default 30s; must be positive, and at least each route's timeout +
	// 3s.
	LockTTL time.Duration `yaml:"lock_ttl"`
	// Retention: how long a finished key is remembered and replayed, for
	// routes that do not set their own. Default 72h, as long as the longest
	// provider retries (Stripe: 3 days; Shopify: 48 hours). Must be
	// positive, and, for each route that uses it, at least as long as that
	// route accepts a signature (tolerance, or jwt max_age + leeway).
	Retention time.Duration `yaml:"retention"`
	// ReplayBodyLimit caps the upstream answer body stored for replays; a
	// larger body is passed through but not stored, and its replays carry
	// the status alone. Default 64KiB.
	ReplayBodyLimit ByteSize `yaml:"replay_body_limit"`
	// History bounds each key's history: the newest entries kept (one per
	// arrival, try, settle, dead-lettering, skip, replay, reset, purge and
	// delete), written with the change they record and dropped with the
	// key after its retention. Default 50, at most 1000; 0 records no
	// history at all (the admin API's history is then empty).
	History int `yaml:"history"`
}

// Alerts on retry storms.
type Alerts struct {
	// MaxAttempts: more deliveries than this for one key raise an alert.
	// Default 3.
	MaxAttempts int `yaml:"max_attempts"`
	// WebhookURLEnv names a variable holding a URL alerts are POSTed to
	// (for PagerDuty, https://events.pagerduty.com/v2/enqueue). Empty: log
	// and metric only.
	WebhookURLEnv string `yaml:"webhook_url_env"`
	// PagerDutyRoutingKeyEnv names a variable holding the PagerDuty
	// integration (routing) key, sent as routing_key in every alert. It
	// needs WebhookURLEnv; the variable must be set and not empty. Empty
	// (the default): alerts carry no routing_key, for receivers other than
	// PagerDuty's Events API.
	PagerDutyRoutingKeyEnv string `yaml:"pagerduty_routing_key_env"`

	// WebhookURL is the resolved URL ("" when none).
	WebhookURL string `yaml:"-"`
	// PagerDutyRoutingKey is the resolved routing key ("" when none).
	PagerDutyRoutingKey string `yaml:"-"`
}

// Tracing is the tracing block: OpenTelemetry spans exported over OTLP.
// Parse resolves it against the OTEL_* variables (config/tracing.go), so
// after Parse each field holds the value the gateway runs with.
type Tracing struct {
	// Enabled turns tracing on. Default false. Tracing is also on when
	// OTEL_TRACES_EXPORTER is otlp or OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, and off, whatever this
	// says, when OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is none
	// (after loading, Enabled holds the effective state).
	Enabled bool `yaml:"enabled"`
	// Endpoint is the collector's base URL, http://host:port (plain text)
	// or https://host:port (TLS); with http/protobuf spans are posted to
	// its path + /v1/traces. Empty (the default): the exporter reads
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT,
	// else sends to localhost (port 4318, or 4317 for grpc).
	Endpoint string `yaml:"endpoint"`
	// Protocol: http/protobuf (default) or grpc. When not written:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of deliveries traced, from 0 to 1, decided
	// on the trace id. Default 1: every delivery. The caller's sampled
	// flag is not followed.
	SampleRatio float64 `yaml:"sample_ratio"`

	// EnabledBy names what decided Enabled ("tracing.enabled",
	// "OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT", ...);
	// empty when nothing turned tracing on.
	EnabledBy string `yaml:"-"`
}

// Route is one upstream service and how its deliveries are handled.
type Route struct {
	// Name labels metrics and scopes keys. Required, unique.
	Name string `yaml:"name"`
	// Match says which requests the route takes. Required.
	Match Match `yaml:"match"`
	// Upstream is an absolute http(s) URL: the service deliveries are
	// forwarded to. Required.
	Upstream string `yaml:"upstream"`
	// Dedupe is the route's duplicate handling.
	Dedupe struct {
		// Mode: enforce (default: duplicates are answered by the gateway),
		// shadow (duplicates are counted, and forwarded anyway: a safe
		// rollout; on a queue route each copy is queued and delivered as an
		// event of its own) or off (every copy is forwarded; not on a queue
		// route).
		Mode DedupeMode `yaml:"mode"`
	} `yaml:"dedupe"`
	// StripPrefix is removed from the path before forwarding. Empty (the
	// default): the path is forwarded as matched.
	StripPrefix string `yaml:"strip_prefix"`
	// Timeout for the upstream's answer. Default 10s. It must leave 3s
	// (LockMargin) of dedupe.lock_ttl for claiming and recording the key
	// (timeout + 3s <= lock_ttl), so the lock outlives the wait for the
	// upstream. On a queue route it bounds each try of a worker, and the
	// same rule covers the worker's hold on the key during a try, which
	// needs timeout + 2s <= lock_ttl.
	Timeout time.Duration `yaml:"timeout"`
	// Retention: how long this route's finished keys are remembered and
	// replayed (and, with the replay guard, its signatures). Zero (the
	// default) uses dedupe.retention (after loading it holds the effective
	// value). Must not be negative, and must be
	// at least as long as the route accepts a signature (tolerance, or jwt
	// max_age + leeway).
	Retention time.Duration `yaml:"retention"`
	// MaxBody: larger bodies get 413. Default 1MiB.
	MaxBody ByteSize `yaml:"max_body"`
	// Idempotency says where a delivery's key comes from.
	Idempotency Idempotency `yaml:"idempotency"`
	// Verify says how a delivery's signature is checked. Required, unless
	// provider names a preset: scheme none must be written out to check
	// nothing.
	Verify verify.Config `yaml:"verify"`
	// Provider names a preset (github, stripe, zoom, ...: docs/providers.md)
	// that fills in every verify and idempotency field the route does not
	// write itself. Empty (the default): none; verify must then be written
	// out.
	Provider string `yaml:"provider"`
	// PublicURL is the URL the provider calls, as it calls it (the gateway
	// may sit behind a load balancer): required when the signature covers
	// the URL (Twilio, Square, HubSpot); the signature's {url}. Empty (the
	// default): a route whose signature covers the URL is refused.
	PublicURL string `yaml:"public_url"`
	// Delivery: sync (default) or queue. sync forwards a delivery while
	// its sender waits and answers with the upstream's answer. queue
	// stores the verified, deduplicated delivery in the queue (see the
	// top-level queue), answers ack_status at once, and has workers
	// forward it, trying again as retry says. A queue route needs dedupe.mode
	// enforce or shadow (shadow queues every copy as an event of its own)
	// and idempotency.required true; like a sync route it gets the replay
	// guard when its first key source is not signed.
	Delivery Delivery `yaml:"delivery"`
	// AckStatus is what a queue route answers once the event is queued: a
	// 2xx status. Default 202. Only for delivery: queue (an error on a sync
	// route).
	AckStatus int `yaml:"ack_status"`
	// Workers is how many events of a queue route each instance forwards
	// at once, from 1 to 1024. Default 8. Only for delivery: queue (an
	// error on a sync route).
	Workers int `yaml:"workers"`
	// Retry says how a queue route tries an event again after a failed
	// try. Only for delivery: queue (an error on a sync route).
	Retry Retry `yaml:"retry"`
	// AllowIPs lists the client addresses that may deliver to the route,
	// as bare IP addresses ("192.0.2.7") or CIDR prefixes ("192.0.2.0/24"),
	// such as the ranges a provider publishes. Anyone else gets 403 before
	// the body is read. The client is the peer, or, when the peer is in
	// trusted_proxies, the right-most X-Forwarded-For entry that is not
	// itself a trusted proxy. Empty (the default): every client.
	AllowIPs []string `yaml:"allow_ips"`
	// RateLimit bounds the route's deliveries per second from each
	// client; past it they get 429 with Retry-After. Default: no limit.
	RateLimit RateLimit `yaml:"rate_limit"`
	// Pace bounds the tries of a queue route's events that reach the
	// upstream, over every instance together: "N/s", "N/m", "N/h" or
	// "N/DURATION" (such as 50/s or 5/10s), evenly spaced. Events wait in
	// the queue; the acknowledgement is not slowed. Empty (the default):
	// no bound. Only for delivery: queue.
	Pace string `yaml:"pace"`
	// Breaker stops trying an upstream that keeps failing (see Breaker).
	// Empty (the default): no breaker.
	Breaker Breaker `yaml:"breaker"`
	// Order delivers a queue route's events one at a time per object, in
	// the order they were acknowledged (see Order). Empty (the default):
	// events are delivered in parallel, in no particular order. Only for
	// delivery: queue.
	Order Order `yaml:"order"`

	// Line is the route's line in the file.
	Line int `yaml:"-"`
	// PaceLimit is Pace parsed; zero when Pace is empty.
	PaceLimit PaceLimit `yaml:"-"`
	// UpstreamURL is Upstream parsed.
	UpstreamURL *url.URL `yaml:"-"`
	// Key is Idempotency.Key compiled.
	Key *idkey.KeySpec `yaml:"-"`
	// OrderBy and OrderStale are Order.By and Order.Stale compiled; nil
	// when not written.
	OrderBy, OrderStale *idkey.KeySpec `yaml:"-"`
	// Verifier is Verify compiled.
	Verifier verify.Verifier `yaml:"-"`
	// ReplayGuard is true when the route's first key source is not covered
	// by its signature (see Idempotency.Key), Idempotency.AllowUnsignedKey
	// is false, and Verifier implements verify.SignedDigester. The runtime
	// then remembers the SignedDigest of every accepted delivery for
	// Retention and refuses the same signed request arriving under another
	// key (on a queue route, acknowledged under another key). Always false
	// for scheme none and for dedupe mode off.
	ReplayGuard bool `yaml:"-"`
	// AllowNets is AllowIPs parsed like TrustedNets (a bare address is a
	// single-address prefix, IPv4-mapped forms are made IPv4, host bits
	// are cleared). Nil when AllowIPs is empty.
	AllowNets []netip.Prefix `yaml:"-"`
}

// Queued reports whether the route's deliveries go through the queue
// (delivery: queue).
func (r *Route) Queued() bool { return r.Delivery == DeliveryQueue }

// Retry is a queue route's retry: how often, and how far apart, a worker
// tries an event. The delay before try n+1 is min(Max, Initial*2^(n-1))
// times a random factor from 0.8 to 1.2; a Retry-After from the upstream
// is honoured, kept between that delay and Max. With the defaults the
// tries of one event span about 6.4 hours in all.
type Retry struct {
	// MaxAttempts counts every try, the first included, from 1 to 1000.
	// Default 16. An event whose last try fails goes to the route's
	// dead-letter queue.
	MaxAttempts int `yaml:"max_attempts"`
	// Initial is the delay after the first try. Default 5s; must be
	// positive.
	Initial time.Duration `yaml:"initial"`
	// Max bounds every delay. Default 1h; must not be shorter than
	// Initial.
	Max time.Duration `yaml:"max"`
}

// Match selects a route's deliveries. Exactly one of Path and PathPrefix.
type Match struct {
	// Path is the exact path the route takes (compared after its dot
	// segments are resolved). Empty: path_prefix must be set.
	Path string `yaml:"path"`
	// PathPrefix is a plain string prefix of the paths the route takes;
	// the longest matching prefix wins, after exact paths. Empty: path
	// must be set.
	PathPrefix string `yaml:"path_prefix"`
	// Host, when set, must equal the request's host (port ignored).
	// Empty (the default): any host.
	Host string `yaml:"host"`
	// Methods allowed: GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, in any
	// case; default [POST]. Others get 405.
	Methods []string `yaml:"methods"`
}

// Idempotency says where a delivery's key comes from.
type Idempotency struct {
	// Required: a delivery without a key gets 400. Default true. When false
	// such a delivery is forwarded without deduplication (outcome unkeyed).
	Required bool `yaml:"required"`
	// Key sources, tried in order; the first present wins. Default
	// ["header:Idempotency-Key"].
	//
	// The first source should be one the signature covers: json:, form:
	// and body:sha256 when the scheme signs the body (every scheme but
	// none; jwt only with body_hash_claim); header: only for the headers a
	// scheme signs (webhook-id and webhook-timestamp for
	// standard-webhooks, X-Slack-Request-Timestamp for slack); template:
	// when all its parts are; query: never. Otherwise a captured delivery
	// could be sent again with a fresh key and forwarded again: the
	// gateway then guards the route (the replay guard, ReplayGuard) when
	// the scheme can, and refuses the config when it cannot (jwt without
	// body_hash_claim), unless allow_unsigned_key is set.
	Key []string `yaml:"key"`
	// AllowUnsignedKey accepts a first key source the signature does not
	// cover, with a warning, and no replay guard: the same signed request
	// may then be forwarded once under each key it arrives with. Default
	// false: such a route is guarded, or refused when it cannot be. No
	// effect when the first source is covered.
	AllowUnsignedKey bool `yaml:"allow_unsigned_key"`
}

// ByteSize is a size in bytes; YAML accepts 1024, "64KiB", "1MiB", "1GiB",
// "10KB", "1MB".
type ByteSize int64

// Backend is store.backend: where key state lives.
type Backend string

// Store backends.
const (
	BackendMemory Backend = "memory" // this process only
	BackendRedis  Backend = "redis"  // shared by every instance
)

// OnError is store.on_error: what a delivery gets while the store does not
// answer.
type OnError string

// Store failure modes.
const (
	OnErrorReject  OnError = "reject"  // 503 with Retry-After
	OnErrorForward OnError = "forward" // forwarded on the local window alone
)

// DedupeMode is a route's dedupe.mode.
type DedupeMode string

// Dedupe modes.
const (
	ModeEnforce DedupeMode = "enforce" // duplicates are answered by the gateway
	ModeShadow  DedupeMode = "shadow"  // counted, and forwarded anyway
	ModeOff     DedupeMode = "off"     // every copy is forwarded
)

// ServerKind is the delivery listener's front door (Config.Server).
type ServerKind string

// The front doors of the delivery listener.
const (
	ServerNetHTTP  ServerKind = "net/http" // Go's standard server: HTTP/1.1 and HTTP/2 over TLS
	ServerFastHTTP ServerKind = "fasthttp" // fasthttp's server: HTTP/1.1 only, fastest
)

// Delivery is a route's delivery mode.
type Delivery string

// Delivery modes.
const (
	DeliverySync  Delivery = "sync"  // forwarded while the sender waits
	DeliveryQueue Delivery = "queue" // acknowledged once queued, then forwarded by workers
)

// QueueBackend is queue.backend: where queued events live.
type QueueBackend string

// Queue backends.
const (
	QueueMemory QueueBackend = "memory" // this process only; lost when it stops
	QueueRedis  QueueBackend = "redis"  // the store's Redis, shared by every instance
	QueueKafka  QueueBackend = "kafka"  // Kafka topics; the keys' state in the store
)

// SASLMechanism is queue.kafka.sasl.mechanism.
type SASLMechanism string

// SASL mechanisms.
const (
	SASLPlain       SASLMechanism = "plain"         // the password sent as it is: needs TLS
	SASLScramSHA256 SASLMechanism = "scram-sha-256" // RFC 7677
	SASLScramSHA512 SASLMechanism = "scram-sha-512"
)
