package kafka

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// promoter reads a route's retry tiers in the group G.R.retry and sends
// each record on when it is due: back to the main topic, or to a shorter
// tier when its delay is not over yet. A partition's records are held in
// order, at most maxHeld of them (then its fetching pauses until some are
// sent on), so memory stays bounded.
type promoter struct {
	r  *route
	cl *kgo.Client

	mu   sync.Mutex
	held map[tp][]*kgo.Record
	// committed is the offset last committed per partition.
	committed map[tp]int64
	tiers     map[string]time.Duration // topic -> its delay
}

// maxHeld bounds the records held per tier partition.
const maxHeld = 1000

type tp struct {
	topic string
	part  int32
}

func newPromoter(r *route) (*promoter, error) {
	p := &promoter{r: r, held: map[tp][]*kgo.Record{}, committed: map[tp]int64{}, tiers: map[string]time.Duration{}}
	var topics []string
	for _, t := range Tiers {
		n := r.b.tierTopic(r.name, t)
		p.tiers[n] = t
		topics = append(topics, n)
	}
	cl, err := kgo.NewClient(append(r.b.o.common(),
		kgo.ConsumerGroup(r.b.o.Group+"."+r.name+".retry"),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(r.b.o.SessionTimeout),
		// A rebalance waits this long for members to rejoin: a member that
		// died mid-rebalance holds its partitions until then. It must leave
		// room for the revoke callback's DrainWait.
		kgo.RebalanceTimeout(r.b.o.DrainWait+5*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.OnPartitionsRevoked(p.drop),
		kgo.OnPartitionsLost(p.drop),
	)...)
	if err != nil {
		return nil, err
	}
	p.cl = cl
	return p, nil
}

// pollLoop takes the tiers' records as they come.
func (p *promoter) pollLoop(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		fs := p.cl.PollRecords(ctx, 256)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		failed := false
		fs.EachError(func(string, int32, error) { failed = true })
		p.mu.Lock()
		pause := map[string][]int32{}
		for _, rec := range fs.Records() {
			k := tp{rec.Topic, rec.Partition}
			q := p.held[k]
			if n := len(q); n > 0 && q[n-1].Offset >= rec.Offset {
				continue // already held
			}
			p.held[k] = append(q, rec)
			if len(q)+1 == maxHeld {
				pause[rec.Topic] = append(pause[rec.Topic], rec.Partition)
			}
		}
		if len(pause) > 0 {
			p.cl.PauseFetchPartitions(pause)
		}
		p.mu.Unlock()
		if failed && len(pause) == 0 {
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 2*time.Second)
		} else {
			backoff = 50 * time.Millisecond
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// releasable reports whether a held tier record may go on at now: its
// tier's delay has passed since it was written, or it is due.
func (p *promoter) releasable(rec *kgo.Record, now time.Time) bool {
	due, okDue := msHeader(rec, hDue)
	at, okAt := msHeader(rec, hAt)
	if !okDue || !okAt {
		return true // malformed: dropped by promote
	}
	return !now.Before(due) || !now.Before(at.Add(p.tiers[rec.Topic]))
}

func msHeader(rec *kgo.Record, k string) (time.Time, bool) {
	v, err := strconv.ParseInt(header(rec, k), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(v), true
}

// promote sends every releasable record on (not only a partition's due
// front: in the shortest tier a record due sooner may follow one due
// later), commits each partition up to its first record still held, and
// resumes the partitions that were full. A record sent on but behind one still
// held is not committed yet: read again after a crash, its second copy is
// dropped by the fence.
func (p *promoter) promote(ctx context.Context, now time.Time) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type move struct {
		from *kgo.Record
		to   *kgo.Record // nil: malformed, dropped
	}
	var moves []move
	var out []*kgo.Record
	rest := map[tp][]*kgo.Record{}
	for k, q := range p.held {
		var keep []*kgo.Record
		for _, rec := range q {
			if !p.releasable(rec, now) {
				keep = append(keep, rec)
				continue
			}
			to := p.next(rec, now)
			moves = append(moves, move{rec, to})
			if to != nil {
				out = append(out, to)
			}
		}
		rest[k] = keep
	}
	if len(moves) == 0 {
		return 0, nil
	}
	if len(out) > 0 {
		pctx, cancel := context.WithTimeout(ctx, produceTimeout)
		err := p.r.b.produce(pctx, out...)
		cancel()
		if err != nil {
			// Keep every held record: a record produced anyway is sent
			// again next time and the second copy is dropped by the fence.
			return 0, unavailable("produce promoted retries", err)
		}
	}
	promoted := 0
	for _, m := range moves {
		if m.to == nil {
			p.r.b.log.Error("kafka: dropped a retry record without clawgate headers", "topic", m.from.Topic, "partition", m.from.Partition, "offset", m.from.Offset)
		} else if m.to.Topic == p.r.b.topic(p.r.name) {
			promoted++
		}
	}
	offs := map[string]map[int32]kgo.EpochOffset{}
	resume := map[string][]int32{}
	for k, q := range p.held {
		keep := rest[k]
		if len(keep) == len(q) {
			continue
		}
		// The commit point: the first record still held, or past the last.
		at := kgo.EpochOffset{Epoch: q[len(q)-1].LeaderEpoch, Offset: q[len(q)-1].Offset + 1}
		if len(keep) > 0 {
			at = kgo.EpochOffset{Epoch: keep[0].LeaderEpoch, Offset: keep[0].Offset}
			p.held[k] = keep
		} else {
			delete(p.held, k)
		}
		if len(q) >= maxHeld {
			resume[k.topic] = append(resume[k.topic], k.part) // paused when full
		}
		if at.Offset > p.committed[k] {
			p.committed[k] = at.Offset
			if offs[k.topic] == nil {
				offs[k.topic] = map[int32]kgo.EpochOffset{}
			}
			offs[k.topic][k.part] = at
		}
	}
	if len(offs) > 0 {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		p.cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				err = respErr(resp)
			}
			if err != nil {
				// The records went on; if they are read again (after a
				// restart or a rebalance) their copies are dropped by the
				// fence.
				p.r.b.log.Warn("kafka: retry offset commit failed", "route", p.r.name, "error", err)
			}
		})
		cancel()
	}
	if len(resume) > 0 {
		p.cl.ResumeFetchPartitions(resume)
	}
	return promoted, nil
}

// next is where a released tier record goes: the main topic when due,
// else the longest tier not longer than what is left of its delay.
func (p *promoter) next(rec *kgo.Record, now time.Time) *kgo.Record {
	eid, tok, first := header(rec, hEventID), header(rec, hToken), header(rec, hFirst)
	due, ok := msHeader(rec, hDue)
	if eid == "" || tok == "" || len(rec.Key) == 0 || !ok {
		return nil
	}
	hs := []kgo.RecordHeader{{Key: hEventID, Value: []byte(eid)}, {Key: hToken, Value: []byte(tok)}, {Key: hFirst, Value: []byte(first)}}
	left := due.Sub(now)
	if left <= 0 {
		return &kgo.Record{Topic: p.r.b.topic(p.r.name), Key: rec.Key, Value: rec.Value, Headers: hs}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: hDue, Value: []byte(header(rec, hDue))},
		kgo.RecordHeader{Key: hAt, Value: strconv.AppendInt(nil, now.UnixMilli(), 10)})
	return &kgo.Record{Topic: p.r.b.tierTopic(p.r.name, tierFor(left)), Key: rec.Key, Value: rec.Value, Headers: hs}
}

// drop forgets the held records of partitions the group took away; they
// were not committed, so their next owner reads them again.
func (p *promoter) drop(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for topic, ps := range parts {
		if !strings.HasPrefix(topic, p.r.b.o.TopicPrefix) {
			continue
		}
		for _, part := range ps {
			delete(p.held, tp{topic, part})
			delete(p.committed, tp{topic, part})
		}
		// A paused partition that comes back must be fetched again.
		p.cl.ResumeFetchPartitions(map[string][]int32{topic: ps})
	}
}

func (p *promoter) close() { p.cl.Close() }
