package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/store/redistest"
)

// /readyz follows the Kafka brokers of queue.backend kafka: 503 with
// "queue":"unavailable" while none answers, 200 again once one does.
func TestQueueKafkaReadyzFollowsBrokers(t *testing.T) {
	kc := kafkatest.StartPersistent(t)
	up := newQUpstream(t)
	in := startQueue(t, qConf{redis: redistest.Start(t), kafka: kc.Addrs(), upstream: up.srv.URL}, nil)
	ready := func() (int, map[string]string) {
		resp, err := http.Get(in.admin() + "/readyz")
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := ready(); code != 200 {
		t.Fatalf("readyz with Kafka up: %d %v", code, body)
	}
	kc.Stop()
	var code int
	var body map[string]string
	qEventually(t, 20*time.Second, func() bool { code, body = ready(); return code == 503 },
		func() string { return fmt.Sprintf("readyz with Kafka down: %d %v, want 503", code, body) })
	if body["queue"] != "unavailable" || body["store"] != "ok" || body["error"] == "" {
		t.Fatalf("readyz body with Kafka down: %v", body)
	}
	if v := readyGauge(t, in); v != 0 {
		t.Fatalf("clawgate_ready with Kafka down = %v, want 0", v)
	}
	kc.Restart()
	qEventually(t, 30*time.Second, func() bool { code, body = ready(); return code == 200 },
		func() string { return fmt.Sprintf("readyz after Kafka came back: %d %v", code, body) })
}

// readyGauge is clawgate_ready as the admin listener's registry has it.
func readyGauge(t *testing.T, in *qInstance) float64 {
	t.Helper()
	mfs, err := in.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "clawgate_ready" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no clawgate_ready")
	return 0
}

// SASL/SCRAM with the password from the environment: the right password
// delivers; a wrong one fails closed (not ready, 503, nothing queued).
func TestQueueKafkaSASL(t *testing.T) {
	kc := kafkatest.Start(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "clawgate", "s3cret"))
	sasl := "sasl: { mechanism: scram-sha-512, username: clawgate, password_env: KAFKA_PASSWORD }"
	t.Run("right password", func(t *testing.T) {
		up := newQUpstream(t)
		in := startQueue(t, qConf{redis: redistest.Start(t), kafka: kc.Addrs(), kafkaExtra: sasl, upstream: up.srv.URL},
			map[string]string{"KAFKA_PASSWORD": "s3cret"})
		if a := qPost(in.url(), "sasl-1"); a.status != 202 {
			t.Fatalf("with SASL: %d %q %v", a.status, a.raw, a.err)
		}
		up.waitCompleted(t, []string{"sasl-1"}, 20*time.Second)
		checkOnce(t, up, []string{"sasl-1"})
	})
	t.Run("wrong password", func(t *testing.T) {
		up := newQUpstream(t)
		in := startQueue(t, qConf{redis: redistest.Start(t), kafka: kc.Addrs(), kafkaExtra: sasl, topicPrefix: "wrong.", upstream: up.srv.URL},
			map[string]string{"KAFKA_PASSWORD": "not-it"})
		if a := qPost(in.url(), "sasl-2"); a.status != 503 || a.retry == "" {
			t.Fatalf("with a wrong SASL password: %d Retry-After %q %q %v, want 503", a.status, a.retry, a.raw, a.err)
		}
		if ks := in.keyState("sasl-2"); ks.State != "absent" {
			t.Fatalf("sasl-2 after the 503: %+v, want absent", ks)
		}
		resp, err := http.Get(in.admin() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Fatalf("readyz with a wrong SASL password: %d, want 503", resp.StatusCode)
		}
		if strings.Contains(in.log.String(), "not-it") {
			t.Fatal("the password is in the gateway's log")
		}
	})
}
