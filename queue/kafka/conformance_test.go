package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/queue/queuetest"
)

// The queue's conformance suite on the Kafka backend, every case: kfake
// on loopback, each ledger.
//
// Entries move between consumers of different instances at a group
// rebalance, not by another consumer's Reclaim, so the suite's takeover
// (queuetest.Options.Takeover) is one: the instance holding the entries
// stops taking part in the route's group, as the group drops an instance
// that stalled past the session timeout, and another instance of the
// same queue (same brokers, topics, groups and ledger) gets the partition
// and reads them again. The stalled instance's drain waits DrainWait for
// its tries, which never settle, and forgets them; it stays alive for its
// late settles and hand-backs.
func TestConformance(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			type instance struct {
				kc     *kafkatest.Cluster
				l      ledger.Ledger
				prefix string
			}
			made := map[queue.Backend]instance{}
			start := func(t *testing.T, in instance) *Backend {
				return newBackend(t, in.kc, in.l, func(o *Options) {
					o.TopicPrefix = in.prefix
					o.Partitions = 1
					o.DrainWait = 100 * time.Millisecond // a stalled try is given up soon
				})
			}
			n := 0
			queuetest.RunWith(t, func(t *testing.T) queue.Backend {
				n++
				in := instance{kafkatest.Start(t), newLedger(t, kind), fmt.Sprintf("conf%d.", n)}
				b := start(t, in)
				made[b] = in
				return b
			}, queuetest.Options{Takeover: func(t *testing.T, b queue.Backend, from, to string, held []queue.Lease) (queue.Backend, []queue.Lease) {
				t.Helper()
				in, ok := made[b]
				if !ok {
					t.Fatalf("Takeover of a backend this test did not make")
				}
				b.(*Backend).leaveGroup(t, queuetest.Route)
				nb := start(t, in)
				var taken []queue.Lease
				eventually(t, bound, func() bool {
					ls, err := nb.Read(t.Context(), queuetest.Route, 0, to, len(held), 50*time.Millisecond)
					if err != nil {
						t.Fatalf("Read on the other instance: %v", err)
					}
					taken = append(taken, ls...)
					return len(taken) >= len(held)
				}, func() string {
					return fmt.Sprintf("the other instance read %d of %s's %d entries", len(taken), from, len(held))
				})
				return nb, taken
			}})
		})
	}
}

// leaveGroup makes this instance stop reading route's main topic: it
// leaves the route's group, so that the group gives its partitions to the
// other instances. Tries still running on them get DrainWait to settle.
func (b *Backend) leaveGroup(t *testing.T, route string) {
	t.Helper()
	r := b.existing(route)
	if r == nil {
		t.Fatalf("leaveGroup: route %q not prepared", route)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := r.main.cl.LeaveGroupContext(ctx); err != nil {
		t.Fatalf("leaving the group of route %q: %v", route, err)
	}
}
