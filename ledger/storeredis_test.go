package ledger_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/storetest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/store/redistest"
	"github.com/redis/go-redis/v9"
)

// The Redis store's own tests, from the days package store kept its
// keys: now on ledger.RedisStore (store.Redis's connection, the ledger's
// key records).

// The client library's own log lines (failed dials while a test has Redis
// down) are noise here.
func init() { store.SetRedisLogger(nil) }

// newTestRedis returns the sync routes' store on addrs under a key prefix
// of its own, so tests can share one server; records of schema version 1
// are looked for (the move is not known), as on a store just upgraded.
func newTestRedis(t testing.TB, opts store.RedisOptions, sync ...ledger.SyncOptions) *ledger.RedisStore {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = fmt.Sprintf("test%d:", prefixes.Add(1))
	}
	if opts.OpTimeout == 0 {
		// Generous where timing is not what is tested: a loaded CI machine
		// must not turn a slow call into a failure.
		opts.OpTimeout = 2 * time.Second
	}
	r, err := store.NewRedis(opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	var o ledger.SyncOptions
	if len(sync) > 0 {
		o = sync[0]
	}
	return ledger.NewRedisStore(r, ledger.StreamsPlace(r.KeyPrefix(), func(string) int { return 1 }), o, 0)
}

// keyHash names scoped's key record in s.
func keyHash(s *ledger.RedisStore, scoped string) string {
	route, key, _ := strings.Cut(scoped, ":")
	return ledger.StreamsKey(s.KeyPrefix(), route, 0, key)
}

// redisFixture: schema2 true runs on a store past its move from version
// 1 (no version-1 records looked for), false on one just moved.
func redisFixture(addrs []string, schema2 bool) func(t *testing.T) *storetest.Fixture {
	return func(t *testing.T) *storetest.Fixture {
		r := newTestRedis(t, store.RedisOptions{Addrs: addrs})
		if schema2 {
			if _, err := r.CheckSchema(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		const short = 50 * time.Millisecond
		return &storetest.Fixture{
			S:        r,
			LockTTL:  30 * time.Second,
			ShortTTL: short,
			ExpireLock: func(t *testing.T, key string) {
				t.Helper()
				// The lease runs out on Redis' clock.
				eventually.Within(t, 5*time.Second, func() bool {
					return storetest.MustGet(t, r, key).State != store.InFlight
				}, func() string { return key + "'s lease did not run out" })
			},
			ExpireReset: func(t *testing.T, key string) {
				t.Helper()
				waitGone(t, r, keyHash(r, key))
			},
			CheckRetention: func(t *testing.T, key string, retention time.Duration) {
				t.Helper()
				// Waiting an hour is not an option: check that the record
				// carries the retention as its TTL.
				ttl, err := r.Client().PTTL(context.Background(), keyHash(r, key)).Result()
				if err != nil {
					t.Fatalf("PTTL: %v", err)
				}
				if ttl > retention || ttl < retention-5*time.Second {
					t.Fatalf("PTTL %s = %v, want about %v", key, ttl, retention)
				}
			},
		}
	}
}

// waitGone returns once the Redis key k has expired.
func waitGone(t *testing.T, r *ledger.RedisStore, k string) {
	t.Helper()
	// redis-server expires k on its own clock: the fixtures give it a
	// short TTL, and this polls until it is gone.
	eventually.Within(t, 5*time.Second, func() bool {
		n, err := r.Client().Exists(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		return n == 0
	}, func() string { return k + " did not expire" })
}

func TestRedisStoreConformance(t *testing.T) {
	single := []string{redistest.Start(t)}
	cluster := redistest.StartCluster(t)
	t.Run("single", func(t *testing.T) { storetest.Run(t, redisFixture(single, true)) })
	t.Run("single-upgraded", func(t *testing.T) { storetest.Run(t, redisFixture(single, false)) })
	t.Run("cluster", func(t *testing.T) { storetest.Run(t, redisFixture(cluster, true)) })
	t.Run("cluster-upgraded", func(t *testing.T) { storetest.Run(t, redisFixture(cluster, false)) })
}

func TestRedisStoreKeyLayout(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{addr}, KeyPrefix: "clawgate:"})
	if _, err := r.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	c := storetest.MustClaim(t, r, "orders:evt_1", storetest.FpA, time.Minute, store.Claimed)
	raw := r.Client()
	const k = "clawgate:webhook_qkey:{q:orders:0}evt_1"
	h, err := raw.HGetAll(ctx, k).Result()
	if err != nil || h["st"] != "lock" || h["tok"] != c.Token || h["n"] != "1" || h["qt"] != "1" || h["first"] == "" ||
		h["last"] == "" || h["fp"] != storetest.FpA || h["lease"] == "" {
		t.Fatalf("key record = %v, %v", h, err)
	}
	if ttl := raw.PTTL(ctx, k).Val(); ttl < store.DefaultAttemptsTTL-time.Minute || ttl > store.DefaultAttemptsTTL {
		t.Fatalf("record PTTL = %v, want about %v (the counters outlive the lease)", ttl, store.DefaultAttemptsTTL)
	}
	want := storetest.Outcome(200, "ok")
	if err := r.Finish(ctx, "orders:evt_1", c.Token, want, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	h = raw.HGetAll(ctx, k).Val()
	if out, err := store.DecodeOutcome([]byte(h["rec"])); h["st"] != "done" || h["tok"] != "" || h["lease"] != "" || err != nil || !storetest.SameOutcome(out, want) {
		t.Fatalf("finished record = %v (%+v, %v)", h, out, err)
	}
	keys, _ := raw.Keys(ctx, "*").Result()
	if len(keys) != 3 { // the record, the schema and its move
		t.Fatalf("keys after Finish = %v, want the record and the schema's", keys)
	}
}

func TestRedisStoreAttemptsTTL(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{addr}}, ledger.SyncOptions{AttemptsTTL: time.Hour})
	c := storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if ttl := r.Client().PTTL(ctx, keyHash(r, "k:1")).Val(); ttl <= time.Hour-time.Minute || ttl > time.Hour {
		t.Fatalf("record PTTL = %v, want about an hour", ttl)
	}
	if err := r.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	if st := storetest.MustGet(t, r, "k:1"); st.State != store.Absent || st.Attempts != 1 {
		t.Fatalf("after release: %+v", st)
	}

	// A negative AttemptsTTL keeps the counter only while the lock lives.
	r = newTestRedis(t, store.RedisOptions{Addrs: []string{addr}}, ledger.SyncOptions{AttemptsTTL: -1})
	c = storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if ttl := r.Client().PTTL(ctx, keyHash(r, "k:1")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("record PTTL = %v, want the lock's minute", ttl)
	}
	if err := r.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	if st := storetest.MustGet(t, r, "k:1"); st != (store.KeyState{}) {
		t.Fatalf("released with a negative AttemptsTTL: %+v", st)
	}
}

func TestRedisStartsWhileDown(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop()
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}})
	if err := r.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping while down = %v, want store.ErrUnavailable", err)
	}
	srv.Start()
	waitPing(t, r)
	storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)
}

func waitPing(t *testing.T, r *ledger.RedisStore) {
	t.Helper()
	var err error
	eventually.Within(t, 10*time.Second, func() bool { err = r.Ping(context.Background()); return err == nil },
		func() string { return fmt.Sprintf("Redis did not come back: %v", err) })
}

// allOps runs every Store method once and returns each one's error and
// how long it took.
func allOps(r *ledger.RedisStore, token string) map[string]opResult {
	ctx := context.Background()
	res := map[string]opResult{}
	run := func(op string, f func() error) {
		start := time.Now()
		err := f()
		res[op] = opResult{err, time.Since(start)}
	}
	run("claim", func() error { _, err := r.Claim(ctx, "k:1", storetest.FpA, time.Minute); return err })
	run("finish", func() error { return r.Finish(ctx, "k:1", token, storetest.Outcome(200, "x"), time.Hour) })
	run("release", func() error { return r.Release(ctx, "k:1", token) })
	run("get", func() error { _, err := r.Get(ctx, "k:1"); return err })
	run("reset", func() error { _, err := r.Delete(ctx, "k:1"); return err })
	run("ping", func() error { return r.Ping(ctx) })
	return res
}

type opResult struct {
	err  error
	took time.Duration
}

func TestRedisDownAndBack(t *testing.T) {
	const opTimeout = 200 * time.Millisecond
	srv := redistest.StartServer(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: opTimeout})
	c := storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)

	srv.Stop()
	var slowest time.Duration
	// Enough failed calls to exhaust the connection pool's dial budget,
	// after which the library redials in the background.
	for round := 0; round < 10; round++ {
		for op, res := range allOps(r, c.Token) {
			slowest = max(slowest, res.took)
			if !errors.Is(res.err, store.ErrUnavailable) {
				t.Fatalf("%s while store.Redis is down = %v, want store.ErrUnavailable", op, res.err)
			}
			if prefix := map[string]string{"ping": "store"}[op]; !strings.HasPrefix(res.err.Error(), cmp.Or(prefix, "ledger")+": redis "+op+": ") {
				t.Fatalf("%s error %q does not name the operation", op, res.err)
			}
		}
	}

	t.Logf("slowest call while store.Redis was down: %v", slowest)
	srv.Start()
	waitPing(t, r)
	// Same client, no reconstruction; the restarted server is empty.
	if c := storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed); c.Attempts != 1 {
		t.Fatalf("claim after restart = %+v", c)
	}
}

func TestRedisPasswordNotInErrors(t *testing.T) {
	srv := redistest.StartServerWith(t, redistest.Options{Password: "right-pass"})
	good := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}, Password: "right-pass"})
	storetest.MustClaim(t, good, "k:1", storetest.FpA, time.Minute, store.Claimed)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}, Password: "s3cret-pass", Username: "default"})
	for op, res := range allOps(r, "tok") {
		err := res.err
		if err == nil {
			t.Fatalf("%s with a wrong password succeeded", op)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s = %v, want store.ErrUnavailable", op, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s error leaks the password: %v", op, err)
		}
	}
}

func TestRedisHungTimesOut(t *testing.T) {
	const opTimeout = 400 * time.Millisecond
	srv := redistest.StartServer(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: opTimeout})
	c := storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	ctx := context.Background()
	ops := map[string]func() error{
		"claim":   func() error { _, err := r.Claim(ctx, "k:2", storetest.FpA, time.Minute); return err },
		"finish":  func() error { return r.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour) },
		"release": func() error { return r.Release(ctx, "k:1", c.Token) },
		"get":     func() error { _, err := r.Get(ctx, "k:1"); return err },
		"delete":  func() error { _, err := r.Delete(ctx, "k:3"); return err },
		"ping":    func() error { return r.Ping(ctx) },
	}
	// A stopped (SIGSTOP) store.Redis accepts connections and never answers: a
	// call that returns at all was cut by the op deadline. Durations are
	// logged, never asserted.
	for op, f := range ops {
		start := time.Now()
		err := f()
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("%s on a hung store.Redis = %v, want store.ErrUnavailable", op, err)
		}
		t.Logf("%s on a hung store.Redis returned after %v", op, time.Since(start))
	}
	// A caller's own deadline is honoured too.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := r.Get(short, "k:1")
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get with a 20ms deadline = %v", err)
	}
	srv.Resume()
	resumed = true
	waitPing(t, r)
	if st := storetest.MustGet(t, r, "k:1"); st.State != store.InFlight {
		t.Fatalf("after resume: %+v", st)
	}
}

func TestRedisStoreCorruptRecords(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{addr}})
	valid, err := store.EncodeOutcome(storetest.Outcome(200, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":          {},
		"garbage":        []byte("not a record at all"),
		"json":           []byte(`{"status":200}`),
		"header only":    valid[:3],
		"truncated":      valid[:len(valid)-1],
		"trailing":       append(append([]byte(nil), valid...), 0),
		"wrong version":  append([]byte{9}, valid[1:]...),
		"unknown flags":  append([]byte{1, 0x80}, valid[2:]...),
		"status 65535":   append([]byte{1, 1, 0xff, 0xff}, valid[4:]...),
		"absurd length":  append([]byte{1, 0, 0, 200}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"varint overrun": append([]byte{1, 0, 0, 200}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			key := "corrupt:" + name
			if err := r.Client().HSet(ctx, keyHash(r, key), "st", "done", "rec", rec).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Claim(ctx, key, storetest.FpA, time.Minute); !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Claim = %v, want ErrCorrupt", err)
			}
			if _, err := r.Get(ctx, key); !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Get = %v, want ErrCorrupt", err)
			}
			// Delete is how an operator clears it.
			st, err := r.Delete(ctx, key)
			if err != nil || st.State != store.Finished {
				t.Fatalf("Delete = %+v, %v", st, err)
			}
			storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed)
		})
	}
	t.Run("wrong type", func(t *testing.T) {
		key := "wrongtype:1"
		if err := r.Client().RPush(ctx, keyHash(r, key), "x").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Claim(ctx, key, storetest.FpA, time.Minute); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Claim with a list = %v, want ErrCorrupt", err)
		}
		if _, err := r.Get(ctx, key); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Get with a list = %v, want ErrCorrupt", err)
		}
		if err := r.Finish(ctx, key, "x", storetest.Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("Finish on a list = %v, want ErrCorrupt", err)
		}
		if _, err := r.Delete(ctx, key); err != nil {
			t.Fatalf("Delete with a list = %v", err)
		}
		storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed)
	})
}

func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	addrs := redistest.StartCluster(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: addrs, KeyPrefix: "clawgate:"})
	if _, ok := r.Client().(*redis.ClusterClient); !ok {
		t.Fatalf("several addrs gave a %T, want a cluster client", r.Client())
	}
	if err := r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 0; i < n; i++ {
		// A route's keys share its shards' slots: keys of many routes
		// spread over the nodes.
		key := "r" + strconv.Itoa(i) + ":evt"
		if i%50 == 0 {
			key += "}{odd"
		}
		c := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed)
		if in := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.InFlight); in.Attempts != 2 {
			t.Fatalf("%s: %+v", key, in)
		}
		if st := storetest.MustGet(t, r, key); st.State != store.InFlight {
			t.Fatalf("%s: %+v", key, st)
		}
		switch i % 3 {
		case 0:
			if err := r.Finish(ctx, key, c.Token, storetest.Outcome(200, key), time.Hour); err != nil {
				t.Fatalf("Finish %s: %v", key, err)
			}
			if fin := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Finished); string(fin.Outcome.Body) != key {
				t.Fatalf("%s: %+v", key, fin)
			}
		case 1:
			if err := r.Release(ctx, key, c.Token); err != nil {
				t.Fatalf("Release %s: %v", key, err)
			}
			storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed)
		case 2:
			if st, err := r.Delete(ctx, key); err != nil || st.State != store.InFlight {
				t.Fatalf("Delete %s: %+v, %v", key, st, err)
			}
			if c := storetest.MustClaim(t, r, key, storetest.FpA, time.Minute, store.Claimed); c.Attempts != 1 {
				t.Fatalf("%s after Delete: %+v", key, c)
			}
		}
	}
	// The keys spread over every node.
	for _, addr := range addrs {
		size, err := redistest.Command(addr, "DBSIZE")
		if err != nil || size == "0" {
			t.Fatalf("node %s holds %s keys (%v): keys did not spread over the slots", addr, size, err)
		}
	}
}

// benchRedis is a store past its schema move's window (no version-1
// lookups), as a store is but for the first retention after the upgrade.
func benchRedis(b *testing.B) *ledger.RedisStore {
	addr := redistest.Start(b)
	r := newTestRedis(b, store.RedisOptions{Addrs: []string{addr}})
	if _, err := r.CheckSchema(context.Background()); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkRedisClaimFinish: a unique delivery's two scripts, without a
// history (history=0) and with the default one (history=50: an entry
// written by each script, with what the gateway notes of a delivery).
func BenchmarkRedisClaimFinish(b *testing.B) {
	for _, hist := range []int{0, 50} {
		b.Run("history="+strconv.Itoa(hist), func(b *testing.B) {
			ctx := store.WithNote(context.Background(), store.Note{RequestID: "0123456789abcdef0123456789abcdef", Secret: "k1", Client: "203.0.113.7"})
			r := benchRedis(b)
			r.SetHistory(ledger.HistoryOptions{Cap: hist, Instance: "bench-host-4242"})
			out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				key := "orders:" + strconv.Itoa(i)
				c, err := r.Claim(ctx, key, storetest.FpA, time.Minute)
				if err != nil || c.State != store.Claimed {
					b.Fatal(c, err)
				}
				if err := r.Finish(ctx, key, c.Token, out, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRedisClaimFinished(b *testing.B) {
	ctx := context.Background()
	r := benchRedis(b)
	c, err := r.Claim(ctx, "orders:1", storetest.FpA, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
	if err := r.Finish(ctx, "orders:1", c.Token, out, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := r.Claim(ctx, "orders:1", storetest.FpA, time.Minute)
		if err != nil || c.State != store.Finished {
			b.Fatal(c, err)
		}
	}
}

func BenchmarkRedisClaimFinishParallel(b *testing.B) {
	ctx := context.Background()
	r := benchRedis(b)
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: storetest.FpA}
	var seq atomic.Int64
	var once sync.Once
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "orders:" + strconv.FormatInt(seq.Add(1), 10)
			c, err := r.Claim(ctx, key, storetest.FpA, time.Minute)
			if err == nil {
				err = r.Finish(ctx, key, c.Token, out, time.Hour)
			}
			if err != nil {
				once.Do(func() { b.Error(err) })
				return
			}
		}
	})
}

// A store.Redis restart that loses its data takes the lock with it; the delivery
// that held it still records its outcome, so the next copy is replayed.
func TestRedisFinishAfterRestartLostTheLock(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{srv.Addr}})
	c := storetest.MustClaim(t, r, "orders:evt_1", storetest.FpA, time.Minute, store.Claimed)
	srv.Stop()
	srv.Start()
	waitPing(t, r)
	if st := storetest.MustGet(t, r, "orders:evt_1"); st != (store.KeyState{}) {
		t.Fatalf("after the restart: %+v, want nothing left", st)
	}
	want := storetest.Outcome(200, "accepted")
	if err := r.Finish(ctx, "orders:evt_1", c.Token, want, time.Hour); err != nil {
		t.Fatalf("Finish after the restart: %v", err)
	}
	if fin := storetest.MustClaim(t, r, "orders:evt_1", storetest.FpA, time.Minute, store.Finished); !storetest.SameOutcome(fin.Outcome, want) {
		t.Fatalf("claim after the restart = %+v, want the recorded outcome", fin)
	}
}

// The store.Redis side of TestMemoryResetOfAFinishedKeyHoldsForResetHold.
func TestRedisResetOfAFinishedKeyHoldsForResetHold(t *testing.T) {
	ctx := context.Background()
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{redistest.Start(t)}}, ledger.SyncOptions{ResetHold: 300 * time.Millisecond})
	c := storetest.MustClaim(t, r, "k:1", storetest.FpA, time.Minute, store.Claimed)
	if err := r.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(ctx, "k:1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Finish retried right after the reset = %v, want store.ErrNotOwner", err)
	}
	waitGone(t, r, keyHash(r, "k:1"))
	if err := r.Finish(ctx, "k:1", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatalf("Finish after ResetHold: %v", err)
	}
}

func TestRedisStoreResetTombstone(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, store.RedisOptions{Addrs: []string{addr}, KeyPrefix: "clawgate:"})
	if _, err := r.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	const lockTTL = time.Minute
	c := storetest.MustClaim(t, r, "orders:evt_1", storetest.FpA, lockTTL, store.Claimed)
	if _, err := r.Delete(ctx, "orders:evt_1"); err != nil {
		t.Fatal(err)
	}
	// The tombstone is the key's record in state reset, living for what
	// remained of the lock (in the record's Cluster slot).
	const tomb = "clawgate:webhook_qkey:{q:orders:0}evt_1"
	if h := r.Client().HGetAll(ctx, tomb).Val(); len(h) != 2 || h["st"] != "reset" || h["rst"] == "" {
		t.Fatalf("tombstone = %v", h)
	}
	if ttl := r.Client().PTTL(ctx, tomb).Val(); ttl <= 0 || ttl > lockTTL {
		t.Fatalf("tombstone PTTL = %v, want in (0, %v]", ttl, lockTTL)
	}
	if err := r.Finish(ctx, "orders:evt_1", c.Token, storetest.Outcome(200, "x"), time.Hour); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("Finish by the pre-reset owner = %v, want ErrNotOwner", err)
	}
	// Resetting a finished key (no lock) leaves none.
	c = storetest.MustClaim(t, r, "orders:evt_2", storetest.FpA, lockTTL, store.Claimed)
	if err := r.Finish(ctx, "orders:evt_2", c.Token, storetest.Outcome(200, "x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(ctx, "orders:evt_2"); err != nil {
		t.Fatal(err)
	}
	if n := r.Client().Exists(ctx, keyHash(r, "orders:evt_2")).Val(); n != 0 {
		t.Fatalf("a reset without a lock left a tombstone")
	}
}
