package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
)

// The delivery listener has two front doors (config.Server): the tests
// that send HTTP to it run on both, as subtests named "nethttp" and
// "fasthttp" (doortest.ForEach), and start their gateway with the door
// the subtest's name says (doorYAML, withDoor).

// withDoor is the config y (top-level YAML, without a server key) with
// its front door set to k.
func withDoor(k config.ServerKind, y string) string {
	return fmt.Sprintf("server: %q\n", string(k)) + strings.TrimLeft(y, "\n")
}

// doorYAML is y on the front door the test runs on (doorOf).
func doorYAML(tb testing.TB, y string) string { return withDoor(doortest.Of(tb), y) }

// checkDoor fails the test unless s serves deliveries on the front door
// the test runs on: a config whose server key was lost would otherwise
// run every "fasthttp" subtest on net/http.
func checkDoor(tb testing.TB, s *Server) {
	tb.Helper()
	want := doortest.Of(tb)
	if s.cfg.Server != want {
		tb.Fatalf("the gateway runs with server: %q, want %q", s.cfg.Server, want)
	}
	// The door's concrete type names its kind (proxy's httpDoor, fastDoor).
	got := fmt.Sprintf("%T", s.door)
	if fast := strings.Contains(strings.ToLower(got), "fast"); fast != (want == config.ServerFastHTTP) {
		tb.Fatalf("the delivery listener is served by %s, want the %s front door", got, want)
	}
}

// heldUpstream records the deliveries it receives and, while held,
// keeps each one waiting until released (or the gateway hangs up).
type heldUpstream struct {
	srv     *httptest.Server
	arrived chan struct{} // one value per delivery received
	gate    chan struct{} // closed by release
	release func()
	mu      sync.Mutex
	reqs    []upstreamRequest
}

func newHeldUpstream(t *testing.T) *heldUpstream {
	t.Helper()
	u := &heldUpstream{arrived: make(chan struct{}, 16), gate: make(chan struct{})}
	var once sync.Once
	u.release = func() { once.Do(func() { close(u.gate) }) }
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := recordRequest(r)
		u.mu.Lock()
		u.reqs = append(u.reqs, got)
		u.mu.Unlock()
		u.arrived <- struct{}{}
		select {
		case <-u.gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"upstream":"ok"}`)
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(u.release) // runs first: no handler is left waiting
	return u
}

func (u *heldUpstream) received() []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamRequest(nil), u.reqs...)
}

// doorRouteYAML is a gateway with one sync route, orders on
// /webhook/order in front of upstream, keyed on Idempotency-Key.
func doorRouteYAML(upstream string) string {
	return strings.Replace(baseYAML, "http://127.0.0.1:9", upstream, 1)
}

// rawDelivery is a delivery to the orders route with key, as written on
// the wire.
func rawDelivery(key string) string {
	body := `{"id":"` + key + `"}`
	return "POST /webhook/order HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: " + key +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// readEnd reads c until it ends, for at most bound, and says how: nil
// when the peer closed it (EOF or reset), the timeout otherwise; n is the
// number of bytes read on the way.
func readEnd(c net.Conn, bound time.Duration) (n int64, err error) {
	c.SetReadDeadline(time.Now().Add(bound))
	n, err = io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return n, err
	}
	return n, nil
}

// Shutdown drains: a delivery in flight when it starts (the upstream
// holds it) is still answered 200 and forwarded once, and Shutdown
// waits for it; meanwhile new connections are refused and an idle
// keep-alive connection is closed without an answer. On each front door.
func TestShutdownDrainsTheDeliveryInFlight(t *testing.T) {
	doortest.ForEach(t, testShutdownDrainsTheDeliveryInFlight)
}

func testShutdownDrainsTheDeliveryInFlight(t *testing.T) {
	up := newHeldUpstream(t)
	in := startFile(t, doorRouteYAML(up.srv.URL), nil)
	addr := in.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial before the shutdown: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}

	// A keep-alive connection, answered once (no route: 404), then idle.
	idle := dial()
	if _, err := io.WriteString(idle, "GET /nowhere HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatalf("the idle connection's first answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Close {
		t.Fatalf("the idle connection's first answer: %d, close %v; want 404 on a kept connection", resp.StatusCode, resp.Close)
	}

	// The delivery in flight: at the upstream, held there.
	busy := dial()
	if _, err := io.WriteString(busy, rawDelivery("drain-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the delivery never reached the upstream")
	}

	stopped := make(chan struct{})
	go func() { in.stop(10 * time.Second); close(stopped) }()

	// New connections are refused once the listener is closed.
	qEventually(t, 5*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, func() string { return "the delivery listener still accepts connections after Shutdown started" })
	// The idle connection is closed, without an answer.
	if n, err := readEnd(idle, 5*time.Second); err != nil || n != 0 {
		t.Errorf("the idle keep-alive connection after Shutdown started: %d bytes read, then %v; want it closed without an answer", n, err)
	}
	select {
	case <-stopped:
		t.Fatal("Shutdown returned while a delivery was in flight")
	default:
	}

	up.release()
	br := bufio.NewReader(busy)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the delivery in flight was not answered: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"upstream":"ok"}` {
		t.Fatalf("the delivery in flight: %d %q, want 200 with the upstream's answer", resp.StatusCode, body)
	}
	// Nothing more is served on a draining connection: it ends after
	// the answer.
	if n, err := io.Copy(io.Discard, br); n != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("after the drained answer: %d more bytes, then %v; want the connection closed", n, err)
	}
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("Shutdown did not return once the delivery in flight was answered")
	}
	if reqs := up.received(); len(reqs) != 1 || string(reqs[0].Body) != `{"id":"drain-1"}` {
		t.Errorf("the upstream received %d deliveries %v, want drain-1 once", len(reqs), reqs)
	}
	if strings.Contains(in.log.String(), "grace period over") {
		t.Errorf("Shutdown cut the delivery instead of draining it:\n%s", in.log)
	}
}

// A TLS listener serves deliveries on each front door: fasthttp speaks
// HTTP/1.1 over TLS (its ALPN offers only http/1.1), net/http may
// negotiate HTTP/2. Two deliveries share one connection, and the
// upstream learns they came over TLS (X-Forwarded-Proto: https).
func TestTLSServesDeliveries(t *testing.T) { doortest.ForEach(t, testTLSServesDeliveries) }

func testTLSServesDeliveries(t *testing.T) {
	up := newHeldUpstream(t)
	up.release()
	y := strings.Replace(doorRouteYAML(up.srv.URL), `listen: "127.0.0.1:0"`, `listen: "127.0.0.1:0"
tls: { cert_file: tls.crt, key_file: tls.key }`, 1)
	var certPEM []byte
	in := startFile(t, y, func(dir string) {
		writeCert(t, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), "door")
		var err error
		if certPEM, err = os.ReadFile(filepath.Join(dir, "tls.crt")); err != nil {
			t.Fatal(err)
		}
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("the test certificate does not parse")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "https://" + in.Addr().String() + "/webhook/order"
	var conns []string
	for _, key := range []string{"tls-1", "tls-2"} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"id":"`+key+`"}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		var local string
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { local = i.Conn.LocalAddr().String() },
		}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s over TLS: %v", key, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		conns = append(conns, local)
		if resp.StatusCode != http.StatusOK || string(body) != `{"upstream":"ok"}` {
			t.Fatalf("%s over TLS: %d %q, want 200 with the upstream's answer", key, resp.StatusCode, body)
		}
		if resp.TLS == nil || !resp.TLS.HandshakeComplete {
			t.Fatalf("%s: not answered over TLS", key)
		}
		t.Logf("%s: %s, ALPN %q", key, resp.Proto, resp.TLS.NegotiatedProtocol)
		if doortest.Of(t) == config.ServerFastHTTP && (resp.ProtoMajor != 1 || resp.ProtoMinor != 1 || resp.TLS.NegotiatedProtocol != "http/1.1") {
			t.Errorf("%s on fasthttp: %s with ALPN %q, want HTTP/1.1 (http/1.1)", key, resp.Proto, resp.TLS.NegotiatedProtocol)
		}
	}
	if conns[0] != conns[1] {
		t.Errorf("the two deliveries went over two connections (%s, %s): the first was not kept alive", conns[0], conns[1])
	}
	reqs := up.received()
	if len(reqs) != 2 {
		t.Fatalf("the upstream received %d deliveries, want 2", len(reqs))
	}
	for i, r := range reqs {
		if want := fmt.Sprintf(`{"id":"tls-%d"}`, i+1); string(r.Body) != want || r.Header.Get("X-Forwarded-Proto") != "https" {
			t.Errorf("upstream delivery %d: body %q, X-Forwarded-Proto %q; want %s over https", i+1, r.Body, r.Header.Get("X-Forwarded-Proto"), want)
		}
		if bad := r.wellFramed(); bad != "" {
			t.Errorf("upstream delivery %d was not well framed: %s", i+1, bad)
		}
	}
}
