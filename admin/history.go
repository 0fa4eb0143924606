package admin

import (
	"context"
	"net/http"
	"strings"

	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/store"
)

// History is the JSON answer of GET /admin/keys/{route}/{key}/history:
// the key's state as the key API reports it and its history, oldest
// first.
type History struct {
	Route  string         `json:"route"`
	Key    string         `json:"key"`
	State  string         `json:"state"`
	Events []HistoryEvent `json:"events"`
}

// HistoryEvent is one entry of a key's history. At is RFC 3339 with
// milliseconds, in UTC.
type HistoryEvent struct {
	At        string `json:"at"`
	Kind      string `json:"kind"`
	Instance  string `json:"instance"`
	RequestID string `json:"request_id"`
	Attempt   int64  `json:"attempt"`
	Status    int    `json:"status"`
	MS        int64  `json:"ms"`
	Detail    string `json:"detail"`
}

// historyTime is HistoryEvent.At's layout.
const historyTime = "2006-01-02T15:04:05.000Z07:00"

// historian is a queue that keeps histories apart from the store's (the
// Redis Streams queue's ordered keys live in their order value's shard).
type historian interface {
	History(ctx context.Context, route, key string) ([]store.HistoryEntry, error)
}

// noted is r's context carrying the operator action that the keys'
// history records of what the request changes.
func noted(r *http.Request, action string) context.Context {
	return store.WithNote(r.Context(), store.Note{Action: action, Client: clientHost(r.RemoteAddr)})
}

// clientHost is addr's host ("ip" of "ip:port").
func clientHost(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i > 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}

// getHistory answers GET /admin/keys/{route}/{key}/history: 404 for an
// unknown route, or a key that has neither a state nor a history. A key
// whose name itself ends in "/history" is read with its slash escaped
// (%2F).
func (a *api) getHistory(w http.ResponseWriter, r *http.Request) {
	route, key, ok := a.routeKey(w, r)
	if !ok {
		return
	}
	key = strings.TrimSuffix(key, "/history")
	if key == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid key", "route": route})
		return
	}
	ks, ok := a.readKey(w, r, route, key)
	if !ok {
		return
	}
	var es []store.HistoryEntry
	var err error
	if h, isH := a.Queue.(historian); isH && a.queueKey(route) {
		es, err = h.History(r.Context(), route, key)
	}
	if err == nil && len(es) == 0 {
		if h, isH := a.Store.(store.Historian); isH {
			es, err = h.History(r.Context(), idkey.Scoped(route, key))
		}
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
		return
	}
	if ks.State == "absent" && len(es) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown key", "route": route, "key": key})
		return
	}
	out := History{Route: route, Key: key, State: ks.State, Events: make([]HistoryEvent, 0, len(es))}
	for _, e := range es {
		out.Events = append(out.Events, HistoryEvent{At: e.At.UTC().Format(historyTime), Kind: e.Kind, Instance: e.Instance,
			RequestID: e.RequestID, Attempt: e.Attempt, Status: e.Status, MS: e.MS, Detail: e.Detail})
	}
	writeJSON(w, http.StatusOK, out)
}
