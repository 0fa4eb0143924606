package proxy

import "net/http"

// NewRequest builds the outgoing request of a delivery read by the
// net/http front door from in.
func NewRequest(in *http.Request, uri string, body []byte, key, reqID, trace string, trusted bool) *Request {
	v := httpInbound(in)
	return newRequest(&v, uri, body, key, reqID, trace, trusted)
}
