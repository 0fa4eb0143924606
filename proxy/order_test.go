package proxy_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/queue"
)

// entryLog is a memory queue that keeps what Enqueue was given.
type entryLog struct {
	*queue.Memory
	mu      sync.Mutex
	entries map[string]queue.Entry
}

func (q *entryLog) Enqueue(ctx context.Context, e queue.Entry, maxDepth int) (queue.Ack, error) {
	q.mu.Lock()
	q.entries[e.Key] = e
	q.mu.Unlock()
	return q.Memory.Enqueue(ctx, e, maxDepth)
}

func (q *entryLog) entry(key string) queue.Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.entries[key]
}

// An ordered route queues each event with its order.by value and its
// order.stale value read as a number (a number as written, an RFC 3339
// time as Unix seconds); an event without a value, or with a stale value
// that is neither, is queued without it.
func TestQueueRouteOrderValues(t *testing.T) { doortest.ForEach(t, testQueueRouteOrderValues) }

func testQueueRouteOrderValues(t *testing.T) {
	q := &entryLog{Memory: queue.NewMemory(), entries: map[string]queue.Entry{}}
	h := newHarness(t, nil, withRouteYAML(queueRoute+`
    order: { by: "json:data.object.id", stale: "json:created" }`), withQueue(q))
	for _, c := range []struct {
		key, body, order, stale string
	}{
		{"e1", `{"created":1767225600,"data":{"object":{"id":"sub_1"}}}`, "sub_1", "1767225600"},
		{"e2", `{"created":"2026-01-01T00:00:00.5Z","data":{"object":{"id":"sub_1"}}}`, "sub_1", "1767225600.5"},
		{"e3", `{"created":"yesterday","data":{"object":{"id":"sub_2"}}}`, "sub_2", ""},
		{"e4", `{"created":5,"data":{}}`, "", ""},
	} {
		if r := h.post(t, "/webhook/order", c.key, []byte(c.body)); r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", c.key, r.status, r.body)
		}
		if e := q.entry(c.key); e.Order != c.order || e.Stale != c.stale {
			t.Errorf("%s queued with order %q stale %q, want %q %q", c.key, e.Order, e.Stale, c.order, c.stale)
		}
	}
	if n := h.metric("webhook_queue_unordered_total", map[string]string{"route": "orders"}); n != 1 {
		t.Errorf("webhook_queue_unordered_total = %v, want 1 (e4)", n)
	}
}
