package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/kafkatest"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// An instance whose ordered head settled died before producing the next
// event's record (the hand-back's own step): the sweeper produces it, and
// the event is delivered, once.
func TestKafkaOrderHandBackLostWithItsInstance(t *testing.T) {
	forEachLedger(t, func(t *testing.T, kc *kafkatest.Cluster, l ledger.Ledger) {
		b := newBackend(t, kc, l, func(o *Options) { o.Partitions = 1; o.HandBackRedo = 200 * time.Millisecond })
		ctx := context.Background()
		for _, k := range []string{"a1", "a2"} {
			e := entry(k)
			e.Order = "A"
			if ack, err := b.Enqueue(ctx, e, 1000); err != nil || ack.State != queue.Enqueued {
				t.Fatalf("Enqueue %s: %+v, %v", k, ack, err)
			}
		}
		got := map[string]queue.Lease{}
		eventually(t, bound, func() bool {
			ls, err := b.Read(ctx, testRoute, 0, "c", 2, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				got[l.Key] = l
			}
			return len(got) == 2
		}, func() string { return "both records read" })
		if _, ok, err := b.Begin(ctx, got["a2"]); ok || err != nil {
			t.Fatalf("a2 begun out of turn: %v %v", ok, err)
		}
		j, ok, err := b.Begin(ctx, got["a1"])
		if !ok || err != nil {
			t.Fatalf("Begin a1: %v %v", ok, err)
		}
		// The settle, recorded in the ledger by an instance that dies before
		// its hand-back.
		s := queue.Settlement{Kind: queue.SettleDelivered, Retention: time.Hour, At: time.Now()}
		if r, err := l.Settle(ctx, testRoute, j.Key, j.EventID, j.Token, ownerOf("c", j.Entry), s); err != nil || r != queue.Recorded {
			t.Fatalf("ledger Settle a1: %v %v", r, err)
		}
		var a2 queue.Lease
		eventually(t, bound, func() bool {
			ls, err := b.Read(ctx, testRoute, 0, "c", 1, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) == 1 {
				a2 = ls[0]
			}
			return len(ls) == 1
		}, func() string { return "a2 handed back by the sweeper" })
		if a2.Key != "a2" || string(got["a2"].Key) != "a2" {
			t.Fatalf("handed back %+v", a2)
		}
		j2, ok, err := b.Begin(ctx, a2)
		if !ok || err != nil || j2.Try != 1 || string(j2.Payload) != "payload a2" {
			t.Fatalf("Begin handed-back a2 = %+v, %v, %v", j2, ok, err)
		}
		if r, err := b.Settle(ctx, "c", j2, s); err != nil || r != queue.Recorded {
			t.Fatalf("Settle a2: %v %v", r, err)
		}
		if ks, _ := b.Get(ctx, testRoute, "a2"); ks.State != queue.StateFinished {
			t.Fatalf("a2 = %+v", ks)
		}
	})
}
