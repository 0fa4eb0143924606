package queue_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/queue/queuetest"
	"github.com/clawgate/clawgate/store/redistest"
)

// The conformance suite (queuetest.Run) on the memory backend, on a
// redis-server and on a Redis Cluster.
func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		queuetest.Run(t, func(t *testing.T) queue.Backend { return queue.NewMemory() })
	})
	t.Run("redis", func(t *testing.T) {
		addr := redistest.Start(t)
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		t.Cleanup(func() { _ = c.Close() })
		n := 0
		queuetest.Run(t, func(t *testing.T) queue.Backend {
			n++
			return queue.NewRedis(c, fmt.Sprintf("conf%d:", n), 0)
		})
	})
	t.Run("cluster", func(t *testing.T) {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t), Protocol: 2})
		t.Cleanup(func() { _ = cc.Close() })
		n := 0
		queuetest.Run(t, func(t *testing.T) queue.Backend {
			n++
			return queue.NewRedis(cc, fmt.Sprintf("conf%d:", n), 0)
		})
	})
}
