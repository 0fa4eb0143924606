package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"github.com/clawgate/clawgate/metrics"
)

// The fasthttp front door: fasthttp's server reads the request (HTTP/1.1
// only), the delivery steps run on a view of it, and their answer is set
// on the response, which fasthttp writes once this handler returns (under
// its WriteTimeout). The server must stream request bodies
// (fasthttp.Server.StreamRequestBody), so a body is read only up to the
// route's max_body.

// ServeFastHTTP serves one delivery from fasthttp's server.
func (g *Gateway) ServeFastHTTP(c *fasthttp.RequestCtx) {
	x := exchangePool.Get().(*fastExchange)
	x.c = c
	defer x.release()
	d := &x.d
	x.read(&d.in)
	d.in.watch = x
	g.serve(d)
	defer g.end(d)
	// The watch ends before the answer is written: fasthttp reads the
	// connection again afterwards.
	x.hangUp.stop(c)
	if d.out.status == StatusClientClosed {
		// Nothing is written: the connection is closed without an answer.
		c.HijackSetNoResponse(true)
		c.Hijack(func(net.Conn) {})
		return
	}
	if d.in.contentLength < 0 || !c.Request.Header.IsHTTP11() || d.in.refused != nil {
		// A chunked request is the only kind that could hide a second
		// framing, and HTTP/1.0 keep-alive is where proxies disagree:
		// both close their connection after the answer, as on the
		// net/http front door. So does a request the door refused: its
		// framing may have left bytes behind it that are not a request.
		c.SetConnectionClose()
	}
	resp := &c.Response
	resp.Header.DisableNormalizing()
	for i := 0; i+1 < len(d.out.header); i += 2 {
		resp.Header.Add(d.out.header[i], d.out.header[i+1])
	}
	resp.SetStatusCode(d.out.status)
	// Copied: the upstream's answer is released before fasthttp writes.
	resp.SetBody(d.out.body)
}

// fastExchange is the fasthttp front door's scratch for one request,
// pooled: the bytes the view's strings are cut from, the view's header
// pairs and map (the steps only read them, and keep neither past the
// delivery: what they keep are the strings, which are never reused), the
// body reader, the hang-up watch, and the delivery itself (nothing keeps
// it past its end: what outlives it are its strings and the upstream's
// answer, allocations of their own).
type fastExchange struct {
	c      *fasthttp.RequestCtx
	d      delivery
	buf    []byte
	offs   []int
	pairs  []string
	header http.Header
	vals   []string
	body   bytes.Reader
	hangUp hangUpWatch
}

var exchangePool = sync.Pool{New: func() any { return new(fastExchange) }}

// maxPooledHeaders bounds the header fields whose map and slices a pooled
// exchange keeps for the next request.
const maxPooledHeaders = 64

func (x *fastExchange) release() {
	x.c, x.hangUp, x.d = nil, hangUpWatch{}, delivery{}
	x.body.Reset(nil)
	clear(x.pairs)
	clear(x.vals)
	clear(x.header)
	if len(x.pairs) > 2*maxPooledHeaders {
		x.pairs, x.vals, x.header = nil, nil, nil
	}
	if cap(x.buf) <= 64<<10 {
		exchangePool.Put(x)
	}
}

// watch starts the hang-up watch (the steps asked for the context).
func (x *fastExchange) watch() context.Context { return x.hangUp.start(x.c) }

// read fills in from the request: every string of the view (header names
// and values, path, query, host, peer address) is cut from one string,
// the one allocation of the view; its header pairs and map are the
// exchange's, reused.
func (x *fastExchange) read(in *inbound) {
	c := x.c
	req := &c.Request
	x.buf, x.offs = x.buf[:0], x.offs[:0]
	mark := func() { x.offs = append(x.offs, len(x.buf)) }
	for k, v := range req.Header.All() {
		if string(k) == "Host" {
			continue
		}
		x.buf = append(x.buf, k...)
		mark()
		x.buf = append(x.buf, v...)
		mark()
	}
	nh := len(x.offs)
	uri := req.URI()
	path, query := uri.PathOriginal(), uri.QueryString()
	if raw := req.Header.RequestURI(); bytes.IndexByte(raw, '#') >= 0 {
		path, query = splitTarget(raw)
	}
	x.buf = append(x.buf, path...)
	mark()
	x.buf = append(x.buf, query...)
	mark()
	x.buf = append(x.buf, c.Host()...)
	mark()
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		x.buf = a.AddrPort().AppendTo(x.buf)
	} else {
		x.buf = append(x.buf, c.RemoteAddr().String()...)
	}
	mark()
	all := string(x.buf)
	cut := func(i int) string {
		start := 0
		if i > 0 {
			start = x.offs[i-1]
		}
		return all[start:x.offs[i]]
	}
	pairs := slices.Grow(x.pairs[:0], nh)[:nh]
	for i := range pairs {
		pairs[i] = cut(i)
	}
	x.pairs = pairs
	if x.header == nil {
		x.header = make(http.Header, nh/2)
	}
	x.vals = fillHeader(x.header, x.vals, pairs)
	in.header, in.pairs = x.header, pairs
	in.path, in.rawPath, in.refused = splitPath(cut(nh))
	if err := fastFraming(&req.Header, pairs); err != nil {
		in.refused = err
	}
	proto := req.Header.Protocol()
	if len(proto) != len("HTTP/1.1") || proto[5] != '1' {
		// fasthttp serves "HTTP/2.0" (any HTTP/d.d) as HTTP/1.0; net/http
		// answers 505.
		in.refused = errHTTPVersion
	}
	in.lengthless = string(proto) == "HTTP/1.0" && !hasRawField(req.Header.RawHeaders(), "Content-Length")
	in.rawQuery, in.host, in.remoteAddr = cut(nh+1), cut(nh+2), cut(nh+3)
	in.method = methodString(req.Header.Method())
	in.tls = c.IsTLS()
	in.proto = protoString(req.Header.Protocol())
	// fasthttp's -1 is a chunked body; -2 (no length, not chunked) is
	// no body at all on a request.
	switch cl := req.Header.ContentLength(); {
	case cl >= 0:
		in.contentLength = int64(cl)
	case cl == -1:
		in.contentLength = -1
	}
	if s := c.RequestBodyStream(); s != nil {
		in.body = s
	} else {
		x.body.Reset(req.Body())
		in.body = &x.body
	}
}

// fillHeader indexes name, value pairs by name into the empty map h, its
// values cut from vals (grown to one per pair), which it returns.
func fillHeader(h http.Header, vals []string, pairs []string) []string {
	n := len(pairs) / 2
	vals = slices.Grow(vals[:0], n)[:n]
	for i := 0; i < n; i++ {
		name, v := pairs[2*i], pairs[2*i+1]
		if prev, ok := h[name]; ok {
			h[name] = append(prev, v)
			continue
		}
		vals[i] = v
		h[name] = vals[i : i+1 : i+1]
	}
	return vals
}

// methodString returns the common methods without an allocation.
func methodString(m []byte) string {
	switch string(m) {
	case http.MethodPost:
		return http.MethodPost
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPut:
		return http.MethodPut
	}
	return string(m)
}

var (
	errBadFieldName   = fail(http.StatusBadRequest, metrics.OutcomeRejected, "malformed header field name", nil)
	errTransferCoding = fail(http.StatusNotImplemented, metrics.OutcomeRejected, "unsupported transfer coding", nil)
	errExpectation    = fail(http.StatusExpectationFailed, metrics.OutcomeRejected, "unsupported expectation", nil)
)

// fastFraming refuses the requests fasthttp reads without complaint but
// that no reading frames safely, as the net/http front door does (each
// is answered, then the connection is closed, unread past the head);
// pairs are the header's name, value pairs:
//
//   - A field name that is not a token ("Transfer Encoding"): fasthttp
//     takes it, the upstream or a proxy beside the gateway may read it
//     otherwise: 400.
//   - A Transfer-Encoding that is not chunked. fasthttp refuses every
//     coding but identity; identity it drops from the header and frames
//     the request by its Content-Length, or, without one, as a request
//     without a body, reading the bytes behind the head as the next
//     request. RFC 9112 leaves such a body's length undetermined: 501.
//     The field is gone from the parsed header, so the raw head is
//     searched, only when it can be there: a length of 0 (fasthttp's
//     for a request without a Content-Length), or a Content-Length on a
//     connection fasthttp already closes after.
//   - An expectation other than 100-continue on HTTP/1.1, which fasthttp
//     ignores (it would reach the upstream): 417.
func fastFraming(h *fasthttp.RequestHeader, pairs []string) error {
	for i := 0; i < len(pairs); i += 2 {
		if !httpguts.ValidHeaderFieldName(pairs[i]) {
			return errBadFieldName
		}
	}
	if cl := h.ContentLength(); cl == 0 || cl == -2 || cl > 0 && h.ConnectionClose() {
		if hasRawField(h.RawHeaders(), "Transfer-Encoding") {
			return errTransferCoding
		}
	}
	if e := h.Peek("Expect"); len(e) > 0 && (!h.IsHTTP11() || !bytes.EqualFold(e, []byte("100-continue"))) {
		return errExpectation
	}
	return nil
}

// hasRawField reports whether the raw header block raw has a field
// called name (in any case, blanks allowed before the colon).
func hasRawField(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) > len(name) && strings.EqualFold(string(line[:len(name)]), name) &&
			strings.HasPrefix(strings.TrimLeft(string(line[len(name):]), " \t"), ":") {
			return true
		}
	}
	return false
}

var errBadPath = fail(http.StatusBadRequest, metrics.OutcomeRejected, "malformed request path", nil)

var errHTTPVersion = fail(http.StatusHTTPVersionNotSupported, metrics.OutcomeRejected, "unsupported HTTP version", nil)

// splitTarget cuts a request target into its path and query as net/http
// does: a request has no fragment, so a "#" is part of the path or the
// query ("/p/x#/../../y" is the path "/p/x#/../../y", which resolves to
// "/y"), where fasthttp cuts it off ("/p/x"). An absolute-form target
// loses its scheme and authority.
func splitTarget(raw []byte) (path, query []byte) {
	if len(raw) > 0 && raw[0] != '/' {
		if i := bytes.Index(raw, []byte("://")); i >= 0 {
			raw = raw[i+3:]
			j := bytes.IndexAny(raw, "/?")
			if j < 0 {
				return nil, nil
			}
			raw = raw[j:]
		}
	}
	path, query, _ = bytes.Cut(raw, []byte("?"))
	return path, query
}

// expectFast is the fasthttp front door's answer to "Expect:
// 100-continue": 100 (fasthttp sends it, then reads the body) unless the
// delivery is refused before its body is read (refusedUnread); then the
// delivery is served here, without its body, and its status returned:
// fasthttp writes that answer, with no 100 Continue before it, and closes
// the connection, as net/http does.
func (g *Gateway) expectFast(c *fasthttp.RequestCtx) int {
	x := exchangePool.Get().(*fastExchange)
	x.c = c
	var in inbound
	x.read(&in)
	refused := g.refusedUnread(&in)
	x.release()
	if !refused {
		return fasthttp.StatusContinue
	}
	g.ServeFastHTTP(c)
	return c.Response.StatusCode()
}

// refusedUnread reports whether the steps refuse in before they read its
// body, for reasons that the request alone decides: a malformed request,
// a path refused or matched by no route (or not its method), a client
// not in allow_ips, or a declared length over the route's max_body. (The
// rate limit, which changes from one moment to the next, is left to the
// steps.)
func (g *Gateway) refusedUnread(in *inbound) bool {
	if in.refused != nil || in.lengthless && in.method != http.MethodGet && in.method != http.MethodHead {
		return true
	}
	t := g.tbl.Load()
	path, err := cleanPath(in.path, in.rawPath)
	if err != nil {
		return true
	}
	rt, err := t.match(in, path)
	if err != nil {
		return true
	}
	return in.contentLength > int64(rt.MaxBody) ||
		len(rt.AllowNets) > 0 && !allowed(rt.AllowNets, t.clientAddr(in))
}

// splitPath decodes a request URI's path as net/url does: path decoded,
// rawPath the path as sent when that differs from path's default escaping.
func splitPath(sent string) (path, rawPath string, err error) {
	path = sent
	if strings.IndexByte(sent, '%') >= 0 {
		if path, err = url.PathUnescape(sent); err != nil {
			return "", "", errBadPath
		}
	}
	if (&url.URL{Path: path}).EscapedPath() != sent {
		rawPath = sent
	}
	return path, rawPath, nil
}

// errHangUp is the cause of a request context cancelled because the
// caller closed its connection.
var errHangUp = errors.New("caller closed the connection")

// hangUpWatch cancels a request's context when the caller closes its
// connection while the delivery waits on the store, the queue or the
// upstream, as net/http's background read does (then the answer is 499).
// It costs nothing until a step first asks for the context (a duplicate
// answered from the local window never does), and little until the wait
// has lasted hangUpWatchAfter: only then does a goroutine peek at the
// socket. So the delivery answered within that time, nearly every one,
// costs a timer and no goroutine, no system call; a caller that hangs up
// while the store or the upstream stalls is seen at most that much later.
// The peek leaves a pipelined request behind this one for fasthttp to
// read; a byte waiting there ends the watch (the caller is still there),
// and so does the end of the delivery.
type hangUpWatch struct {
	cancel context.CancelCauseFunc
	peek   *hangUpPeek
}

// hangUpWatchAfter is how long a delivery waits before its hang-up
// watch starts peeking.
const hangUpWatchAfter = 20 * time.Millisecond

// hangUpPeeks counts the hang-up peeks that ran to their end, in this
// process: tests wait on it rather than sleep past hangUpWatchAfter.
var hangUpPeeks atomic.Int64

// hangUpPeek is one watch's peek: its timer's function peeks unless the
// delivery ended first. Whichever of the two claims it first decides.
// It is its own allocation, shared with the timer's function only: the
// pooled exchange may be reused while a timer that lost the race still
// runs.
type hangUpPeek struct {
	timer   *time.Timer
	claimed atomic.Bool
	done    chan struct{} // closed when a peek that was claimed ends
}

func (w *hangUpWatch) start(c *fasthttp.RequestCtx) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	w.cancel = cancel
	rc := rawConn(c.Conn())
	if rc == nil {
		return ctx
	}
	p := &hangUpPeek{}
	w.peek = p
	// The timer's function runs in its own goroutine: it peeks there.
	p.timer = time.AfterFunc(hangUpWatchAfter, func() {
		p.done = make(chan struct{}) // published by the swap below
		if !p.claimed.CompareAndSwap(false, true) {
			return
		}
		defer close(p.done)
		if peekHangUp(rc) {
			cancel(errHangUp)
		}
		hangUpPeeks.Add(1)
	})
	return ctx
}

// stop ends the watch before the answer is written and the connection
// read again: a peek that started is woken by a read deadline in the
// past (fasthttp clears the deadlines a handler set before it reads the
// next request) and waited for.
func (w *hangUpWatch) stop(c *fasthttp.RequestCtx) {
	if w.peek != nil {
		w.peek.timer.Stop()
		if !w.peek.claimed.CompareAndSwap(false, true) {
			_ = c.SetReadDeadline(time.Unix(1, 0))
			<-w.peek.done
		}
	}
	if w.cancel != nil {
		w.cancel(nil)
	}
}

// rawConn is the TCP connection under c (under TLS too: bytes waiting
// there, even a TLS alert, mean the caller is still there).
func rawConn(c net.Conn) syscall.RawConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// protoString is fasthttp's request protocol as a string, without an
// allocation for the usual ones.
func protoString(p []byte) string {
	switch string(p) {
	case "HTTP/1.1":
		return "HTTP/1.1"
	case "HTTP/1.0":
		return "HTTP/1.0"
	}
	return string(p)
}
