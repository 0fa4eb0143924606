package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of the top-level settings (gateway.yaml shows each).
const (
	DefaultListen        = ":8080"
	DefaultAdminListen   = "127.0.0.1:9090"
	DefaultAdminTokenEnv = "CLAWGATE_ADMIN_TOKEN"
	DefaultBackend       = BackendMemory
	DefaultRedisAddr     = "127.0.0.1:6379"
	DefaultKeyPrefix     = "clawgate:"
	DefaultOnError       = OnErrorReject
	DefaultWindow        = 10 * time.Second
	DefaultCacheSize     = 100000
	DefaultLockTTL       = 30 * time.Second
	DefaultRetention     = 72 * time.Hour
	DefaultHistory       = 50
	// MaxHistory bounds dedupe.history.
	MaxHistory              = 1000
	DefaultReplayBodyLimit  = 64 * KiB
	DefaultMaxAttempts      = 3
	DefaultMemoryMaxBytes   = 256 * MiB
	DefaultRedisWaitTimeout = 100 * time.Millisecond
	DefaultQueueMaxDepth    = 100000
	DefaultQueueMaxDLQ      = 10000
	DefaultQueueMaxDLQBytes = 64 * MiB
	DefaultQueueShards      = 1
	DefaultQueueReplayRate  = 50.0
	DefaultKafkaTopicPrefix = "clawgate."
	DefaultKafkaClientID    = "clawgate"
	DefaultKafkaGroup       = "clawgate"
	DefaultKafkaPartitions  = 3
	// DefaultKafkaReplicationFactor -1: the broker's default.replication.factor.
	DefaultKafkaReplicationFactor = -1
	DefaultKafkaCreateTopics      = true
)

// LockMargin is the part of dedupe.lock_ttl a route's timeout must leave
// for the store round trips that claim the key before forwarding and
// record the answer after it.
const LockMargin = 3 * time.Second

// Defaults of each route.
const (
	DefaultMethod        = "POST"
	DefaultDedupeMode    = ModeEnforce
	DefaultTimeout       = 10 * time.Second
	DefaultMaxBody       = 1 * MiB
	DefaultKeySource     = "header:Idempotency-Key"
	DefaultTolerance     = 5 * time.Minute
	DefaultHMACAlgorithm = "sha256"
	DefaultHMACEncoding  = "hex"
	DefaultDelivery      = DeliverySync
	DefaultKeyRequired   = true
	// Of a queue route.
	DefaultAckStatus        = 202
	DefaultWorkers          = 8
	DefaultOrderOnDead      = OnDeadContinue
	DefaultRetryMaxAttempts = 16
	DefaultRetryInitial     = 5 * time.Second
	DefaultRetryMax         = time.Hour
)

// Default returns a Config holding every top-level default and no routes.
// Parse decodes the file over it, so an omitted field keeps its default.
func Default() *Config {
	return &Config{
		Listen: DefaultListen,
		Server: ServerNetHTTP,
		Admin: Admin{
			Listen:   DefaultAdminListen,
			TokenEnv: DefaultAdminTokenEnv,
		},
		Store: Store{
			Backend: DefaultBackend,
			Memory:  Memory{MaxBytes: DefaultMemoryMaxBytes},
			Redis: Redis{
				Addrs:       []string{DefaultRedisAddr},
				KeyPrefix:   DefaultKeyPrefix,
				WaitTimeout: DefaultRedisWaitTimeout,
			},
			OnError: DefaultOnError,
		},
		Dedupe: Dedupe{
			Window:          DefaultWindow,
			CacheSize:       DefaultCacheSize,
			LockTTL:         DefaultLockTTL,
			Retention:       DefaultRetention,
			ReplayBodyLimit: DefaultReplayBodyLimit,
			History:         DefaultHistory,
		},
		Queue: Queue{
			MaxDepth:    DefaultQueueMaxDepth,
			MaxDLQ:      DefaultQueueMaxDLQ,
			MaxDLQBytes: DefaultQueueMaxDLQBytes,
			Shards:      DefaultQueueShards,
			ReplayRate:  DefaultQueueReplayRate,
			Kafka: Kafka{
				TopicPrefix:       DefaultKafkaTopicPrefix,
				ClientID:          DefaultKafkaClientID,
				Group:             DefaultKafkaGroup,
				Partitions:        DefaultKafkaPartitions,
				ReplicationFactor: DefaultKafkaReplicationFactor,
				CreateTopics:      DefaultKafkaCreateTopics,
			},
		},
		Alerts: Alerts{MaxAttempts: DefaultMaxAttempts},
	}
}

// setDefaults fills r with every route default.
func (r *Route) setDefaults() {
	*r = Route{}
	r.Match.Methods = []string{DefaultMethod}
	r.Dedupe.Mode = DefaultDedupeMode
	r.Timeout = DefaultTimeout
	r.MaxBody = DefaultMaxBody
	r.Idempotency.Required = DefaultKeyRequired
	r.Idempotency.Key = []string{DefaultKeySource}
	r.Verify.Tolerance = DefaultTolerance
	r.Verify.Algorithm = DefaultHMACAlgorithm
	r.Verify.Encoding = DefaultHMACEncoding
	r.Delivery = DefaultDelivery
	r.AckStatus = DefaultAckStatus
	r.Workers = DefaultWorkers
	r.Retry = Retry{MaxAttempts: DefaultRetryMaxAttempts, Initial: DefaultRetryInitial, Max: DefaultRetryMax}
	r.Order.OnDead = DefaultOrderOnDead
}

// UnmarshalYAML applies the route defaults, then decodes the route over
// them. Unknown fields inside a route are reported by Parse, which checks
// the whole document against the Config type before decoding it.
func (r *Route) UnmarshalYAML(n *yaml.Node) error {
	type plain Route
	r.setDefaults()
	r.Line = n.Line
	return n.Decode((*plain)(r))
}
