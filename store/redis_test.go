package store

import (
	"context"
	"errors"
	"fmt"
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

var prefixSeq atomic.Int64

// The client library's own log lines (failed dials while a test has Redis
// down) are noise here.
func init() { SetRedisLogger(nil) }

// newTestRedis returns a store on addrs under a key prefix of its own, so
// tests can share one server.
func newTestRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = fmt.Sprintf("test%d:", prefixSeq.Add(1))
	}
	if opts.OpTimeout == 0 {
		// Generous where timing is not what is tested: a loaded CI machine
		// must not turn a slow call into a failure.
		opts.OpTimeout = 2 * time.Second
	}
	r, err := NewRedis(opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func redisFixture(addr string) func(t *testing.T) *fixture {
	return func(t *testing.T) *fixture {
		r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
		const short = 50 * time.Millisecond
		return &fixture{
			s:        r,
			lockTTL:  30 * time.Second,
			shortTTL: short,
			expireLock: func(t *testing.T, key string) {
				t.Helper()
				waitGone(t, r, r.keys(key)[0])
			},
			expireReset: func(t *testing.T, key string) {
				t.Helper()
				waitGone(t, r, r.keys(key)[3])
			},
			checkRetention: func(t *testing.T, key string, retention time.Duration) {
				t.Helper()
				// Waiting an hour is not an option: check that the record
				// and its counter carry the retention as their TTL.
				ks := r.keys(key)
				for _, k := range ks[1:3] { // the record and the counter
					ttl, err := r.client.PTTL(context.Background(), k).Result()
					if err != nil {
						t.Fatalf("PTTL %s: %v", k, err)
					}
					if ttl > retention || ttl < retention-5*time.Second {
						t.Fatalf("PTTL %s = %v, want about %v", k, ttl, retention)
					}
				}
				if n, _ := r.client.Exists(context.Background(), ks[0]).Result(); n != 0 {
					t.Fatalf("lock %s still exists after Finish", ks[0])
				}
			},
		}
	}
}

// waitGone returns once the Redis key k has expired.
func waitGone(t *testing.T, r *Redis, k string) {
	t.Helper()
	// redis-server expires k on its own clock: the fixtures give it a
	// short TTL, and this polls until it is gone.
	eventually.Within(t, 5*time.Second, func() bool {
		n, err := r.client.Exists(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		return n == 0
	}, func() string { return k + " did not expire" })
}

func TestRedisConformance(t *testing.T) {
	addr := redistest.Start(t)
	testStore(t, redisFixture(addr))
}

func TestRedisKeyLayout(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{addr}, KeyPrefix: "clawgate:"})
	c := mustClaim(t, r, "orders:evt_1", fpA, time.Minute, Claimed)
	raw := r.client
	if v, err := raw.Get(ctx, "clawgate:webhook_lock:{orders:evt_1}").Result(); err != nil || v != c.Token {
		t.Fatalf("lock key = %q, %v; want the token %q", v, err, c.Token)
	}
	if ttl := raw.PTTL(ctx, "clawgate:webhook_lock:{orders:evt_1}").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("lock PTTL = %v", ttl)
	}
	meta, err := raw.HGetAll(ctx, "clawgate:webhook_attempts:{orders:evt_1}").Result()
	if err != nil || meta["n"] != "1" || meta["first"] == "" || meta["last"] == "" || meta["fp"] != fpA {
		t.Fatalf("attempts hash = %v, %v", meta, err)
	}
	if ttl := raw.PTTL(ctx, "clawgate:webhook_attempts:{orders:evt_1}").Val(); ttl < DefaultAttemptsTTL-time.Minute || ttl > DefaultAttemptsTTL {
		t.Fatalf("attempts PTTL = %v, want about %v", ttl, DefaultAttemptsTTL)
	}
	want := outcome(200, "ok")
	if err := r.Finish(ctx, "orders:evt_1", c.Token, want, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	rec, err := raw.Get(ctx, "clawgate:webhook_done:{orders:evt_1}").Bytes()
	if err != nil {
		t.Fatalf("done key: %v", err)
	}
	if out, err := decodeRecord(rec); err != nil || !sameOutcome(out, want) {
		t.Fatalf("done record decodes to %+v, %v", out, err)
	}
	if n := raw.Exists(ctx, "clawgate:webhook_lock:{orders:evt_1}").Val(); n != 0 {
		t.Fatalf("lock still there after Finish")
	}
	keys, _ := raw.Keys(ctx, "*").Result()
	if len(keys) != 2 {
		t.Fatalf("keys after Finish = %v, want the done record and the attempts hash", keys)
	}
	// Keys that would make an empty hash tag are escaped.
	if got := r.keys("}x")[0]; got != "clawgate:webhook_lock:{%}x}" {
		t.Fatalf("escaped key = %q", got)
	}
}

func TestRedisAttemptsTTL(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{addr}, AttemptsTTL: time.Hour})
	c := mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)
	if ttl := r.client.PTTL(ctx, r.keys("k:1")[2]).Val(); ttl <= time.Hour-time.Minute || ttl > time.Hour {
		t.Fatalf("attempts PTTL = %v, want about an hour", ttl)
	}
	if err := r.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	if st := mustGet(t, r, "k:1"); st.State != Absent || st.Attempts != 1 {
		t.Fatalf("after release: %+v", st)
	}

	// A negative AttemptsTTL keeps the counter only while the lock lives.
	r = newTestRedis(t, RedisOptions{Addrs: []string{addr}, AttemptsTTL: -1})
	c = mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)
	if ttl := r.client.PTTL(ctx, r.keys("k:1")[2]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("attempts PTTL = %v, want the lock's minute", ttl)
	}
	if err := r.Release(ctx, "k:1", c.Token); err != nil {
		t.Fatal(err)
	}
	if st := mustGet(t, r, "k:1"); st != (KeyState{}) {
		t.Fatalf("released with a negative AttemptsTTL: %+v", st)
	}
}

func TestNewRedisValidates(t *testing.T) {
	for _, p := range []string{"a{", "}b", "{x}"} {
		if _, err := NewRedis(RedisOptions{KeyPrefix: p}); err == nil {
			t.Fatalf("KeyPrefix %q accepted", p)
		}
	}
	if _, err := NewRedis(RedisOptions{OpTimeout: -1}); err == nil {
		t.Fatalf("negative OpTimeout accepted")
	}
}

func TestRedisStartsWhileDown(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop()
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	if err := r.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping while down = %v, want ErrUnavailable", err)
	}
	srv.Start()
	waitPing(t, r)
	mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)
}

func waitPing(t *testing.T, r *Redis) {
	t.Helper()
	var err error
	eventually.Within(t, 10*time.Second, func() bool { err = r.Ping(context.Background()); return err == nil },
		func() string { return fmt.Sprintf("Redis did not come back: %v", err) })
}

// allOps runs every Store method once and returns each one's error and
// how long it took.
func allOps(r *Redis, token string) map[string]opResult {
	ctx := context.Background()
	res := map[string]opResult{}
	run := func(op string, f func() error) {
		start := time.Now()
		err := f()
		res[op] = opResult{err, time.Since(start)}
	}
	run("claim", func() error { _, err := r.Claim(ctx, "k:1", fpA, time.Minute); return err })
	run("finish", func() error { return r.Finish(ctx, "k:1", token, outcome(200, "x"), time.Hour) })
	run("release", func() error { return r.Release(ctx, "k:1", token) })
	run("get", func() error { _, err := r.Get(ctx, "k:1"); return err })
	run("delete", func() error { _, err := r.Delete(ctx, "k:1"); return err })
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
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: opTimeout})
	c := mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)

	srv.Stop()
	var slowest time.Duration
	// Enough failed calls to exhaust the connection pool's dial budget,
	// after which the library redials in the background.
	for round := 0; round < 10; round++ {
		for op, res := range allOps(r, c.Token) {
			slowest = max(slowest, res.took)
			if !errors.Is(res.err, ErrUnavailable) {
				t.Fatalf("%s while Redis is down = %v, want ErrUnavailable", op, res.err)
			}
			if !strings.HasPrefix(res.err.Error(), "store: redis "+op+": ") {
				t.Fatalf("%s error %q does not name the operation", op, res.err)
			}
		}
	}

	t.Logf("slowest call while Redis was down: %v", slowest)
	srv.Start()
	waitPing(t, r)
	// Same client, no reconstruction; the restarted server is empty.
	if c := mustClaim(t, r, "k:1", fpA, time.Minute, Claimed); c.Attempts != 1 {
		t.Fatalf("claim after restart = %+v", c)
	}
}

func TestRedisPasswordNotInErrors(t *testing.T) {
	srv := redistest.StartServerWith(t, redistest.Options{Password: "right-pass"})
	good := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, Password: "right-pass"})
	mustClaim(t, good, "k:1", fpA, time.Minute, Claimed)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, Password: "s3cret-pass", Username: "default"})
	for op, res := range allOps(r, "tok") {
		err := res.err
		if err == nil {
			t.Fatalf("%s with a wrong password succeeded", op)
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s = %v, want ErrUnavailable", op, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%s error leaks the password: %v", op, err)
		}
	}
}

func TestRedisHungTimesOut(t *testing.T) {
	const opTimeout = 400 * time.Millisecond
	srv := redistest.StartServer(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: opTimeout})
	c := mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	ctx := context.Background()
	ops := map[string]func() error{
		"claim":   func() error { _, err := r.Claim(ctx, "k:2", fpA, time.Minute); return err },
		"finish":  func() error { return r.Finish(ctx, "k:1", c.Token, outcome(200, "x"), time.Hour) },
		"release": func() error { return r.Release(ctx, "k:1", c.Token) },
		"get":     func() error { _, err := r.Get(ctx, "k:1"); return err },
		"delete":  func() error { _, err := r.Delete(ctx, "k:3"); return err },
		"ping":    func() error { return r.Ping(ctx) },
	}
	// A stopped (SIGSTOP) Redis accepts connections and never answers: a
	// call that returns at all was cut by the op deadline. Durations are
	// logged, never asserted.
	for op, f := range ops {
		start := time.Now()
		err := f()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s on a hung Redis = %v, want ErrUnavailable", op, err)
		}
		t.Logf("%s on a hung Redis returned after %v", op, time.Since(start))
	}
	// A caller's own deadline is honoured too.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := r.Get(short, "k:1")
	cancel()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get with a 20ms deadline = %v", err)
	}
	srv.Resume()
	resumed = true
	waitPing(t, r)
	if st := mustGet(t, r, "k:1"); st.State != InFlight {
		t.Fatalf("after resume: %+v", st)
	}
}

func TestRedisCorruptRecords(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
	valid, err := encodeRecord(nil, outcome(200, "hello"))
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
		"unknown flags":  append([]byte{recordVersion, 0x80}, valid[2:]...),
		"status 65535":   append([]byte{recordVersion, flagRawFP, 0xff, 0xff}, valid[4:]...),
		"absurd length":  append([]byte{recordVersion, 0, 0, 200}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"varint overrun": append([]byte{recordVersion, 0, 0, 200}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			key := "corrupt:" + name
			if err := r.client.Set(ctx, r.keys(key)[1], rec, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Claim(ctx, key, fpA, time.Minute); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Claim = %v, want ErrCorrupt", err)
			}
			if _, err := r.Get(ctx, key); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Get = %v, want ErrCorrupt", err)
			}
			// Delete is how an operator clears it.
			st, err := r.Delete(ctx, key)
			if err != nil || st.State != Finished {
				t.Fatalf("Delete = %+v, %v", st, err)
			}
			mustClaim(t, r, key, fpA, time.Minute, Claimed)
		})
	}
	t.Run("wrong types", func(t *testing.T) {
		for i, k := range []int{1, 2} {
			key := fmt.Sprintf("wrongtype:%d", i)
			if err := r.client.RPush(ctx, r.keys(key)[k], "x").Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Claim(ctx, key, fpA, time.Minute); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Claim with %s a list = %v, want ErrCorrupt", r.keys(key)[k], err)
			}
			if _, err := r.Get(ctx, key); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Get with %s a list = %v, want ErrCorrupt", r.keys(key)[k], err)
			}
			if _, err := r.Delete(ctx, key); err != nil {
				t.Fatalf("Delete with %s a list = %v", r.keys(key)[k], err)
			}
			mustClaim(t, r, key, fpA, time.Minute, Claimed)
		}
		// A lock of the wrong type is never owned.
		key := "wrongtype:lock"
		r.client.RPush(ctx, r.keys(key)[0], "x")
		if err := r.Finish(ctx, key, "x", outcome(200, "x"), time.Hour); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Finish on a list lock = %v", err)
		}
		if err := r.Release(ctx, key, "x"); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release on a list lock = %v", err)
		}
	})
}

func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	addrs := redistest.StartCluster(t)
	r := newTestRedis(t, RedisOptions{Addrs: addrs, KeyPrefix: "clawgate:"})
	if _, ok := r.client.(*redis.ClusterClient); !ok {
		t.Fatalf("several addrs gave a %T, want a cluster client", r.client)
	}
	if err := r.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 0; i < n; i++ {
		key := "orders:evt_" + strconv.Itoa(i)
		if i%50 == 0 {
			key += "}{odd"
		}
		c := mustClaim(t, r, key, fpA, time.Minute, Claimed)
		if in := mustClaim(t, r, key, fpA, time.Minute, InFlight); in.Attempts != 2 {
			t.Fatalf("%s: %+v", key, in)
		}
		if st := mustGet(t, r, key); st.State != InFlight {
			t.Fatalf("%s: %+v", key, st)
		}
		switch i % 3 {
		case 0:
			if err := r.Finish(ctx, key, c.Token, outcome(200, key), time.Hour); err != nil {
				t.Fatalf("Finish %s: %v", key, err)
			}
			if fin := mustClaim(t, r, key, fpA, time.Minute, Finished); string(fin.Outcome.Body) != key {
				t.Fatalf("%s: %+v", key, fin)
			}
		case 1:
			if err := r.Release(ctx, key, c.Token); err != nil {
				t.Fatalf("Release %s: %v", key, err)
			}
			mustClaim(t, r, key, fpA, time.Minute, Claimed)
		case 2:
			if st, err := r.Delete(ctx, key); err != nil || st.State != InFlight {
				t.Fatalf("Delete %s: %+v, %v", key, st, err)
			}
			if c := mustClaim(t, r, key, fpA, time.Minute, Claimed); c.Attempts != 1 {
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

func benchRedis(b *testing.B) *Redis {
	addr := redistest.Start(b)
	return newTestRedis(b, RedisOptions{Addrs: []string{addr}})
}

func BenchmarkRedisClaimFinish(b *testing.B) {
	ctx := context.Background()
	r := benchRedis(b)
	out := Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: fpA}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := "orders:" + strconv.Itoa(i)
		c, err := r.Claim(ctx, key, fpA, time.Minute)
		if err != nil || c.State != Claimed {
			b.Fatal(c, err)
		}
		if err := r.Finish(ctx, key, c.Token, out, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisClaimFinished(b *testing.B) {
	ctx := context.Background()
	r := benchRedis(b)
	c, err := r.Claim(ctx, "orders:1", fpA, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	out := Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: fpA}
	if err := r.Finish(ctx, "orders:1", c.Token, out, time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := r.Claim(ctx, "orders:1", fpA, time.Minute)
		if err != nil || c.State != Finished {
			b.Fatal(c, err)
		}
	}
}

func BenchmarkRedisClaimFinishParallel(b *testing.B) {
	ctx := context.Background()
	r := benchRedis(b)
	out := Outcome{Status: 200, ContentType: "application/json", Body: make([]byte, 100), Fingerprint: fpA}
	var seq atomic.Int64
	var once sync.Once
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "orders:" + strconv.FormatInt(seq.Add(1), 10)
			c, err := r.Claim(ctx, key, fpA, time.Minute)
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

// A Redis restart that loses its data takes the lock with it; the delivery
// that held it still records its outcome, so the next copy is replayed.
func TestRedisFinishAfterRestartLostTheLock(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	c := mustClaim(t, r, "orders:evt_1", fpA, time.Minute, Claimed)
	srv.Stop()
	srv.Start()
	waitPing(t, r)
	if st := mustGet(t, r, "orders:evt_1"); st != (KeyState{}) {
		t.Fatalf("after the restart: %+v, want nothing left", st)
	}
	want := outcome(200, "accepted")
	if err := r.Finish(ctx, "orders:evt_1", c.Token, want, time.Hour); err != nil {
		t.Fatalf("Finish after the restart: %v", err)
	}
	if fin := mustClaim(t, r, "orders:evt_1", fpA, time.Minute, Finished); !sameOutcome(fin.Outcome, want) {
		t.Fatalf("claim after the restart = %+v, want the recorded outcome", fin)
	}
}

// The Redis side of TestMemoryResetOfAFinishedKeyHoldsForResetHold.
func TestRedisResetOfAFinishedKeyHoldsForResetHold(t *testing.T) {
	ctx := context.Background()
	r := newTestRedis(t, RedisOptions{Addrs: []string{redistest.Start(t)}, ResetHold: 300 * time.Millisecond})
	c := mustClaim(t, r, "k:1", fpA, time.Minute, Claimed)
	if err := r.Finish(ctx, "k:1", c.Token, outcome(200, "x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(ctx, "k:1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(ctx, "k:1", c.Token, outcome(200, "x"), time.Hour); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Finish retried right after the reset = %v, want ErrNotOwner", err)
	}
	waitGone(t, r, r.keys("k:1")[3])
	if err := r.Finish(ctx, "k:1", c.Token, outcome(200, "x"), time.Hour); err != nil {
		t.Fatalf("Finish after ResetHold: %v", err)
	}
}

func TestRedisResetTombstoneKey(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Start(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{addr}, KeyPrefix: "clawgate:"})
	const lockTTL = time.Minute
	c := mustClaim(t, r, "orders:evt_1", fpA, lockTTL, Claimed)
	if _, err := r.Delete(ctx, "orders:evt_1"); err != nil {
		t.Fatal(err)
	}
	const tomb = "clawgate:webhook_reset:{orders:evt_1}"
	if got := r.keys("orders:evt_1")[3]; got != tomb {
		t.Fatalf("reset key = %q, want %q", got, tomb)
	}
	// The tombstone lives for what remained of the lock, under the key's
	// hash tag (so in its Cluster slot).
	if ttl := r.client.PTTL(ctx, tomb).Val(); ttl <= 0 || ttl > lockTTL {
		t.Fatalf("tombstone PTTL = %v, want in (0, %v]", ttl, lockTTL)
	}
	if keys := r.client.Keys(ctx, "*").Val(); len(keys) != 1 || keys[0] != tomb {
		t.Fatalf("keys after the reset = %v, want only the tombstone", keys)
	}
	if err := r.Finish(ctx, "orders:evt_1", c.Token, outcome(200, "x"), time.Hour); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("Finish by the pre-reset owner = %v, want ErrNotOwner", err)
	}
	// Resetting a finished key (no lock) leaves none.
	c = mustClaim(t, r, "orders:evt_2", fpA, lockTTL, Claimed)
	if err := r.Finish(ctx, "orders:evt_2", c.Token, outcome(200, "x"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(ctx, "orders:evt_2"); err != nil {
		t.Fatal(err)
	}
	if n := r.client.Exists(ctx, r.keys("orders:evt_2")[3]).Val(); n != 0 {
		t.Fatalf("a reset without a lock left a tombstone")
	}
}
