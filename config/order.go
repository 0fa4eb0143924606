package config

import (
	"strings"

	"github.com/clawgate/clawgate/idkey"
)

// Order delivers a queue route's events one at a time per object: events
// with the same By value are delivered in the order the gateway
// acknowledged them (a sequence per value taken in the same step as the
// event is stored, so it holds across instances). While one is being
// tried or waits for its retry, the later events of its value wait;
// other values go on in parallel. An event without a By value is
// delivered unordered (webhook_queue_unordered_total counts it).
type Order struct {
	// By is where an event's object comes from: a key source, json:PATH,
	// header:NAME or query:PARAM, such as "json:data.object.id". Required
	// when order is written; empty (the default, order not written): no
	// order.
	By string `yaml:"by"`
	// Stale, when set, skips an event older than one already delivered for
	// the same By value: a key source (json:, header:, query:) whose value
	// is a number (such as Stripe's created) or an RFC 3339 time. Such an
	// event is not delivered: its key is finished with a 200 answer of
	// {"status":"skipped","reason":"stale"} and it is counted in
	// webhook_queue_skipped_total. Empty (the default): nothing is
	// skipped. An event without a Stale value is never skipped.
	Stale string `yaml:"stale"`
	// OnDead is what a dead-lettered event does to the later events of
	// its value: continue (the default) lets the next one go; hold keeps
	// them waiting until the dead event is replayed and delivered, or
	// purged.
	OnDead OnDead `yaml:"on_dead"`
}

// OnDead is order.on_dead.
type OnDead string

// order.on_dead values.
const (
	OnDeadContinue OnDead = "continue"
	OnDeadHold     OnDead = "hold"
)

// Ordered reports whether the route orders its events (order.by set).
func (r *Route) Ordered() bool { return r.OrderBy != nil }

// orderSourceKinds are the key sources order.by and order.stale take.
const orderSourceKinds = "json:, header: or query:"

// parseOrderSource compiles one order source: a single json:, header: or
// query: key source.
func parseOrderSource(src string) (*idkey.KeySpec, string) {
	src = strings.TrimSpace(src)
	kind, _, _ := strings.Cut(src, ":")
	switch kind {
	case idkey.KindJSON, idkey.KindHeader, idkey.KindQuery:
	default:
		return nil, "must be a " + orderSourceKinds + " source, got " + quoteClip(src)
	}
	k, err := idkey.ParseKey([]string{src})
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "dedupe: ")
	}
	return k, ""
}

func quoteClip(s string) string { return `"` + clip(s) + `"` }

// checkOrder validates route i's order block, compiling its sources.
func (b *builder) checkOrder(i int) {
	r := &b.cfg.Routes[i]
	r.OrderBy, r.OrderStale = nil, nil
	if !b.loc.written("routes", i, "order") {
		return
	}
	o := &r.Order
	bad := false
	if !r.Queued() {
		b.routeError(i, []any{"order"}, "order", "applies only to delivery: queue (a sync route forwards each delivery while the provider waits); remove it, or set delivery: queue")
		bad = true
	}
	switch o.OnDead {
	case OnDeadContinue, OnDeadHold:
	case "":
		o.OnDead = DefaultOrderOnDead
	default:
		b.routeError(i, []any{"order", "on_dead"}, "order.on_dead", "must be continue or hold, got %q", clip(string(o.OnDead)))
		bad = true
	}
	var by, stale *idkey.KeySpec
	if o.By == "" {
		b.routeError(i, []any{"order"}, "order.by", "is required: the key source of the object whose events are delivered in order, such as json:data.object.id (remove order for none)")
		bad = true
	} else if k, msg := parseOrderSource(o.By); msg != "" {
		b.routeError(i, []any{"order", "by"}, "order.by", "%s", msg)
		bad = true
	} else {
		by = k
	}
	if o.Stale != "" {
		if k, msg := parseOrderSource(o.Stale); msg != "" {
			b.routeError(i, []any{"order", "stale"}, "order.stale", "%s", msg)
			bad = true
		} else {
			stale = k
		}
	}
	if !bad {
		r.OrderBy, r.OrderStale = by, stale
	}
}
