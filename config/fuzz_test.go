package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/verify"
)

// FuzzParse: no input makes Parse panic, and every result is either a
// config that holds the invariants the gateway relies on or an *Error whose
// lines name the file and never leak a secret. The seed corpus is in
// testdata/fuzz/FuzzParse (`go test -fuzz FuzzParse ./config/`).
func FuzzParse(f *testing.F) {
	realDeps(f)
	// verify reads secret, PEM and JWKS files; keep the fuzzer from
	// pointing them at devices (/dev/zero never ends).
	nv := newVerifier
	newVerifier = func(c verify.Config, env verify.Env) (verify.Verifier, []string, error) {
		safe := func(p *string) {
			if *p == "" {
				return
			}
			path := *p
			if !filepath.IsAbs(path) {
				path = filepath.Join(env.Dir, path)
			}
			if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
				*p = "not-a-regular-file"
			}
		}
		c.Secrets = append([]verify.SecretConfig(nil), c.Secrets...)
		for i := range c.Secrets {
			safe(&c.Secrets[i].SecretFile)
		}
		c.JWT.Keys = append([]verify.JWTKeyConfig(nil), c.JWT.Keys...)
		for i := range c.JWT.Keys {
			safe(&c.JWT.Keys[i].PEMFile)
			safe(&c.JWT.Keys[i].SecretFile)
		}
		safe(&c.JWT.JWKSFile)
		return nv(c, env)
	}
	f.Cleanup(func() { newVerifier = nv })
	dir := f.TempDir()

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml", dir, getenv)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v", cfg != nil, err)
		}
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %T %q is not a non-empty *Error", err, err)
			}
			for _, l := range ce.Lines() {
				if !strings.HasPrefix(l, "fuzz.yaml") {
					t.Fatalf("error line %q does not name the file", l)
				}
			}
			// A fuzzed file may put any text anywhere, so only values from
			// the environment are known to be secret.
			assertNoEnvSecrets(t, err.Error())
			return
		}
		if len(cfg.Routes) == 0 {
			t.Fatal("a config with no routes loaded")
		}
		q := cfg.Queue
		switch {
		case q.Backend == QueueKafka:
			if cfg.Store.Backend != BackendMemory && cfg.Store.Backend != BackendRedis {
				t.Fatalf("queue.backend kafka with store.backend %q", cfg.Store.Backend)
			}
			checkKafkaInvariants(t, cfg)
		case q.Backend != QueueMemory && q.Backend != QueueRedis,
			string(q.Backend) != string(cfg.Store.Backend):
			t.Fatalf("queue.backend %q with store.backend %q", q.Backend, cfg.Store.Backend)
		}
		if q.MaxDepth < 1 || q.Shards < 1 || q.Shards > maxQueueShards || !(q.ReplayRate > 0) || math.IsInf(q.ReplayRate, 0) {
			t.Fatalf("queue %+v", q)
		}
		names := map[string]bool{}
		for _, r := range cfg.Routes {
			switch {
			case r.Name == "" || names[r.Name]:
				t.Fatalf("route name %q is empty or repeated", r.Name)
			case r.UpstreamURL == nil || r.Key == nil || r.Verifier == nil:
				t.Fatalf("route %q is not compiled", r.Name)
			case r.Timeout <= 0 || r.Timeout > cfg.Dedupe.LockTTL-LockMargin:
				t.Fatalf("route %q: timeout %v, lock_ttl %v", r.Name, r.Timeout, cfg.Dedupe.LockTTL)
			case r.Retention <= 0:
				t.Fatalf("route %q: retention %v", r.Name, r.Retention)
			case r.MaxBody <= 0 || len(r.Match.Methods) == 0:
				t.Fatalf("route %q: max_body %v, methods %q", r.Name, r.MaxBody, r.Match.Methods)
			case (r.Match.Path == "") == (r.Match.PathPrefix == ""):
				t.Fatalf("route %q: match %+v", r.Name, r.Match)
			}
			if _, ok := r.Verifier.(verify.SignedDigester); r.ReplayGuard && !ok {
				t.Fatalf("route %q: a replay guard without a SignedDigester", r.Name)
			}
			if r.Delivery != DeliverySync && !r.Queued() {
				t.Fatalf("route %q: delivery %q", r.Name, r.Delivery)
			}
			if rt := r.Retry; r.Queued() && (r.Dedupe.Mode != ModeEnforce || !r.Idempotency.Required || r.ReplayGuard ||
				r.AckStatus < 200 || r.AckStatus > 299 || r.Workers < 1 || r.Workers > maxWorkers ||
				rt.MaxAttempts < 1 || rt.MaxAttempts > maxRetryAttempts || rt.Initial <= 0 || rt.Max < rt.Initial) {
				t.Fatalf("queue route %q: %+v", r.Name, r)
			}
			for _, m := range r.Match.Methods {
				if m != strings.ToUpper(m) || !validToken(m) {
					t.Fatalf("route %q: method %q", r.Name, m)
				}
			}
			names[r.Name] = true
		}
		assertNoEnvSecrets(t, strings.Join(cfg.Warnings, "\n"))
	})
}

// checkKafkaInvariants fails t unless cfg's queue.kafka is what the kafka
// backend can run with: brokers to dial, topic and group names Kafka
// accepts, TLS compiled when enabled, SASL complete.
func checkKafkaInvariants(t *testing.T, cfg *Config) {
	t.Helper()
	k := cfg.Queue.Kafka
	if len(k.Brokers) == 0 {
		t.Fatal("queue.backend kafka without brokers")
	}
	for _, a := range k.Brokers {
		if host, _, err := splitHostPort(a); err != nil || host == "" {
			t.Fatalf("broker %q", a)
		}
	}
	switch {
	case !validKafkaName(k.TopicPrefix) || k.ClientID == "" || k.Group == "" || !validKafkaName(k.Group):
		t.Fatalf("kafka names %q %q %q", k.TopicPrefix, k.ClientID, k.Group)
	case k.Partitions < 1 || k.Partitions > maxKafkaPartitions,
		k.ReplicationFactor != -1 && (k.ReplicationFactor < 1 || k.ReplicationFactor > maxKafkaReplication):
		t.Fatalf("kafka partitions %d, replication %d", k.Partitions, k.ReplicationFactor)
	case k.TLS.Enabled != (k.TLSConfig != nil):
		t.Fatalf("kafka tls.enabled %v, TLSConfig %v", k.TLS.Enabled, k.TLSConfig != nil)
	case k.SASL.Mechanism != "" && (k.SASL.Username == "" || k.SASL.Password == ""):
		t.Fatalf("kafka sasl %s without username or password", k.SASL.Mechanism)
	}
	for _, r := range cfg.Routes {
		if r.Queued() && len(k.TopicPrefix+r.Name+KafkaLongestTopicSuffix) > MaxKafkaTopicLen {
			t.Fatalf("route %q: topic names too long", r.Name)
		}
	}
}

// FuzzParseByteSize: sizes that parse print back to themselves.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"0", "64KiB", "1.5MiB", "10KB", "-1", "1e3", "9223372036854775807B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseByteSize(s)
		if err != nil {
			if !errors.Is(err, ErrBadSize) {
				t.Fatalf("error %v does not wrap ErrBadSize", err)
			}
			return
		}
		if b < 0 {
			t.Fatalf("ParseByteSize(%q) = %d", s, b)
		}
		back, err := ParseByteSize(b.String())
		if err != nil || back != b {
			t.Fatalf("round trip of %q: %q -> %d, %v", s, b.String(), back, err)
		}
	})
}
