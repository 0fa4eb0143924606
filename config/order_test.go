package config

import (
	"net/http"
	"testing"
)

// An ordered queue route compiles its sources, on_dead defaults to
// continue, and a route without order is unordered.
func TestOrderCompiled(t *testing.T) {
	src := `
store: { backend: memory }
routes:
  - name: orders
    match: { path: /o }
    upstream: http://127.0.0.1:9000
    delivery: queue
    verify: { scheme: none }
    idempotency: { key: ["json:id"] }
    order:
      by: json:data.object.id
      stale: json:created
  - name: held
    match: { path: /h }
    upstream: http://127.0.0.1:9000
    delivery: queue
    verify: { scheme: none }
    order: { by: "header:X-Object", on_dead: hold }
  - name: plain
    match: { path: /p }
    upstream: http://127.0.0.1:9000
    delivery: queue
    verify: { scheme: none }
`
	cfg, err := Parse([]byte(src), "gateway.yaml", t.TempDir(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	o, h, p := &cfg.Routes[0], &cfg.Routes[1], &cfg.Routes[2]
	if !o.Ordered() || o.OrderStale == nil || o.Order.OnDead != OnDeadContinue {
		t.Fatalf("orders: ordered %v, stale %v, on_dead %q", o.Ordered(), o.OrderStale, o.Order.OnDead)
	}
	v, err := o.OrderBy.Derive(nil, "", []byte(`{"data":{"object":{"id":"sub_1"}},"created":17}`))
	if err != nil || v != "sub_1" {
		t.Fatalf("order.by derived %q, %v", v, err)
	}
	hdr := http.Header{"X-Object": {"o-9"}}
	if v, err := h.OrderBy.Derive(hdr, "", nil); err != nil || v != "o-9" || h.Order.OnDead != OnDeadHold || h.OrderStale != nil {
		t.Fatalf("held: %q %v %q", v, err, h.Order.OnDead)
	}
	if p.Ordered() || p.Order.OnDead != OnDeadContinue {
		t.Fatalf("plain: ordered %v, on_dead %q", p.Ordered(), p.Order.OnDead)
	}
}
