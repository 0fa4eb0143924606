package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

func init() { store.SetRedisLogger(nil) }

// The durability watch's reports reach the metrics through the reporter
// Start wires, through a Redis restart: the gauges follow, the old label
// set goes, the restart is counted.
func TestDurabilityReporterFollowsARedisRestart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	srv := redistest.StartServerWith(t, redistest.Options{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	r, err := store.NewRedis(store.RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: 200 * time.Millisecond,
		OnReplicaShortfall: m.StoreReplicaShortfalls.Inc})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	compare := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"clawgate_store_durable", "clawgate_store_persistence_info", "clawgate_store_restarts_total"); err != nil {
			t.Fatal(err)
		}
	}
	const help = `
# HELP clawgate_store_durable 1 when no finished key can be lost by a store restart or eviction (every Redis master persists with AOF or RDB and has maxmemory-policy noeviction), 0 when keys can be lost, -1 when unknown (not checked yet, check failed, or CONFIG refused without AOF).
# TYPE clawgate_store_durable gauge
# HELP clawgate_store_restarts_total Durability checks that found a Redis master restarted (its run_id changed since the previous check).
# TYPE clawgate_store_restarts_total counter
`
	const infoHelp = `# HELP clawgate_store_persistence_info The Redis store's persistence as last checked, always 1: aof (yes, no), rdb (yes, no, unknown) and maxmemory_policy; unknown when the check failed.
# TYPE clawgate_store_persistence_info gauge
`
	compare(help + "clawgate_store_durable -1\nclawgate_store_restarts_total 0\n")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type reportOf struct {
		d   store.Durability
		err error
	}
	reports := make(chan reportOf)
	report := durabilityReporter(slog.New(slog.NewJSONHandler(io.Discard, nil)), m, nil)
	r.WatchDurability(ctx, 10*time.Millisecond, func(d store.Durability, err error) {
		report(d, err)
		select {
		case reports <- reportOf{d, err}:
		case <-ctx.Done():
		}
	})
	next := func() reportOf {
		t.Helper()
		select {
		case rep := <-reports:
			return rep
		case <-time.After(10 * time.Second):
			t.Fatal("no durability report")
		}
		panic("unreachable")
	}
	if rep := next(); rep.err != nil {
		t.Fatal(rep.err)
	}
	compare(help + infoHelp + `clawgate_store_durable 0
clawgate_store_persistence_info{aof="no",maxmemory_policy="allkeys-lru",rdb="no"} 1
clawgate_store_restarts_total 0
`)
	srv.Stop()
	for next().err == nil {
	}
	// The old label set is gone, not left beside the new one.
	compare(help + infoHelp + `clawgate_store_durable -1
clawgate_store_persistence_info{aof="unknown",maxmemory_policy="unknown",rdb="unknown"} 1
clawgate_store_restarts_total 0
`)
	srv.Start()
	for rep := next(); rep.err != nil; rep = next() {
	}
	compare(help + infoHelp + `clawgate_store_durable 0
clawgate_store_persistence_info{aof="no",maxmemory_policy="allkeys-lru",rdb="no"} 1
clawgate_store_restarts_total 1
`)
}

// The memory store openStore builds exports its size.
func TestMemoryStoreExportsItsBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	if n, err := testutil.GatherAndCount(reg, "clawgate_store_memory_bytes"); err != nil || n != 0 {
		t.Fatalf("clawgate_store_memory_bytes before the store: %d series, %v", n, err)
	}
	st, err := openStore(config.Default(), m, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	mem := st.(*ledger.MemoryStore)
	if _, err := mem.Claim(context.Background(), "orders:1", "fp", time.Minute); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`
# HELP clawgate_store_memory_bytes Estimated size in bytes of the keys the memory store holds, the figure its byte budget bounds.
# TYPE clawgate_store_memory_bytes gauge
clawgate_store_memory_bytes %d
`, mem.Bytes())
	if mem.Bytes() <= 0 {
		t.Fatalf("Bytes = %d after a claim", mem.Bytes())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "clawgate_store_memory_bytes"); err != nil {
		t.Fatal(err)
	}
}

// The memory queue keeps its keys in the memory store's ledger: its
// finished keys count against the store's byte budget with the store's
// own, and each one forgotten for it counts in
// webhook_store_evictions_total, as the store's evictions do.
func TestMemoryQueueKeysShareTheStoreBudget(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	cfg := config.Default()
	cfg.Store.Memory.MaxBytes = 64 << 10
	cfg.Queue.Backend = config.QueueMemory
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	st, err := openStore(cfg, m, log)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := openQueue(cfg, st, m, log)
	if err != nil {
		t.Fatal(err)
	}
	mem, keys := st.(*ledger.MemoryStore), qb.(*queue.Memory).Keys()
	if keys != mem.Ledger() {
		t.Fatal("the memory queue keeps its keys apart from the memory store's")
	}
	if _, err := mem.Claim(ctx, "orders:1", "fp", time.Minute); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 1<<10)
	for i := range 100 {
		key := fmt.Sprintf("k%03d", i)
		if ack, err := qb.Enqueue(ctx, queue.Entry{Route: "q", Key: key, Fingerprint: "fp", FirstSeen: time.Now()}, 1000); err != nil || ack.State != queue.Enqueued {
			t.Fatalf("Enqueue %s = %+v, %v", key, ack, err)
		}
		ls, err := qb.Read(ctx, "q", 0, "c", 1, time.Second)
		if err != nil || len(ls) != 1 {
			t.Fatalf("Read = %+v, %v", ls, err)
		}
		j, ok, err := qb.Begin(ctx, ls[0])
		if err != nil || !ok {
			t.Fatalf("Begin = %v, %v", ok, err)
		}
		s := queue.Settlement{Kind: queue.SettleDelivered, Retention: time.Hour, Outcome: store.Outcome{Status: 200, Body: body}}
		if got, err := qb.Settle(ctx, "c", j, s); err != nil || got != queue.Recorded {
			t.Fatalf("Settle = %v, %v", got, err)
		}
	}
	if used := mem.Bytes(); used == 0 || used > int64(cfg.Store.Memory.MaxBytes) {
		t.Fatalf("the queue's and the store's keys take %d bytes, over the %d budget", used, cfg.Store.Memory.MaxBytes)
	}
	if n := testutil.ToFloat64(m.StoreEvictions); n < 30 {
		t.Fatalf("webhook_store_evictions_total = %v after 100KiB of finished keys in a 64KiB budget", n)
	}
}
