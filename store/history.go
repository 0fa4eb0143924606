package store

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// HistoryEntry is one line of a key's history: an arrival of a copy, a
// try, the settle, a dead-lettering, a skip, a replay, a reset, a purge
// or a delete, written by the key's record in the same atomic step as the
// change it records.
type HistoryEntry struct {
	At        time.Time
	Kind      string // HistArrival...
	Instance  string // the instance that made the change ("" unknown)
	RequestID string
	Attempt   int64 // the copies (arrival) or tries (try, settle) counted so far
	Status    int   // the upstream's status (0 none)
	MS        int64 // the upstream's time in ms (try, settle)
	// Detail is the verdict of an arrival (forwarded, replayed,
	// in_flight, conflict, queued, refused, unauthorized) followed by
	// its secret id and client address, a dead-lettering's reason, or
	// the operator action of a replay, reset, purge or delete.
	Detail string
}

// History entry kinds.
const (
	HistArrival = "arrival"
	HistTry     = "try"
	HistSettle  = "settle"
	HistRetry   = "retry"
	HistDead    = "dead"
	HistSkip    = "skip"
	HistReplay  = "replay"
	HistReset   = "reset"
	HistPurge   = "purge"
	HistDelete  = "delete"
	HistRelease = "release"
)

// Note is what the caller of a key transition knows that the record does
// not: the instance, the request, how the copy was verified and where it
// came from, and the upstream's time. It rides in the transition's
// context (WithNote); a transition without one records its entry with
// these fields empty.
type Note struct {
	Instance  string
	RequestID string
	Secret    string // the secret id that verified the copy
	Client    string // the client address
	Action    string // an operator action ("admin reset", "dlq replay")
	Status    int    // the upstream status, for a release or a retry
	// Unrecorded: the transition records no entry (an operator action
	// already recorded by the call before it on the same record).
	Unrecorded bool
	UpstreamMS int64
	// At is when what the entry records happened; zero: when it is
	// written (a note written later, such as the copies an instance's
	// window answered, gathered for a second, carries the first's time).
	At time.Time
}

type noteKey struct{}

// WithNote returns ctx carrying n for the key transitions called with it.
func WithNote(ctx context.Context, n Note) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

// NoteFrom returns the note ctx carries (zero when none).
func NoteFrom(ctx context.Context) Note {
	n, _ := ctx.Value(noteKey{}).(Note)
	return n
}

// Suffix is what an entry's detail carries after its verdict or reason:
// " secret=ID", " client=ADDR", " by=ACTION" for the fields set.
func (n Note) Suffix() string {
	if n.Secret == "" && n.Client == "" && n.Action == "" {
		return ""
	}
	// One allocation: the pieces are written, not joined first.
	var b strings.Builder
	b.Grow(len(n.Secret) + len(n.Client) + len(n.Action) + len(" secret= client= by="))
	for _, f := range [...][2]string{{" secret=", n.Secret}, {" client=", n.Client}, {" by=", n.Action}} {
		if f[1] != "" {
			b.WriteString(f[0])
			b.WriteString(f[1])
		}
	}
	return b.String()
}

// Historian is a store that keeps each key's history: History returns
// the entries of a scoped key ("route:key"), oldest first (none: nil).
type Historian interface {
	History(ctx context.Context, key string) ([]HistoryEntry, error)
}

// histSep separates an encoded entry's fields: a control character no
// field carries (instance ids, request ids, secret ids, addresses and
// reasons are printable; a key never reaches an entry).
const histSep = "\x1f"

// EncodeHistory is an entry as the records keep it: its fields joined by
// histSep, at in ms.
func EncodeHistory(e HistoryEntry) string {
	return strings.Join([]string{strconv.FormatInt(e.At.UnixMilli(), 10), e.Kind, CleanField(e.Instance), CleanField(e.RequestID),
		strconv.FormatInt(e.Attempt, 10), strconv.Itoa(e.Status), strconv.FormatInt(e.MS, 10), CleanField(e.Detail)}, histSep)
}

// CleanField drops histSep and the entries' separator (0x1e) from a
// field: EncodeHistory's, and the fields sent to a script that builds the
// entry.
func CleanField(s string) string {
	if !strings.ContainsAny(s, "\x1e\x1f") {
		return s
	}
	return strings.NewReplacer("\x1e", "", "\x1f", "").Replace(s)
}

// DecodeHistory reads an encoded entry; ok false when it is not one.
func DecodeHistory(s string) (HistoryEntry, bool) {
	f := strings.Split(s, histSep)
	if len(f) != 8 {
		return HistoryEntry{}, false
	}
	at, err1 := strconv.ParseInt(f[0], 10, 64)
	att, err2 := strconv.ParseInt(f[4], 10, 64)
	st, err3 := strconv.Atoi(f[5])
	ms, err4 := strconv.ParseInt(f[6], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return HistoryEntry{}, false
	}
	return HistoryEntry{At: time.UnixMilli(at).UTC(), Kind: f[1], Instance: f[2], RequestID: f[3],
		Attempt: att, Status: st, MS: ms, Detail: f[7]}, true
}

// HistoryNoter is a store that appends an arrival that changed nothing
// (verdict: replayed from an instance's window, unauthorized) to a
// scoped key's history, only when the key has a record.
type HistoryNoter interface {
	Note(ctx context.Context, key, verdict string) error
}

// History implements Historian: the timed store's history, nil when it
// keeps none.
func (t *Timed) History(ctx context.Context, key string) ([]HistoryEntry, error) {
	if h, ok := t.s.(Historian); ok {
		return h.History(ctx, key)
	}
	return nil, nil
}

// Note implements HistoryNoter: nothing when the timed store keeps no
// history.
func (t *Timed) Note(ctx context.Context, key, verdict string) error {
	if h, ok := t.s.(HistoryNoter); ok {
		return h.Note(ctx, key, verdict)
	}
	return nil
}
