package ledger_test

import (
	"os"
	"testing"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/ledger/ledgertest"
	"github.com/clawgate/clawgate/store/redistest"
)

// upgradeFixture holds every key an earlier build's Redis ledger wrote
// for the keys below, as DUMP payloads. Regenerate it only when the
// schema version changes, from the commit before the change:
//
//	CLAWGATE_WRITE_UPGRADE_FIXTURE=1 go test ./ledger -run TestWriteUpgradeFixture
const upgradeFixture = "testdata/upgrade/schema1.json"

// upgradePrefix is the key prefix of the fixture's ledger.
const upgradePrefix = "u1:"

// TestWriteUpgradeFixture writes upgradeFixture with this build: a key
// being enqueued, one queued and never begun, one begun by an owner that
// then died, one waiting to retry under a new token, two dead-lettered
// (one purged since) and one finished.
func TestWriteUpgradeFixture(t *testing.T) {
	if os.Getenv("CLAWGATE_WRITE_UPGRADE_FIXTURE") == "" {
		t.Skip("writes the upgrade fixture; set CLAWGATE_WRITE_UPGRADE_FIXTURE=1 to regenerate it")
	}
	addr := redistest.Start(t)
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(redisClient(t, addr), upgradePrefix, opTimeout)
	l.Now = clock.Now

	ledgertest.MustReserve(t, l, ledgertest.Res(clock, "enq-1", "e-enq-1", "t-enq-1"))
	ledgertest.Enqueue(t, l, clock, "queued-1")
	eid, tok := ledgertest.Enqueue(t, l, clock, "begun-1")
	ledgertest.MustBegin(t, l, "begun-1", eid, tok, "p-begun-1", "w1", true)
	eid, tok = ledgertest.Enqueue(t, l, clock, "retry-1")
	ledgertest.MustBegin(t, l, "retry-1", eid, tok, "p-retry-1", "w1", true)
	ledgertest.MustSettle(t, l, "retry-1", eid, tok, "w1", ledgertest.RetrySettlement("t2-retry-1"), ledger.Recorded)
	ledgertest.Kill(t, l, clock, "dead-1", "dlq-1")
	eid = ledgertest.Kill(t, l, clock, "dead-2", "dlq-2")
	if err := l.Purge(t.Context(), ledgertest.Route, eid, ledgertest.Retain); err != nil {
		t.Fatal(err)
	}
	eid, tok = ledgertest.Enqueue(t, l, clock, "done-1")
	ledgertest.MustBegin(t, l, "done-1", eid, tok, "p-done-1", "w1", true)
	ledgertest.MustSettle(t, l, "done-1", eid, tok, "w1", ledgertest.DoneSettlement("done-1"), ledger.Recorded)

	s := redistest.WriteSnapshot(t, addr, upgradeFixture)
	t.Logf("wrote %d keys to %s", len(s.Keys), upgradeFixture)
}

// The Redis ledger of this build reads what an earlier build's wrote
// (the fixture) as meant: the reservation is still confirmable, the
// queued key begins, the key begun by a dead owner begins again from
// its record (naming that owner), the retry's record is adopted under
// its new token, the dead-lettered event is listed and replayed, the
// purged one stays dead-lettered and unlisted, and the finished key
// answers its copy with the stored outcome.
func TestUpgradeReadsLedgerOfTheEarlierBuild(t *testing.T) {
	addr := redistest.Start(t)
	s := redistest.LoadSnapshot(t, addr, upgradeFixture)
	t.Logf("fixture: %d keys written by commit %.12s on redis %s", len(s.Keys), s.Commit, s.Redis)
	clock := ledgertest.NewClock()
	l := ledger.NewRedis(redisClient(t, addr), upgradePrefix, opTimeout)
	l.Now = clock.Now

	ledgertest.WantStats(t, l, 3, 1, clock.Now())
	ledgertest.MustConfirm(t, l, "enq-1", "t-enq-1", true)
	ledgertest.WantState(t, l, "queued-1", ledger.StateQueued)
	if b := ledgertest.MustBegin(t, l, "queued-1", "e-queued-1", "t-queued-1", "p-queued-1", "w2", true); b.Try != 1 || b.Total != 1 {
		t.Errorf("queued-1's first try after the upgrade: %+v, want try 1 of 1", b)
	}
	if b := ledgertest.MustBegin(t, l, "begun-1", "e-begun-1", "t-begun-1", "p-begun-1", "w2", true); b.PrevOwner != "w1" || b.Try != 2 {
		t.Errorf("begun-1 read again after its owner died: %+v, want try 2 with previous owner w1", b)
	}
	ledgertest.MustBegin(t, l, "retry-1", "e-retry-1", "t-retry-1", "p-retry-1", "w2", false)
	if b := ledgertest.MustBegin(t, l, "retry-1", "e-retry-1", "t2-retry-1", "p2-retry-1", "w2", true); b.Try != 2 {
		t.Errorf("retry-1's retry after the upgrade: %+v, want try 2", b)
	}

	dead, next, err := l.ListDead(t.Context(), ledgertest.Route, "", 10)
	if err != nil || next != "" || len(dead) != 1 || dead[0].Key != "dead-1" || dead[0].Reason != "rejected:400" || dead[0].Status != 400 {
		t.Fatalf("ListDead after the upgrade: %+v %q %v, want dead-1 (rejected:400) alone", dead, next, err)
	}
	key, pos, err := l.Dead(t.Context(), ledgertest.Route, "e-dead-1", "t2-dead-1")
	if err != nil || key != "dead-1" || pos != "dlq-1" {
		t.Fatalf("Dead(e-dead-1) after the upgrade: %q %q %v", key, pos, err)
	}
	if err := l.Replay(t.Context(), ledgertest.Route, "e-dead-1", "dlq-1", "t2-dead-1"); err != nil {
		t.Fatalf("Replay(e-dead-1) after the upgrade: %v", err)
	}
	ledgertest.WantState(t, l, "dead-1", ledger.StateQueued)
	ledgertest.WantState(t, l, "dead-2", ledger.StateDeadLettered)

	got := ledgertest.MustReserve(t, l, ledgertest.Res(clock, "done-1", "e-x", "t-x"))
	if got.State != ledger.Delivered || got.Outcome.Status != 201 || string(got.Outcome.Body) != "ok done-1" {
		t.Errorf("a copy of done-1 after the upgrade: %+v, want the stored 201", got)
	}
}
