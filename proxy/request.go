package proxy

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Request is what the upstream receives for one delivery, built once from
// the inbound request (which is never changed) by newRequest. It keeps no
// reference to the inbound request, so it can be held and sent later, and
// sent again: each try adds only Idempotency-Key and X-Clawgate-Attempt.
type Request struct {
	Method string
	// URI is the request URI on the upstream: base path, the delivery's
	// path (dot segments resolved, strip_prefix removed) and the query.
	// With RouteRelative it lacks the base path.
	URI string
	// RouteRelative: URI is relative to the route's upstream, whose base
	// path is prepended when the request is sent (queued requests: the
	// upstream a reload gives the route applies to them whole).
	RouteRelative bool
	// Header holds name, value pairs in the order they are sent: the
	// caller's end-to-end headers, then the gateway's own.
	Header []string
	// Body is the raw body as received. It may share the delivery's read
	// buffer: copy it before keeping the Request past the delivery.
	Body []byte
	// Key is the idempotency key ("" for unkeyed deliveries).
	Key         string
	RequestID   string
	Traceparent string
}

// Each calls f with every header pair to send on a try: Header, then the
// key and the attempt number when the delivery has a key.
func (r *Request) Each(attempt int64, f func(name, value string)) {
	for i := 0; i+1 < len(r.Header); i += 2 {
		f(r.Header[i], r.Header[i+1])
	}
	if r.Key != "" {
		f("Idempotency-Key", r.Key)
		f("X-Clawgate-Attempt", strconv.FormatInt(attempt, 10))
	}
}

// newRequest builds the outgoing request of a delivery under the header
// policy:
//   - hop-by-hop headers, and those the inbound Connection header names,
//     are removed, and so are Host and Content-Length (the upstream client
//     sets them);
//   - the headers the gateway sets itself (X-Forwarded-*, X-Request-Id,
//     traceparent, Idempotency-Key, X-Clawgate-Attempt) are never taken
//     from the caller;
//   - X-Real-IP and Forwarded pass only from a trusted proxy (trusted);
//   - X-Forwarded-For is the peer's address, after the chain a trusted
//     proxy sent; X-Forwarded-Proto and -Host are a trusted proxy's when it
//     sent them, else this hop's.
//
// The caller's headers keep the order they came in when the front door
// kept it (in.pairs), else the header map's order.
func newRequest(in *inbound, uri string, body []byte, key, reqID, trace string, trusted bool) *Request {
	r := &Request{}
	fillRequest(r, nil, in, uri, body, key, reqID, trace, trusted)
	return r
}

// fillRequest is newRequest into r, its header appended to hdr (which it
// grows when it is too small).
func fillRequest(r *Request, hdr []string, in *inbound, uri string, body []byte, key, reqID, trace string, trusted bool) {
	*r = Request{Method: in.method, URI: uri, Body: body, Key: key, RequestID: reqID, Traceparent: trace}
	conn := connectionTokens(in.header["Connection"])
	if in.pairs != nil {
		r.Header = slices.Grow(hdr[:0], len(in.pairs)+10)
		for i := 0; i+1 < len(in.pairs); i += 2 {
			if forwardable(in.pairs[i], conn, trusted) {
				r.Header = append(r.Header, in.pairs[i], in.pairs[i+1])
			}
		}
	} else {
		n := 10
		for _, vals := range in.header {
			n += 2 * len(vals)
		}
		r.Header = slices.Grow(hdr[:0], n)
		for name, vals := range in.header {
			if !forwardable(name, conn, trusted) {
				continue
			}
			for _, v := range vals {
				r.Header = append(r.Header, name, v)
			}
		}
	}
	client, _, err := net.SplitHostPort(in.remoteAddr)
	if err != nil {
		client = in.remoteAddr
	}
	proto, host := "http", in.host
	if in.tls {
		proto = "https"
	}
	if trusted {
		if prior := in.header.Values("X-Forwarded-For"); len(prior) > 0 && client != "" {
			client = strings.Join(prior, ", ") + ", " + client
		}
		if v := in.header.Get("X-Forwarded-Proto"); v != "" {
			proto = v
		}
		if v := in.header.Get("X-Forwarded-Host"); v != "" {
			host = v
		}
	}
	if client != "" {
		r.Header = append(r.Header, "X-Forwarded-For", client)
	}
	r.Header = append(r.Header, "X-Forwarded-Proto", proto, "X-Forwarded-Host", host,
		"X-Request-Id", reqID, "traceparent", trace)
}

// forwardable reports whether a caller's header named name is sent
// upstream (see newRequest).
func forwardable(name string, conn []string, trusted bool) bool {
	return !isHop(name, conn) && name != "Host" && name != "Content-Length" && !isGatewayHeader(name) &&
		(trusted || !isClientAddressHeader(name))
}

// isHop reports a hop-by-hop header (RFC 9110 7.6.1), or one the message's
// Connection header names. Names are canonical: net/http and fasthttp both
// canonicalise them.
func isHop[S string | []byte](name S, conn []string) bool {
	switch string(name) {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	for _, c := range conn {
		if c == string(name) {
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

// requestVersion is the first byte of an encoded Request;
// requestVersionRelative marks one whose URI is relative to the route's
// upstream (RouteRelative). Requests queued by earlier versions (1) hold
// the full URI, base path included.
const (
	requestVersion         = 1
	requestVersionRelative = 2
)

// AppendBinary appends r's encoding to dst: what the delivery queue stores
// and a worker forwards later, byte for byte the same request.
func (r *Request) AppendBinary(dst []byte) []byte {
	if r.RouteRelative {
		dst = append(dst, requestVersionRelative)
	} else {
		dst = append(dst, requestVersion)
	}
	for _, s := range [...]string{r.Method, r.URI, r.Key, r.RequestID, r.Traceparent} {
		dst = appendField(dst, s)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Header)))
	for _, s := range r.Header {
		dst = appendField(dst, s)
	}
	return append(binary.AppendUvarint(dst, uint64(len(r.Body))), r.Body...)
}

func appendField(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// ErrBadRequestEncoding: stored bytes that AppendBinary did not make.
var ErrBadRequestEncoding = errors.New("proxy: damaged queued request")

// DecodeRequest parses what AppendBinary made. The body aliases b.
func DecodeRequest(b []byte) (*Request, error) {
	if len(b) == 0 || b[0] != requestVersion && b[0] != requestVersionRelative {
		return nil, ErrBadRequestEncoding
	}
	relative := b[0] == requestVersionRelative
	b = b[1:]
	next := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var f [5]string
	for i := range f {
		var ok bool
		if f[i], ok = next(); !ok {
			return nil, ErrBadRequestEncoding
		}
	}
	r := &Request{Method: f[0], URI: f[1], Key: f[2], RequestID: f[3], Traceparent: f[4], RouteRelative: relative}
	n, k := binary.Uvarint(b)
	if k <= 0 || n%2 != 0 || n > uint64(len(b)) {
		return nil, ErrBadRequestEncoding
	}
	b = b[k:]
	r.Header = make([]string, n)
	for i := range r.Header {
		var ok bool
		if r.Header[i], ok = next(); !ok {
			return nil, ErrBadRequestEncoding
		}
	}
	bl, k := binary.Uvarint(b)
	if k <= 0 || bl != uint64(len(b)-k) {
		return nil, ErrBadRequestEncoding
	}
	r.Body = b[k:]
	return r, nil
}

// QueuedBody reads a queued delivery's payload (what AppendBinary
// stored): the body the upstream gets and the request's Content-Type (""
// when it has none). The body aliases payload. ErrBadRequestEncoding for
// bytes AppendBinary did not make.
func QueuedBody(payload []byte) (body []byte, contentType string, err error) {
	r, err := DecodeRequest(payload)
	if err != nil {
		return nil, "", err
	}
	for i := 0; i+1 < len(r.Header); i += 2 {
		if strings.EqualFold(r.Header[i], "Content-Type") {
			return r.Body, r.Header[i+1], nil
		}
	}
	return r.Body, "", nil
}
