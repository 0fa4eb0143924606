package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
)

// finishes reports whether an upstream status settles the key:
// 2xx, and 4xx other than 408, 409, 425 and 429. Anything else (5xx, those
// four, 1xx/3xx) releases the lock so the provider's retry goes through.
func finishes(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status >= 400 && status < 500:
		return status != 408 && status != 409 && status != 425 && status != 429
	}
	return false
}

// forward sends the one copy upstream and settles the key with the
// answer. token is the lock owner's token, or "" when this copy holds no
// lock (unkeyed, dedupe off, shadow duplicates, store down with on_error:
// forward): then the key's state is left alone.
func (g *Gateway) forward(d *delivery, token string) error {
	rt := d.rt
	if token != "" {
		g.held.Store(d.scoped, token)
		defer g.held.Delete(d.scoped)
	}
	out := Outbound{
		In:          d.r,
		Body:        d.body,
		PathQuery:   rt.upstreamURI(d.r, d.path),
		Key:         d.key,
		Attempt:     d.attempt,
		RequestID:   d.reqID,
		Traceparent: d.trace,
		Timeout:     rt.Timeout,
		TrustClient: d.t.trusted(d.r.RemoteAddr),
	}
	t0 := time.Now()
	ans, err := rt.upstream.Forward(d.r.Context(), &out)
	rt.m.Upstream(time.Since(t0).Seconds())
	// Settling the key must survive the caller hanging up.
	ctx := context.WithoutCancel(d.r.Context())
	if err != nil {
		if token != "" {
			g.release(ctx, d, token, releaseReason(err))
		}
		return err
	}
	defer ans.Release()
	status := ans.StatusCode()
	switch {
	case token != "" && finishes(status):
		// From here on the lock must not be released at shutdown: the
		// upstream took the event.
		g.held.Delete(d.scoped)
		g.finish(ctx, d, token, ans)
	case token != "":
		g.release(ctx, d, token, "upstream_status")
	case d.localOnly && finishes(status):
		g.cache.Add(d.scoped, outcomeOf(d, ans), d.attempt, d.gen)
	}
	g.armWrite(d)
	h := d.w.Header()
	ans.CopyHeader(h)
	h.Set("X-Request-Id", d.reqID)
	d.w.WriteHeader(status)
	d.w.Write(ans.Body())
	d.status = status
	if d.outcome == "" {
		d.outcome = metrics.OutcomeForwarded
	}
	return nil
}

// finish records the key as finished, for the route's retention, and adds
// the outcome to the local window. A body over replay_body_limit is not
// kept: its replays carry the status alone.
//
// Finish is the step that makes the key's fate durable: if it never lands,
// the lock expires after lock_ttl with no record behind it and the next
// copy is forwarded again. So a failed Finish is tried again at once a few
// times, and then, after the answer went out, in the background for as
// long as the lock can still be this delivery's (a Redis restart takes
// about a second). The finish script checks the token, so a repeat after a
// success that timed out changes nothing; a lock that vanished with a Redis
// that lost its data is recorded all the same unless another copy holds
// the key.
func (g *Gateway) finish(ctx context.Context, d *delivery, token string, ans Answer) {
	out := outcomeOf(d, ans)
	f := pendingFinish{g: g, rt: d.rt, scoped: d.scoped, key: d.key, reqID: d.reqID,
		token: token, out: out, deadline: d.lockDeadline.Add(-finishMargin)}
	err := f.try(ctx)
	retried := false
	for n := 1; retryableFinish(err) && n < finishTries; n++ {
		time.Sleep(time.Duration(n) * 25 * time.Millisecond)
		err = f.try(ctx)
		retried = true
	}
	switch {
	case errors.Is(err, store.ErrNotOwner) && !retried:
		// The lock outlived lock_ttl and another copy holds or finished
		// the key: leave the store alone.
		d.rt.m.LockReleased("expired")
	case errors.Is(err, store.ErrNotOwner):
		// An earlier try that timed out had in fact finished the key.
	case err != nil:
		g.finishLater(f)
	}
	d.keyDone = true
	g.cache.Add(d.scoped, out, d.attempt, d.gen)
}

// finishTries bounds the attempts at recording a finished key before the
// answer is written; later ones run in the background.
const finishTries = 4

// finishMargin is how long before the lock's expiry the background tries
// stop: the last one must reach the store while the lock (and a reset's
// tombstone, which lives as long) can still be there, whatever the store's
// own call deadline (500 ms for Redis). Route timeouts leave 3 s of
// lock_ttl, so this leaves the background at least 2 s.
const finishMargin = time.Second

func retryableFinish(err error) bool { return err != nil && !errors.Is(err, store.ErrNotOwner) }

// pendingFinish is a finished key not yet recorded in the store.
type pendingFinish struct {
	g        *Gateway
	rt       *route
	scoped   string
	key      string
	reqID    string
	token    string
	out      store.Outcome
	deadline time.Time // when to stop trying: finishMargin before the lock's expiry
}

func (f *pendingFinish) try(ctx context.Context) error {
	err := f.g.store.Finish(ctx, f.scoped, f.token, f.out, f.rt.Retention)
	if retryableFinish(err) {
		f.g.metrics.StoreErrors.WithLabelValues("finish").Inc()
		f.g.log.LogAttrs(ctx, slog.LevelError, "store error", slog.String("op", "finish"),
			slog.String("route", f.rt.Name), slog.String("key", f.key),
			slog.String("request_id", f.reqID), slog.String("error", err.Error()))
	}
	return err
}

// finishLater keeps trying f in the background, with growing pauses,
// until it is recorded, another copy turns out to hold the key, the lock's
// deadline passes, or the gateway is closed (Close waits for it first).
func (g *Gateway) finishLater(f pendingFinish) {
	g.pending.Add(1)
	f.rt.m.FinishDeferred("deferred")
	go func() {
		defer g.pending.Done()
		pause := 50 * time.Millisecond
		for {
			wait := min(pause, time.Until(f.deadline))
			if wait <= 0 {
				break
			}
			select {
			case <-g.stop:
				f.rt.m.FinishDeferred("gave_up")
				g.logUnrecorded(&f, "the gateway stopped")
				return
			case <-time.After(wait):
			}
			err := f.try(context.Background())
			switch {
			case err == nil:
				f.rt.m.FinishDeferred("recorded")
				return
			case errors.Is(err, store.ErrNotOwner):
				f.rt.m.FinishDeferred("not_owner")
				return
			}
			pause = min(2*pause, time.Second)
		}
		f.rt.m.FinishDeferred("gave_up")
		g.logUnrecorded(&f, "the lock's lifetime ran out")
	}()
}

func (g *Gateway) logUnrecorded(f *pendingFinish, why string) {
	g.log.LogAttrs(context.Background(), slog.LevelError,
		"could not record a finished key before "+why+"; the next copy may be forwarded again",
		slog.String("route", f.rt.Name), slog.String("key", f.key), slog.String("request_id", f.reqID))
}

// outcomeOf copies what a replay of ans needs.
func outcomeOf(d *delivery, ans Answer) store.Outcome {
	out := store.Outcome{Status: ans.StatusCode(), Fingerprint: d.fp}
	if b := ans.Body(); int64(len(b)) <= int64(d.t.cfg.Dedupe.ReplayBodyLimit) {
		out.ContentType = ans.ContentType()
		out.Body = append([]byte(nil), b...)
	}
	return out
}

// release drops the lock so the provider's next retry is forwarded.
func (g *Gateway) release(ctx context.Context, d *delivery, token, reason string) {
	err := g.store.Release(ctx, d.scoped, token)
	switch {
	case errors.Is(err, store.ErrNotOwner):
		d.rt.m.LockReleased("expired")
	case err != nil:
		g.storeError("release", d, err)
	default:
		d.rt.m.LockReleased(reason)
	}
}

func releaseReason(err error) string {
	switch statusOf(err).status {
	case http.StatusGatewayTimeout:
		return "timeout"
	case StatusClientClosed:
		return "client_closed"
	}
	return "unreachable"
}
