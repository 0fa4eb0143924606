package proxy

import (
	"context"
	"net"
	"time"

	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/store"
)

// The keys' history (dedupe.history): the store writes each entry in the
// same step as the change it records, from what the delivery tells it in
// the context (its request id, the secret that verified it, the client's
// address, the upstream's status and time). A copy answered without a
// store call (from this instance's window) or refused 401 changes no
// record: it is appended by a call of its own, in the background and
// only to a key whose record exists, so that an unauthenticated caller
// or a forged key never creates a record or a history.

// historyOn reports whether d's keys keep a history.
func (d *delivery) historyOn() bool { return d.t.cfg.Dedupe.History > 0 }

// note is ctx carrying what d's key history records of its arrival.
func (d *delivery) note(ctx context.Context) context.Context {
	if !d.historyOn() {
		return ctx
	}
	return store.WithNote(ctx, d.noteOf())
}

// settleNote is ctx carrying what d's key history records of its try:
// the upstream's status and time too.
func (d *delivery) settleNote(ctx context.Context, status int) context.Context {
	if !d.historyOn() {
		return ctx
	}
	n := d.noteOf()
	n.Status, n.UpstreamMS = status, d.upstreamTime.Milliseconds()
	return store.WithNote(ctx, n)
}

func (d *delivery) noteOf() store.Note {
	client, _, err := net.SplitHostPort(d.in.remoteAddr)
	if err != nil {
		client = d.in.remoteAddr
	}
	return store.Note{RequestID: d.reqID, Secret: d.secretID, Client: client}
}

// noteWindow appends to d's key history a copy this instance's window
// answered (adm).
func (g *Gateway) noteWindow(d *delivery, adm dedupe.Admission) {
	if adm.Layer != "cache" || d.scoped == "" {
		return
	}
	verdict := "replayed"
	switch adm.Verdict {
	case dedupe.Busy:
		verdict = "in_flight"
	case dedupe.Conflict:
		verdict = "conflict"
	}
	g.noteArrival(d, d.scoped, verdict)
}

// notesInFlight bounds the background history notes: past it, a note is
// dropped rather than queued (a flood of duplicates or of bad signatures
// must not pile up calls to the store).
const notesInFlight = 64

// noteTimeout bounds one background note.
const noteTimeout = 2 * time.Second

// noteArrival appends an arrival that changed nothing (verdict) to the
// history of scoped when the key has a record, in the background.
func (g *Gateway) noteArrival(d *delivery, scoped, verdict string) {
	if !d.historyOn() {
		return
	}
	n, ok := g.store.(store.HistoryNoter)
	if !ok {
		return
	}
	select {
	case g.notes <- struct{}{}:
	default:
		return
	}
	ctx := store.WithNote(context.Background(), d.noteOf())
	go func() {
		defer func() { <-g.notes }()
		ctx, cancel := context.WithTimeout(ctx, noteTimeout)
		defer cancel()
		if err := n.Note(ctx, scoped, verdict); err != nil {
			g.log.Debug("history: could not note an arrival", "error", err.Error())
		}
	}()
}

// noteUnauthorized appends a copy refused 401 (reason: why its signature
// failed) to its key's history when the key has a record: the key is
// derived from the unverified request for that lookup alone.
func (g *Gateway) noteUnauthorized(d *delivery, reason string) {
	rt := d.rt
	if !d.historyOn() || rt.Key == nil {
		return
	}
	key, err := rt.Key.Derive(d.in.header, d.in.rawQuery, d.body)
	if err != nil {
		return
	}
	g.noteArrival(d, d.scopedKey(rt.Name, key), "unauthorized reason="+reason)
}
