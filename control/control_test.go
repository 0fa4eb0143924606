package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/control/controltest"
	"github.com/clawgate/clawgate/store/redistest"
)

func TestMemory(t *testing.T) {
	controltest.Run(t, func(*testing.T) control.Store { return control.NewMemory() })
}

func TestRedis(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Start(t)})
	t.Cleanup(func() { c.Close() })
	n := 0
	controltest.Run(t, func(*testing.T) control.Store {
		n++
		return control.NewRedis(c, "t"+string(rune('a'+n%26))+time.Now().Format("150405.000000")+":", 5*time.Second)
	})
}

func TestRedisCluster(t *testing.T) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t)})
	t.Cleanup(func() { c.Close() })
	n := 0
	controltest.Run(t, func(*testing.T) control.Store {
		n++
		return control.NewRedis(c, "c"+string(rune('a'+n%26))+time.Now().Format("150405.000000")+":", 5*time.Second)
	})
}

// An unreachable store fails every step closed: no admission, no pause
// state, no pace, each error wrapping ErrUnavailable.
func TestRedisDownFailsClosed(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	g := control.NewGate(control.NewRedis(c, "x:", time.Second))
	ctx := context.Background()
	br := control.Breaker{Failures: 1, Cooldown: time.Second}
	if a, err := g.Admit(ctx, "r", br); !errors.Is(err, control.ErrUnavailable) || a.Allow {
		t.Errorf("Admit = %+v, %v", a, err)
	}
	if _, err := g.Paused(ctx, "r"); !errors.Is(err, control.ErrUnavailable) {
		t.Errorf("Paused: %v", err)
	}
	if n, _, err := g.Take(ctx, "r", control.Pace{Rate: 1, Per: time.Second}, 3); !errors.Is(err, control.ErrUnavailable) || n != 0 {
		t.Errorf("Take = %d, %v", n, err)
	}
	if err := g.Report(ctx, "r", br, false, false); !errors.Is(err, control.ErrUnavailable) {
		t.Errorf("Report: %v", err)
	}
}

// A record that is not a number is reported as corrupt, not read as 0.
func TestRedisCorruptRecord(t *testing.T) {
	addr := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	c.HSet(ctx, "p:webhook_control:{r}", "v", "1", "open", "soon")
	if _, err := control.NewRedis(c, "p:", time.Second).Load(ctx, "r"); !errors.Is(err, control.ErrCorrupt) {
		t.Fatalf("Load of a corrupt record: %v", err)
	}
	c.Set(ctx, "p:webhook_control:{s}", "x", 0)
	if _, err := control.NewRedis(c, "p:", time.Second).Load(ctx, "s"); !errors.Is(err, control.ErrCorrupt) {
		t.Fatalf("Load of a key of another type: %v", err)
	}
}

// The pace's key stays under the store's prefix (redis_rate would put it
// under "rate:").
func TestPaceKeyUnderThePrefix(t *testing.T) {
	addr := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if _, _, err := control.NewRedis(c, "p:", time.Second).Take(context.Background(), "r", control.Pace{Rate: 5, Per: time.Second}, 1); err != nil {
		t.Fatal(err)
	}
	keys, _ := c.Keys(context.Background(), "*").Result()
	if len(keys) != 1 || keys[0] != "p:webhook_pace:{r}" {
		t.Fatalf("keys %v, want p:webhook_pace:{r}", keys)
	}
}
