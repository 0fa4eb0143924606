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
	"RetryAndPromote":      "a retry waits in a retry topic that a consumer reads in the background; Promote sends on only the records that consumer already holds, so a Promote at the due time may find none yet (promote.go)",
	"StaleOwnerSettle":     "Reclaim hands back only this instance's own records; another consumer's records move with their partitions at a group rebalance (TestKafkaTwoInstancesRebalance)",
	"HandBack":             "as StaleOwnerSettle: a handed-back record is taken again by the consumer that owns its partition, not by another consumer's Reclaim",
	"HandBackByStaleOwner": "as StaleOwnerSettle: entries move between consumers by rebalance, not by Reclaim",
	"OrderLeaseRecovery":   "as StaleOwnerSettle: a dead instance's begun head moves with its partition at a rebalance (TestOrderLoad in package server kills an instance), not by Reclaim",
	"ListDLQPagination":    "the DLQ listing is the ledger's ListDead, whose order is unspecified (each dead event listed once), not the order the events died",
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
