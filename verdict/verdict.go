// Package verdict says how the gateway treats an upstream's answer, the
// same on sync and queue routes: whether it is final (Classify), and what
// of it is kept to answer later copies of the event (Capture).
package verdict

import "github.com/clawgate/clawgate/store"

// Class is what an upstream status means for the event.
type Class int

const (
	// Success: 2xx. The event is delivered: its key is finished with the
	// answer, which later copies get replayed.
	Success Class = iota
	// Refused: 4xx other than 408, 409, 425 and 429. The same request
	// sent again gets the same answer: a sync route finishes the key with
	// it (later copies get it replayed); a queue route dead-letters the
	// event ("rejected:STATUS").
	Refused
	// Transient: 5xx, 408, 409, 425 and 429, worth another try: a sync
	// route releases the key so that the provider's retry goes through; a
	// queue route tries again after its back-off.
	Transient
	// Unexpected: any other status (1xx, 3xx, outside 100-599). A sync
	// route releases the key and leaves the provider to retry; a queue
	// route dead-letters the event, since its own retries of the same
	// request cannot change the answer.
	Unexpected
)

// Classify is the one rule for which upstream statuses are final.
func Classify(status int) Class {
	switch {
	case status >= 200 && status <= 299:
		return Success
	case status == 408, status == 409, status == 425, status == 429, status >= 500 && status <= 599:
		return Transient
	case status >= 400 && status <= 499:
		return Refused
	}
	return Unexpected
}

// Finishes reports whether a sync route's key is finished with the
// answer (Success, Refused) rather than released.
func (c Class) Finishes() bool { return c == Success || c == Refused }

// Answer is the part of an upstream's answer that Capture keeps.
type Answer interface {
	StatusCode() int
	ContentType() string
	Body() []byte
}

// Capture is what answering a later copy of the event with a's answer
// needs: the status and, when the body is at most limit bytes, the
// content type and a copy of the body (a longer body is not kept: the
// copy gets the status alone). fingerprint names the delivery a answered
// ("" when the caller fills it in later).
func Capture(a Answer, limit int64, fingerprint string) store.Outcome {
	out := store.Outcome{Status: a.StatusCode(), Fingerprint: fingerprint}
	if b := a.Body(); int64(len(b)) <= limit {
		out.ContentType = a.ContentType()
		out.Body = append([]byte(nil), b...)
	}
	return out
}
