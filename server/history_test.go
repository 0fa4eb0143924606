package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/store/redistest"
)

// historyYAML: the queue route "orders" (/webhook/order, two tries) and
// the sync route "pay" (/webhook/pay, HMAC-signed), keyed on the body's
// id, on the memory store or Redis (redis not ""); a one-key window, so
// that a second key sends the first's copies to the store.
func historyYAML(upstream, redis string) string {
	var b strings.Builder
	b.WriteString("listen: \"127.0.0.1:0\"\nadmin: { listen: \"127.0.0.1:0\" }\n")
	if redis != "" {
		fmt.Fprintf(&b, "store: { backend: redis, redis: { addrs: [%q] } }\n", redis)
	}
	fmt.Fprintf(&b, `dedupe: { lock_ttl: 5s, cache_size: 1 }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: %[1]s
    delivery: queue
    timeout: 2s
    workers: 2
    retry: { max_attempts: 2, initial: 20ms, max: 50ms }
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
  - name: pay
    match: { path: /webhook/pay }
    upstream: %[1]s
    timeout: 2s
    idempotency: { key: ["json:id"] }
    verify:
      scheme: hmac
      header: X-Signature
      secrets: [{ id: k1, secret: s3cret }]
`, upstream)
	return b.String()
}

// payPost delivers body to the sync route, signed (or with a bad
// signature).
func payPost(t *testing.T, in *qInstance, body string, good bool) (int, bool) {
	t.Helper()
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte(body))
	sig := hex.EncodeToString(m.Sum(nil))
	if !good {
		sig = strings.Repeat("0", len(sig))
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+in.Addr().String()+"/webhook/pay", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", sig)
	resp, err := qClient.Do(req)
	if err != nil {
		t.Fatalf("post %s: %v", body, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
}

// history reads a key's history; code 404 when it has none.
func (in *qInstance) history(route, key string) (int, admin.History) {
	in.t.Helper()
	var h admin.History
	code := in.adminJSON("GET", "/admin/keys/"+route+"/"+key+"/history", &h)
	return code, h
}

// historyKinds is a history as "kind/verdict" (the detail's first word).
func historyKinds(h admin.History) string {
	var s []string
	for _, e := range h.Events {
		d, _, _ := strings.Cut(e.Detail, " ")
		s = append(s, e.Kind+"/"+d)
	}
	return strings.Join(s, " ")
}

// waitHistory waits until route's key has n entries and checks them.
func (in *qInstance) waitHistory(t *testing.T, route, key string, want string) admin.History {
	t.Helper()
	n := len(strings.Fields(want))
	var h admin.History
	qEventually(t, 10*time.Second, func() bool {
		_, h = in.history(route, key)
		return len(h.Events) >= n
	}, func() string { return fmt.Sprintf("%s %s history %s, want %s", route, key, historyKinds(h), want) })
	if got := historyKinds(h); got != want {
		t.Fatalf("%s %s history:\n got %s\nwant %s", route, key, got, want)
	}
	return h
}

// TestKeyHistoryEveryPath: each path a copy or an event takes leaves its
// entry in its key's history, on the memory store and queue and on
// Redis, on both front doors: sync forward, 409, the replays from the
// window and from the store, 422, 401 (only for a key with a record),
// reset; a queued event's tries, retry, dead-lettering, replay, purge and
// reset.
func TestKeyHistoryEveryPath(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		for _, be := range []string{"memory", "redis"} {
			t.Run(be, func(t *testing.T) {
				redis := ""
				if be == "redis" {
					redis = redistest.Start(t)
				}
				testKeyHistoryEveryPath(t, redis)
			})
		}
	})
}

func testKeyHistoryEveryPath(t *testing.T, redis string) {
	up := newQUpstream(t)
	up.setAnswer(func(key string, n int) int {
		if strings.HasPrefix(key, "dead") && n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	in := startQueueYAML(t, historyYAML(up.srv.URL, redis), nil)

	// Sync: a copy while the first is forwarded (409), the first's
	// settle, a replay from the window, one from the store (another key
	// took the one-key window), another payload (422), a bad signature
	// (401).
	s1 := `{"id":"s1","amount":1}`
	up.hold()
	first := make(chan int, 1)
	go func() { code, _ := payPost(t, in, s1, true); first <- code }()
	qEventually(t, 10*time.Second, func() bool { return up.held.Load() == 1 }, func() string { return "the first copy at the upstream" })
	if code, _ := payPost(t, in, s1, true); code != http.StatusConflict {
		t.Fatalf("a copy in flight: %d, want 409", code)
	}
	in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight")
	up.release()
	if code := <-first; code != http.StatusOK {
		t.Fatalf("first copy: %d", code)
	}
	if code, replayed := payPost(t, in, s1, true); code != http.StatusOK || !replayed {
		t.Fatalf("window replay: %d %v", code, replayed)
	}
	in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight settle/finished arrival/replayed")
	if code, _ := payPost(t, in, `{"id":"s2","amount":1}`, true); code != http.StatusOK {
		t.Fatalf("s2: %d", code)
	}
	if code, replayed := payPost(t, in, s1, true); code != http.StatusOK || !replayed {
		t.Fatalf("store replay: %d %v", code, replayed)
	}
	in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight settle/finished arrival/replayed arrival/replayed")
	if code, _ := payPost(t, in, `{"id":"s1","amount":2}`, true); code != http.StatusUnprocessableEntity {
		t.Fatalf("another payload: %d, want 422", code)
	}
	in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight settle/finished arrival/replayed arrival/replayed arrival/conflict")
	// A bad signature on a key with no record leaves nothing; sent before
	// the one on s1, its note has had the time that one took.
	if code, _ := payPost(t, in, `{"id":"ghost"}`, false); code != http.StatusUnauthorized {
		t.Fatalf("ghost: %d", code)
	}
	if code, _ := payPost(t, in, s1, false); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d, want 401", code)
	}
	h := in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight settle/finished arrival/replayed arrival/replayed arrival/conflict arrival/unauthorized")
	if e := h.Events[0]; !strings.Contains(e.Detail, "secret=k1") || e.RequestID == "" || e.Instance == "" || e.Attempt != 1 {
		t.Errorf("forwarded arrival = %+v", e)
	}
	if e := h.Events[2]; e.Status != 200 || e.RequestID != h.Events[0].RequestID {
		t.Errorf("settle = %+v", e)
	}
	if e := h.Events[6]; strings.Contains(e.Detail, "secret=") {
		t.Errorf("the 401 names a secret: %+v", e)
	}
	if code, h := in.history("pay", "ghost"); code != http.StatusNotFound {
		t.Fatalf("history of an unauthenticated unknown key: %d %s", code, historyKinds(h))
	}
	if code := in.adminJSON("DELETE", "/admin/keys/pay/s1", nil); code != http.StatusOK {
		t.Fatalf("reset s1: %d", code)
	}
	h = in.waitHistory(t, "pay", "s1", "arrival/forwarded arrival/in_flight settle/finished arrival/replayed arrival/replayed arrival/conflict arrival/unauthorized reset/reset")
	if e := h.Events[7]; !strings.Contains(e.Detail, "by=admin reset") || h.State != "absent" {
		t.Errorf("reset = %+v (state %s)", e, h.State)
	}

	// Queue: delivered at once; dead-lettered after two tries, then
	// replayed and delivered; dead-lettered and purged; reset.
	if a := qPost(in.url(), "q1"); a.status != http.StatusAccepted {
		t.Fatalf("q1: %d %s", a.status, a.raw)
	}
	in.waitHistory(t, "orders", "q1", "arrival/queued try/ settle/delivered")
	if a := qPost(in.url(), "q1"); a.status != http.StatusOK || !a.replayed {
		t.Fatalf("q1 again: %d %v", a.status, a.replayed)
	}
	in.waitHistory(t, "orders", "q1", "arrival/queued try/ settle/delivered arrival/replayed")
	for _, k := range []string{"dead1", "dead2"} {
		if a := qPost(in.url(), k); a.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", k, a.status, a.raw)
		}
		in.waitHistory(t, "orders", k, "arrival/queued try/ retry/retry try/ dead/exhausted")
	}
	h = in.waitHistory(t, "orders", "dead1", "arrival/queued try/ retry/retry try/ dead/exhausted")
	if e := h.Events[4]; e.Status != 500 || e.Attempt != 2 {
		t.Errorf("dead = %+v", e)
	}
	if e := h.Events[1]; e.Attempt != 1 {
		t.Errorf("first try = %+v", e)
	}
	if e := h.Events[2]; e.Status != 500 {
		t.Errorf("retry = %+v", e)
	}
	ids := map[string]string{}
	for _, e := range in.dlq().Entries {
		ids[e.Key] = e.ID
	}
	if code := in.adminJSON("POST", "/admin/dlq/orders/"+ids["dead1"]+"/replay", nil); code != http.StatusOK {
		t.Fatalf("replay dead1: %d", code)
	}
	h = in.waitHistory(t, "orders", "dead1", "arrival/queued try/ retry/retry try/ dead/exhausted replay/replayed try/ settle/delivered")
	if e := h.Events[5]; !strings.Contains(e.Detail, "by=dlq replay") {
		t.Errorf("replay = %+v", e)
	}
	if code := in.adminJSON("DELETE", "/admin/dlq/orders/"+ids["dead2"], nil); code != http.StatusOK {
		t.Fatalf("purge dead2: %d", code)
	}
	in.waitHistory(t, "orders", "dead2", "arrival/queued try/ retry/retry try/ dead/exhausted purge/purged")
	if code := in.adminJSON("DELETE", "/admin/keys/orders/q1", nil); code != http.StatusOK {
		t.Fatalf("reset q1: %d", code)
	}
	in.waitHistory(t, "orders", "q1", "arrival/queued try/ settle/delivered arrival/replayed delete/deleted")
}

// Regression: every copy a window answered cost a store call of its own
// (a goroutine and a Redis script per duplicate: duplicates on Redis ran
// at 0.76x of the same gateway with dedupe.history 0 in make bench). Now
// the copies of one key are gathered for a second and written as one
// entry with their count: a storm of 40 copies leaves a few entries whose
// counts add up to 39, each with the first copy's time, in time order
// with the forward and the settle. On memory and Redis.
func TestKeyHistoryGathersAStormOfCopies(t *testing.T) {
	for _, be := range []string{"memory", "redis"} {
		t.Run(be, func(t *testing.T) {
			redis := ""
			if be == "redis" {
				redis = redistest.Start(t)
			}
			up := newQUpstream(t)
			in := startQueueYAML(t, strings.Replace(historyYAML(up.srv.URL, redis), "cache_size: 1", "cache_size: 100", 1), nil)
			const copies = 40
			body := `{"id":"storm","amount":1}`
			for i := range copies {
				if code, replayed := payPost(t, in, body, true); code != http.StatusOK || replayed != (i > 0) {
					t.Fatalf("copy %d: %d replayed=%v", i+1, code, replayed)
				}
			}
			var h admin.History
			counted := 0
			qEventually(t, 10*time.Second, func() bool {
				_, h = in.history("pay", "storm")
				counted = 0
				for _, e := range h.Events {
					if d, ok := strings.CutPrefix(e.Detail, "replayed"); ok && e.Kind == "arrival" {
						n := 1
						if _, c, ok := strings.Cut(d, "copies="); ok {
							fmt.Sscan(c, &n)
						}
						counted += n
					}
				}
				return counted >= copies-1
			}, func() string {
				return fmt.Sprintf("replayed copies noted %d of %d: %s", counted, copies-1, historyKinds(h))
			})
			if counted != copies-1 || len(h.Events) > 2+5 {
				t.Fatalf("%d replayed copies in %d entries (%s), want %d in a few", counted, len(h.Events), historyKinds(h), copies-1)
			}
			if k := historyKinds(h); !strings.HasPrefix(k, "arrival/forwarded settle/finished arrival/replayed") {
				t.Fatalf("history %s: not in time order", k)
			}
			for i := 1; i < len(h.Events); i++ {
				// RFC 3339 with milliseconds, UTC: ordered as text.
				if h.Events[i].At < h.Events[i-1].At {
					t.Fatalf("entry %d at %v before entry %d at %v", i, h.Events[i].At, i-1, h.Events[i-1].At)
				}
			}
		})
	}
}
