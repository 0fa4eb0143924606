package config

import (
	"fmt"
	"math"
	"strings"

	"github.com/clawgate/clawgate/verify"
)

// Bounds of the queue settings.
const (
	maxQueueShards   = 256
	maxWorkers       = 1024
	maxRetryAttempts = 1000
)

// checkQueue validates the queue block and resolves an empty
// queue.backend to the one store.backend implies. queue.kafka is checked
// (kafka.go) only with queue.backend kafka.
func (b *builder) checkQueue() {
	q := &b.cfg.Queue
	line := b.line("queue", "backend")
	store := b.cfg.Store.Backend
	switch q.Backend {
	case "":
		switch store {
		case BackendMemory:
			q.Backend = QueueMemory
		case BackendRedis:
			q.Backend = QueueRedis
		}
		// Any other store.backend is reported by checkStore.
	case QueueMemory:
		if store == BackendRedis {
			b.ps.add(line, "queue.backend", "memory with store.backend: redis would give each instance a queue of its own, not shared: an event delivered to two instances would be queued and forwarded by each; use redis")
		}
	case QueueRedis:
		if store == BackendMemory {
			b.ps.add(line, "queue.backend", "redis needs store.backend: redis (the queue lives in the store's Redis)")
		}
	case QueueKafka:
		if store == BackendMemory {
			b.warnAt(line, "queue.backend", "kafka with store.backend: memory keeps the state of the events' keys in this process only: run a single instance (several would not share it; use store.backend: redis)")
		}
		b.checkKafka()
	default:
		b.ps.add(line, "queue.backend", "must be memory, redis or kafka, got %q", clip(string(q.Backend)))
	}
	if q.MaxDepth < 1 {
		b.ps.add(b.line("queue", "max_depth"), "queue.max_depth", "must be at least 1, got %d", q.MaxDepth)
	}
	if q.MaxDLQ < 1 {
		b.ps.add(b.line("queue", "max_dlq"), "queue.max_dlq", "must be at least 1, got %d", q.MaxDLQ)
	}
	if q.MaxDLQBytes <= 0 {
		b.ps.add(b.line("queue", "max_dlq_bytes"), "queue.max_dlq_bytes", "must be positive, such as 64MiB, got %d", int64(q.MaxDLQBytes))
	}
	if q.Shards < 1 || q.Shards > maxQueueShards {
		b.ps.add(b.line("queue", "shards"), "queue.shards", "must be from 1 to %d, got %d", maxQueueShards, q.Shards)
	}
	if !(q.ReplayRate > 0) || math.IsInf(q.ReplayRate, 0) {
		b.ps.add(b.line("queue", "replay_rate"), "queue.replay_rate", "must be a positive number of events per second, such as 50 or 0.5, got %v", q.ReplayRate)
	}
}

// checkDelivery validates route i's delivery mode and, on a queue route,
// the queue settings and how the route's other settings fit the queue.
// That a queue route's key source must be covered by its signature is
// checked by checkKeySigned.
func (b *builder) checkDelivery(i int) {
	r := &b.cfg.Routes[i]
	switch r.Delivery {
	case DeliverySync:
		// Their defaults cannot be told from values written, so ask the
		// document.
		for _, f := range []string{"ack_status", "workers", "retry"} {
			if b.loc.written("routes", i, f) {
				b.routeError(i, []any{f}, f, "applies only to delivery: queue; remove it, or set delivery: queue")
			}
		}
		return
	case DeliveryQueue:
	default:
		b.routeError(i, []any{"delivery"}, "delivery", "must be sync or queue, got %q", clip(string(r.Delivery)))
		return
	}

	if r.AckStatus < 200 || r.AckStatus > 299 {
		b.routeError(i, []any{"ack_status"}, "ack_status", "must be a 2xx status, from 200 to 299, got %d", r.AckStatus)
	}
	if r.Workers < 1 || r.Workers > maxWorkers {
		b.routeError(i, []any{"workers"}, "workers", "must be from 1 to %d, got %d", maxWorkers, r.Workers)
	}
	rt := &r.Retry
	if rt.MaxAttempts < 1 || rt.MaxAttempts > maxRetryAttempts {
		b.routeError(i, []any{"retry", "max_attempts"}, "retry.max_attempts", "must be from 1 to %d (every try, the first included), got %d", maxRetryAttempts, rt.MaxAttempts)
	}
	if rt.Initial <= 0 {
		b.routeError(i, []any{"retry", "initial"}, "retry.initial", "must be positive, got %v", rt.Initial)
	}
	switch {
	case rt.Max <= 0:
		b.routeError(i, []any{"retry", "max"}, "retry.max", "must be positive, got %v", rt.Max)
	case rt.Initial > 0 && rt.Max < rt.Initial:
		b.routeError(i, []any{"retry", "max"}, "retry.max", "%v is shorter than retry.initial (%v); it bounds every delay, the first included", rt.Max, rt.Initial)
	}

	if r.Dedupe.Mode == ModeOff {
		b.routeError(i, []any{"delivery"}, "delivery", "queue needs dedupe.mode: enforce or shadow (dedupe.mode is off): the queue keeps one entry per key")
	}
	if !r.Idempotency.Required {
		b.routeError(i, []any{"delivery"}, "delivery", "queue needs idempotency.required: true: a delivery without a key could not be queued once, each copy would be queued and forwarded")
	}
	if strings.EqualFold(strings.TrimSpace(r.Verify.Scheme), verify.SchemeSlack) {
		b.warn(b.routeLine(i, "delivery"), r.Name, fmt.Sprintf(
			"delivery: Slack's url_verification handshake needs the upstream's answer now; a queue route answers %d instead", r.AckStatus))
	}
}

// checkQueueRoutes checks the queue routes against the queue backend
// (the names of their Kafka topics) and warns about the top-level
// settings that they do not follow.
func (b *builder) checkQueueRoutes() {
	if b.cfg.Queue.Backend == QueueKafka {
		b.checkKafkaRoutes()
	}
	if b.cfg.Store.OnError != OnErrorForward {
		return
	}
	var names []string
	for i := range b.cfg.Routes {
		if r := &b.cfg.Routes[i]; r.Queued() {
			names = append(names, clip(r.Name))
		}
	}
	if len(names) == 0 {
		return
	}
	b.warnAt(b.line("store", "on_error"), "store.on_error", fmt.Sprintf(
		"forward does not apply to queue routes (%s): they answer 503 while the queue backend is unreachable", strings.Join(names, ", ")))
}
