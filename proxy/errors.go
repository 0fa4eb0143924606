package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/clawgate/clawgate/metrics"
)

// StatusClientClosed is logged and counted when the caller went away before
// its answer was ready (Nginx's 499). Nothing is written.
const StatusClientClosed = 499

// statusError is a failure with the status the caller gets. Every answer the
// gateway writes itself goes through one, so the mapping from failure to
// status lives in one place: statusOf.
type statusError struct {
	status     int
	msg        string // public: sent to the caller
	outcome    string // access log and metric label
	retryAfter int    // seconds; 0: no Retry-After
	err        error  // private cause: logged, never sent
}

func (e *statusError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *statusError) Unwrap() error { return e.err }

func fail(status int, outcome, msg string, cause error) *statusError {
	return &statusError{status: status, msg: msg, outcome: outcome, err: cause}
}

// Names of what did not answer, for unavailable.
const (
	storeUnavailable = "idempotency store unavailable"
	queueUnavailable = "delivery queue unavailable"
)

// unavailable answers a delivery whose store or queue (what) did not
// answer: the caller's own error when it hung up meanwhile (499, not a
// backend failure), else 503 with Retry-After, so the provider keeps the
// event.
func unavailable(ctx context.Context, what string, cause error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	se := fail(http.StatusServiceUnavailable, metrics.OutcomeRejected, what, cause)
	se.retryAfter = 1
	return se
}

// statusOf maps any failure to what the caller gets: the error funnel.
func statusOf(err error) *statusError {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, context.Canceled):
		return fail(StatusClientClosed, metrics.OutcomeError, "client closed request", err)
	case errors.Is(err, ErrUpstreamTimeout), errors.Is(err, context.DeadlineExceeded):
		return fail(http.StatusGatewayTimeout, metrics.OutcomeError, "upstream timed out", err)
	case errors.Is(err, ErrUpstreamUnreachable):
		return fail(http.StatusBadGateway, metrics.OutcomeError, "upstream unreachable", err)
	}
	return fail(http.StatusBadGateway, metrics.OutcomeError, "bad gateway", err)
}

// errorAnswer appends the headers of the gateway's own JSON error answer
// to h and returns them with its body.
func errorAnswer(h []string, se *statusError, route, requestID string) ([]string, []byte) {
	if se.status == StatusClientClosed {
		return h, nil
	}
	h = append(h, "Content-Type", "application/json", "X-Request-Id", requestID)
	if se.retryAfter > 0 {
		h = append(h, "Retry-After", strconv.Itoa(se.retryAfter))
	}
	return h, errorBody(se.msg, route)
}

// errorBody is {"error": msg, "route": route}, JSON-escaped.
func errorBody(msg, route string) []byte {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		Route string `json:"route"`
	}{msg, route})
	return append(b, '\n')
}
