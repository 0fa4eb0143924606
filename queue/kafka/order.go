package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The order gate on Kafka (package ledger's order.go; model/order.pml with
// SPLIT_HANDBACK): the ledger parks an ordered event begun out of turn and
// keeps the position of its main-topic record, which is then committed
// like a leftover's. When the event's turn comes (its value's head
// settled, was purged or deleted) the ledger makes it due; handBackDue
// reads its record back from that position and produces it to the main
// topic again, carrying the pending token the ledger gave it. That
// produce is a step of its own, which an instance may die before: the
// sweeper (sweepLoop) hands back again every event due and not begun for
// HandBackRedo, with the same token, so a late first record and the
// second one are one event (the first begun wins, the other is dropped).

// handBackDue produces the records of route's events due for a
// hand-back: those never handed back, and with redo > 0 also those handed
// back at least redo ago and not begun since. A failure is logged; the
// sweeper tries again.
func (b *Backend) handBackDue(ctx context.Context, route string, redo time.Duration) {
	if b.existing(route) == nil {
		return
	}
	hs, err := b.o.Ledger.HandBacks(context.WithoutCancel(ctx), route, redo, 100)
	if err != nil {
		b.log.Warn("kafka: could not hand back ordered events; the sweeper tries again", "route", route, "error", err)
		return
	}
	for _, h := range hs {
		p, off, ok := parsePos(h.Pos)
		if !ok {
			b.log.Error("kafka: an ordered event was parked without a record position; it cannot be handed back", "route", route, "key", h.Key, "id", h.EventID)
			continue
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.o.Lease)
		rec, err := b.fetch(fctx, b.topic(route), p, off)
		cancel()
		if err != nil {
			b.log.Error("kafka: could not read a parked ordered event back; the sweeper tries again", "route", route, "key", h.Key, "id", h.EventID, "position", h.Pos, "error", err)
			continue
		}
		out := &kgo.Record{Topic: b.topic(route), Key: []byte(h.Key), Value: rec.Value, Headers: []kgo.RecordHeader{
			{Key: hEventID, Value: []byte(h.EventID)}, {Key: hToken, Value: []byte(h.Token)},
			{Key: hFirst, Value: []byte(header(rec, hFirst))}, {Key: hOrder, Value: []byte(header(rec, hOrder))},
		}}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), produceTimeout)
		err = b.produce(pctx, out)
		cancel()
		if err != nil {
			b.log.Warn("kafka: could not produce a handed-back ordered event; the sweeper tries again", "route", route, "key", h.Key, "error", err)
		}
	}
}

// sweepLoop hands back, every second, the route's ordered events whose
// hand-back was lost (see handBackDue).
func (b *Backend) sweepLoop(r *route) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.bg.Done():
			return
		case <-t.C:
		}
		if b.down() == nil {
			b.handBackDue(b.bg, r.name, b.o.HandBackRedo)
		}
	}
}
