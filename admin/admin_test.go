package admin_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

const token = "admin-test-token"

const cfgText = `
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0", token_env: TEST_ADMIN_TOKEN }
store: { backend: redis, redis: { addrs: [%REDIS%], key_prefix: "adm:" } }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %UPSTREAM%
    idempotency: { allow_unsigned_key: true }   # one body under many keys
    verify:
      scheme: hmac
      header: X-Signature
      secrets: [{ id: k1, secret: s3cret }]
`

// node is one gateway instance with its admin listener.
type node struct {
	gw, admin *httptest.Server
	st        *store.Redis
	reg       *prometheus.Registry
}

type cluster struct {
	t       *testing.T
	nodes   []*node
	upCalls atomic.Int64
	hold    chan struct{} // when non-nil, the upstream waits on it
}

func newCluster(t *testing.T, redisAddr string, n int) *cluster {
	c := &cluster{t: t}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.upCalls.Add(1)
		if c.hold != nil {
			<-c.hold
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(up.Close)
	y := strings.NewReplacer("%REDIS%", redisAddr, "%UPSTREAM%", up.URL).Replace(cfgText)
	for i := 0; i < n; i++ {
		cfg, err := config.Parse([]byte(y), "t.yaml", t.TempDir(), func(k string) string {
			if k == "TEST_ADMIN_TOKEN" {
				return token
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.NewRedis(store.RedisOptions{Addrs: []string{redisAddr}, KeyPrefix: "adm:"})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		log := slog.New(slog.NewJSONHandler(io.Discard, nil))
		keys := ledger.RedisStoreOn(st)
		keys.SetHistory(ledger.HistoryOptions{Cap: cfg.Dedupe.History, Instance: fmt.Sprintf("node-%d", i)})
		gw := proxy.New(cfg, proxy.Options{Store: keys, Metrics: metrics.New(reg), Logger: log})
		ctx, cancel := context.WithCancel(context.Background())
		st.SubscribeResets(ctx, gw.Forget)
		nd := &node{
			gw:    httptest.NewServer(gw),
			admin: httptest.NewServer(admin.Handler(admin.Options{Gatherer: reg, Store: keys, Gateway: gw, Broadcaster: st, Token: cfg.Admin.Token, Logger: log})),
			st:    st, reg: reg,
		}
		t.Cleanup(func() { cancel(); nd.gw.Close(); nd.admin.Close(); st.Close() })
		c.nodes = append(c.nodes, nd)
	}
	return c
}

var body = []byte(`{"id":"evt_adm","amount":100}`)

func (c *cluster) deliver(i int, key string) *http.Response {
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	req, _ := http.NewRequest(http.MethodPost, c.nodes[i].gw.URL+"/webhook/order", bytes.NewReader(body))
	req.Header.Set("X-Signature", hex.EncodeToString(m.Sum(nil)))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (c *cluster) call(i int, method, path, tok string) (int, admin.KeyState) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.nodes[i].admin.URL+path, nil)
	req.Header.Set(admin.Header, "1")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ks admin.KeyState
	json.NewDecoder(resp.Body).Decode(&ks)
	return resp.StatusCode, ks
}

// reset DELETEs a key through node i and decodes the answer.
func (c *cluster) reset(i int, route, key string) (int, admin.ResetResult) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, c.nodes[i].admin.URL+"/admin/keys/"+route+"/"+key, nil)
	req.Header.Set(admin.Header, "1")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var res admin.ResetResult
	json.NewDecoder(resp.Body).Decode(&res)
	return resp.StatusCode, res
}

func TestKeyStateFollowsDeliveries(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 1)
	if code, ks := c.call(0, "GET", "/admin/keys/orders/evt_1", token); code != 200 || ks.State != "absent" || ks.FirstSeen != nil {
		t.Fatalf("never seen: %d %+v", code, ks)
	}
	c.hold = make(chan struct{})
	done := make(chan struct{})
	go func() { c.deliver(0, "evt_1"); close(done) }()
	var ks admin.KeyState
	eventually.True(t, "the claim of evt_1", func() bool {
		_, ks = c.call(0, "GET", "/admin/keys/orders/evt_1", token)
		return ks.State == "in_flight"
	})
	if ks.State != "in_flight" || ks.Attempts != 1 {
		t.Fatalf("while forwarding: %+v", ks)
	}
	close(c.hold)
	<-done
	_, ks = c.call(0, "GET", "/admin/keys/orders/evt_1", token)
	if ks.State != "finished" || ks.Status != 200 || ks.Attempts != 1 || len(ks.Fingerprint) != 64 || ks.FirstSeen == nil || ks.LastSeen == nil {
		t.Fatalf("finished: %+v", ks)
	}
	// Replays from the window count as deliveries too.
	c.deliver(0, "evt_1")
	c.deliver(0, "evt_1")
	if _, ks = c.call(0, "GET", "/admin/keys/orders/evt_1", token); ks.Attempts != 3 {
		t.Fatalf("after two replays: attempts %d, want 3", ks.Attempts)
	}
	if code, _ := c.call(0, "GET", "/admin/keys/nope/evt_1", token); code != 404 {
		t.Fatalf("unknown route: %d", code)
	}
}

func TestResetOnOneInstanceForwardsAgainOnAnother(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 2)
	c.deliver(1, "evt_r")                                                          // forwarded by B
	if r := c.deliver(1, "evt_r"); r.Header.Get("Idempotent-Replayed") != "true" { // B's window has it
		t.Fatal("duplicate not replayed")
	}
	code, res := c.reset(0, "orders", "evt_r") // reset through A
	if code != 200 || !res.Reset || res.Forgot.State != "finished" || res.Forgot.Status != 200 {
		t.Fatalf("reset: %d %+v", code, res)
	}
	if _, ks := c.call(0, "GET", "/admin/keys/orders/evt_r", token); ks.State != "absent" {
		t.Fatalf("after reset: %+v", ks)
	}
	// B hears of the reset over pub/sub; wait (bounded) until its next
	// delivery is forwarded rather than replayed from its window.
	eventually.True(t, "B to forward evt_r after the reset", func() bool {
		return c.deliver(1, "evt_r").Header.Get("Idempotent-Replayed") == ""
	})
	if c.upCalls.Load() != 2 {
		t.Fatalf("after reset: upstream calls %d, want 2", c.upCalls.Load())
	}
}

func TestAdminTokenRequired(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 1)
	for _, tc := range []struct {
		method, path, tok string
		want              int
	}{
		{"GET", "/admin/keys/orders/k", "", 401},
		{"GET", "/admin/keys/orders/k", "wrong", 401},
		{"DELETE", "/admin/keys/orders/k", "", 401},
		{"DELETE", "/admin/keys/orders/k", token + "x", 401},
		{"GET", "/admin/other", "", 401},
		{"GET", "/admin/keys/orders/k", token, 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
	} {
		if code, _ := c.call(0, tc.method, tc.path, tc.tok); code != tc.want {
			t.Errorf("%s %s token %q: %d, want %d", tc.method, tc.path, tc.tok, code, tc.want)
		}
	}
}

func TestReadyzFollowsTheStore(t *testing.T) {
	srv := redistest.StartServer(t)
	c := newCluster(t, srv.Addr, 1)
	if code, _ := c.call(0, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	srv.Stop()
	if code, _ := c.call(0, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz with Redis down: %d", code)
	}
	if code, _ := c.call(0, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz with Redis down: %d", code)
	}
	srv.Start()
	code := 0
	eventually.Within(t, 10*time.Second, func() bool { code, _ = c.call(0, "GET", "/readyz", ""); return code == 200 },
		func() string { return fmt.Sprintf("readyz after Redis came back: %d", code) })
}

func TestPprofBehindToken(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 1)
	if code, _ := c.call(0, "GET", "/debug/pprof/", ""); code != 401 {
		t.Fatalf("pprof without token: %d", code)
	}
	if code, _ := c.call(0, "GET", "/debug/pprof/", token); code != 200 {
		t.Fatalf("pprof with token: %d", code)
	}
}

// Regression: last_seen never moved for replays answered from the local
// window (they cost no store round trip, so the store never saw them).
func TestLastSeenMovesForWindowReplays(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 1)
	c.deliver(0, "evt_seen")
	_, first := c.call(0, "GET", "/admin/keys/orders/evt_seen", token)
	// The store keeps milliseconds: wait for the clock to reach the next one.
	eventually.True(t, "the clock to pass the first last_seen", func() bool {
		return first.LastSeen == nil || time.Now().UnixMilli() > first.LastSeen.UnixMilli() // nil: failed below
	})
	if resp := c.deliver(0, "evt_seen"); resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("second delivery not replayed")
	}
	_, again := c.call(0, "GET", "/admin/keys/orders/evt_seen", token)
	if first.LastSeen == nil || again.LastSeen == nil || !again.LastSeen.After(*first.LastSeen) || again.Attempts != 2 {
		t.Fatalf("last_seen %v then %v, attempts %d", first.LastSeen, again.LastSeen, again.Attempts)
	}
}
