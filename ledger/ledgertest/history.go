package ledgertest

import (
	"context"
	"strings"
	"testing"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// Historian is a ledger that keeps each key's history: the history cases
// run when the subject's ledger is one.
type Historian interface {
	SetHistory(ledger.HistoryOptions)
	History(ctx context.Context, route, key string) ([]store.HistoryEntry, error)
	Note(ctx context.Context, route, key, verdict string) error
}

// histInstance names the instance in the history cases' entries.
const histInstance = "inst-1"

// historied turns l's history on with cap entries per key.
func historied(t *testing.T, l Subject, cap int) Historian {
	t.Helper()
	h, ok := l.Ledger.(Historian)
	if !ok {
		t.Skip("the ledger keeps no history")
	}
	h.SetHistory(ledger.HistoryOptions{Cap: cap, Keep: Retain, Instance: histInstance})
	return h
}

// history reads Route's key's history.
func history(t *testing.T, h Historian, key string) []store.HistoryEntry {
	t.Helper()
	es, err := h.History(background, Route, key)
	if err != nil {
		t.Fatalf("History %s: %v", key, err)
	}
	return es
}

// summary is an entry as "kind/detail/attempt/status" (detail's first
// word), for comparing timelines.
func summary(es []store.HistoryEntry) string {
	var b []string
	for _, e := range es {
		d, _, _ := strings.Cut(e.Detail, " ")
		b = append(b, e.Kind+"/"+d+"/"+itoa(e.Attempt)+"/"+itoa(int64(e.Status)))
	}
	return strings.Join(b, " ")
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// wantHistory checks Route's key's timeline.
func wantHistory(t *testing.T, h Historian, key, want string) []store.HistoryEntry {
	t.Helper()
	es := history(t, h, key)
	if got := summary(es); got != want {
		t.Fatalf("history of %s:\n got %s\nwant %s", key, got, want)
	}
	return es
}

// noted is a context carrying a note of request rid.
func noted(rid string) context.Context {
	return store.WithNote(background, store.Note{RequestID: rid, Secret: "live", Client: "203.0.113.9"})
}

var historyCases = []testCase{
	{"HistoryQueuedKeyEveryTransition", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 50)
		const key = "k"
		eid, tok := "e-k", "t-k"
		if got, err := l.Reserve(noted("r1"), Res(clock, key, eid, tok)); err != nil || got.State != queue.Enqueued {
			t.Fatalf("Reserve = %+v, %v", got, err)
		}
		MustConfirm(t, l, key, tok, true)
		MustReserve(t, l, Res(clock, key, "e-other", "t-other")) // a copy
		other := Res(clock, key, "e-x", "t-x")
		other.Fingerprint = "fp-else"
		MustReserve(t, l, other) // the same key, another payload
		MustBegin(t, l, key, eid, tok, "p1", "w1", true)
		MustSettle(t, l, key, eid, tok, "w1", RetrySettlement("t2"), queue.Recorded)
		MustBegin(t, l, key, eid, "t2", "p2", "w1", true)
		MustSettle(t, l, key, eid, "t2", "w1", DeadSettlement(clock, "d1"), queue.Recorded)
		if _, _, err := l.Dead(background, Route, eid, ""); err != nil {
			t.Fatalf("Dead: %v", err)
		}
		if err := l.Replay(background, Route, eid, "d1", "t3"); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		MustBegin(t, l, key, eid, "t3", "p3", "w1", true)
		MustSettle(t, l, key, eid, "t3", "w1", DoneSettlement(key), queue.Recorded)
		MustReserve(t, l, Res(clock, key, "e-again", "t-again")) // replayed
		es := wantHistory(t, h, key, "arrival/queued/1/0 arrival/queued/2/0 arrival/conflict/3/0 "+
			"try//1/0 retry/retry/1/0 try//2/0 dead/rejected:400/2/400 replay/replayed/2/0 try//3/0 "+
			"settle/delivered/3/201 arrival/replayed/4/0")
		first := es[0]
		if first.RequestID != "r1" || first.Instance != histInstance || !first.At.Equal(clock.Now()) ||
			first.Detail != "queued secret=live client=203.0.113.9" {
			t.Fatalf("first entry = %+v", first)
		}
		if es[1].RequestID != "" {
			t.Fatalf("an entry without a note has request id %q", es[1].RequestID)
		}
		// Gone with the key after its retention.
		l.Expire(t, Route, key)
		wantHistory(t, h, key, "")
	}},
	{"HistoryPurgeAndDelete", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 50)
		eid := Kill(t, l, clock, "k", "d1")
		if err := l.Purge(store.WithNote(background, store.Note{Action: "dlq purge"}), Route, eid, Retain); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		es := wantHistory(t, h, "k", "arrival/queued/1/0 try//1/0 dead/rejected:400/1/400 purge/purged/1/0")
		if es[3].Detail != "purged by=dlq purge" {
			t.Fatalf("purge entry detail = %q", es[3].Detail)
		}
		Enqueue(t, l, clock, "q")
		if _, err := l.Delete(background, Route, "q"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		// The history outlives the deleted record, for the operator to
		// read what was deleted.
		wantHistory(t, h, "q", "arrival/queued/1/0 delete/deleted/0/0")
		WantState(t, l, "q", queue.StateAbsent)
	}},
	{"HistoryCapped", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 3)
		eid, tok := Enqueue(t, l, clock, "k")
		for range 4 {
			MustReserve(t, l, Res(clock, "k", "e-x", "t-x"))
		}
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		wantHistory(t, h, "k", "arrival/queued/4/0 arrival/queued/5/0 try//1/0")
	}},
	{"HistoryOff", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 0)
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "p1", "w1", true)
		MustSettle(t, l, "k", eid, tok, "w1", DoneSettlement("k"), queue.Recorded)
		if err := h.Note(background, Route, "k", "replayed"); err != nil {
			t.Fatalf("Note: %v", err)
		}
		wantHistory(t, h, "k", "")
	}},
	{"HistoryNoteOnlyOnKnownKeys", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 50)
		// An unknown key (a forged one, or an unauthenticated copy) gets
		// no record and no history.
		if err := h.Note(noted("r9"), Route, "forged", "unauthorized"); err != nil {
			t.Fatalf("Note: %v", err)
		}
		wantHistory(t, h, "forged", "")
		WantState(t, l, "forged", queue.StateAbsent)
		if d := l.TTL(t, Route, "forged"); d != NoKey {
			t.Fatalf("a note on an unknown key left a record (ttl %v)", d)
		}
		Enqueue(t, l, clock, "k")
		if err := h.Note(noted("r2"), Route, "k", "unauthorized"); err != nil {
			t.Fatalf("Note: %v", err)
		}
		es := wantHistory(t, h, "k", "arrival/queued/1/0 arrival/unauthorized/1/0")
		if es[1].RequestID != "r2" {
			t.Fatalf("note entry = %+v", es[1])
		}
	}},
}

var syncHistoryCases = []testCase{
	{"HistorySyncKey", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 50)
		s := syncOf(l)
		c, err := s.Claim(noted("r1"), Route, "k", "fp-k", Lease)
		if err != nil || c.State != store.Claimed {
			t.Fatalf("Claim = %+v, %v", c, err)
		}
		MustClaim(t, l, "k", store.InFlight)
		ctx := store.WithNote(background, store.Note{RequestID: "r1", UpstreamMS: 12})
		if err := s.Finish(ctx, Route, "k", c.Token, SyncOutcome("k"), Retain); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		MustClaim(t, l, "k", store.Finished)
		if c, err := s.Claim(background, Route, "k", "fp-else", Lease); err != nil || c.State != store.Finished {
			t.Fatalf("Claim with another payload = %+v, %v", c, err)
		}
		es := wantHistory(t, h, "k", "arrival/forwarded/1/0 arrival/in_flight/2/0 settle/finished/1/202 "+
			"arrival/replayed/3/0 arrival/conflict/4/0")
		if es[2].MS != 12 || es[2].RequestID != "r1" {
			t.Fatalf("settle entry = %+v", es[2])
		}
		c2 := MustClaim(t, l, "r", store.Claimed)
		mustRelease(t, l, "r", c2.Token, nil)
		wantHistory(t, h, "r", "arrival/forwarded/1/0 release/released/1/0")
		// A reset keeps the history, the reset last.
		if _, err := s.Reset(store.WithNote(background, store.Note{Action: "admin"}), Route, "k"); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		es = history(t, h, "k")
		if len(es) != 6 || es[5].Kind != store.HistReset || es[5].Detail != "reset by=admin" {
			t.Fatalf("history after reset = %s", summary(es))
		}
		// The next copy is forwarded again, its arrival after the reset.
		MustClaim(t, l, "k", store.Claimed)
		es = history(t, h, "k")
		if got := summary(es[5:]); got != "reset/reset/0/0 arrival/forwarded/1/0" {
			t.Fatalf("history after reset and claim ends %s", got)
		}
	}},
	// The claim and the finish append their entry in the record's own
	// write: the cap holds there too, the oldest entries dropped first.
	{"HistorySyncCapped", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 2)
		c := MustClaim(t, l, "k", store.Claimed)
		mustRelease(t, l, "k", c.Token, nil)
		c = MustClaim(t, l, "k", store.Claimed)
		wantHistory(t, h, "k", "release/released/1/0 arrival/forwarded/2/0")
		mustFinish(t, l, "k", c.Token, nil)
		wantHistory(t, h, "k", "arrival/forwarded/2/0 settle/finished/2/202")
	}},
	{"HistorySyncGoneWithKey", func(t *testing.T, l Subject, clock *Clock) {
		h := historied(t, l, 50)
		c := MustClaim(t, l, "k", store.Claimed)
		mustFinish(t, l, "k", c.Token, nil)
		wantHistory(t, h, "k", "arrival/forwarded/1/0 settle/finished/1/202")
		l.Expire(t, Route, "k")
		wantHistory(t, h, "k", "")
	}},
}
