package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// inbound is one request as the delivery steps see it. A front door fills
// it (door_http.go for net/http, door_fast.go for fasthttp); the steps
// read it, never change it, and know nothing of the server that read it.
// The header map has the standard library's type because the verifiers
// and the key derivation read headers through it; nothing else of either
// server reaches the steps.
type inbound struct {
	method string
	// host is the Host header, or an absolute-form request URI's host.
	host string
	// path is the request URI's path, percent-decoded; rawPath the path as
	// sent when that differs from path's default escaping (url.URL's
	// RawPath), else "".
	path, rawPath string
	// rawQuery is the request URI's query, without the "?".
	rawQuery string
	// header holds the request headers under canonical names, Host
	// excluded. The steps only read it.
	header http.Header
	// pairs, when the front door kept them, are the same headers as
	// name, value pairs in the order they came in (header's values alias
	// them); nil otherwise.
	pairs []string
	// lengthless is an HTTP/1.0 request without a Content-Length: its
	// body, if it has one, cannot be framed (a Transfer-Encoding there
	// means faulty framing, and net/http drops the field unseen).
	lengthless bool
	// body reads the request body; contentLength is its declared length,
	// -1 when unknown (chunked).
	body          io.Reader
	contentLength int64
	// remoteAddr is the peer's "ip:port".
	remoteAddr string
	// tls is true when the request came over TLS.
	tls bool
	// proto is the request's protocol, e.g. "HTTP/1.1" or "HTTP/2.0".
	proto string
	// refused, when set, is the front door's refusal of a request it could
	// not read into this view (a malformed path): the steps answer it
	// before anything else, with its own access line.
	refused error

	// ctx is done when the caller hangs up. A front door that watches for
	// that only when it matters sets watch instead: context starts the
	// watch at the first step that waits on something (the store, the
	// queue, the upstream).
	ctx   context.Context
	watch watcher
}

// watcher starts a front door's watch for the caller hanging up and
// returns the context it cancels then.
type watcher interface{ watch() context.Context }

// context returns the request's context, starting the front door's watch
// for a hang-up if it has not started yet.
func (in *inbound) context() context.Context {
	if in.ctx == nil {
		if in.watch == nil {
			return context.Background()
		}
		in.ctx = in.watch.watch()
	}
	return in.ctx
}

// detached is the request's context without its cancellation, for the
// work that must end even when the caller hung up (settling the key).
// The fasthttp front door's context, built on context.Background, carries
// no values: that is context.Background itself, which costs nothing.
func (in *inbound) detached() context.Context {
	if in.watch != nil || in.ctx == nil {
		return context.Background()
	}
	return context.WithoutCancel(in.ctx)
}

// escapedPath is the path as it is forwarded when unchanged: as sent when
// that is a valid escaping of path, else path escaped.
func (in *inbound) escapedPath() string {
	u := url.URL{Path: in.path, RawPath: in.rawPath}
	return u.EscapedPath()
}

// reply is the answer the steps give to one delivery; the front door
// writes it. A status of StatusClientClosed writes nothing: the front door
// ends the exchange without an answer.
type reply struct {
	status int
	// header holds name, value pairs, written in order.
	header []string
	// body is the answer body. It may alias up's body: the delivery's end
	// releases up, after the front door wrote (or copied) body.
	body []byte
	up   Answer
	// hdr backs header: most answers need no allocation for it.
	hdr [10]string
}
