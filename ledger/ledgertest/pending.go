package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/clawgate/clawgate/queue"
)

// The pending token closes the race between producing a retry or replay
// record and recording it: a consumer may read the record first. Each
// case runs on every ledger (memory, Redis, Redis Cluster).
var pendingCases = []testCase{
	{"RetryRecordReadBeforeSettle", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "0/1", "w1", true)
		if got, err := l.Intend(background, Route, "k", eid, tok, "w1", "t2"); err != nil || got != queue.Recorded {
			t.Fatalf("Intend = %v, %v", got, err)
		}
		// The promoted retry record is read before w1 records the retry:
		// adopted, not dropped.
		b := MustBegin(t, l, "k", eid, "t2", "0/7", "w2", true)
		if b.Try != 2 || b.Total != 2 {
			t.Fatalf("adopted try = %+v, want try 2 of 2", b)
		}
		// w1's settlement then finds its retry already live.
		MustSettle(t, l, "k", eid, tok, "w1", RetrySettlement("t2"), queue.Recorded)
		// And w2's try is the one that settles.
		MustSettle(t, l, "k", eid, "t2", "w2", DoneSettlement("k"), queue.Recorded)
		WantState(t, l, "k", queue.StateFinished)
		// The old record, read again, is a leftover.
		MustBegin(t, l, "k", eid, tok, "0/1", "w3", false)
	}},
	{"LiveRecordCancelsPendingRetry", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "0/1", "w1", true)
		if got, err := l.Intend(background, Route, "k", eid, tok, "w1", "t2"); err != nil || got != queue.Recorded {
			t.Fatalf("Intend = %v, %v", got, err)
		}
		// w1 died before recording the retry: its record is read again
		// and taken over; the retry record, read later, is a leftover.
		MustBegin(t, l, "k", eid, tok, "0/1", "w2", true)
		MustSettle(t, l, "k", eid, tok, "w1", RetrySettlement("t2"), queue.NotOwner)
		MustBegin(t, l, "k", eid, "t2", "0/7", "w3", false)
		MustSettle(t, l, "k", eid, tok, "w2", DoneSettlement("k"), queue.Recorded)
	}},
	{"IntendRefusals", func(t *testing.T, l Subject, clock *Clock) {
		eid, tok := Enqueue(t, l, clock, "k")
		MustBegin(t, l, "k", eid, tok, "0/1", "w1", true)
		if got, _ := l.Intend(background, Route, "k", eid, tok, "other", "t2"); got != queue.NotOwner {
			t.Fatalf("Intend by another owner = %v, want NotOwner", got)
		}
		if got, _ := l.Intend(background, Route, "k", eid, "old", "w1", "t2"); got != queue.Stale {
			t.Fatalf("Intend with an old token = %v, want Stale", got)
		}
		if _, err := l.Intend(background, Route, "k", eid, tok, "w1", ""); err == nil {
			t.Fatal("Intend without a token: no error")
		}
		// Refused intents leave no pending token behind.
		MustBegin(t, l, "k", eid, "t2", "0/7", "w2", false)
	}},
	{"ReplayRecordReadBeforeReplay", func(t *testing.T, l Subject, clock *Clock) {
		eid := Kill(t, l, clock, "k", "3/9")
		key, pos, err := l.Dead(background, Route, eid, "r1")
		if err != nil || key != "k" || pos != "3/9" {
			t.Fatalf("Dead = %q, %q, %v", key, pos, err)
		}
		WantStats(t, l, 0, 1, time.Time{})
		b := MustBegin(t, l, "k", eid, "r1", "0/20", "w2", true)
		if b.Try != 1 || b.Total != 2 {
			t.Fatalf("adopted replay try = %+v, want try 1 (round reset), 2 in all", b)
		}
		WantStats(t, l, 1, 0, clock.Now())
		WantState(t, l, "k", queue.StateQueued)
		// The operator's replay then finds the event no longer dead.
		if err := l.Replay(background, Route, eid, "3/9", "r1"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("Replay after adoption = %v, want ErrNotFound", err)
		}
		MustSettle(t, l, "k", eid, "r1", "w2", DoneSettlement("k"), queue.Recorded)
	}},
	{"TwoReplaysOneLive", func(t *testing.T, l Subject, clock *Clock) {
		eid := Kill(t, l, clock, "k", "3/9")
		if _, _, err := l.Dead(background, Route, eid, "r1"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Dead(background, Route, eid, "r2"); err != nil {
			t.Fatal(err)
		}
		if err := l.Replay(background, Route, eid, "3/9", "r1"); err != nil {
			t.Fatalf("first replay: %v", err)
		}
		if err := l.Replay(background, Route, eid, "3/9", "r2"); !errors.Is(err, queue.ErrNotFound) {
			t.Fatalf("second replay = %v, want ErrNotFound", err)
		}
		// Only r1's record is live; r2's is a leftover.
		MustBegin(t, l, "k", eid, "r2", "0/21", "w2", false)
		MustBegin(t, l, "k", eid, "r1", "0/20", "w2", true)
	}},
}
