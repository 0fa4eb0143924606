package config

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withKafkaDefaults fills the queue.kafka fields k leaves at their zero
// value (but Brokers, TLS and SASL) with their defaults.
func withKafkaDefaults(k Kafka) Kafka {
	d := Default().Queue.Kafka
	if k.TopicPrefix == "" {
		k.TopicPrefix = d.TopicPrefix
	}
	if k.ClientID == "" {
		k.ClientID = d.ClientID
	}
	if k.Group == "" {
		k.Group = d.Group
	}
	if k.Partitions == 0 {
		k.Partitions = d.Partitions
	}
	if k.ReplicationFactor == 0 {
		k.ReplicationFactor = d.ReplicationFactor
	}
	k.CreateTopics = true
	return k
}

// kafkaYAML is a config with queue.backend kafka; %TLS% and %SASL% are
// replaced by the lines of queue.kafka's tls and sasl blocks.
const kafkaYAML = `store: { backend: redis }
queue:
  backend: kafka
  kafka:
    brokers: ["kafka-1:9093"]
%TLS%
%SASL%
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    delivery: queue
    verify: { scheme: none }
`

func kafkaConfig(tlsBlock, saslBlock string) string {
	return strings.NewReplacer("%TLS%", tlsBlock, "%SASL%", saslBlock).Replace(kafkaYAML)
}

// TestKafkaTLSFiles: the CA and the client certificate are read at load
// time, relative to the config's directory, into Kafka.TLSConfig.
func TestKafkaTLSFiles(t *testing.T) {
	useFakes(t)
	dir := t.TempDir()
	writeKeyPair(t, filepath.Join(dir, "kafka", "ca.pem"), filepath.Join(dir, "kafka", "ca-key.pem"))
	writeKeyPair(t, filepath.Join(dir, "kafka", "client.pem"), filepath.Join(dir, "kafka", "client-key.pem"))
	y := kafkaConfig(`    tls:
      enabled: true
      ca_file: kafka/ca.pem
      cert_file: kafka/client.pem
      key_file: kafka/client-key.pem`, "")
	cfg, err := Parse([]byte(y), "gateway.yaml", dir, getenv)
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Queue.Kafka
	eq(t, "tls", k.TLS, KafkaTLS{Enabled: true,
		CAFile:   filepath.Join(dir, "kafka", "ca.pem"),
		CertFile: filepath.Join(dir, "kafka", "client.pem"),
		KeyFile:  filepath.Join(dir, "kafka", "client-key.pem"),
	})
	tc := k.TLSConfig
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.MinVersion != tls.VersionTLS12 || tc.ServerName != "" || tc.InsecureSkipVerify {
		t.Fatalf("TLSConfig %+v", tc)
	}
	eq(t, "warnings", cfg.Warnings, []string(nil))
}

func TestKafkaTLSFileErrors(t *testing.T) {
	useFakes(t)
	dir := t.TempDir()
	writeKeyPair(t, filepath.Join(dir, "client.pem"), filepath.Join(dir, "other-key.pem"))
	writeKeyPair(t, filepath.Join(dir, "unused.pem"), filepath.Join(dir, "client-key.pem"))
	write(t, filepath.Join(dir, "not-a-ca.pem"), "not a certificate\n")
	if err := os.Mkdir(filepath.Join(dir, "ca-dir.pem"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tls  string
		want string
	}{
		{"ca_file: not-a-ca.pem", "gateway.yaml:8: queue.kafka.tls.ca_file: " + filepath.Join(dir, "not-a-ca.pem") + " holds no PEM certificate"},
		{"ca_file: ca-dir.pem", "gateway.yaml:8: queue.kafka.tls.ca_file: " + filepath.Join(dir, "ca-dir.pem") + " is not a regular file"},
		{"cert_file: client.pem\n      key_file: client-key.pem", "gateway.yaml:6: queue.kafka.tls: cannot use " +
			filepath.Join(dir, "client.pem") + " and " + filepath.Join(dir, "client-key.pem") + " as a key pair: tls: private key does not match public key"},
	} {
		y := kafkaConfig("    tls:\n      enabled: true\n      "+c.tls, "")
		cfg, err := Parse([]byte(y), "gateway.yaml", dir, getenv)
		var ce *Error
		if !errors.As(err, &ce) || cfg != nil {
			t.Fatalf("%s: Parse = %v, %v", c.tls, cfg, err)
		}
		if got := err.Error(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.tls, got, c.want)
		}
	}
}

// TestKafkaSASLWarnings: SASL without TLS loads with a warning that says
// what travels unencrypted; with TLS there is none.
func TestKafkaSASLWarnings(t *testing.T) {
	useFakes(t)
	for _, c := range []struct {
		tls, mechanism, want string
	}{
		{"", "plain", "gateway.yaml:8: queue.kafka.sasl: mechanism plain without queue.kafka.tls.enabled sends the password in clear to the brokers; set tls.enabled: true"},
		{"", "scram-sha-256", "gateway.yaml:8: queue.kafka.sasl: mechanism scram-sha-256 without queue.kafka.tls.enabled does not send the password, but the username and every record travel unencrypted; set tls.enabled: true"},
		{"    tls: { enabled: false }", "scram-sha-512", "gateway.yaml:8: queue.kafka.sasl: mechanism scram-sha-512 without queue.kafka.tls.enabled does not send the password, but the username and every record travel unencrypted; set tls.enabled: true"},
		{"    tls: { enabled: true }", "plain", ""},
	} {
		y := kafkaConfig(c.tls, "    sasl:\n      mechanism: "+c.mechanism+"\n      username: clawgate\n      password_env: KAFKA_PASSWORD")
		cfg, err := Parse([]byte(y), "gateway.yaml", t.TempDir(), getenv)
		if err != nil {
			t.Fatalf("%s %s: %v", c.tls, c.mechanism, err)
		}
		got := strings.Join(cfg.Warnings, "\n")
		if got != c.want {
			t.Errorf("%s %s: warnings\n got %q\nwant %q", c.tls, c.mechanism, got, c.want)
		}
		eq(t, "password", cfg.Queue.Kafka.SASL.Password, testEnv["KAFKA_PASSWORD"])
		assertNoSecrets(t, got)
	}
}

// TestKafkaCheckedOnlyWithItsBackend: queue.kafka is not checked (nor its
// password variable read) unless queue.backend is kafka.
func TestKafkaCheckedOnlyWithItsBackend(t *testing.T) {
	useFakes(t)
	y := strings.Replace(kafkaConfig("    tls: { ca_file: missing.pem }", "    sasl: { mechanism: nope, password_env: KAFKA_PASSWORD }"),
		"backend: kafka", "backend: redis", 1)
	cfg, err := Parse([]byte(y), "gateway.yaml", t.TempDir(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "queue.backend", cfg.Queue.Backend, QueueRedis)
	eq(t, "password", cfg.Queue.Kafka.SASL.Password, "")
	eq(t, "tls config", cfg.Queue.Kafka.TLSConfig, (*tls.Config)(nil))
}

// TestExpandKafka: the names and files of queue.kafka take ${VAR}; the
// variable naming the password does not.
func TestExpandKafka(t *testing.T) {
	useFakes(t)
	dir := t.TempDir()
	writeKeyPair(t, filepath.Join(dir, "staging", "ca.pem"), filepath.Join(dir, "staging", "ca-key.pem"))
	y := `store: { backend: redis }
queue:
  backend: ${QUEUE:-kafka}
  kafka:
    brokers: ["${KAFKA_A}", "${KAFKA_B:-10.0.1.2:9092}"]
    topic_prefix: "${ENV}."
    client_id: "clawgate-${ENV}"
    group: "${GROUP:-clawgate}-${ENV}"
    tls:
      enabled: true
      ca_file: "${ENV}/ca.pem"
      server_name: "kafka.${DOMAIN}"
    sasl:
      mechanism: scram-sha-256
      username: "${KAFKA_USER:-clawgate}"
      password_env: KAFKA_${ENV}
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9000
    delivery: queue
    verify: { scheme: none }
`
	// password_env is not expanded: the variable named KAFKA_${ENV} is
	// read, not KAFKA_staging.
	env := map[string]string{"KAFKA_A": "10.0.1.1:9092", "ENV": "staging", "DOMAIN": "staging.example.com",
		"KAFKA_${ENV}": "kafka-staging-password", "KAFKA_staging": "not-this-one"}
	cfg, err := Parse([]byte(y), "gateway.yaml", dir, envFunc(env))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Queue.Kafka
	eq(t, "backend", cfg.Queue.Backend, QueueKafka)
	eq(t, "brokers", k.Brokers, []string{"10.0.1.1:9092", "10.0.1.2:9092"})
	eq(t, "names", [...]string{k.TopicPrefix, k.ClientID, k.Group, k.SASL.Username}, [...]string{"staging.", "clawgate-staging", "clawgate-staging", "clawgate"})
	eq(t, "tls", k.TLS, KafkaTLS{Enabled: true, CAFile: filepath.Join(dir, "staging", "ca.pem"), ServerName: "kafka.staging.example.com"})
	eq(t, "password_env", k.SASL.PasswordEnv, "KAFKA_${ENV}")
	eq(t, "password", k.SASL.Password, "kafka-staging-password")
}

// TestKafkaRestartFields: every queue.kafka field needs a restart; the
// compiled TLS config is not compared (its fields are), and a password
// read from the environment is named by its variable's field.
func TestKafkaRestartFields(t *testing.T) {
	base := func() *Config {
		c := Default()
		c.Queue.Backend = QueueKafka
		c.Queue.Kafka.Brokers = []string{"k1:9092"}
		c.Queue.Kafka.TLS.Enabled = true
		c.Queue.Kafka.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		c.Queue.Kafka.SASL = KafkaSASL{Mechanism: SASLPlain, Username: "u", PasswordEnv: "P", Password: "p1"}
		return c
	}
	for _, c := range []struct {
		change func(k *Kafka)
		want   string
	}{
		{func(k *Kafka) {}, ""},
		// Each load compiles a new tls.Config.
		{func(k *Kafka) { k.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} }, ""},
		{func(k *Kafka) { k.Brokers = []string{"k1:9092", "k2:9092"} }, "queue.kafka.brokers"},
		{func(k *Kafka) { k.ClientID = "x"; k.Group = "g" }, "queue.kafka.client_id queue.kafka.group"},
		{func(k *Kafka) { k.Partitions = 6; k.ReplicationFactor = 3; k.CreateTopics = false },
			"queue.kafka.partitions queue.kafka.replication_factor queue.kafka.create_topics"},
		{func(k *Kafka) { k.TLS.Enabled = false; k.TLSConfig = nil }, "queue.kafka.tls.enabled"},
		{func(k *Kafka) { k.TLS.CAFile = "/ca.pem"; k.TLS.ServerName = "kafka" }, "queue.kafka.tls.ca_file queue.kafka.tls.server_name"},
		{func(k *Kafka) { k.TLS.CertFile = "/c.pem"; k.TLS.KeyFile = "/k.pem" }, "queue.kafka.tls.cert_file queue.kafka.tls.key_file"},
		{func(k *Kafka) { k.SASL.Mechanism = SASLScramSHA512; k.SASL.Username = "v" }, "queue.kafka.sasl.mechanism queue.kafka.sasl.username"},
		{func(k *Kafka) { k.SASL.Password = "p2" }, "queue.kafka.sasl.password_env"},
		{func(k *Kafka) { k.SASL.PasswordEnv = "Q"; k.SASL.Password = "p2" }, "queue.kafka.sasl.password_env"},
	} {
		next := base()
		c.change(&next.Queue.Kafka)
		if got := strings.Join(RestartFields(base(), next), " "); got != c.want {
			t.Errorf("RestartFields = %q, want %q", got, c.want)
		}
	}
}
