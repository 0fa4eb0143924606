package queue

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// scaleDepths lists the waiting events BenchmarkScaleQueueDepth measures
// with: CLAWGATE_SCALE_DEPTHS (comma-separated), or 0, 100k and 1M.
func scaleDepths() []int {
	v := os.Getenv("CLAWGATE_SCALE_DEPTHS")
	if v == "" {
		return []int{0, 100_000, 1_000_000}
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n >= 0 {
			ns = append(ns, n)
		}
	}
	return ns
}

// BenchmarkScaleQueueDepth: how the queue's two costs grow with the events
// waiting in it, on the memory queue and on Redis Streams (its own
// redis-server on loopback, no persistence, one shard): ack is one new
// event stored (the 202's work), deliver one waiting event read, begun and
// settled as delivered (the worker's, without the upstream). The depth
// stays about the same while they run (ack adds b.N events, deliver takes
// b.N away). At depth 0, ack's events are delivered first, then each
// deliver stores its own event and delivers it: that row is a whole
// cycle. cpu-us/op is this process's CPU (not Redis's) per operation.
// Part of `make bench`'s scaling table (docs/benchmarks.md).
func BenchmarkScaleQueueDepth(b *testing.B) {
	addr := redistest.Start(b)
	ctx := context.Background()
	for _, kind := range []string{"memory", "redis"} {
		for _, depth := range scaleDepths() {
			var be Backend
			switch kind {
			case "memory":
				be = NewMemory()
			case "redis":
				c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: 64})
				if err := c.FlushAll(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				r := NewRedis(c, "scale:", 5*time.Second)
				if err := r.Prepare(ctx, "orders", 1); err != nil {
					b.Fatal(err)
				}
				be = r
				defer c.Close()
			}
			fillQueue(b, be, depth)
			name := kind + "/depth=" + depthName(depth)
			var seq int
			b.Run(name+"/ack", func(b *testing.B) {
				now := time.Now()
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					seq++
					ack, err := be.Enqueue(ctx, Entry{Route: "orders", Key: "ack-" + strconv.Itoa(seq), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now}, 1<<30)
					if err != nil || ack.State != Enqueued {
						b.Fatal(ack, err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			})
			if depth == 0 {
				drainQueue(b, be) // ack's events: nothing waits
			}
			b.Run(name+"/deliver", func(b *testing.B) {
				now := time.Now()
				out := store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
				if depth > 0 {
					// Enough events for this round, whatever the
					// rounds before took (regression: make bench's
					// memory depth=1M row ran out of events and
					// failed), and a count that must come out right.
					st, err := be.Stats(ctx, "orders")
					if err != nil {
						b.Fatal(err)
					}
					if short := int64(b.N) - st.Depth; short > 0 {
						seq++
						topUp(b, be, fmt.Sprintf("top-%d-", seq), int(short))
					}
					defer func() {
						if after, err := be.Stats(ctx, "orders"); err == nil && after.Depth != max(st.Depth, int64(b.N))-int64(b.N) {
							b.Fatalf("after %d deliveries of %d waiting events the queue holds %d", b.N, max(st.Depth, int64(b.N)), after.Depth)
						}
					}()
				}
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if depth == 0 {
						// Nothing waits: each delivery is of an event
						// stored just before, as on an idle queue, and
						// the time includes storing it (stopping the
						// timer around it would cost more than it).
						seq++
						if _, err := be.Enqueue(ctx, Entry{Route: "orders", Key: "d-" + strconv.Itoa(seq), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now}, 1<<30); err != nil {
							b.Fatal(err)
						}
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
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// fillQueue stores n events waiting for delivery, from several goroutines.
func fillQueue(b *testing.B, be Backend, n int) { topUp(b, be, "wait-", n) }

// topUp stores n more events, keyed prefix and a number.
func topUp(b *testing.B, be Backend, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	workers := 4 * runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, err := be.Enqueue(ctx, Entry{Route: "orders", Key: prefix + strconv.Itoa(i), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now}, 1<<30); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// drainQueue delivers every event waiting on route orders.
func drainQueue(b *testing.B, be Backend) {
	b.Helper()
	ctx := context.Background()
	out := store.Outcome{Status: 200}
	for {
		ls, err := be.Read(ctx, "orders", 0, "bench", 1000, 10*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		if len(ls) == 0 {
			return
		}
		for _, l := range ls {
			j, ok, err := be.Begin(ctx, l)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if _, err := be.Settle(ctx, "bench", j, Settlement{Kind: SettleDelivered, Outcome: out, Retention: time.Hour, At: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// processCPU is the CPU time this process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// depthName writes n as 0, 100k, 1M.
func depthName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
