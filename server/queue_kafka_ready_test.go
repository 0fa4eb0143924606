package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

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
