package proxy

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/store"
)

// The keys' history (dedupe.history): the store writes each entry in the
// same step as the change it records, from what the delivery tells it in
// the context (its request id, the secret that verified it, the client's
// address, the upstream's status and time). A copy answered without a
// store call (from this instance's window) or refused 401 changes no
// record: it is appended by a call of its own, gathered per key for a
// second (noteArrival), and only to a key whose record exists, so that an
// unauthenticated caller or a forged key never creates a record or a
// history.

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

// A copy that changed no record is noted a second later, gathered per key
// and verdict: a storm of copies of one event answered from the window
// (17 pushes, or 20,000 a second) writes one entry a second per key, not
// one store call per copy, and the duplicates' path stays a map update.
const (
	// noteEvery is how long notes gather before they are written.
	noteEvery = time.Second
	// notesMax bounds the keys gathered: past it, a copy of another key
	// is not noted (counted in the debug log of the next write).
	notesMax = 10_000
	// noteTimeout bounds one note's store call.
	noteTimeout = 2 * time.Second
)

// notes gathers the copies to note until the next write.
type notes struct {
	mu      sync.Mutex
	pending map[noteKey]*pendingNote
	dropped int
}

type noteKey struct{ scoped, verdict string }

// pendingNote is the first copy's note and the copies gathered.
type pendingNote struct {
	n      store.Note
	copies int
}

// noteArrival notes an arrival that changed nothing (verdict) in the
// history of scoped, when the key has a record, within noteEvery.
func (g *Gateway) noteArrival(d *delivery, scoped, verdict string) {
	if !d.historyOn() {
		return
	}
	if _, ok := g.store.(store.HistoryNoter); !ok {
		return
	}
	k := noteKey{scoped, verdict}
	ns := &g.notes
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if p := ns.pending[k]; p != nil {
		p.copies++
		return
	}
	if len(ns.pending) >= notesMax {
		ns.dropped++
		return
	}
	if ns.pending == nil {
		ns.pending = map[noteKey]*pendingNote{}
		time.AfterFunc(noteEvery, g.writeNotes)
	}
	n := d.noteOf()
	// The delivery's strings live in its own block: keep copies.
	n.RequestID, n.Client, n.Secret = strings.Clone(n.RequestID), strings.Clone(n.Client), strings.Clone(n.Secret)
	n.At = time.Now()
	ns.pending[k] = &pendingNote{n: n, copies: 1}
}

// writeNotes writes the gathered notes, one entry per key and verdict:
// the first copy's time, request id and client, and how many copies
// there were when more than one.
func (g *Gateway) writeNotes() {
	ns := &g.notes
	ns.mu.Lock()
	pending, dropped := ns.pending, ns.dropped
	ns.pending, ns.dropped = nil, 0
	ns.mu.Unlock()
	if dropped > 0 {
		g.log.Debug("history: copies not noted (too many keys at once)", "copies", dropped)
	}
	n, _ := g.store.(store.HistoryNoter)
	for k, p := range pending {
		verdict := k.verdict
		if p.copies > 1 {
			verdict += " copies=" + strconv.Itoa(p.copies)
		}
		ctx, cancel := context.WithTimeout(store.WithNote(context.Background(), p.n), noteTimeout)
		if err := n.Note(ctx, k.scoped, verdict); err != nil {
			g.log.Debug("history: could not note an arrival", "error", err.Error())
		}
		cancel()
	}
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
