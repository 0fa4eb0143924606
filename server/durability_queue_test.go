package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

// A Redis without persistence loses the queue routes' queued and
// dead-lettered events too, not only finished keys: the start-up warning
// and the restart line say so when queue routes live in Redis. (Issue:
// the warnings spoke of idempotency keys only.)
func TestDurabilityWarningsNameTheQueueRoutesEvents(t *testing.T) {
	lossy := store.Durability{RDBKnown: true, MaxmemoryPolicy: "noeviction",
		Nodes:    []store.NodeDurability{{Addr: "127.0.0.1:6379", RDBKnown: true, MaxmemoryPolicy: "noeviction"}},
		Problems: []string{"127.0.0.1:6379 has neither AOF nor RDB snapshots on: a restart loses every key"}}
	cfg := &config.Config{Queue: config.Queue{Backend: config.QueueRedis}, Routes: []config.Route{
		{Name: "orders", Delivery: config.DeliveryQueue}, {Name: "sync", Delivery: config.DeliverySync}}}
	for _, c := range []struct {
		name  string
		cfg   *config.Config
		queue bool
	}{
		{"queue routes on redis", cfg, true},
		{"no queue routes", &config.Config{Queue: config.Queue{Backend: config.QueueRedis}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			report := durabilityReporter(log, metrics.New(prometheus.NewRegistry()), func() []string { return redisQueueRoutes(c.cfg) })
			report(lossy, nil)
			restarted := lossy
			restarted.Restarted = true
			report(restarted, nil)
			out := buf.String()
			for _, want := range []string{
				"redis can lose the queue routes' events: a restart without persistence (or an eviction) drops every event still queued or dead-lettered",
				"the queue routes' events that were still queued or dead-lettered are gone too",
				"queue_routes=orders ",
			} {
				if got := strings.Contains(out, want); got != c.queue {
					t.Errorf("log has %q: %v, want %v\n%s", want, got, c.queue, out)
				}
			}
			if strings.Contains(out, "sync") {
				t.Errorf("a sync route named:\n%s", out)
			}
		})
	}
}
