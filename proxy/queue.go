package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verdict"
)

// Queue is where a delivery to a `delivery: queue` route is stored before
// it is acknowledged (queue.Manager).
type Queue interface {
	Enqueue(ctx context.Context, e queue.Entry) (queue.Ack, error)
}

// queued is step 6 for a queue route: the request the upstream will get
// is stored together with the key's claim, in one step, and only then
// acknowledged with the route's ack_status. A copy of an event still
// queued, retrying or dead-lettered gets the same answer, marked
// Idempotent-Replayed; one already delivered gets the upstream's stored
// answer; another payload under the same key gets 422. A queue that does
// not answer, or is full, gets 503 with Retry-After: nothing is
// acknowledged that is not stored. On a route with a replay guard the
// signed request is recorded first (guard.go). In shadow mode every copy
// enforce would answer itself is counted the same and queued as an event
// of its own (shadowCopy).
func (g *Gateway) queued(d *delivery) error {
	rt := d.rt
	if g.queue == nil {
		return fail(http.StatusServiceUnavailable, metrics.OutcomeError, "delivery queue unavailable", errNoQueue)
	}
	shadow := rt.Dedupe.Mode == config.ModeShadow
	// A copy of an event already delivered is answered from the local
	// window, like on a sync route.
	labels := dedupe.Labels{Route: rt.Name, Key: d.key, RequestID: d.reqID, Metrics: rt.m}
	if adm, ok := g.guard.Cached(d.scoped, d.fp, labels); ok {
		if shadow {
			d.attempt = adm.Attempts
			g.checkAttempts(d)
			return g.shadowCopy(d, adm.Layer, finishedOutcome(adm.Outcome.Fingerprint == d.fp))
		}
		return g.duplicate(d, adm)
	}
	switch {
	case g.readsSync:
	case g.sharedKeys:
		// One record for both modes: only a record of the earlier schema
		// (Redis' schema-1 sync records, read with the store's Peek) is
		// looked at, on a route that ran as a sync route. The memory
		// store keeps none: nothing is looked at.
		if g.peeks && g.otherMode(d) {
			if done, err := g.syncRecord(d); done {
				return err
			}
		}
	case !g.otherMode(d):
	default:
		if shadow {
			if done, err := g.syncRecord(d); done {
				return err
			}
		} else {
			release, done, err := g.syncHold(d)
			if done {
				return err
			}
			defer release()
		}
	}
	// The replay guard: the signed request is recorded under this key
	// before the event is stored (guard.go).
	if rt.digester != nil {
		if answered, err := g.guardQueued(d, labels); answered {
			return err
		}
	}
	ack, err := g.enqueue(d, d.key)
	if err != nil {
		return err
	}
	d.attempt = ack.Copies
	g.checkAttempts(d)
	switch ack.State {
	case queue.Enqueued:
		return g.ackQueued(d, ack.ID, false)
	case queue.Pending:
		same := ack.Fingerprint == d.fp
		if shadow {
			return g.shadowCopy(d, "store", finishedOutcome(same))
		}
		if !same {
			rt.m.Duplicate("store", metrics.OutcomeConflict)
			return errKeyReused
		}
		rt.m.Duplicate("store", metrics.OutcomeReplayed)
		return g.ackQueued(d, ack.ID, true)
	case queue.InFlight:
		if shadow {
			return g.shadowCopy(d, "store", metrics.OutcomeInFlight)
		}
		// Another copy is being stored this instant (Kafka: its record is
		// being produced): as for a copy in flight on a sync route.
		rt.m.Duplicate("store", metrics.OutcomeInFlight)
		se := fail(http.StatusConflict, metrics.OutcomeInFlight, "a delivery with this idempotency key is in progress", nil)
		se.retryAfter = 1
		return se
	case queue.Delivered:
		g.guard.Remember(d.scoped, ack.Outcome, ack.Copies, d.gen)
		if shadow {
			return g.shadowCopy(d, "store", finishedOutcome(ack.Outcome.Fingerprint == d.fp))
		}
		return g.finishedDuplicate(d, "store", &ack.Outcome)
	}
	return errFull()
}

// enqueue stores d in the queue under key (d's own, or a shadow copy's),
// for the upstream to get with d's key. err is the answer when the queue
// did not answer.
func (g *Gateway) enqueue(d *delivery, key string) (queue.Ack, error) {
	rt := d.rt
	// The URI is stored relative to the route's upstream: a reload that
	// moves the upstream sends the queued events to the new one, under
	// its base path (Send).
	req := newRequest(&d.in, rt.routeURI(&d.in, d.path), d.body, d.key, d.reqID, d.trace, d.t.trusted(d.in.remoteAddr))
	req.RouteRelative = true
	ctx := d.in.context()
	e := queue.Entry{Route: rt.Name, Key: key, Fingerprint: d.fp, Payload: req.AppendBinary(nil), FirstSeen: d.start}
	e.Order, e.Stale = orderOf(rt, &d.in, d.body)
	ack, err := g.queue.Enqueue(d.note(ctx), e)
	if err != nil {
		return ack, unavailable(ctx, queueUnavailable, err)
	}
	return ack, nil
}

// errFull is the answer of a queue at max_depth (or its DLQ at its bound).
func errFull() error {
	se := fail(http.StatusServiceUnavailable, metrics.OutcomeRejected, "delivery queue full", errQueueFull)
	se.retryAfter = 5
	return se
}

// finishedOutcome is how a copy of a finished or queued key is counted:
// replayed for the same payload, conflict for another.
func finishedOutcome(same bool) string {
	if same {
		return metrics.OutcomeReplayed
	}
	return metrics.OutcomeConflict
}

// shadowCopy is shadow mode on a queue route: a copy that enforce would
// have answered itself (a replay, 409, 422) is counted as enforce counts
// it, under layer and outcome, and then queued and delivered as an event
// of its own, under a key of its own (copyKey) so that it shares nothing
// in the ledger with the event it copies: its own 202, its own tries,
// its own place in the DLQ. The upstream gets it with the key it came
// with.
func (g *Gateway) shadowCopy(d *delivery, layer, outcome string) error {
	d.rt.m.Duplicate(layer, outcome)
	key, err := copyKey(d.key)
	if err != nil {
		return fail(http.StatusServiceUnavailable, metrics.OutcomeError, "delivery queue unavailable", err)
	}
	ack, err := g.enqueue(d, key)
	if err != nil {
		return err
	}
	if ack.State == queue.Enqueued {
		return g.ackQueued(d, ack.ID, false)
	}
	if ack.State == queue.Full {
		return errFull()
	}
	// A fresh random key the queue already knows: nothing is acknowledged.
	return fail(http.StatusServiceUnavailable, metrics.OutcomeError, "delivery queue unavailable",
		errors.New("shadow copy key already queued"))
}

// copyKey is the internal key a shadow copy of key is queued under: key,
// a unit separator (0x1f, which no idempotency key may hold, so it never
// meets a real key) and "shadow-" with 16 random hex digits.
func copyKey(key string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("proxy: shadow copy key: %w", err)
	}
	return key + "\x1fshadow-" + hex.EncodeToString(b[:]), nil
}

var (
	errNoQueue   = errors.New("no delivery queue configured")
	errQueueFull = errors.New("queue.max_depth reached")
)

// ackQueued writes the acknowledgement of a stored event.
func (g *Gateway) ackQueued(d *delivery, id string, replayed bool) error {
	body, _ := json.Marshal(struct {
		Status string `json:"status"`
		ID     string `json:"id"`
		Route  string `json:"route"`
		Key    string `json:"key"`
	}{"queued", id, d.rt.Name, d.key})
	d.out.header = append(d.out.header, "Content-Type", "application/json", "X-Request-Id", d.reqID)
	d.outcome = metrics.OutcomeQueued
	if replayed {
		d.out.header = append(d.out.header, "Idempotent-Replayed", "true")
		d.outcome = metrics.OutcomeReplayed
	}
	d.out.status, d.out.body = d.rt.AckStatus, body
	d.status = d.rt.AckStatus
	return nil
}

// Send implements queue.Sender: one try of a queued event, on the route
// as currently loaded (a reload's new upstream or timeout applies to the
// next try). The route's current upstream applies whole, base path
// included: events queued before a reload that moved it go to the new
// upstream's base path (events queued by versions that stored the full
// URI keep the base path they were queued with).
func (g *Gateway) Send(ctx context.Context, name string, payload []byte, attempt int64) queue.Result {
	rt := g.tbl.Load().byName[name]
	if rt == nil {
		return queue.Result{Err: errors.New("route " + name + " is no longer configured")}
	}
	req, err := DecodeRequest(payload)
	if err != nil {
		return queue.Result{Err: err}
	}
	if req.RouteRelative {
		req.URI, req.RouteRelative = rt.basePath+req.URI, false
	}
	t0 := time.Now()
	ans, err := rt.upstream.Forward(ctx, req, attempt, rt.Timeout)
	rt.m.Upstream(time.Since(t0).Seconds())
	if err != nil {
		return queue.Result{Err: err}
	}
	defer ans.Release()
	res := queue.Result{Status: ans.StatusCode()}
	if verdict.Classify(res.Status) == verdict.Success {
		res.Outcome = verdict.Capture(ans, int64(g.tbl.Load().cfg.Dedupe.ReplayBodyLimit), "")
	}
	if v := retryAfterHeader(ans); v > 0 {
		res.RetryAfter = v
	}
	return res
}

// retryAfterHeader reads an answer's Retry-After in seconds (the HTTP-date
// form is ignored: the route's own schedule applies).
func retryAfterHeader(ans Answer) time.Duration {
	var v string
	h := ans.AppendHeader(nil)
	for i := 0; i+1 < len(h); i += 2 {
		if h[i] == "Retry-After" {
			v = h[i+1]
			break
		}
	}
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(min(s, 86400)) * time.Second
}

// ModeHistory tells whether a route ran in the other delivery mode
// recently, on any instance sharing the store (control.Gate): its
// records may then hold finished keys of the route.
type ModeHistory interface {
	Announce(ctx context.Context, route string, queued bool, retention time.Duration) (time.Duration, error)
	OtherMode(ctx context.Context, route string, queued bool, retention time.Duration) (bool, error)
}

var _ ModeHistory = (*control.Gate)(nil)

// otherMode reports whether the delivery's route ran in the other mode
// recently enough for that mode's records to hold its key. When that
// cannot be told the answer is yes: the lookup then tells the store is
// down.
func (g *Gateway) otherMode(d *delivery) bool {
	other, err := g.modes.OtherMode(d.in.context(), d.rt.Name, d.rt.Queued(), d.rt.Retention)
	return other || err != nil
}

// announce records the delivery mode of each of cfg's routes before
// they serve, and waits, when a route ran in the other mode recently,
// until every instance reads the new one.
func (g *Gateway) announce(cfg *config.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wait time.Duration
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		w, err := g.modes.Announce(ctx, r.Name, r.Queued(), r.Retention)
		if err != nil {
			// One line, not one per route: the store is down for all.
			g.log.Warn("could not record the routes' delivery modes in the store; the other instances learn them once the store answers (every instance records them again each minute)", "route", r.Name, "error", err)
			break
		}
		wait = max(wait, w)
	}
	if wait > 0 {
		time.Sleep(wait)
	}
}

// syncRecord answers a copy, on a queue route that was a sync route, of
// an event the sync path finished (its stored answer, or 422 for another
// payload) or is forwarding (409), from the store's record; done false
// when the store has neither and the event is queued as usual. A store
// that does not answer gets 503: it cannot be told whether the event was
// delivered.
func (g *Gateway) syncRecord(d *delivery) (done bool, err error) {
	p, ok := g.store.(store.Peeker)
	if !ok {
		return false, nil
	}
	state, out, err := p.Peek(d.in.context(), d.scoped)
	if err != nil {
		return true, unavailable(d.in.context(), storeUnavailable, err)
	}
	shadow := d.rt.Dedupe.Mode == config.ModeShadow
	switch state {
	case store.Finished:
		g.guard.Remember(d.scoped, out, 1, d.gen)
		if shadow {
			return true, g.shadowCopy(d, "store", finishedOutcome(out.Fingerprint == d.fp))
		}
		return true, g.finishedDuplicate(d, "store", &out)
	case store.InFlight:
		if shadow {
			return true, g.shadowCopy(d, "store", metrics.OutcomeInFlight)
		}
		return true, g.inFlightDuplicate(d, "store", time.Second)
	}
	return false, nil
}

// syncHold claims the key in the sync store before a queue route that
// ran as a sync route recently queues its event (the store does not read
// the sync record in the enqueue's own step: Cluster, Kafka, memory). A
// key the sync path finished gets its stored answer, one it is
// forwarding 409 (done true). Otherwise the hold keeps every instance
// still running the route as a sync route from forwarding the key while
// this one queues it: such an instance claims the key only after release
// and then finds the queue's record (queueRecord). Claiming first and
// looking second on both sides means one of two copies arriving at once
// always sees the other.
func (g *Gateway) syncHold(d *delivery) (release func(), done bool, err error) {
	labels := dedupe.Labels{Route: d.rt.Name, Key: d.key, RequestID: d.reqID, Metrics: d.rt.m}
	k, adm := g.guard.Open(d.scoped, d.fp, d.gen, d.t.cfg.Dedupe.LockTTL, labels)
	if adm.Verdict != dedupe.Proceed {
		return nil, true, g.duplicate(d, adm)
	}
	ctx := d.in.context()
	adm = k.Claim(ctx)
	switch adm.Verdict {
	case dedupe.Proceed:
	case dedupe.Unavailable:
		k.Done()
		return nil, true, unavailable(ctx, storeUnavailable, adm.Err)
	default:
		k.Done()
		return nil, true, g.duplicate(d, adm)
	}
	return func() {
		k.Release(context.WithoutCancel(ctx), "queued")
		k.Done()
	}, false, nil
}

// QueueRecords reads a queue route's key as the queue's backend holds it,
// also after a reload turned the route into a sync one (queue.Manager's
// Record).
type QueueRecords interface {
	Record(ctx context.Context, route, key string) (queue.KeyState, error)
}

// queueRecord answers, on a sync route that was a queue route, a copy of
// an event the queue delivered or dead-lettered, from the queue's record;
// k is the store claim the copy just won. Delivered: the stored answer,
// replayed, and recorded in the store under k, so that later copies are
// answered by the store. Dead-lettered: the claim is released and the
// copy gets what the queue route answered it, the acknowledgement marked
// Idempotent-Replayed (422 for another payload): it is not forwarded. done
// false when the queue holds neither (the copy is forwarded as usual). A
// queue backend that does not answer gets 503: it cannot be told whether
// the event was delivered.
func (g *Gateway) queueRecord(d *delivery, k *dedupe.Key) (done bool, err error) {
	qr, ok := g.queue.(QueueRecords)
	if !ok {
		return false, nil
	}
	ctx := d.in.context()
	ks, err := qr.Record(ctx, d.rt.Name, d.key)
	if err != nil {
		k.Release(context.WithoutCancel(ctx), "unreachable")
		return true, unavailable(ctx, queueUnavailable, err)
	}
	switch ks.State {
	case queue.StateFinished:
		out := ks.Outcome
		if out.Fingerprint == "" {
			out.Fingerprint = ks.Fingerprint
		}
		k.Finish(context.WithoutCancel(ctx), out, d.attempt, d.rt.Retention)
		return true, g.finishedDuplicate(d, "store", &out)
	case queue.StateQueued, queue.StateDeadLettered:
		// Still to be delivered by the queue (an instance that runs the
		// route as a queue route), or dead-lettered: acknowledged as the
		// queue route would, not forwarded.
		reason := "dead_lettered"
		if ks.State == queue.StateQueued {
			reason = "queued"
		}
		k.Release(context.WithoutCancel(ctx), reason)
		same := ks.Fingerprint == d.fp
		d.rt.m.Duplicate("store", finishedOutcome(same))
		if !same {
			return true, errKeyReused
		}
		return true, g.ackQueued(d, ks.EventID, true)
	}
	return false, nil
}

// orderOf is an event's order value and stale value on an ordered route
// (order.by, order.stale): "" when the route is unordered, or the event
// has no value (delivered unordered, and counted by the queue) or one
// that is not a key (too long, control characters). A stale value that is
// neither a number nor an RFC 3339 time is none: the event is never
// skipped.
func orderOf(rt *route, in *inbound, body []byte) (order, stale string) {
	if rt.OrderBy == nil {
		return "", ""
	}
	order, err := rt.OrderBy.Derive(in.header, in.rawQuery, body)
	if err != nil {
		return "", ""
	}
	if rt.OrderStale != nil {
		if raw, err := rt.OrderStale.Derive(in.header, in.rawQuery, body); err == nil {
			stale, _ = queue.StaleValue(raw)
		}
	}
	return order, stale
}
