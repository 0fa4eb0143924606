package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
)

// Kafka's limits on the names the kafka backend creates.
const (
	// MaxKafkaTopicLen is the longest topic name Kafka accepts.
	MaxKafkaTopicLen = 249
	// KafkaLongestTopicSuffix is the longest suffix the kafka backend puts
	// after a route's main topic (TopicPrefix + route name) to name the
	// route's other topics.
	KafkaLongestTopicSuffix = ".retry.10m"
	maxKafkaPartitions      = 10000
	maxKafkaReplication     = 32767
)

// KafkaTopicSuffixes are what the kafka backend puts after a route's main
// topic (TopicPrefix + route name) to name each of the route's topics, the
// main topic itself first.
var KafkaTopicSuffixes = []string{"", ".retry.1s", ".retry.5s", ".retry.30s", ".retry.2m", ".retry.10m", ".retry.1h", ".retry.6h", ".dlq"}

// kafkaNameChars says what validKafkaName allows.
const kafkaNameChars = "letters, digits, '.', '_' and '-'"

// validKafkaName reports a string made only of the characters Kafka allows
// in a topic name: ASCII letters, digits, '.', '_' and '-'.
func validKafkaName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkKafka validates queue.kafka, compiles its TLS settings into
// Kafka.TLSConfig and resolves the SASL password. Called with
// queue.backend kafka only.
func (b *builder) checkKafka() {
	k := &b.cfg.Queue.Kafka
	if len(k.Brokers) == 0 {
		b.ps.add(b.line("queue", "kafka", "brokers"), "queue.kafka.brokers", `at least one broker address is required with queue.backend kafka, such as ["kafka-1:9092"]`)
	}
	for i, addr := range k.Brokers {
		line, field := b.line("queue", "kafka", "brokers", i), fmt.Sprintf("queue.kafka.brokers[%d]", i)
		host, port, err := splitHostPort(addr)
		switch {
		case err != nil:
			b.ps.add(line, field, "%v", err)
		case host == "":
			b.ps.add(line, field, `%q has no host; write host:port, such as "kafka-1:9092"`, clip(addr))
		case strings.TrimLeft(port, "0") == "":
			b.ps.add(line, field, "port %q of %q cannot be dialled; use the brokers' port, such as 9092", clip(port), clip(addr))
		}
	}

	// The longest topic is TopicPrefix + route + KafkaLongestTopicSuffix,
	// and a route name has at least one character.
	line := b.line("queue", "kafka", "topic_prefix")
	maxPrefix := MaxKafkaTopicLen - 1 - len(KafkaLongestTopicSuffix)
	switch {
	case !validKafkaName(k.TopicPrefix):
		b.ps.add(line, "queue.kafka.topic_prefix", "%q may only contain %s: Kafka allows no other character in a topic name", clip(k.TopicPrefix), kafkaNameChars)
	case len(k.TopicPrefix) > maxPrefix:
		b.ps.add(line, "queue.kafka.topic_prefix", "is %d characters long; at most %d leave room for a route's name and %q within Kafka's %d-character topic names",
			len(k.TopicPrefix), maxPrefix, KafkaLongestTopicSuffix, MaxKafkaTopicLen)
	}
	if k.ClientID == "" {
		b.ps.add(b.line("queue", "kafka", "client_id"), "queue.kafka.client_id", `must not be empty; the default is "clawgate"`)
	} else if strings.ContainsFunc(k.ClientID, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		b.ps.add(b.line("queue", "kafka", "client_id"), "queue.kafka.client_id", "%q must not contain control characters", clip(k.ClientID))
	}
	switch line := b.line("queue", "kafka", "group"); {
	case k.Group == "":
		b.ps.add(line, "queue.kafka.group", `must not be empty: each route's consumer group is named GROUP.ROUTE; the default is "clawgate"`)
	case !validKafkaName(k.Group):
		b.ps.add(line, "queue.kafka.group", "%q may only contain %s", clip(k.Group), kafkaNameChars)
	}
	if k.Partitions < 1 || k.Partitions > maxKafkaPartitions {
		b.ps.add(b.line("queue", "kafka", "partitions"), "queue.kafka.partitions", "must be from 1 to %d, got %d", maxKafkaPartitions, k.Partitions)
	}
	if rf := k.ReplicationFactor; rf != -1 && (rf < 1 || rf > maxKafkaReplication) {
		b.ps.add(b.line("queue", "kafka", "replication_factor"), "queue.kafka.replication_factor", "must be from 1 to %d, or -1 for the brokers' default.replication.factor, got %d", maxKafkaReplication, rf)
	}
	b.checkKafkaTLS()
	b.checkKafkaSASL()
}

// checkKafkaTLS validates queue.kafka.tls and compiles it into
// Kafka.TLSConfig, reading its files now so that a config that loads can
// connect.
func (b *builder) checkKafkaTLS() {
	k := &b.cfg.Queue.Kafka
	t := &k.TLS
	if !t.Enabled {
		for _, f := range []struct{ name, val string }{
			{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"server_name", t.ServerName},
		} {
			if f.val != "" {
				b.ps.add(b.line("queue", "kafka", "tls", f.name), "queue.kafka.tls."+f.name, "is set but queue.kafka.tls.enabled is false, so the brokers are reached in plain text; set enabled: true, or remove it")
			}
		}
		return
	}
	line := b.line("queue", "kafka", "tls")
	ok := true
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		b.ps.add(line, "queue.kafka.tls", "cert_file is set but key_file is not; set both (a client certificate) or neither")
		ok = false
	case t.CertFile == "" && t.KeyFile != "":
		b.ps.add(line, "queue.kafka.tls", "key_file is set but cert_file is not; set both (a client certificate) or neither")
		ok = false
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		t.CAFile = b.resolvePath(t.CAFile)
		caLine := b.line("queue", "kafka", "tls", "ca_file")
		pem, err := readRegular(t.CAFile)
		if err != nil {
			b.ps.wrap(caLine, "queue.kafka.tls.ca_file", err)
			ok = false
		} else if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(pem) {
			b.ps.add(caLine, "queue.kafka.tls.ca_file", "%s holds no PEM certificate", t.CAFile)
			ok = false
		} else {
			cfg.RootCAs = pool
		}
	}
	if t.CertFile != "" && t.KeyFile != "" {
		t.CertFile = b.resolvePath(t.CertFile)
		t.KeyFile = b.resolvePath(t.KeyFile)
		cert, certErr := readRegular(t.CertFile)
		if certErr != nil {
			b.ps.wrap(b.line("queue", "kafka", "tls", "cert_file"), "queue.kafka.tls.cert_file", certErr)
		}
		key, keyErr := readRegular(t.KeyFile)
		if keyErr != nil {
			b.ps.wrap(b.line("queue", "kafka", "tls", "key_file"), "queue.kafka.tls.key_file", keyErr)
		}
		if certErr != nil || keyErr != nil {
			ok = false
		} else if pair, err := tls.X509KeyPair(cert, key); err != nil {
			b.ps.list = append(b.ps.list, &Problem{File: b.ps.file, Line: line, Field: "queue.kafka.tls",
				Msg: fmt.Sprintf("cannot use %s and %s as a key pair: %v", t.CertFile, t.KeyFile, err), Err: err})
			ok = false
		} else {
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	if ok {
		k.TLSConfig = cfg
	}
}

// checkKafkaSASL validates queue.kafka.sasl and resolves its password. The
// password is a credential: messages name its variable, never its value.
func (b *builder) checkKafkaSASL() {
	k := &b.cfg.Queue.Kafka
	s := &k.SASL
	const mechanisms = "plain, scram-sha-256 or scram-sha-512"
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.PasswordEnv != "" {
			b.ps.add(b.line("queue", "kafka", "sasl"), "queue.kafka.sasl", "username and password_env need a mechanism: %s", mechanisms)
		}
		return
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if !k.TLS.Enabled {
			what := "sends the password in clear to the brokers"
			if s.Mechanism != SASLPlain {
				what = "does not send the password, but the username and every record travel unencrypted"
			}
			b.warnAt(b.line("queue", "kafka", "sasl", "mechanism"), "queue.kafka.sasl", fmt.Sprintf(
				"mechanism %s without queue.kafka.tls.enabled %s; set tls.enabled: true", s.Mechanism, what))
		}
	default:
		b.ps.add(b.line("queue", "kafka", "sasl", "mechanism"), "queue.kafka.sasl.mechanism", "must be %s, got %q", mechanisms, clip(string(s.Mechanism)))
	}
	if s.Username == "" {
		b.ps.add(b.line("queue", "kafka", "sasl", "username"), "queue.kafka.sasl.username", "required with sasl.mechanism")
	}
	line := b.line("queue", "kafka", "sasl", "password_env")
	if s.PasswordEnv == "" {
		b.ps.add(line, "queue.kafka.sasl.password_env", "required with sasl.mechanism: the name of the variable holding the password, such as KAFKA_PASSWORD")
		return
	}
	s.Password = b.getenv(s.PasswordEnv)
	if s.Password == "" {
		b.ps.add(line, "queue.kafka.sasl.password_env", "%s is unset or empty; set it to the SASL password", clip(s.PasswordEnv))
	}
}

// checkKafkaRoutes checks the topic names of the queue routes with
// queue.backend kafka. Their characters need no check: a route name
// (validName) only has characters Kafka allows.
func (b *builder) checkKafkaRoutes() {
	k := &b.cfg.Queue.Kafka
	prefixOK := validKafkaName(k.TopicPrefix) && len(k.TopicPrefix) <= MaxKafkaTopicLen-1-len(KafkaLongestTopicSuffix)
	// Each route's topics must be its own: Kafka refuses a topic whose name
	// differs from another's only in '.' and '_' (the same character in its
	// metric names), and a route named "orders.dlq" would read the DLQ of
	// "orders" as its main topic.
	owner := map[string]int{} // normalised topic -> route index
	for i := range b.cfg.Routes {
		r := &b.cfg.Routes[i]
		if !r.Queued() || r.Name == "" || !validName(r.Name) {
			continue
		}
		if prefixOK {
			longest := k.TopicPrefix + r.Name + KafkaLongestTopicSuffix
			if len(longest) > MaxKafkaTopicLen {
				b.routeError(i, []any{"name"}, "name", "is too long for a Kafka topic: with queue.kafka.topic_prefix %q the route's longest topic (%s) is %d characters, and Kafka allows %d; shorten the name (to at most %d characters) or the prefix",
					clip(k.TopicPrefix), clip(longest), len(longest), MaxKafkaTopicLen, MaxKafkaTopicLen-len(k.TopicPrefix)-len(KafkaLongestTopicSuffix))
			}
		}
		for _, suffix := range KafkaTopicSuffixes {
			topic := k.TopicPrefix + r.Name + suffix
			norm := strings.ReplaceAll(topic, ".", "_")
			j, taken := owner[norm]
			if !taken {
				owner[norm] = i
				continue
			}
			if j == i {
				continue
			}
			other := b.cfg.Routes[j]
			b.routeError(i, []any{"name"}, "name", "its Kafka topic %s is also one of the topics of %s at line %d (Kafka counts '.' and '_' as the same character); rename one of the routes",
				clip(topic), routeLabel(j, other.Name), other.Line)
			break
		}
	}
}
