package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/store/redistest"
)

// The scenarios of queue_test.go that make sense for Kafka run on it
// through forEachQueueBackend; these are Kafka's own.

// With the Kafka broker down a queue route answers 503 with Retry-After
// (the event could not be produced, so nothing is acknowledged); once the
// broker is back (same address, its data kept) the same delivery is
// acknowledged and delivered, once.
func TestQueueKafkaDown503(t *testing.T) {
	kc := kafkatest.StartPersistent(t)
	up := newQUpstream(t)
	in := startQueue(t, qConf{redis: redistest.Start(t), kafka: kc.Addrs(), upstream: up.srv.URL}, nil)
	// The route works before the broker goes.
	if a := qPost(in.url(), "up-1"); a.status != 202 {
		t.Fatalf("with Kafka up: %d %q %v", a.status, a.raw, a.err)
	}
	up.waitCompleted(t, []string{"up-1"}, 20*time.Second)

	kc.Stop()
	a := qPost(in.url(), "down-1")
	if a.err != nil || a.status != 503 || a.retry == "" {
		t.Fatalf("with Kafka down: %d Retry-After %q %q %v, want 503 with Retry-After", a.status, a.retry, a.raw, a.err)
	}
	if ks := in.keyState("down-1"); ks.State != "absent" {
		t.Fatalf("down-1 after the 503: %+v, want absent", ks)
	}
	kc.Restart()
	qEventually(t, 30*time.Second, func() bool {
		a = qPost(in.url(), "down-1")
		if a.status != 202 && (a.status != 503 || a.retry == "") && a.status != 409 {
			t.Fatalf("while Kafka comes back: %d Retry-After %q %q %v, want 202, or 503/409 with Retry-After", a.status, a.retry, a.raw, a.err)
		}
		return a.status == 202
	}, func() string { return fmt.Sprintf("last answer %d %q %v", a.status, a.raw, a.err) })
	if a.replayed || a.body.Status != "queued" {
		t.Fatalf("first acknowledgement: replayed=%v %q", a.replayed, a.raw)
	}
	up.waitCompleted(t, []string{"down-1"}, 20*time.Second)
	qEventually(t, 10*time.Second, func() bool { return in.keyState("down-1").State == "finished" },
		func() string { return fmt.Sprintf("down-1: %+v, want finished", in.keyState("down-1")) })
	checkOnce(t, up, []string{"up-1", "down-1"})
	if n := len(up.tries("down-1")); n != 1 {
		t.Errorf("down-1 tried %d times, want 1", n)
	}
}
