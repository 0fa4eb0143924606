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

// KeepRestartFields carries every setting RestartFields names, and only
// those, from the running config into a reloaded one.
func TestKeepRestartFields(t *testing.T) {
	running := Default()
	running.Store.Redis.Password = "p1"
	next := Default()
	next.Listen, next.Server = ":9", ServerFastHTTP
	next.TLS = TLS{CertFile: "/b.crt", KeyFile: "/b.key"}
	next.Admin.Token = "t2"
	next.Store.Backend, next.Store.Redis.Password = BackendRedis, "p2"
	next.Tracing.Enabled = true
	next.Dedupe.Window, next.Dedupe.CacheSize, next.Dedupe.Retention = time.Second, 5, time.Minute
	next.Queue.Backend, next.Queue.Shards, next.Queue.MaxDepth = QueueRedis, 4, 7
	next.Queue.Kafka.Brokers = []string{"k:9092"}
	next.Routes = []Route{{Name: "x"}}
	if len(RestartFields(running, next)) == 0 {
		t.Fatal("no restart fields changed")
	}
	KeepRestartFields(running, next)
	if got := RestartFields(running, next); len(got) != 0 {
		t.Fatalf("after KeepRestartFields, %v still differ", got)
	}
	if next.Store.Redis.Password != "p1" {
		t.Fatalf("the resolved Redis password was not kept: %q", next.Store.Redis.Password)
	}
	if next.Dedupe.Retention != time.Minute || next.Queue.MaxDepth != 7 || len(next.Routes) != 1 {
		t.Fatalf("a reloadable setting was reset: retention %v, max_depth %d, %d routes", next.Dedupe.Retention, next.Queue.MaxDepth, len(next.Routes))
	}
}
