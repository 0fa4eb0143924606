package queue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// benchPayload is a 1 KiB stored request, about what a webhook weighs.
var benchPayload = make([]byte, 1024)

func benchBackends(b *testing.B) map[string]Backend {
	addr := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	b.Cleanup(func() { c.Close() })
	r := NewRedis(c, "bench:", time.Second)
	if err := r.Prepare(context.Background(), "orders", 1); err != nil {
		b.Fatal(err)
	}
	// As the gateway runs it on a single server or Sentinel: the enqueue
	// also reads the key's sync record (a route switched from sync).
	rs := NewRedis(c, "bench-sync:", time.Second)
	rs.CheckSyncRecords(func(route, key string) (string, string, string) {
		k := "{" + route + ":" + key + "}"
		return "bench-sync:webhook_lock:" + k, "bench-sync:webhook_done:" + k, "bench-sync:webhook_attempts:" + k
	})
	if err := rs.Prepare(context.Background(), "orders", 1); err != nil {
		b.Fatal(err)
	}
	return map[string]Backend{"memory": NewMemory(), "redis": r, "redis-sync-records": rs}
}

// BenchmarkQueueEnqueue is the acknowledgement's cost: one new event
// stored with its key's claim.
func BenchmarkQueueEnqueue(b *testing.B) {
	for name, be := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			now := time.Now()
			for i := 0; b.Loop(); i++ {
				ack, err := be.Enqueue(ctx, Entry{Route: "orders", Key: "k" + strconv.Itoa(i), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now}, 1<<30)
				if err != nil || ack.State != Enqueued {
					b.Fatal(ack, err)
				}
			}
		})
	}
}

// BenchmarkQueueCycle is one event's whole life on the queue: enqueue,
// read, begin, settle as delivered.
func BenchmarkQueueCycle(b *testing.B) {
	for name, be := range benchBackends(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			now := time.Now()
			out := store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
			for i := 0; b.Loop(); i++ {
				if _, err := be.Enqueue(ctx, Entry{Route: "orders", Key: "c" + strconv.Itoa(i), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now}, 1<<30); err != nil {
					b.Fatal(err)
				}
				ls, err := be.Read(ctx, "orders", 0, "bench", 1, time.Second)
				if err != nil || len(ls) != 1 {
					b.Fatal(ls, err)
				}
				j, ok, err := be.Begin(ctx, ls[0])
				if err != nil || !ok {
					b.Fatal(ok, err)
				}
				got, err := be.Settle(ctx, "bench", j, Settlement{Kind: SettleDelivered, Outcome: out, Retention: time.Hour, At: now})
				if err != nil || got != Recorded {
					b.Fatal(got, err)
				}
			}
		})
	}
}

// orderedBench runs f on a Redis queue of its own, unordered and with
// order over 1,000 values, in the same run: the order gate's cost on the
// acknowledgement and on a delivery.
func orderedBench(b *testing.B, f func(b *testing.B, be Backend, order func(i int) string)) {
	addr := redistest.Start(b)
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	b.Cleanup(func() { c.Close() })
	for _, tc := range []struct {
		name  string
		order func(i int) string
	}{
		{"unordered", func(int) string { return "" }},
		{"ordered-1000-values", func(i int) string { return "obj_" + strconv.Itoa(i%1000) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := NewRedis(c, "bench-"+tc.name+":", time.Second)
			if err := r.Prepare(context.Background(), "orders", 1); err != nil {
				b.Fatal(err)
			}
			f(b, r, tc.order)
		})
	}
}

// BenchmarkQueueOrderedEnqueue is the acknowledgement's cost on Redis,
// unordered and ordered (the value's sequence taken in the same script).
func BenchmarkQueueOrderedEnqueue(b *testing.B) {
	orderedBench(b, func(b *testing.B, be Backend, order func(int) string) {
		b.ReportAllocs()
		ctx := context.Background()
		now := time.Now()
		for i := 0; b.Loop(); i++ {
			e := Entry{Route: "orders", Key: "k" + strconv.Itoa(i), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now, Order: order(i)}
			if ack, err := be.Enqueue(ctx, e, 1<<30); err != nil || ack.State != Enqueued {
				b.Fatal(ack, err)
			}
		}
	})
}

// BenchmarkQueueOrderedCycle is one event's whole life on Redis (enqueue,
// read, begin, settle), unordered and ordered over 1,000 values (each
// event the head of its value when begun: the gate's cost without a
// wait).
func BenchmarkQueueOrderedCycle(b *testing.B) {
	orderedBench(b, func(b *testing.B, be Backend, order func(int) string) {
		b.ReportAllocs()
		ctx := context.Background()
		now := time.Now()
		out := store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
		for i := 0; b.Loop(); i++ {
			e := Entry{Route: "orders", Key: "c" + strconv.Itoa(i), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now, Order: order(i)}
			if _, err := be.Enqueue(ctx, e, 1<<30); err != nil {
				b.Fatal(err)
			}
			ls, err := be.Read(ctx, "orders", 0, "bench", 1, time.Second)
			if err != nil || len(ls) != 1 {
				b.Fatal(ls, err)
			}
			j, ok, err := be.Begin(ctx, ls[0])
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if got, err := be.Settle(ctx, "bench", j, Settlement{Kind: SettleDelivered, Outcome: out, Retention: time.Hour, At: now}); err != nil || got != Recorded {
				b.Fatal(got, err)
			}
		}
	})
}
