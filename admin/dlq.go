package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clawgate/clawgate/queue"
)

// Queue is what the admin API needs of the delivery queue of the routes
// with delivery: queue (a *queue.Manager): their dead-letter queues and
// their keys. Every method answers an error wrapping queue.ErrNoRoute for
// a route that is not a queue route of this instance.
type Queue interface {
	// IsRoute reports whether route is a queue route of this instance.
	IsRoute(route string) bool
	// ListDLQ lists up to limit dead-lettered events after cursor ("" for
	// the first page), each once across the pages, oldest first (in no
	// set order on the Kafka queue backend); next is "" on the last page.
	ListDLQ(ctx context.Context, route, cursor string, limit int) (entries []queue.DeadEntry, next string, err error)
	// Dead reports one dead-lettered event with its payload (the
	// outgoing request as the proxy stored it); an error wrapping
	// queue.ErrNotFound when it is not in the route's DLQ.
	Dead(ctx context.Context, route, id string) (queue.DeadEntry, []byte, error)
	// Replay moves one dead-lettered event back to the ready queue.
	Replay(ctx context.Context, route, id string) error
	// Purge drops one dead-lettered event.
	Purge(ctx context.Context, route, id string) error
	// Get reports a queue route's key.
	Get(ctx context.Context, route, key string) (queue.KeyState, error)
	// Delete forgets a queue route's key and cancels its delivery.
	Delete(ctx context.Context, route, key string) (queue.KeyState, error)
	// ReplayAll starts replaying the route's whole DLQ in the background.
	ReplayAll(route string) (queue.ReplayStatus, error)
	// Replaying reports the last replay-all of the route started here.
	Replaying(route string) (queue.ReplayStatus, bool)
	// CancelReplay stops the route's replay-all and reports how it ended.
	CancelReplay(route string) (queue.ReplayStatus, bool)
	// Stats measures a queue route: depth and DLQ size.
	Stats(ctx context.Context, route string) (queue.Stats, error)
}

var _ Queue = (*queue.Manager)(nil)

// DLQ listing page sizes: the default, and the most one page holds (a
// larger limit is served as this one).
const (
	DefaultDLQLimit = 100
	MaxDLQLimit     = 1000
)

// DLQPage is the JSON answer to GET /admin/dlq/{route}: one page of the
// route's dead-lettered events, oldest first (in no set order on the
// Kafka queue backend).
type DLQPage struct {
	Route string `json:"route"`
	// Entries is never null: [] when the page is empty.
	Entries []queue.DeadEntry `json:"entries"`
	// Next is the cursor of the next page, "" on the last one.
	Next string `json:"next"`
}

// MaxBodyPreview is how much of a dead-lettered event's body GET
// /admin/dlq/{route}/{id} shows: 4 KiB.
const MaxBodyPreview = 4 << 10

// DLQEvent is the JSON answer to GET /admin/dlq/{route}/{id}: one
// dead-lettered event with the fields of its DLQ listing entry, and the
// start of the body the upstream would get. Everything in it came from
// the sender: show it as text, never as markup.
type DLQEvent struct {
	Route string `json:"route"`
	queue.DeadEntry
	// BodyPreview is the body's first MaxBodyPreview bytes as text (cut
	// at a character boundary), each invalid UTF-8 sequence replaced by
	// U+FFFD; "" for an empty body.
	BodyPreview string `json:"body_preview"`
	// BodyTruncated is true when the body is longer than the preview.
	BodyTruncated bool `json:"body_truncated"`
	// BodyBytes is the whole body's size in bytes.
	BodyBytes int `json:"body_bytes"`
	// ContentType is the request's Content-Type, "" when it had none.
	ContentType string `json:"content_type"`
}

// DLQResult is the JSON answer to a replay (Replayed) or a purge (Purged)
// of one dead-lettered event.
type DLQResult struct {
	Route    string `json:"route"`
	ID       string `json:"id"`
	Replayed bool   `json:"replayed,omitempty"`
	Purged   bool   `json:"purged,omitempty"`
}

// replayConflict is the 409 answer to a replay-all while one runs: the
// running replay's status and why nothing was started.
type replayConflict struct {
	queue.ReplayStatus
	Error string `json:"error"`
}

// dlqRoutes serves the DLQ endpoints on mux, behind the admin token. An
// event id is "<shard>-<24 hex digits>", so it is never the literal
// "replay" of the replay-all paths (which the mux prefers anyway, being
// more specific).
func (a *api) dlqRoutes(mux *http.ServeMux) {
	mux.Handle("GET /admin/dlq/{route}", a.auth(a.listDLQ))
	mux.Handle("POST /admin/dlq/{route}/replay", a.auth(a.replayAll))
	mux.Handle("GET /admin/dlq/{route}/replay", a.auth(a.replayStatus))
	mux.Handle("DELETE /admin/dlq/{route}/replay", a.auth(a.cancelReplay))
	mux.Handle("GET /admin/dlq/{route}/{id}", a.auth(a.showOne))
	mux.Handle("POST /admin/dlq/{route}/{id}/replay", a.auth(a.replayOne))
	mux.Handle("DELETE /admin/dlq/{route}/{id}", a.auth(a.purgeOne))
}

// queueRoute reads {route}, answering 404 when the running config has no
// such route or when it is not a queue route of this instance.
func (a *api) queueRoute(w http.ResponseWriter, r *http.Request) (string, bool) {
	route := r.PathValue("route")
	if !a.knownRoute(w, route) {
		return "", false
	}
	if a.Queue == nil || !a.Queue.IsRoute(route) {
		notQueueRoute(w, route)
		return "", false
	}
	return route, true
}

func notQueueRoute(w http.ResponseWriter, route string) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("route %q is not a delivery: queue route", route), "route": route})
}

// queueError answers an error of the queue: 404 for a route that stopped
// being a queue route or an event not in the DLQ, 400 for a bad cursor,
// 503 (with Retry-After) when the queue's backend does not answer, 500
// for anything else (corrupt data).
func (a *api) queueError(w http.ResponseWriter, route, id string, err error) {
	body := map[string]string{"error": err.Error(), "route": route}
	if id != "" {
		body["id"] = id
	}
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, queue.ErrNoRoute):
		notQueueRoute(w, route)
		return
	case errors.Is(err, queue.ErrNotFound):
		code, body["error"] = http.StatusNotFound, fmt.Sprintf("no dead-lettered event %q on route %q", id, route)
	case errors.Is(err, queue.ErrBadCursor):
		code, body["error"] = http.StatusBadRequest, "bad cursor: pass the next of a previous page of this DLQ, or none for the first page"
	case errors.Is(err, queue.ErrUnavailable):
		code = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	default:
		a.Logger.Error("admin: queue error", "route", route, "error", err.Error())
	}
	writeJSON(w, code, body)
}

// listDLQ answers one page of the route's DLQ:
// ?limit=N (default 100, at most 1000) &cursor=C (a previous page's next).
func (a *api) listDLQ(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := DefaultDLQLimit
	if q.Has("limit") {
		s := q.Get("limit")
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("limit must be a positive integer (at most %d), got %q", MaxDLQLimit, clipParam(s)), "route": route})
			return
		}
		limit = min(n, MaxDLQLimit)
	}
	entries, next, err := a.Queue.ListDLQ(r.Context(), route, q.Get("cursor"), limit)
	if err != nil {
		a.queueError(w, route, "", err)
		return
	}
	if entries == nil {
		entries = []queue.DeadEntry{}
	}
	writeJSON(w, http.StatusOK, DLQPage{Route: route, Entries: entries, Next: next})
}

// clipParam shortens a query parameter quoted in an error.
func clipParam(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// showOne answers one dead-lettered event with a preview of its body:
// 404 when it is not in the route's DLQ, 500 when its stored request
// cannot be read.
func (a *api) showOne(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	d, payload, err := a.Queue.Dead(r.Context(), route, id)
	if err != nil {
		a.queueError(w, route, id, err)
		return
	}
	body, ct := payload, ""
	if a.Body != nil {
		if body, ct, err = a.Body(payload); err != nil {
			a.Logger.Error("admin: a dead-lettered event's stored request cannot be read", "route", route, "id", id, "error", err.Error())
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "the event's stored request cannot be read: " + err.Error(), "route": route, "id": id})
			return
		}
	}
	ev := DLQEvent{Route: route, DeadEntry: d, BodyBytes: len(body), ContentType: ct}
	ev.BodyPreview, ev.BodyTruncated = preview(body, MaxBodyPreview)
	writeJSON(w, http.StatusOK, ev)
}

// preview is b's first limit bytes as text, cut back to a character
// boundary, with each invalid UTF-8 sequence replaced by U+FFFD; cut
// reports that b is longer.
func preview(b []byte, limit int) (text string, cut bool) {
	if len(b) > limit {
		n := limit
		// Back off over at most three continuation bytes, so that the
		// last character is not cut in two.
		for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(b[n]); i++ {
			n--
		}
		if !utf8.RuneStart(b[n]) {
			n = limit // not UTF-8 there anyway
		}
		b, cut = b[:n], true
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), cut
}

// replayOne moves one dead-lettered event back to the ready queue.
func (a *api) replayOne(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := a.Queue.Replay(noted(r, "dlq replay"), route, id); err != nil {
		a.queueError(w, route, id, err)
		return
	}
	writeJSON(w, http.StatusOK, DLQResult{Route: route, ID: id, Replayed: true})
}

// purgeOne drops one dead-lettered event; its key stays dead-lettered for
// the route's retention, so the provider's retries are not delivered.
func (a *api) purgeOne(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := a.Queue.Purge(noted(r, "dlq purge"), route, id); err != nil {
		a.queueError(w, route, id, err)
		return
	}
	writeJSON(w, http.StatusOK, DLQResult{Route: route, ID: id, Purged: true})
}

// replayAll starts replaying the route's whole DLQ at queue.replay_rate
// events per second: 202 with its status, or 409 with the status of the
// replay already running.
func (a *api) replayAll(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	st, err := a.Queue.ReplayAll(route)
	switch {
	case errors.Is(err, queue.ErrReplayRunning):
		writeJSON(w, http.StatusConflict, replayConflict{ReplayStatus: st,
			Error: fmt.Sprintf("a replay of route %q's DLQ is already running; cancel it with DELETE /admin/dlq/%s/replay", route, route)})
		return
	case err != nil:
		a.queueError(w, route, "", err)
		return
	}
	a.Logger.Info("admin: DLQ replay started", "route", route, "total", st.Total, "rate", st.Rate, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusAccepted, st)
}

// replayStatus answers the last replay-all of the route started on this
// instance.
func (a *api) replayStatus(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	st, ok := a.Queue.Replaying(route)
	if !ok {
		noReplay(w, route)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// cancelReplay stops the route's replay-all; what it replayed stays
// replayed.
func (a *api) cancelReplay(w http.ResponseWriter, r *http.Request) {
	route, ok := a.queueRoute(w, r)
	if !ok {
		return
	}
	st, ok := a.Queue.CancelReplay(route)
	if !ok {
		noReplay(w, route)
		return
	}
	a.Logger.Info("admin: DLQ replay cancelled", "route", route, "state", st.State, "replayed", st.Replayed, "total", st.Total)
	writeJSON(w, http.StatusOK, st)
}

func noReplay(w http.ResponseWriter, route string) {
	writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no replay of route %q's DLQ was started on this instance", route), "route": route})
}

// queueKeyState is a queue route's key as the key API shows it.
func queueKeyState(route, key string, qs queue.KeyState) KeyState {
	ks := KeyState{Route: route, Key: key, State: qs.State, ID: qs.EventID, Attempts: qs.Attempts,
		Status: qs.Status, Fingerprint: qs.Fingerprint}
	if !qs.FirstSeen.IsZero() {
		t := qs.FirstSeen.UTC()
		ks.FirstSeen = &t
	}
	if !qs.LastSeen.IsZero() {
		t := qs.LastSeen.UTC()
		ks.LastSeen = &t
	}
	return ks
}
