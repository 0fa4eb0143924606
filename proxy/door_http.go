package proxy

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// The net/http front door: Go's standard server reads the request
// (HTTP/1.1, and HTTP/2 over TLS), the delivery steps run on a view of it,
// and their answer is written back here.

// ServeHTTP serves one delivery from net/http's server.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := deliveryPool.Get().(*delivery)
	d.in = httpInbound(r)
	defer deliveryPool.Put(d)
	defer func() { *d = delivery{} }()
	g.serve(d)
	defer g.end(d)
	if d.out.status == StatusClientClosed {
		// Nothing is written: the exchange ends without an answer, so that
		// net/http does not send an implicit 200 for a delivery that was
		// never forwarded. (end runs, deferred, on the way out.)
		panic(http.ErrAbortHandler)
	}
	h := w.Header()
	if len(r.TransferEncoding) > 0 && r.ProtoMajor == 1 || r.ProtoMajor == 1 && r.ProtoMinor == 0 {
		// A chunked request may also have carried a Content-Length, which
		// net/http drops without a trace: two framings in one request are a
		// smuggling attempt (RFC 9112 section 6.1), so the connection is
		// closed after the answer and nothing pipelined behind it is read.
		// HTTP/1.0 is closed after every answer: net/http frames it by
		// Content-Length and drops a Transfer-Encoding before the handler
		// could see it (RFC 9112 asks to close after such a message), and
		// it honours "Connection: keep-alive, close" as keep-alive.
		h["Connection"] = closeValue
	}
	// One values slice for the whole answer, the delivery's array when it
	// is large enough (net/http copies the header when the handler calls
	// WriteHeader, before the delivery is reused); a name given twice
	// appends.
	pairs := d.out.header
	vals := d.outVals[:0]
	vals = slices.Grow(vals, len(pairs)/2)[:len(pairs)/2]
	for i := 0; i+1 < len(pairs); i += 2 {
		name, v := pairs[i], pairs[i+1]
		if prev, ok := h[name]; ok {
			h[name] = append(prev, v)
			continue
		}
		vals[i/2] = v
		h[name] = vals[i/2 : i/2+1 : i/2+1]
	}
	if d.se != nil && d.limited.R == nil && r.ContentLength != 0 && r.Header.Get("Expect") != "" {
		// Refused before the body was read, and net/http sent no 100
		// Continue (it does at the first read): a client that waits for
		// one never sends the body. net/http would wait for it (up to
		// 256 KiB, for the read timeout) after the answer, to keep the
		// connection; a read deadline in the past ends that wait, and the
		// connection closes after the answer, as on the fasthttp door.
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
	// The answer gets its own write deadline, so a caller that stops
	// reading cannot hold the handler (and the memory of the answer) for
	// longer than the write timeout. net/http's HTTP/1 and HTTP/2 response
	// writers have the method; this handler is never wrapped.
	if wd, ok := w.(writeDeadliner); ok {
		_ = wd.SetWriteDeadline(time.Now().Add(g.writeTimeout))
	}
	w.WriteHeader(d.out.status)
	n, _ := w.Write(d.out.body)
	d.bytesOut = int64(n)
}

// deliveryPool holds the net/http front door's deliveries between
// requests: nothing keeps one past its end (what outlives it are its
// strings and the upstream's answer, allocations of their own).
var deliveryPool = sync.Pool{New: func() any { return new(delivery) }}

// httpInbound is the steps' view of r.
func httpInbound(r *http.Request) inbound {
	return inbound{
		method:        r.Method,
		host:          r.Host,
		path:          r.URL.Path,
		rawPath:       r.URL.RawPath,
		rawQuery:      r.URL.RawQuery,
		header:        r.Header,
		body:          r.Body,
		contentLength: r.ContentLength,
		lengthless:    r.ProtoMajor == 1 && r.ProtoMinor == 0 && r.Header["Content-Length"] == nil,
		remoteAddr:    r.RemoteAddr,
		tls:           r.TLS != nil,
		proto:         r.Proto,
		ctx:           r.Context(),
	}
}

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// closeValue is shared by the answers that close their connection;
// net/http only reads it.
var closeValue = []string{"close"}
