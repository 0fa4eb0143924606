package proxy

import "net/http"

// NewRequest builds the outgoing request of a delivery read by the
// net/http front door from in.
func NewRequest(in *http.Request, uri string, body []byte, key, reqID, trace string, trusted bool) *Request {
	v := httpInbound(in)
	return newRequest(&v, uri, body, key, reqID, trace, trusted)
}

// HangUpPeeks is how many of the fasthttp front door's hang-up peeks
// have ended in this process.
func HangUpPeeks() int64 { return hangUpPeeks.Load() }
