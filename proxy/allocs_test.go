package proxy_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/clawgate/clawgate/proxy"
)

// fastDelivery returns a function delivering body through gw's fasthttp
// door (the handler given a parsed request, as benchDeliveries does) under
// the key key() returns, failing t unless the answer is 200. The request
// context and its connection are made once, so the function's allocations
// are the door's and the gateway's.
func fastDelivery(t *testing.T, gw *proxy.Gateway, body []byte, key func() string) func() {
	sig := sign(body)
	var c fasthttp.RequestCtx
	conn := &benchConn{}
	return func() {
		c.Init2(conn, nil, false)
		r := &c.Request
		r.Header.SetMethod(http.MethodPost)
		r.SetRequestURI("/webhook/order")
		r.Header.SetHost("gw")
		r.Header.Set("X-Signature", sig)
		r.Header.Set("Idempotency-Key", key())
		r.SetBody(body)
		gw.ServeFastHTTP(&c)
		if st := c.Response.StatusCode(); st != http.StatusOK {
			t.Fatalf("status %d, want 200", st)
		}
		c.Request.Reset()
		c.Response.Reset()
	}
}

// TestDuplicateFastAllocs pins the allocations of a duplicate answered from
// the local window through the fasthttp door (verify, key, fingerprint,
// window lookup, replayed answer, access line, metrics): 2 today (the one
// string the request view is cut from, and the delivery's own strings: a
// new traceparent, the route-scoped key, the fingerprint's hex digits);
// it fails above 4.
func TestDuplicateFastAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	gw, body := benchGateway(t)
	prime(gw, body)
	deliver := fastDelivery(t, gw, body, func() string { return "evt_dup" })
	deliver() // the pools' first fill
	if n := testing.AllocsPerRun(200, deliver); n > 4 {
		t.Fatalf("a duplicate on the fasthttp door allocates %.1f objects, want at most 4", n)
	}
}

// TestUniqueForwardFastAllocs pins the allocations of a new key forwarded
// through the fasthttp door to an upstream and finished: 15 today,
// all the gateway's (the upstream is a fasthttp server in this process,
// which allocates nothing per request once its connection is open, and
// the keys are made before the count); it fails above 40.
func TestUniqueForwardFastAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items: allocation counts mean nothing")
	}
	if testing.Short() {
		t.Skip("forwards 300 deliveries over loopback")
	}
	gw, body := benchGateway(t)
	const runs = 200
	keys := make([]string, runs+50)
	for i := range keys {
		keys[i] = "evt_alloc_" + strconv.Itoa(i)
	}
	next := 0
	deliver := fastDelivery(t, gw, body, func() string { next++; return keys[next-1] })
	for range 20 { // the pools' first fill and the upstream connection
		deliver()
	}
	if n := testing.AllocsPerRun(runs, deliver); n > 40 {
		t.Fatalf("a unique forward on the fasthttp door allocates %.1f objects, want at most 40", n)
	}
}
