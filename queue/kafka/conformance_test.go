package kafka

import (
	"fmt"
	"testing"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/queue/queuetest"
)

// kafkaSkips are the conformance cases that test what Kafka does another
// way by design.
var kafkaSkips = map[string]string{
	"StaleOwnerSettle":     "Reclaim hands back only this instance's own records; another consumer's records move with their partitions at a group rebalance (TestKafkaTwoInstancesRebalance)",
	"HandBackByStaleOwner": "as StaleOwnerSettle: entries move between consumers by rebalance, not by Reclaim",
}

// The queue's conformance suite on the Kafka backend: kfake on loopback,
// each ledger.
func TestConformance(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			n := 0
			queuetest.RunWith(t, func(t *testing.T) queue.Backend {
				n++
				return newBackend(t, kafkatest.Start(t), newLedger(t, kind), func(o *Options) {
					o.TopicPrefix = fmt.Sprintf("conf%d.", n)
					o.Partitions = 1
				})
			}, queuetest.Options{Skip: kafkaSkips})
		})
	}
}
