package proxy

import (
	"context"
	"errors"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// Upstream sends one delivery to a route's service. It is the one seam
// between the gateway and its HTTP client, so the client stays swappable and
// measurable (see docs/benchmarks.md).
type Upstream interface {
	// Forward sends req as try number attempt, waiting at most timeout,
	// and returns the service's answer, or an error wrapping
	// ErrUpstreamTimeout or ErrUpstreamUnreachable. It never resends. The
	// caller releases the answer. It keeps nothing of req past its
	// return: the caller reuses it.
	Forward(ctx context.Context, req *Request, attempt int64, timeout time.Duration) (Answer, error)
}

// Answer is an upstream response, valid until Release.
type Answer interface {
	StatusCode() int
	ContentType() string
	Body() []byte
	// AppendHeader appends the response headers to dst as name, value
	// pairs, without the hop-by-hop ones, Content-Length (the front door
	// sets it) and X-Request-Id (the gateway answers with its own).
	AppendHeader(dst []string) []string
	Release()
}

var (
	// ErrUpstreamTimeout: the upstream did not answer within the route's timeout (504).
	ErrUpstreamTimeout = errors.New("upstream timed out")
	// ErrUpstreamUnreachable: no connection or a broken answer (502).
	ErrUpstreamUnreachable = errors.New("upstream unreachable")
)

// fastUpstream forwards with fasthttp's pooled HostClient: on this workload it
// reaches a higher share of Nginx's throughput than net/http's Transport.
type fastUpstream struct {
	hc   *fasthttp.HostClient
	host string // Host header sent upstream
}

var _ Upstream = (*fastUpstream)(nil)

// NewFastUpstream returns the default Upstream for an http(s) base URL.
func NewFastUpstream(u *url.URL) Upstream {
	addr := hostPort(u)
	return &fastUpstream{
		host: u.Host,
		hc: &fasthttp.HostClient{
			Addr:                     addr,
			IsTLS:                    u.Scheme == "https",
			NoDefaultUserAgentHeader: true,
			DisablePathNormalizing:   true,
			MaxConns:                 4096,
			// Below the keep-alive timeouts of common upstream servers
			// (Node's 5 s), so a pooled connection is rarely stale.
			MaxIdleConnDuration: 4 * time.Second,
			// Never resend: a delivery the upstream may have seen must not be
			// forwarded twice. A failed attempt releases the lock instead,
			// and the provider's own retry goes through.
			RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
			// An answer larger than this is a 502 and releases the key
			// although the upstream did the work: keep it far above any
			// webhook acknowledgement.
			MaxResponseBodySize: maxUpstreamAnswer,
			ReadBufferSize:      8 << 10,
		},
	}
}

// maxUpstreamAnswer bounds an upstream's answer body.
const maxUpstreamAnswer = 64 << 20

type fastAnswer struct{ resp *fasthttp.Response }

func (a fastAnswer) StatusCode() int     { return a.resp.StatusCode() }
func (a fastAnswer) ContentType() string { return contentType(a.resp.Header.ContentType()) }
func (a fastAnswer) Body() []byte        { return a.resp.Body() }
func (a fastAnswer) Release()            { fasthttp.ReleaseResponse(a.resp) }

// contentType is ct as a string, without an allocation for the usual
// webhook acknowledgements'.
func contentType(ct []byte) string {
	switch string(ct) {
	case "":
		return ""
	case "application/json":
		return "application/json"
	case "application/json; charset=utf-8":
		return "application/json; charset=utf-8"
	case "text/plain; charset=utf-8":
		return "text/plain; charset=utf-8"
	case "text/plain":
		return "text/plain"
	}
	return string(ct)
}

// AppendHeader appends the answer's headers: the names of common headers
// are constants, the other names and all the values are cut from one
// string, so an answer's headers cost one allocation.
func (a fastAnswer) AppendHeader(dst []string) []string {
	var connTok []string
	if c := a.resp.Header.Peek("Connection"); len(c) > 0 {
		connTok = connectionTokens([]string{string(c)})
	}
	var stack [512]byte
	var ends [32]int
	b, e := stack[:0], ends[:0] // per pair: the name's end (-1: a constant), the value's
	first := len(dst)
	for k, v := range a.resp.Header.All() {
		if isHop(k, connTok) || string(k) == "Content-Length" || string(k) == "X-Request-Id" {
			continue
		}
		name := commonHeader(k)
		if name == "" {
			b = append(b, k...)
			e = append(e, len(b))
		} else {
			e = append(e, -1)
		}
		b = append(b, v...)
		e = append(e, len(b))
		dst = append(dst, name, "")
	}
	all, at := string(b), 0
	for i := 0; i+1 < len(e); i += 2 {
		if e[i] >= 0 {
			dst[first+i], at = all[at:e[i]], e[i]
		}
		dst[first+i+1], at = all[at:e[i+1]], e[i+1]
	}
	return dst
}

// commonHeader returns name as a constant when it is a header upstreams
// often answer with, else "".
func commonHeader(name []byte) string {
	switch string(name) {
	case "Content-Type":
		return "Content-Type"
	case "Date":
		return "Date"
	case "Server":
		return "Server"
	case "Cache-Control":
		return "Cache-Control"
	case "Vary":
		return "Vary"
	case "Etag":
		return "Etag"
	case "Set-Cookie":
		return "Set-Cookie"
	case "Location":
		return "Location"
	case "X-Content-Type-Options":
		return "X-Content-Type-Options"
	}
	return ""
}

func (f *fastUpstream) Forward(ctx context.Context, r *Request, attempt int64, timeout time.Duration) (Answer, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(r.URI)
	req.Header.SetHost(f.host)
	r.Each(attempt, req.Header.Add)
	req.SetBodyRaw(r.Body)

	resp := fasthttp.AcquireResponse()
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	err := f.hc.DoDeadline(req, resp, deadline)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A deadline that passes while the answer is still arriving (an
		// upstream that dribbles its body) is a read timeout, not
		// fasthttp's ErrTimeout: a timeout all the same.
		var ne net.Error
		if errors.Is(err, fasthttp.ErrTimeout) || errors.As(err, &ne) && ne.Timeout() || !time.Now().Before(deadline) {
			return nil, errors.Join(ErrUpstreamTimeout, err)
		}
		return nil, errors.Join(ErrUpstreamUnreachable, err)
	}
	if resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
		// The gateway never asks for an upgrade (Upgrade and Connection
		// are hop-by-hop, never forwarded): a 101 is a broken answer. It
		// is never relayed, since a proxy in front that trusts it would
		// tunnel whatever follows; and the connection it came on speaks
		// another protocol now, so the idle ones are closed rather than
		// reused (fasthttp pooled it already).
		fasthttp.ReleaseResponse(resp)
		f.hc.CloseIdleConnections()
		return nil, errors.Join(ErrUpstreamUnreachable, errSwitchedProtocols)
	}
	return fastAnswer{resp}, nil
}

// errSwitchedProtocols: the upstream answered 101 Switching Protocols.
var errSwitchedProtocols = errors.New("upstream answered 101 Switching Protocols to a request that asked for no upgrade")

// hostPort is an http(s) URL's host:port, with the scheme's default port
// when the URL has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}
