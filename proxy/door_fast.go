package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

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
	req := &c.Request
	hs := headerScratchPool.Get().(*headerScratch)
	defer hs.release()
	in := inbound{
		method:     string(req.Header.Method()),
		host:       string(c.Host()),
		remoteAddr: c.RemoteAddr().String(),
		tls:        c.IsTLS(),
	}
	in.header, in.pairs = hs.read(&req.Header)
	in.rawQuery = string(req.URI().QueryString())
	var w hangUpWatch
	in.watch = func() context.Context { return w.start(c) }
	defer w.stop(c)

	in.path, in.rawPath, in.refused = splitPath(req.URI().PathOriginal())
	if cl := req.Header.ContentLength(); cl >= 0 {
		in.contentLength = int64(cl)
	} else {
		in.contentLength = -1
	}
	if s := c.RequestBodyStream(); s != nil {
		in.body = s
	} else {
		in.body = bytes.NewReader(req.Body())
	}

	d := g.serve(&in)
	defer g.end(d)
	if d.out.status == StatusClientClosed {
		// Nothing is written: the connection is closed without an answer.
		c.HijackSetNoResponse(true)
		c.Hijack(func(net.Conn) {})
		return
	}
	if in.contentLength < 0 || !req.Header.IsHTTP11() {
		// A chunked request is the only kind that could hide a second
		// framing, and HTTP/1.0 keep-alive is where proxies disagree:
		// both close their connection after the answer, as on the
		// net/http front door.
		c.SetConnectionClose()
	}
	resp := &c.Response
	resp.Header.DisableNormalizing()
	resp.Header.SetNoDefaultContentType(true)
	for i := 0; i+1 < len(d.out.header); i += 2 {
		resp.Header.Add(d.out.header[i], d.out.header[i+1])
	}
	resp.SetStatusCode(d.out.status)
	// Copied: the upstream's answer is released before fasthttp writes.
	resp.SetBody(d.out.body)
}

var errBadPath = fail(http.StatusBadRequest, metrics.OutcomeRejected, "malformed request path", nil)

// splitPath decodes a request URI's path as net/url does: path decoded,
// rawPath the path as sent when that differs from path's default escaping.
func splitPath(raw []byte) (path, rawPath string, err error) {
	sent := string(raw)
	path = sent
	if bytes.IndexByte(raw, '%') >= 0 {
		if path, err = url.PathUnescape(sent); err != nil {
			return "", "", errBadPath
		}
	}
	if (&url.URL{Path: path}).EscapedPath() != sent {
		rawPath = sent
	}
	return path, rawPath, nil
}

// headerScratch turns fasthttp's request headers into the steps' header
// map with three allocations: one string holding every name and value,
// the pairs slice and the map (with one values slice).
type headerScratch struct {
	buf  []byte
	offs []int
}

var headerScratchPool = sync.Pool{New: func() any { return new(headerScratch) }}

func (hs *headerScratch) release() {
	if cap(hs.buf) <= 64<<10 {
		headerScratchPool.Put(hs)
	}
}

// read returns h's headers, Host excluded, as a map and as pairs in the
// order they came in; the map's values alias the pairs.
func (hs *headerScratch) read(h *fasthttp.RequestHeader) (http.Header, []string) {
	hs.buf, hs.offs = hs.buf[:0], hs.offs[:0]
	for k, v := range h.All() {
		if string(k) == "Host" {
			continue
		}
		hs.buf = append(hs.buf, k...)
		hs.offs = append(hs.offs, len(hs.buf))
		hs.buf = append(hs.buf, v...)
		hs.offs = append(hs.offs, len(hs.buf))
	}
	all := string(hs.buf)
	pairs := make([]string, len(hs.offs))
	start := 0
	for i, end := range hs.offs {
		pairs[i] = all[start:end]
		start = end
	}
	n := len(pairs) / 2
	header := make(http.Header, n)
	vals := make([]string, n)
	for i := 0; i < n; i++ {
		name, v := pairs[2*i], pairs[2*i+1]
		vals[i] = v
		if prev, ok := header[name]; ok {
			header[name] = append(prev, v)
			continue
		}
		header[name] = vals[i : i+1 : i+1]
	}
	return header, pairs
}

// errHangUp is the cause of a request context cancelled because the
// caller closed its connection.
var errHangUp = errors.New("caller closed the connection")

// hangUpWatch cancels a request's context when the caller closes its
// connection while the delivery waits on the store, the queue or the
// upstream, as net/http's background read does (then the answer is 499).
// It starts only when a step first asks for the context: a duplicate
// answered from the local window never starts one. It peeks at the
// socket, so a pipelined request behind this one is left for fasthttp to
// read; a byte waiting there ends the watch (the caller is still there),
// and so does the end of the delivery.
type hangUpWatch struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

func (w *hangUpWatch) start(c *fasthttp.RequestCtx) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	w.cancel = cancel
	if rc := rawConn(c.Conn()); rc != nil {
		w.done = make(chan struct{})
		go func() {
			defer close(w.done)
			if peekHangUp(rc) {
				cancel(errHangUp)
			}
		}()
	}
	return ctx
}

// stop ends the watch before the answer is written and the connection
// read again: a read deadline in the past wakes the peek, and fasthttp
// clears the deadlines a handler set before it reads the next request.
func (w *hangUpWatch) stop(c *fasthttp.RequestCtx) {
	if w.done != nil {
		_ = c.SetReadDeadline(time.Unix(1, 0))
		<-w.done
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
