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

// finishes reports whether an upstream status settles the key (step 10):
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

// forward sends the one copy upstream (step 9) and settles the key with the
// answer (step 10). token is the lock owner's token, or "" when this copy
// holds no lock (unkeyed, dedupe off, shadow duplicates, store down with
// on_error: forward): then the key's state is left alone.
func (g *Gateway) forward(d *delivery, token string) error {
	rt := d.rt
	if token != "" {
		g.held.Store(d.scoped, token)
		defer g.held.Delete(d.scoped)
	}
	out := Outbound{
		In:          d.r,
		Body:        d.body,
		PathQuery:   rt.upstreamURI(d.r),
		Key:         d.key,
		Attempt:     d.attempt,
		RequestID:   d.reqID,
		Traceparent: d.trace,
		Timeout:     rt.Timeout,
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
		g.finish(ctx, d, token, ans)
	case token != "":
		g.release(ctx, d, token, "upstream_status")
	case d.localOnly && finishes(status):
		g.cache.Add(d.scoped, outcomeOf(d, ans), d.attempt)
	}
	ans.CopyHeader(d.w.Header())
	d.w.WriteHeader(status)
	d.w.Write(ans.Body())
	d.status = status
	if d.outcome == "" {
		d.outcome = metrics.OutcomeForwarded
	}
	return nil
}

// finish stores the outcome for retention and in the local window. A body
// over replay_body_limit is not kept: its replays carry the status alone.
//
// Finish is the step that makes the key's fate durable: if it fails, the lock
// expires after lock_ttl with no record behind it, and a later retry would be
// forwarded again. So a failed Finish is tried again (the script checks the
// token, so a repeat after a success that timed out only finds the lock gone)
// before the answer is written.
func (g *Gateway) finish(ctx context.Context, d *delivery, token string, ans Answer) {
	out := outcomeOf(d, ans)
	err := g.store.Finish(ctx, d.scoped, token, out, d.t.cfg.Dedupe.Retention)
	retried := false
	for try := 1; err != nil && !errors.Is(err, store.ErrNotOwner) && try < finishTries; try++ {
		g.storeError("finish", d, err)
		time.Sleep(time.Duration(try) * 25 * time.Millisecond)
		err = g.store.Finish(ctx, d.scoped, token, out, d.t.cfg.Dedupe.Retention)
		retried = true
	}
	switch {
	case errors.Is(err, store.ErrNotOwner) && !retried:
		// The lock outlived lock_ttl and may be another delivery's now:
		// leave the store alone, as the contract's token check demands.
		d.rt.m.LockReleased("expired")
	case errors.Is(err, store.ErrNotOwner):
		// An earlier try that timed out had in fact finished the key.
	case err != nil:
		g.storeError("finish", d, err)
		g.log.LogAttrs(ctx, slog.LevelError, "could not record a finished key; a retry after lock_ttl may be forwarded again",
			slog.String("route", d.rt.Name), slog.String("key", d.key), slog.String("request_id", d.reqID))
	}
	g.cache.Add(d.scoped, out, d.attempt)
}

// finishTries bounds the attempts at recording a finished key.
const finishTries = 4

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
