package proxy_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/queue"
)

// forEachQueueBackend runs test on each front door, once on the memory
// queue and store and once on a real redis-server.
func forEachQueueBackend(t *testing.T, route string, test func(t *testing.T, h *harness)) {
	doortest.ForEach(t, func(t *testing.T) {
		for _, b := range []struct {
			name string
			opts func(t *testing.T) []harnessOpt
		}{
			{"memory", func(t *testing.T) []harnessOpt { return []harnessOpt{withQueue(queue.NewMemory())} }},
			{"redis", redisQueueOpts},
		} {
			t.Run(b.name, func(t *testing.T) {
				test(t, newHarness(t, nil, append(b.opts(t), withRouteYAML(route))...))
			})
		}
	})
}

// upstreamKeys returns the Idempotency-Key of every request the upstream
// got, sorted.
func upstreamKeys(h *harness) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for _, r := range h.upReqs {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	sort.Strings(keys)
	return keys
}

// Regression (issue 20): "Shadow mode is refused on queue routes". In
// shadow mode a queue route counts each duplicate as enforce would, and
// queues and delivers every copy as an event of its own, with its own 202.
func TestQueueRouteInShadowModeCountsDuplicatesAndQueuesEachCopy(t *testing.T) {
	forEachQueueBackend(t, `    delivery: queue
    workers: 2
    retry: { max_attempts: 3, initial: 10ms, max: 50ms }
    dedupe: { mode: shadow }
    idempotency: { allow_unsigned_key: true }`, testQueueRouteInShadowModeCountsDuplicatesAndQueuesEachCopy)
}

func testQueueRouteInShadowModeCountsDuplicatesAndQueuesEachCopy(t *testing.T, h *harness) {
	other := []byte(`{"id":"evt_1","type":"order.refunded"}`)
	ids := map[string]bool{}
	for i, body := range [][]byte{event, event, other} {
		r := h.post(t, "/webhook/order", "evt_1", body)
		if r.status != http.StatusAccepted || r.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("copy %d: %d replayed=%q %s", i, r.status, r.header.Get("Idempotent-Replayed"), r.body)
		}
		a := decodeQueued(t, r)
		if a.Key != "evt_1" || ids[a.ID] {
			t.Fatalf("copy %d: 202 body %+v, earlier ids %v", i, a, ids)
		}
		ids[a.ID] = true
	}
	waitUntil(t, "the upstream to get every copy", func() bool { return h.upCalls.Load() == 3 })
	// Once the first copy was delivered (or while it is settled), another
	// copy is still queued anew.
	if r := h.post(t, "/webhook/order", "evt_1", event); r.status != http.StatusAccepted || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("copy after delivery: %d replayed=%q %s", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	waitUntil(t, "the upstream to get the fourth copy", func() bool { return h.upCalls.Load() == 4 })
	if got := strings.Join(upstreamKeys(h), ","); got != "evt_1,evt_1,evt_1,evt_1" {
		t.Fatalf("upstream keys %s, want evt_1 four times", got)
	}
	if v := h.metric("webhook_duplicate_requests_total", map[string]string{"route": "orders", "outcome": "replayed"}); v != 2 {
		t.Errorf("duplicates counted replayed = %v, want 2", v)
	}
	if v := h.metric("webhook_duplicate_requests_total", map[string]string{"route": "orders", "outcome": "conflict"}); v != 1 {
		t.Errorf("duplicates counted conflict = %v, want 1", v)
	}
}

// In shadow mode the replay guard of a queue route counts a signed request
// sent again under another key, and queues it as an event of its own.
func TestQueueRouteReplayGuardInShadowModeCountsAndQueues(t *testing.T) {
	forEachQueueBackend(t, `    delivery: queue
    workers: 2
    retry: { max_attempts: 3, initial: 10ms, max: 50ms }
    dedupe: { mode: shadow }
    idempotency: { key: ["header:Idempotency-Key"] }`, testQueueRouteReplayGuardInShadowModeCountsAndQueues)
}

func testQueueRouteReplayGuardInShadowModeCountsAndQueues(t *testing.T, h *harness) {
	for _, key := range []string{"evt_a", "evt_b"} {
		if r := h.post(t, "/webhook/order", key, event); r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", key, r.status, r.body)
		}
	}
	waitUntil(t, "the upstream to get both copies", func() bool { return h.upCalls.Load() == 2 })
	if got := strings.Join(upstreamKeys(h), ","); got != "evt_a,evt_b" {
		t.Fatalf("upstream keys %s, want evt_a,evt_b", got)
	}
	if v := h.metric("webhook_signature_replays_total", map[string]string{"route": "orders"}); v != 1 {
		t.Fatalf("webhook_signature_replays_total = %v, want 1", v)
	}
	if v := h.metric("webhook_duplicate_requests_total", map[string]string{"route": "orders", "outcome": "conflict"}); v != 1 {
		t.Fatalf("duplicates counted conflict = %v, want 1", v)
	}
}
