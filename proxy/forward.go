package proxy

import (
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verdict"
)

// forward sends the one copy upstream and settles the key with the
// answer. k is the delivery's hold on its key, or nil when this copy holds
// none (unkeyed, dedupe off, duplicates forwarded in shadow mode): then
// the key's state is left alone.
func (g *Gateway) forward(d *delivery, k *dedupe.Key) error {
	rt := d.rt
	// With tracing on, the upstream gets a traceparent naming the forward
	// span as its parent; otherwise the delivery's own.
	tp := d.trace
	_, fsp := g.step(d, d.sctx, spanForward, trace.SpanKindClient)
	if fsp != nil {
		tp = formatTraceparent(fsp.SpanContext())
	}
	req := &d.req
	fillRequest(req, d.reqHdr[:0], &d.in, rt.upstreamURI(&d.in, d.path), d.body, d.key, d.reqID, tp, d.t.trusted(d.in.remoteAddr))
	t0 := time.Now()
	rctx := d.in.context()
	ans, err := rt.upstream.Forward(rctx, req, d.attempt, rt.Timeout)
	d.forwarded, d.upstreamTime = true, time.Since(t0)
	rt.m.Upstream(d.upstreamTime.Seconds())
	// Settling the key must survive the caller hanging up.
	ctx := d.in.detached()
	if err != nil {
		g.reportTry(d, 0)
		endForward(fsp, d, req, 0, err)
		if k != nil {
			reason := releaseReason(err)
			_, ssp := g.step(d, d.sctx, spanSettle, trace.SpanKindInternal)
			k.Release(d.settleNote(ctx, 0), reason)
			endSettle(ssp, false, reason)
		}
		return err
	}
	d.out.up = ans // released at the delivery's end, after the answer is written
	status := ans.StatusCode()
	d.upstreamStatus = status
	g.reportTry(d, status)
	endForward(fsp, d, req, status, nil)
	if k != nil {
		_, ssp := g.step(d, d.sctx, spanSettle, trace.SpanKindInternal)
		if verdict.Classify(status).Finishes() {
			k.Finish(d.settleNote(ctx, status), outcomeOf(d, ans), d.attempt, rt.Retention)
			endSettle(ssp, true, "")
		} else {
			k.Release(d.settleNote(ctx, status), "upstream_status")
			endSettle(ssp, false, "upstream_status")
		}
	}
	// The release above happened before the answer is written: a caller
	// that is slow to read never holds the key.
	d.out.header = append(ans.AppendHeader(d.out.header), "X-Request-Id", d.reqID)
	d.out.status, d.out.body = status, ans.Body()
	d.status = status
	if d.outcome == "" {
		d.outcome = metrics.OutcomeForwarded
	}
	return nil
}

// outcomeOf copies what a replay of ans needs.
func outcomeOf(d *delivery, ans Answer) store.Outcome {
	return verdict.Capture(ans, int64(d.t.cfg.Dedupe.ReplayBodyLimit), d.fp)
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
