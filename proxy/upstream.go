package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Upstream sends one delivery to a route's service. It is the one seam
// between the gateway and its HTTP client, so the client stays swappable and
// measurable (see docs/benchmarks.md).
type Upstream interface {
	// Forward sends out and returns the service's answer, or an error
	// wrapping ErrUpstreamTimeout or ErrUpstreamUnreachable. The caller
	// releases the answer.
	Forward(ctx context.Context, out *Outbound) (Answer, error)
}

// Outbound is what Forward sends: the inbound request (never modified) plus
// what the gateway adds.
type Outbound struct {
	In          *http.Request
	Body        []byte
	PathQuery   string // request URI on the upstream (prefix stripped, base path joined)
	Key         string // "" for unkeyed deliveries
	Attempt     int64
	RequestID   string
	Traceparent string
	Timeout     time.Duration
	// TrustClient: the peer is a trusted proxy, so its X-Forwarded-*,
	// X-Real-IP and Forwarded headers are kept (X-Forwarded-For is
	// appended to). Otherwise they are replaced or removed: at the edge,
	// nothing before the gateway is believed.
	TrustClient bool
}

// Answer is an upstream response, valid until Release.
type Answer interface {
	StatusCode() int
	ContentType() string
	Body() []byte
	// CopyHeader adds the response headers, hop-by-hop ones excluded, to h.
	CopyHeader(h http.Header)
	Release()
}

var (
	// ErrUpstreamTimeout: the upstream did not answer within the route's timeout (504).
	ErrUpstreamTimeout = errors.New("upstream timed out")
	// ErrUpstreamUnreachable: no connection or a broken answer (502).
	ErrUpstreamUnreachable = errors.New("upstream unreachable")
)

// isHop reports a hop-by-hop header (RFC 9110 7.6.1), or one the message's
// Connection header names. Names are canonical: net/http and fasthttp both
// canonicalise them.
func isHop(name string, conn []string) bool {
	switch name {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	for _, c := range conn {
		if c == name {
			return true
		}
	}
	return false
}

// connectionTokens returns the canonical header names listed in Connection
// values.
func connectionTokens(values []string) []string {
	var out []string
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				out = append(out, http.CanonicalHeaderKey(tok))
			}
		}
	}
	return out
}

// fastUpstream forwards with fasthttp's pooled HostClient: on this workload it
// reaches a higher share of Nginx's throughput than net/http's Transport.
type fastUpstream struct {
	hc   *fasthttp.HostClient
	host string // Host header sent upstream
}

var _ Upstream = (*fastUpstream)(nil)

// NewFastUpstream returns the default Upstream for an http(s) base URL.
func NewFastUpstream(u *url.URL) Upstream {
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr = net.JoinHostPort(u.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
	}
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
func (a fastAnswer) ContentType() string { return string(a.resp.Header.ContentType()) }
func (a fastAnswer) Body() []byte        { return a.resp.Body() }
func (a fastAnswer) Release()            { fasthttp.ReleaseResponse(a.resp) }

func (a fastAnswer) CopyHeader(h http.Header) {
	var connTok []string
	if c := a.resp.Header.Peek("Connection"); len(c) > 0 {
		connTok = connectionTokens([]string{string(c)})
	}
	a.resp.Header.VisitAll(func(k, v []byte) {
		name := string(k)
		if isHop(name, connTok) || name == "Content-Length" {
			return
		}
		h[name] = append(h[name], string(v))
	})
}

func (f *fastUpstream) Forward(ctx context.Context, out *Outbound) (Answer, error) {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	in := out.In
	req.Header.SetMethod(in.Method)
	req.SetRequestURI(out.PathQuery)
	req.Header.SetHost(f.host)
	conn := connectionTokens(in.Header["Connection"])
	for name, vals := range in.Header {
		if isHop(name, conn) || name == "Host" || name == "Content-Length" || isGatewayHeader(name) ||
			!out.TrustClient && isClientAddressHeader(name) {
			continue
		}
		for _, v := range vals {
			req.Header.Add(name, v)
		}
	}
	setForwarded(func(k, v string) { req.Header.Set(k, v) }, in, out)
	req.SetBodyRaw(out.Body)

	resp := fasthttp.AcquireResponse()
	deadline := time.Now().Add(out.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	err := f.hc.DoDeadline(req, resp, deadline)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, fasthttp.ErrTimeout) {
			return nil, ErrUpstreamTimeout
		}
		return nil, errors.Join(ErrUpstreamUnreachable, err)
	}
	return fastAnswer{resp}, nil
}

// isGatewayHeader: headers the gateway sets itself on the way up.
func isGatewayHeader(name string) bool {
	switch name {
	case "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
		"X-Request-Id", "Traceparent", "Idempotency-Key", "X-Clawgate-Attempt":
		return true
	}
	return false
}

// isClientAddressHeader: headers that claim who the client is; only a
// trusted proxy's are passed on.
func isClientAddressHeader(name string) bool {
	return name == "X-Real-Ip" || name == "Forwarded"
}

// setForwarded sets the headers the gateway adds to every forwarded
// delivery. X-Forwarded-For is the peer's address, after the chain a
// trusted proxy sent; X-Forwarded-Proto and -Host are a trusted proxy's
// when it sent them, else this hop's.
func setForwarded(set func(k, v string), in *http.Request, out *Outbound) {
	client, _, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		client = in.RemoteAddr
	}
	proto, host := "http", in.Host
	if in.TLS != nil {
		proto = "https"
	}
	if out.TrustClient {
		if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 && client != "" {
			client = strings.Join(prior, ", ") + ", " + client
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
	}
	if client != "" {
		set("X-Forwarded-For", client)
	}
	set("X-Forwarded-Proto", proto)
	set("X-Forwarded-Host", host)
	set("X-Request-Id", out.RequestID)
	set("traceparent", out.Traceparent)
	if out.Key != "" {
		set("Idempotency-Key", out.Key)
		set("X-Clawgate-Attempt", strconv.FormatInt(out.Attempt, 10))
	}
}
