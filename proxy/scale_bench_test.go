package proxy_test

// How a delivery's cost grows with the work: the body's size, the number
// of routes, the signature scheme and the finished keys held. `make bench`
// runs these (go test -run '^$' -bench '^BenchmarkScale' ./proxy/ ./queue/)
// and bench/cmd/scale turns their lines into the table of
// docs/benchmarks.md ("How the cost grows").
//
// Each one drives the gateway's fasthttp handler in one goroutine, as
// benchDeliveries does: ns/op is one core's time per delivery, the
// in-process upstream's included (a fasthttp server answering a fixed 200:
// about 2 µs of it), without sockets on the client side. Every delivery is
// checked to be answered as the case says (200 forwarded, 200 replayed).

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/logging"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
	"github.com/clawgate/clawgate/verify"
)

// scaleRoute is the measured route's YAML, %VERIFY% its verify block.
const scaleRoute = `  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    timeout: 2s
    max_body: 2MiB
    idempotency: { key: ["header:Idempotency-Key"], allow_unsigned_key: true }
    verify:
%VERIFY%
`

const scaleHMAC = `      scheme: hmac
      header: X-Signature
      prefix: "sha256="
      secrets: [{ id: k1, secret: test-secret }]`

// scaleGateway parses a config of head (top-level settings), before (more
// routes, tried before the measured one) and the measured route verified
// by verifyYAML, and returns the gateway on st with a signer for the
// route (signKey as verify.NewSigner takes it).
func scaleGateway(b *testing.B, head, before, verifyYAML string, signKey []byte, st store.Store) (*proxy.Gateway, verify.Signer) {
	b.Helper()
	dir := b.TempDir()
	route := strings.ReplaceAll(strings.ReplaceAll(scaleRoute, "%UPSTREAM%", benchUpstream(b)), "%VERIFY%", verifyYAML)
	y := "listen: \"127.0.0.1:0\"\nadmin: { listen: \"\" }\n" + head + "routes:\n" + before + route
	y = strings.ReplaceAll(y, "%DIR%", dir)
	cfg, err := config.Parse([]byte(y), filepath.Join(dir, "bench.yaml"), dir, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	if st == nil {
		st = ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 1 << 20})
	}
	gw := proxy.New(cfg, proxy.Options{
		Store:   st,
		Metrics: metrics.New(prometheus.NewRegistry()),
		Logger:  slog.New(logging.NewHandler(io.Discard, nil)),
	})
	rt := cfg.Routes[len(cfg.Routes)-1]
	signer, err := verify.NewSigner(rt.Verify, verify.Env{Dir: cfg.Dir}, signKey)
	if err != nil {
		b.Fatal(err)
	}
	return gw, signer
}

// scaleDeliver runs b.N deliveries of body to /webhook/order under key(i)
// with the headers signer adds (signed once: the key is not signed),
// through the fasthttp handler, each answered 200, replayed or not as
// replayed says.
func scaleDeliver(b *testing.B, gw *proxy.Gateway, signer verify.Signer, body []byte, key func(i int) string, replayed bool) {
	b.Helper()
	h := http.Header{}
	if err := signer.Sign(h, body, time.Now()); err != nil {
		b.Fatal(err)
	}
	var c fasthttp.RequestCtx
	conn := &benchConn{}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Init2(conn, nil, false)
		r := &c.Request
		r.Header.SetMethod(http.MethodPost)
		r.SetRequestURI("/webhook/order")
		r.Header.SetHost("gw")
		r.Header.SetContentType("application/json")
		for name, vs := range h {
			r.Header.Set(name, vs[0])
		}
		r.Header.Set("Idempotency-Key", key(i))
		r.SetBody(body)
		gw.ServeFastHTTP(&c)
		if st := c.Response.StatusCode(); st != http.StatusOK {
			b.Fatalf("status %d, want 200: %s", st, c.Response.Body())
		}
		if got := len(c.Response.Header.Peek("Idempotent-Replayed")) > 0; got != replayed {
			b.Fatalf("replayed %v, want %v", got, replayed)
		}
		c.Request.Reset()
		c.Response.Reset()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

// cpuTime is the CPU time this process used so far, user and system: the
// gateway's, its in-process upstream's and the Go runtime's, not Redis's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleBody is a JSON body of n bytes.
func scaleBody(n int) []byte {
	head := `{"id":"evt_scale","type":"order.paid","note":"`
	return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
}

// BenchmarkScaleBody: a unique delivery of 1 KiB, 64 KiB and 1 MiB,
// verified (HMAC-SHA256 of the body), claimed, forwarded and finished.
func BenchmarkScaleBody(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20} {
		gw, signer := scaleGateway(b, "", "", scaleHMAC, nil, nil)
		b.Run("body="+sizeName(n), func(b *testing.B) {
			scaleDeliver(b, gw, signer, scaleBody(n), uniqueKey, false)
		})
	}
}

// BenchmarkScaleRoutes: a unique 1 KiB delivery to the last route of 1,
// 100 and 1,100 routes (1,000 exact paths and 100 prefixes before it).
func BenchmarkScaleRoutes(b *testing.B) {
	for _, n := range []int{1, 100, 1100} {
		var before strings.Builder
		for i := 0; i < n-1; i++ {
			match := fmt.Sprintf("path: /hooks/r%d", i)
			if n > 100 && i >= n-101 {
				match = fmt.Sprintf("path_prefix: /prefixed/p%d/", i)
			}
			fmt.Fprintf(&before, "  - name: r%d\n    match: { %s }\n    upstream: http://127.0.0.1:9\n    verify: { scheme: none }\n    idempotency: { key: [\"header:Idempotency-Key\"], allow_unsigned_key: true }\n", i, match)
		}
		gw, signer := scaleGateway(b, "", before.String(), scaleHMAC, nil, nil)
		b.Run("routes="+strconv.Itoa(n), func(b *testing.B) {
			scaleDeliver(b, gw, signer, scaleBody(1<<10), uniqueKey, false)
		})
	}
}

// BenchmarkScaleScheme: a unique 1 KiB delivery verified by each kind of
// scheme: none, HMAC-SHA256 of the body, Ed25519 of the body, and an ES256
// JWT in the Authorization header.
func BenchmarkScaleScheme(b *testing.B) {
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	ecPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			b.Fatal(err)
		}
		return p
	}
	der := func(k any, pub bool) []byte {
		var d []byte
		var err error
		if pub {
			d, err = x509.MarshalPKIXPublicKey(k)
		} else {
			d, err = x509.MarshalPKCS8PrivateKey(k)
		}
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	edPEM := writePEM("ed.pem", "PUBLIC KEY", der(edPub, true))
	ecPEM := writePEM("ec.pem", "PUBLIC KEY", der(&ecPriv.PublicKey, true))
	cases := []struct {
		name, verify string
		key          []byte
	}{
		{"none", "      scheme: none", nil},
		{"hmac", scaleHMAC, nil},
		{"ed25519", "      scheme: ed25519\n      header: X-Signature\n      template: \"{body}\"\n      secrets: [{ id: k1, secret_file: " + edPEM + " }]",
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der(edPriv, false)})},
		{"jwt-es256", "      scheme: jwt\n      jwt: { algorithms: [ES256], keys: [{ id: k1, pem_file: " + ecPEM + " }], max_age: 1h }",
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der(ecPriv, false)})},
	}
	for _, c := range cases {
		gw, signer := scaleGateway(b, "", "", c.verify, c.key, nil)
		b.Run("scheme="+c.name, func(b *testing.B) {
			scaleDeliver(b, gw, signer, scaleBody(1<<10), uniqueKey, false)
		})
	}
}

// scaleHeld lists the finished-key counts BenchmarkScaleKeysHeld fills the
// memory store with: CLAWGATE_SCALE_KEYS (comma-separated), or 1M and 10M.
func scaleHeld() []int {
	v := os.Getenv("CLAWGATE_SCALE_KEYS")
	if v == "" {
		return []int{1_000_000, 10_000_000}
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			ns = append(ns, n)
		}
	}
	return ns
}

// fillFinished finishes n keys ("orders:held-I") in st from workers
// goroutines, each with a 100-byte stored answer and the fingerprint fp
// (the one a delivery of the benchmark's body has, so that a copy is
// replayed rather than refused as a reused key).
func fillFinished(b *testing.B, st store.Store, fp string, n, workers int) {
	b.Helper()
	ctx := context.Background()
	out := store.Outcome{Status: 200, ContentType: "application/json", Body: []byte(strings.Repeat("x", 100))}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += workers {
				k := idkey.Scoped("orders", "held-"+strconv.Itoa(i))
				c, err := st.Claim(ctx, k, fp, time.Minute)
				if err == nil && c.State != store.Claimed {
					err = fmt.Errorf("key %s: %v", k, c.State)
				}
				if err == nil {
					out := out
					out.Fingerprint = fp
					err = st.Finish(ctx, k, c.Token, out, 72*time.Hour)
				}
				if err != nil {
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

// probeFingerprint delivers body once under a key of its own and returns
// the fingerprint st recorded for it.
func probeFingerprint(b *testing.B, gw *proxy.Gateway, signer verify.Signer, st store.Store, body []byte) string {
	b.Helper()
	h := http.Header{}
	if err := signer.Sign(h, body, time.Now()); err != nil {
		b.Fatal(err)
	}
	r := benchRequest(body, "held-probe")
	for name, vs := range h {
		r.Header.Set(name, vs[0])
	}
	w := &discardWriter{h: http.Header{}}
	gw.ServeHTTP(w, r)
	w.expect(b, http.StatusOK)
	ks, err := st.Get(context.Background(), idkey.Scoped("orders", "held-probe"))
	if err != nil || ks.Fingerprint == "" {
		b.Fatalf("probe: %+v %v", ks, err)
	}
	return ks.Fingerprint
}

// BenchmarkScaleKeysHeld: the memory store holding 1M and 10M finished
// keys (CLAWGATE_SCALE_KEYS to change): a unique delivery, and a copy of a
// random held key, answered from the store (the local window holds one
// outcome, so nearly every copy is a store lookup). held-bytes/key is the
// live heap the keys took, per key, after a full GC (their 100-byte
// answers included).
func BenchmarkScaleKeysHeld(b *testing.B) {
	for _, n := range scaleHeld() {
		st := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: n + 1<<20, MaxBytes: math.MaxInt64})
		gw, signer := scaleGateway(b, "dedupe: { cache_size: 1 }\n", "", scaleHMAC, nil, st)
		body := scaleBody(1 << 10)
		fp := probeFingerprint(b, gw, signer, st, body)
		before := heapInUse()
		fillFinished(b, st, fp, n, runtime.GOMAXPROCS(0))
		perKey := float64(heapInUse()-before) / float64(n)
		name := "held=" + countName(n)
		b.Run(name+"/unique", func(b *testing.B) {
			scaleDeliver(b, gw, signer, body, uniqueKey, false)
			b.ReportMetric(perKey, "held-bytes/key")
		})
		b.Run(name+"/copy", func(b *testing.B) {
			rng := mrand.New(mrand.NewPCG(1, uint64(n)))
			scaleDeliver(b, gw, signer, body, func(int) string { return "held-" + strconv.Itoa(rng.IntN(n)) }, true)
			b.ReportMetric(perKey, "held-bytes/key")
		})
		st.Close()
	}
}

// BenchmarkScaleKeysHeldRedis: a Redis (its own redis-server on loopback,
// no persistence) holding 1M finished keys (CLAWGATE_SCALE_REDIS_KEYS to
// change): a unique delivery, and a copy of a random held key answered
// from Redis. redis-bytes/key is Redis's used_memory grown by the keys,
// per key.
func BenchmarkScaleKeysHeldRedis(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("CLAWGATE_SCALE_REDIS_KEYS")); err == nil && v > 0 {
		n = v
	}
	addr := redistest.Start(b)
	used := func() float64 {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		defer c.Close()
		info, err := c.Info(context.Background(), "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		b.Fatal("no used_memory in INFO")
		return 0
	}
	conn, err := store.NewRedis(store.RedisOptions{Addrs: []string{addr}, OpTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	// As the gateway keeps a sync route's keys on Redis: in the key
	// records of the route's queue (one shard), no schema-1 window.
	st := ledger.NewRedisStore(conn, ledger.StreamsPlace("", func(string) int { return 1 }), ledger.SyncOptions{ResetHold: 5 * time.Second}, 0)
	gw, signer := scaleGateway(b, "dedupe: { cache_size: 1 }\n", "", scaleHMAC, nil, st)
	body := scaleBody(1 << 10)
	fp := probeFingerprint(b, gw, signer, st, body)
	before := used()
	fillFinished(b, st, fp, n, 64)
	perKey := (used() - before) / float64(n)
	name := "held=" + countName(n)
	b.Run(name+"/unique", func(b *testing.B) {
		scaleDeliver(b, gw, signer, body, uniqueKey, false)
		b.ReportMetric(perKey, "redis-bytes/key")
	})
	b.Run(name+"/copy", func(b *testing.B) {
		rng := mrand.New(mrand.NewPCG(2, uint64(n)))
		scaleDeliver(b, gw, signer, body, func(int) string { return "held-" + strconv.Itoa(rng.IntN(n)) }, true)
		b.ReportMetric(perKey, "redis-bytes/key")
	})
}

// sizeName writes n bytes as 1KiB, 64KiB, 1MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// countName writes n as 100k, 1M, 10M.
func countName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
