package config

import (
	"strings"
	"testing"
	"time"
)

func TestRestartFields(t *testing.T) {
	base := func() *Config {
		c := Default()
		c.TLS = TLS{CertFile: "/tls/a.crt", KeyFile: "/tls/a.key"}
		c.Store.Redis.Password = "p1"
		c.Admin.Token = "t1"
		return c
	}
	for _, c := range []struct {
		change func(c *Config)
		want   string
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Routes = []Route{{Name: "x"}}; c.Dedupe.Retention = time.Hour }, ""},
		{func(c *Config) { c.Listen = ":9" }, "listen"},
		{func(c *Config) { c.TLS.CertFile = "/tls/b.crt"; c.TLS.KeyFile = "/tls/b.key" }, "tls.cert_file tls.key_file"},
		{func(c *Config) { c.TLS = TLS{} }, "tls.cert_file tls.key_file"},
		{func(c *Config) { c.Admin.Token = "t2" }, "admin.token_env"},
		{func(c *Config) { c.Admin.TokenEnv = "X"; c.Admin.Token = "t2" }, "admin.token_env"},
		{func(c *Config) { c.Store.Redis.Addrs = []string{"10.0.0.1:6379"} }, "store.redis.addrs"},
		{func(c *Config) { c.Store.Redis.Password = "p2" }, "store.redis.password_env"},
		{func(c *Config) { c.Store.Backend = BackendRedis; c.Store.Redis.KeyPrefix = "x:" }, "store.backend store.redis.key_prefix"},
		{func(c *Config) { c.Store.Redis.WaitTimeout = time.Second }, "store.redis.wait_timeout"},
		{func(c *Config) { c.Dedupe.Window = time.Second; c.Dedupe.CacheSize = 5 }, "dedupe.window dedupe.cache_size"},
		{func(c *Config) { c.Tracing.Enabled = true; c.Tracing.SampleRatio = 0.5 }, "tracing.enabled tracing.sample_ratio"},
		{func(c *Config) { c.Queue.Backend = QueueRedis; c.Queue.Shards = 4 }, "queue.backend queue.shards"},
		{func(c *Config) { c.Queue.Kafka.Brokers = []string{"k:9092"}; c.Queue.Kafka.TopicPrefix = "x." }, "queue.kafka.brokers queue.kafka.topic_prefix"},
		{func(c *Config) { c.Queue.MaxDepth = 5; c.Queue.ReplayRate = 1 }, ""},
		{func(c *Config) { c.Routes = []Route{{Name: "x", Delivery: DeliveryQueue, Workers: 2}} }, ""},
	} {
		next := base()
		c.change(next)
		if got := strings.Join(RestartFields(base(), next), " "); got != c.want {
			t.Errorf("RestartFields = %q, want %q", got, c.want)
		}
	}
}
