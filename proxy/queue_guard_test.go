package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// guardedQueueRoute is a queue route keyed on the Idempotency-Key header,
// which the HMAC over the body does not cover: it gets the replay guard.
const guardedQueueRoute = `    delivery: queue
    workers: 2
    retry: { max_attempts: 3, initial: 10ms, max: 50ms }
    idempotency: { key: ["header:Idempotency-Key"] }`

// Regression (issue 20): "A queue route cannot be guarded against a
// captured delivery resent under a fresh unsigned key": check refused such
// a route unless allow_unsigned_key turned protection off. Now a signed
// request acknowledged under one key and sent again under another gets 422
// and the upstream sees one copy, on the memory and the Redis backends.
func TestQueueRouteRefusesCapturedDeliveryResentUnderFreshKey(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		for _, b := range []struct {
			name    string
			backend func(t *testing.T) []harnessOpt
		}{
			{"memory", func(t *testing.T) []harnessOpt { return []harnessOpt{withQueue(queue.NewMemory())} }},
			{"redis", redisQueueOpts},
		} {
			t.Run(b.name, func(t *testing.T) {
				h := newHarness(t, nil, append(b.backend(t), withRouteYAML(guardedQueueRoute))...)
				testQueueRouteRefusesCapturedDeliveryResentUnderFreshKey(t, h)
			})
		}
	})
}

// redisQueueOpts runs the harness on a real redis-server: the store and
// the queue share it, as they do in production.
func redisQueueOpts(t *testing.T) []harnessOpt {
	addr := redistest.Start(t)
	st, err := store.NewRedis(store.RedisOptions{Addrs: []string{addr}, KeyPrefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	return []harnessOpt{withStore(ledger.RedisStoreOn(st)), withQueue(queue.NewRedis(c, "t:", 0))}
}

func testQueueRouteRefusesCapturedDeliveryResentUnderFreshKey(t *testing.T, h *harness) {
	first := h.post(t, "/webhook/order", "evt_a", event)
	if first.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	// At once (the event may still be queued) and after its delivery.
	for _, key := range []string{"evt_b", "evt_c"} {
		if r := h.post(t, "/webhook/order", key, event); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("replay under %s: %d %s", key, r.status, r.body)
		}
	}
	waitUntil(t, "the upstream to get the event", func() bool { return h.upCalls.Load() == 1 })
	if r := h.post(t, "/webhook/order", "evt_d", event); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("replay under evt_d after delivery: %d %s", r.status, r.body)
	}
	// The provider's own retry (same key, same signed request) is answered
	// as a copy of its event.
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status/100 != 2 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q %s", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	// Another signed request under its own key is queued and delivered.
	if r := h.post(t, "/webhook/order", "evt_e", []byte(`{"id":"evt_e"}`)); r.status != http.StatusAccepted {
		t.Fatalf("new event: %d %s", r.status, r.body)
	}
	waitUntil(t, "the upstream to get the second event", func() bool { return h.upCalls.Load() == 2 })
	h.mu.Lock()
	var keys []string
	for _, r := range h.upReqs {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	h.mu.Unlock()
	if len(keys) != 2 || keys[0] != "evt_a" || keys[1] != "evt_e" {
		t.Fatalf("upstream saw keys %q, want [evt_a evt_e]", keys)
	}
	if v := h.metric("webhook_signature_replays_total", map[string]string{"route": "orders"}); v != 3 {
		t.Fatalf("webhook_signature_replays_total = %v, want 3", v)
	}
}

// flakyQueue is a backend whose enqueue fails while down is set.
type flakyQueue struct {
	queue.Backend
	down atomic.Bool
}

func (q *flakyQueue) Enqueue(ctx context.Context, e queue.Entry, maxDepth int) (queue.Ack, error) {
	if q.down.Load() {
		return queue.Ack{}, errors.New("queue down")
	}
	return q.Backend.Enqueue(ctx, e, maxDepth)
}

// The guard's record is written before the enqueue, so that no event is
// ever queued with its signed request unremembered: a copy whose enqueue
// failed (503, not acknowledged) has already tied its signed request to
// its key. The sender's retry under that key goes through; the same
// request under another key is refused (fail closed).
func TestQueueRouteGuardIsRecordedBeforeTheEnqueue(t *testing.T) {
	doortest.ForEach(t, testQueueRouteGuardIsRecordedBeforeTheEnqueue)
}

func testQueueRouteGuardIsRecordedBeforeTheEnqueue(t *testing.T) {
	q := &flakyQueue{Backend: queue.NewMemory()}
	h := newHarness(t, nil, withQueue(q), withRouteYAML(guardedQueueRoute))
	q.down.Store(true)
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != http.StatusServiceUnavailable {
		t.Fatalf("queue down: %d %s", r.status, r.body)
	}
	q.down.Store(false)
	if r := h.post(t, "/webhook/order", "evt_b", event); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("under another key: %d %s", r.status, r.body)
	}
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != http.StatusAccepted {
		t.Fatalf("retry under its key: %d %s", r.status, r.body)
	}
	waitUntil(t, "the upstream to get the event", func() bool { return h.upCalls.Load() == 1 })
}

// A store that does not answer the guard's claim gets 503 on a queue
// route, even with store.on_error: forward: nothing is queued unguarded.
func TestQueueRouteGuardFailsClosedWhenTheStoreIsDown(t *testing.T) {
	doortest.ForEach(t, testQueueRouteGuardFailsClosedWhenTheStoreIsDown)
}

func testQueueRouteGuardFailsClosedWhenTheStoreIsDown(t *testing.T) {
	h := newHarness(t, nil, withQueue(queue.NewMemory()), withStore(downStore{ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: 100})}),
		withRouteYAML(guardedQueueRoute))
	if r := h.post(t, "/webhook/order", "evt_a", event); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("store down: %d %v %s", r.status, r.header, r.body)
	}
	if n := h.upCalls.Load(); n != 0 {
		t.Fatalf("upstream saw %d deliveries, want 0", n)
	}
}

// downStore is a store whose claims fail.
type downStore struct{ store.Store }

func (downStore) Claim(context.Context, string, string, time.Duration) (store.Claim, error) {
	return store.Claim{}, errors.New("store down")
}
