package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
)

const guardSecret = "queue-guard-secret"

// startGuardedQueue starts a gateway like startQueue, its queue route
// keyed on the Idempotency-Key header beside an HMAC over the body: a key
// the signature does not cover, so the route gets the replay guard.
func startGuardedQueue(t *testing.T, c qConf) *qInstance {
	t.Helper()
	y := c.yaml()
	const plain = "    idempotency: { key: [\"json:id\"] }\n    verify: { scheme: none }\n"
	if !strings.Contains(y, plain) {
		t.Fatalf("the queue route's key and verify lines moved:\n%s", y)
	}
	y = strings.Replace(y, plain, "    idempotency: { key: [\"header:Idempotency-Key\"] }\n"+
		"    verify: { scheme: hmac, header: X-Signature, secrets: [{ id: a, secret_env: GUARD_SECRET }] }\n", 1)
	cfg, err := config.Parse([]byte(doorYAML(t, y)), "gateway.yaml", t.TempDir(), func(k string) string {
		if k == "GUARD_SECRET" {
			return guardSecret
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Routes[0].ReplayGuard {
		t.Fatal("the queue route has no replay guard")
	}
	in := &qInstance{t: t, reg: prometheus.NewRegistry(), log: &logBuffer{}}
	in.Server, err = Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(in.log, nil)), Registry: in.reg, Version: "queue-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.stop(time.Second) })
	checkDoor(t, in.Server)
	return in
}

// signedPost delivers body, signed, under the Idempotency-Key key.
func signedPost(t *testing.T, url, key, body string) (status int, replayed bool) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(guardSecret))
	mac.Write([]byte(body))
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Signature", hex.EncodeToString(mac.Sum(nil)))
	resp, err := qClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s under %s: %v", url, key, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
}

// Regression (issue 20): "A queue route cannot be guarded against a
// captured delivery resent under a fresh unsigned key". Two instances on
// one Redis (the Redis Streams and the Kafka backends): a signed request
// acknowledged by one instance and sent again under other keys, to either
// instance, before and after its delivery, gets 422; the upstream sees
// one copy.
func TestQueueReplayGuardRefusesCapturedDeliveryAcrossInstances(t *testing.T) {
	forEachQueueDoor(t, testQueueReplayGuardRefusesCapturedDeliveryAcrossInstances)
}

func testQueueReplayGuardRefusesCapturedDeliveryAcrossInstances(t *testing.T, _ string, c qConf) {
	up := newQUpstream(t)
	c.upstream = up.srv.URL
	a, b := startGuardedQueue(t, c), startGuardedQueue(t, c)
	const body = `{"id":"evt_1","amount":42}`
	if st, _ := signedPost(t, a.url(), "key-1", body); st != http.StatusAccepted {
		t.Fatalf("first: %d", st)
	}
	for i, in := range []*qInstance{b, a} {
		key := []string{"key-2", "key-3"}[i]
		if st, _ := signedPost(t, in.url(), key, body); st != http.StatusUnprocessableEntity {
			t.Fatalf("under %s: %d, want 422", key, st)
		}
	}
	up.waitCompleted(t, []string{"key-1"}, 20*time.Second)
	if st, _ := signedPost(t, b.url(), "key-4", body); st != http.StatusUnprocessableEntity {
		t.Fatalf("under key-4 after the delivery: %d, want 422", st)
	}
	// The provider's own retry, same key and signed request: answered as a
	// copy of its event.
	if st, replayed := signedPost(t, b.url(), "key-1", body); st/100 != 2 || !replayed {
		t.Fatalf("retry under key-1: %d replayed=%v", st, replayed)
	}
	checkOnce(t, up, []string{"key-1"})
	for _, k := range []string{"key-2", "key-3", "key-4"} {
		if n := len(up.tries(k)); n != 0 {
			t.Errorf("%s reached the upstream %d times, want never", k, n)
		}
	}
	var replays float64
	for _, in := range []*qInstance{a, b} {
		v, _ := in.gauge("webhook_signature_replays_total")
		replays += v
	}
	if replays != 3 {
		t.Errorf("webhook_signature_replays_total over both instances = %v, want 3", replays)
	}
}
