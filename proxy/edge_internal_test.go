package proxy

import (
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/clawgate/clawgate/config"
)

// SetClock makes g read the time from now (the clock Options.Now sets):
// rate limits and signatures are checked against it. Call it before the
// first delivery.
func SetClock(g *Gateway, now func() time.Time) { g.now = now }

func TestClientAddrWalksForwardedForFromTheRight(t *testing.T) {
	tbl := &table{trustedNets: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("2001:db8:ffff::/48"),
	}}
	for _, c := range []struct {
		name   string
		remote string
		xff    []string
		want   string // "" : the invalid Addr
	}{
		{"untrusted peer, no header", "192.0.2.9:5000", nil, "192.0.2.9"},
		{"untrusted peer's header is ignored", "192.0.2.9:5000", []string{"203.0.113.7"}, "192.0.2.9"},
		{"trusted peer, no header: the peer", "127.0.0.1:5000", nil, "127.0.0.1"},
		{"trusted peer: its entry", "127.0.0.1:5000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"forged entries left of the client are ignored", "127.0.0.1:5000", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"trusted proxies are skipped", "127.0.0.1:5000", []string{"198.51.100.1, 203.0.113.7, 10.1.2.3"}, "203.0.113.7"},
		{"several header lines are one list", "127.0.0.1:5000", []string{"198.51.100.1, 203.0.113.7", "10.1.2.3"}, "203.0.113.7"},
		{"all trusted: the left-most", "127.0.0.1:5000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"empty entries are skipped", "127.0.0.1:5000", []string{"203.0.113.7, ,", ""}, "203.0.113.7"},
		{"an entry with a port", "127.0.0.1:5000", []string{"203.0.113.7:4711"}, "203.0.113.7"},
		{"IPv6 with brackets and port", "127.0.0.1:5000", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{"IPv6 with brackets", "127.0.0.1:5000", []string{"[2001:db8::7]"}, "2001:db8::7"},
		{"IPv6 trusted proxy skipped", "[2001:db8:ffff::1]:443", []string{"2001:db8::7, 2001:db8:ffff::2"}, "2001:db8::7"},
		{"IPv4-mapped entry in IPv4 form", "127.0.0.1:5000", []string{"::ffff:203.0.113.7"}, "203.0.113.7"},
		{"IPv4-mapped peer is trusted", "[::ffff:127.0.0.1]:5000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"zone dropped", "127.0.0.1:5000", []string{"fe80::1%eth0"}, "fe80::1"},
		{"not an address ends the walk", "127.0.0.1:5000", []string{"203.0.113.7, unknown"}, ""},
		{"a host name is not an address", "127.0.0.1:5000", []string{"client.example.com"}, ""},
		{"unparsable peer", "@", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: c.remote, Header: http.Header{}, URL: &url.URL{}}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			in := httpInbound(r)
			got := tbl.clientAddr(&in)
			if c.want == "" {
				if got.IsValid() {
					t.Fatalf("got %v, want the invalid address", got)
				}
				return
			}
			if got != netip.MustParseAddr(c.want) {
				t.Fatalf("got %v, want %s", got, c.want)
			}
		})
	}
}

func TestTakeReportsTheWaitAndTakesNothingWhenRefused(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	lim := rate.NewLimiter(0.5, 1) // one every two seconds
	if _, ok := take(lim, t0); !ok {
		t.Fatal("first delivery refused")
	}
	wait, ok := take(lim, t0)
	if ok || wait != 2*time.Second {
		t.Fatalf("second: ok %v, wait %v; want refused, 2s", ok, wait)
	}
	// The refusal took no token: one second later the wait is one second.
	if wait, ok = take(lim, t0.Add(time.Second)); ok || wait != time.Second {
		t.Fatalf("after 1s: ok %v, wait %v; want refused, 1s", ok, wait)
	}
	if _, ok = take(lim, t0.Add(2*time.Second)); !ok {
		t.Fatal("refused after the wait")
	}
}

func TestRetryAfterSecondsIsWholeAndAtLeastOne(t *testing.T) {
	for wait, want := range map[time.Duration]int{
		time.Nanosecond:         1,
		100 * time.Millisecond:  1,
		time.Second:             1,
		1001 * time.Millisecond: 2,
		4 * time.Second:         4,
		1 << 62:                 int(^uint32(0) >> 1),
	} {
		if got := retryAfterSeconds(wait); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", wait, got, want)
		}
	}
}

func TestAdmitAllocatesNothingForAnAdmittedDelivery(t *testing.T) {
	rt := &route{
		Route:   &config.Route{AllowNets: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}},
		limiter: newLimiter(config.RateLimit{RPS: 1e9, Burst: 1e9, Clients: 10}),
	}
	r := &http.Request{RemoteAddr: "127.0.0.1:5000", Header: http.Header{}, URL: &url.URL{}}
	r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7, 10.0.0.1")
	tbl := &table{trustedNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}
	in := httpInbound(r)
	d := &delivery{in: in, t: tbl, rt: rt, start: time.Unix(1_700_000_000, 0)}
	g := &Gateway{}
	if n := testing.AllocsPerRun(100, func() {
		if err := g.admit(d); err != nil {
			t.Fatal(err)
		}
		if err := g.charge(d); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per admitted delivery", n)
	}
}
