package queue

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// scriptCommands is how many commands Redis ran inside scripts since the
// last CONFIG RESETSTAT (INFO commandstats: every command but the
// scripts themselves, the stream reads and this test's own).
func scriptCommands(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_script|load", "cmdstat_xreadgroup", "cmdstat_info", "cmdstat_config|resetstat", "cmdstat_hello", "cmdstat_client|setinfo", "cmdstat_ping":
			continue
		}
		if !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		f, _, _ := strings.Cut(v, ",")
		calls, err := strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		n += calls
	}
	return n
}

// The order gate's cost on Redis, in commands per event (each a Lua
// redis.call, about 2 µs of Redis CPU): one event's whole life (enqueue,
// read, begin, settle as delivered) unordered and ordered, two events of
// a value queued at a time. The gate took 15.5 commands more than an
// unordered event (28.0 against 43.5: 7 on the enqueue, 4 on the begin,
// 4.5 on the settle) when its steps read back what the script had just
// read or written and kept a due set the Streams queue never leaves
// anything in; it takes 8.5 more now (enqueue 4: the sequence, the
// fields, the line; begin 1: the head; settle 3.5: the line, the new
// head, whether it waits, or the emptied value), and an unordered event
// 2 fewer. After the events, the values' lines, parked and due sets and
// the waiting count are gone.
func TestRedisOrderGateCommandsPerEvent(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Start(t), Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	const events = 50
	perEvent := map[string]float64{}
	for _, tc := range []struct {
		name  string
		order func(i int) string
	}{
		{"unordered", func(int) string { return "" }},
		// Two events of each value queued at once: the second waits in
		// its value's line while the first is delivered.
		{"ordered", func(i int) string { return "obj_" + strconv.Itoa(i/2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewRedis(c, "cost-"+tc.name+":", time.Second)
			if err := b.Prepare(ctx, testRoute, 1); err != nil {
				t.Fatal(err)
			}
			out := store.Outcome{Status: 200, ContentType: "text/plain", Body: []byte("ok")}
			deliver := func() {
				ls, err := b.Read(ctx, testRoute, 0, "c", 1, time.Second)
				if err != nil || len(ls) != 1 {
					t.Fatal(ls, err)
				}
				j, ok, err := b.Begin(ctx, ls[0])
				if err != nil || !ok {
					t.Fatalf("Begin %s = %v, %v (parked?)", ls[0].Key, ok, err)
				}
				if got, err := b.Settle(ctx, "c", j, Settlement{Kind: SettleDelivered, Outcome: out, Retention: time.Hour, At: time.Now()}); err != nil || got != Recorded {
					t.Fatal(got, err)
				}
			}
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < events; i += 2 {
				for k := i; k < i+2; k++ {
					e := testEntry("k"+strconv.Itoa(k), "fp")
					e.Order = tc.order(k)
					if ack, err := b.Enqueue(ctx, e, 1000); err != nil || ack.State != Enqueued {
						t.Fatalf("Enqueue: %+v, %v", ack, err)
					}
				}
				deliver()
				deliver()
			}
			perEvent[tc.name] = float64(scriptCommands(t, c)) / events
			t.Logf("%.1f Redis commands per event", perEvent[tc.name])
			left, err := c.Keys(ctx, "cost-"+tc.name+":webhook_ord:*").Result()
			if err != nil || len(left) != 0 {
				t.Fatalf("order keys left after every event was delivered: %v, %v", left, err)
			}
		})
	}
	if extra := perEvent["ordered"] - perEvent["unordered"]; extra > 9 {
		t.Fatalf("an ordered event costs %.1f Redis commands more than an unordered one (%.1f against %.1f), want at most 9",
			extra, perEvent["ordered"], perEvent["unordered"])
	}
}
