package store

import (
	"context"
	"fmt"
)

// resetChannel is the pub/sub channel on which an operator's key reset
// reaches every gateway instance sharing the Redis.
func (r *Redis) resetChannel() string { return r.prefix + "webhook_reset" }

// PublishReset tells every instance subscribed with SubscribeResets that key
// (already "route:key") was forgotten, so their local windows stop
// replaying it at once instead of when their window runs out.
func (r *Redis) PublishReset(ctx context.Context, key string) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.client.Publish(ctx, r.resetChannel(), key).Err(); err != nil {
		return fmt.Errorf("store: redis publish reset: %w: %v", ErrUnavailable, err)
	}
	return nil
}

// SubscribeResets calls forget with every key reset by any instance until
// ctx is done. The subscription reconnects by itself after a Redis outage;
// a reset published while this instance was cut off is missed, and its
// window forgets the key when the window runs out (dedupe.window).
func (r *Redis) SubscribeResets(ctx context.Context, forget func(key string)) {
	ps := r.client.Subscribe(ctx, r.resetChannel())
	go func() {
		defer ps.Close()
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				forget(m.Payload)
			}
		}
	}()
}
