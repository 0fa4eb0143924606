package queue

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// countingBackend counts what the workers ask of the queue: leases read,
// begins, and begins that parked (or dropped) the entry instead of
// beginning a try.
type countingBackend struct {
	Backend
	read, begins, parked atomic.Int64
}

func (c *countingBackend) Read(ctx context.Context, route string, shard int, consumer string, n int, block time.Duration) ([]Lease, error) {
	ls, err := c.Backend.Read(ctx, route, shard, consumer, n, block)
	c.read.Add(int64(len(ls)))
	return ls, err
}

func (c *countingBackend) Begin(ctx context.Context, l Lease) (Job, bool, error) {
	j, ok, err := c.Backend.Begin(ctx, l)
	c.begins.Add(1)
	if !ok && err == nil {
		c.parked.Add(1)
	}
	return j, ok, err
}

// countingSender answers 200 after upstream (an upstream's round trip)
// and counts its tries.
type countingSender struct {
	upstream time.Duration
	sent     atomic.Int64
}

func (s *countingSender) Send(ctx context.Context, _ string, _ []byte, _ int64) Result {
	if s.upstream > 0 {
		sleep(ctx, s.upstream)
	}
	s.sent.Add(1)
	return Result{Status: 200, Outcome: store.Outcome{Status: 200, ContentType: "text/plain", Body: []byte("ok")}}
}

var loadRuns atomic.Int64

// redisTimes reads the CPU time the Redis server has used (INFO cpu)
// and the time it spent in scripts (INFO commandstats: EVALSHA and EVAL,
// their commands included), and the commands the scripts called (every
// command counted but the scripts, reads of the ready stream and the
// benchmark's own; the stats loop's few reads are among them).
func redisTimes(b *testing.B, c redis.UniversalClient) (cpu, scripts time.Duration, calls int64) {
	info, err := c.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += time.Duration(f * float64(time.Second))
		case "cmdstat_evalsha", "cmdstat_eval":
			for _, f := range strings.Split(v, ",") {
				if us, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseInt(us, 10, 64)
					scripts += time.Duration(n) * time.Microsecond
				}
			}
		case "cmdstat_xreadgroup", "cmdstat_info", "cmdstat_config|resetstat", "cmdstat_hello", "cmdstat_client|setinfo", "cmdstat_ping":
		default:
			if strings.HasPrefix(k, "cmdstat_") {
				f, _, _ := strings.Cut(v, ",")
				n, _ := strconv.ParseInt(strings.TrimPrefix(f, "calls="), 10, 64)
				calls += n
			}
		}
	}
	return cpu, scripts, calls
}

// BenchmarkQueueOrderedLoad is closer to the gateway under load than the
// one-client benchmarks: 64 clients enqueue through the store's batcher
// (as the gateway's 202 path does) while a Manager's 8 workers deliver,
// unordered and ordered over 1,000 values in the same run; each op is one
// event acknowledged. Reported: acks/s (the enqueue phase), delivered/s
// (from the first enqueue until every event was delivered), and per event
// the leases read, the begins and the begins that parked instead of
// trying (each a wasted read and begin, and a hand-back later).
func BenchmarkQueueOrderedLoad(b *testing.B) {
	addr := redistest.Start(b)
	for _, tc := range []struct {
		name  string
		order func(i int64) string
	}{
		{"unordered", func(int64) string { return "" }},
		{"ordered-1000-values", func(i int64) string { return "obj_" + strconv.FormatInt(i%1000, 10) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st, err := store.NewRedis(store.RedisOptions{Addrs: []string{addr}, KeyPrefix: "bench-load-" + tc.name + "-" + strconv.Itoa(int(loadRuns.Add(1))) + ":"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			r := NewRedis(st.Client(), st.KeyPrefix(), st.OpTimeout())
			r.UseBatcher(st.RunScript)
			r.UseDurable(st.RunDurable)
			be := &countingBackend{Backend: r}
			sender := &countingSender{upstream: 200 * time.Microsecond}
			m := New(Options{Backend: be, Sender: sender, Metrics: newRecorder(), Log: slog.New(slog.DiscardHandler), Consumer: "bench"})
			route := Route{Name: "orders", Workers: 8, Retry: Retry{MaxAttempts: 5, Initial: time.Second, Max: time.Minute},
				MaxDepth: 1 << 30, Retention: time.Hour, LockTTL: 30 * time.Second, Shards: 1, Ordered: tc.name != "unordered"}
			if err := m.Apply(context.Background(), []Route{route}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { m.Close(time.Second) })
			b.ReportAllocs()
			b.SetParallelism(32)
			var seq atomic.Int64
			now := time.Now()
			st.Client().ConfigResetStat(context.Background())
			cpu0, scripts0, calls0 := redisTimes(b, st.Client())
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					i := seq.Add(1)
					e := Entry{Route: "orders", Key: "k" + strconv.FormatInt(i, 10), Fingerprint: "fp", Payload: benchPayload, FirstSeen: now, Order: tc.order(i)}
					if ack, err := m.Enqueue(ctx, e); err != nil || ack.State != Enqueued {
						b.Error(ack, err)
						return
					}
				}
			})
			acked := time.Since(start)
			n := seq.Load()
			deadline := time.Now().Add(time.Minute)
			for sender.sent.Load() < n && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			all := time.Since(start)
			b.StopTimer()
			if got := sender.sent.Load(); got < n {
				b.Fatalf("%d of %d events delivered within a minute", got, n)
			}
			cpu, scripts, calls := redisTimes(b, st.Client())
			b.ReportMetric(float64(calls-calls0)/float64(n), "redis-commands/event")
			b.ReportMetric(float64(cpu-cpu0)/float64(n)/1e3, "redis-cpu-µs/event")
			b.ReportMetric(float64(scripts-scripts0)/float64(n)/1e3, "redis-script-µs/event")
			b.ReportMetric(float64(n)/acked.Seconds(), "acks/s")
			if f := os.Getenv("BENCH_COMMANDSTATS"); f != "" && n > 1 {
				// Redis' count and time per command, for a closer look.
				info, _ := st.Client().Info(context.Background(), "commandstats").Result()
				_ = os.WriteFile(f+"."+tc.name, []byte(info), 0o644)
			}
			b.ReportMetric(float64(n)/all.Seconds(), "delivered/s")
			b.ReportMetric(float64(be.read.Load())/float64(n), "reads/event")
			b.ReportMetric(float64(be.begins.Load())/float64(n), "begins/event")
			b.ReportMetric(float64(be.parked.Load())/float64(n), "parks/event")
		})
	}
}
