package kafka

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/clawgate/clawgate/queue"
)

// route is one queue route's clients on this instance.
type route struct {
	b        *Backend
	name     string
	main     *consumer
	promoter *promoter

	topicsOK    atomic.Bool // the topics exist (checked or created)
	topicsMu    sync.Mutex  // serialises checking them
	topicsErr   error
	topicsTried time.Time
}

func (b *Backend) newRoute(name string) (*route, error) {
	r := &route{b: b, name: name}
	var err error
	if r.main, err = newConsumer(r); err != nil {
		return nil, err
	}
	if r.promoter, err = newPromoter(r); err != nil {
		r.main.cl.Close()
		return nil, err
	}
	return r, nil
}

func (r *route) close() {
	r.promoter.close()
	r.main.close()
}

// consumer reads a route's main topic in the group G.R and tracks every
// record it handed out until its outcome is durable, to commit offsets
// only that far.
type consumer struct {
	r     *route
	cl    *kgo.Client
	topic string

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a lease ends
	leases  map[string]*lease
	parts   map[int32]*partition
	dirty   map[int32]bool // partitions whose commit point moved
	closing bool
	commitQ chan struct{} // a commit point moved
	quit    chan struct{} // closes commitLoop
	done    chan struct{} // commitLoop ended
}

// lease is one record handed to a worker.
type lease struct {
	rec     *kgo.Record
	l       queue.Lease
	owner   string // consumer/nonce: this hand-out in the ledger
	running bool   // a worker has it; else it waits for Reclaim
	since   time.Time
}

// partition tracks the records taken from one partition, in offset
// order, until the first not yet done: its offset is the commit point.
type partition struct {
	epoch int32
	recs  []taken
	// commit is the offset to commit next (-1: nothing new).
	commit int64
}

type taken struct {
	off  int64
	done bool
}

func newConsumer(r *route) (*consumer, error) {
	c := &consumer{r: r, topic: r.b.topic(r.name), leases: map[string]*lease{}, parts: map[int32]*partition{},
		dirty: map[int32]bool{}, commitQ: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	cl, err := kgo.NewClient(append(r.b.o.common(),
		kgo.ConsumerGroup(r.b.o.Group+"."+r.name),
		kgo.ConsumeTopics(c.topic),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(r.b.o.SessionTimeout),
		// A rebalance waits this long for members to rejoin: a member that
		// died mid-rebalance holds its partitions until then. It must leave
		// room for the revoke callback's DrainWait.
		kgo.RebalanceTimeout(r.b.o.DrainWait+5*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
	)...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	go c.commitLoop()
	return c, nil
}

// read polls for at most n records and hands them out as leases.
func (c *consumer) read(ctx context.Context, consumer string, n int, block time.Duration) ([]queue.Lease, error) {
	pctx, cancel := context.WithTimeout(ctx, block)
	fs := c.cl.PollRecords(pctx, n)
	cancel()
	if fs.IsClientClosed() {
		return nil, nil
	}
	var ferr error
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = err
		}
	})
	var out []queue.Lease
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rec := range fs.Records() {
		p := c.parts[rec.Partition]
		if p == nil {
			p = &partition{commit: -1}
			c.parts[rec.Partition] = p
		}
		p.epoch = rec.LeaderEpoch
		p.recs = append(p.recs, taken{off: rec.Offset})
		eid, tok := header(rec, hEventID), header(rec, hToken)
		if eid == "" || tok == "" || len(rec.Key) == 0 {
			// Not a record this gateway wrote: nothing to deliver.
			c.r.b.log.Error("kafka: dropped a record without clawgate headers", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
			c.doneLocked(rec.Partition, rec.Offset)
			continue
		}
		nonce := newID()
		l := queue.Lease{Route: c.r.name, Entry: pos(rec.Partition, rec.Offset) + "/" + nonce, EventID: eid, Token: tok, Key: string(rec.Key), Consumer: consumer}
		c.leases[l.Entry] = &lease{rec: rec, l: l, owner: consumer + "/" + nonce, running: true, since: time.Now()}
		out = append(out, l)
	}
	if ferr != nil && len(out) == 0 {
		return nil, unavailable("fetch", ferr)
	}
	return out, nil
}

// begin fences the lease's record in the ledger.
func (c *consumer) begin(ctx context.Context, l queue.Lease) (queue.Job, bool, error) {
	c.mu.Lock()
	ls := c.leases[l.Entry]
	c.mu.Unlock()
	if ls == nil {
		// Its partition went to another instance meanwhile: it reads the
		// record again.
		return queue.Job{}, false, nil
	}
	rec := ls.rec
	bg, ok, err := c.r.b.o.Ledger.Begin(ctx, c.r.name, l.Key, l.EventID, l.Token, pos(rec.Partition, rec.Offset), ls.owner)
	if err != nil {
		c.idle(l.Entry)
		return queue.Job{}, false, err
	}
	if !ok {
		// A leftover, or an ordered event parked behind an earlier one of
		// its value (the ledger keeps this record's position, and the
		// event is produced again from it when its turn comes): either
		// way the record is done here.
		c.end(l.Entry)
		return queue.Job{}, false, nil
	}
	if bg.PrevOwner != "" && consumerOf(bg.PrevOwner) != consumerOf(ls.owner) && c.r.b.o.Reclaimed != nil {
		// Another instance began this record and never settled it: its
		// partition came here. (This instance's own entries taken back
		// after lock_ttl are counted by the queue's Reclaim instead.)
		c.r.b.o.Reclaimed(c.r.name, 1)
		c.r.b.log.Warn("kafka: took over a record another instance had begun and not settled", "route", c.r.name, "key", l.Key, "id", l.EventID)
	}
	return queue.Job{Lease: l, Payload: rec.Value, FirstSeen: bg.FirstSeen, Fingerprint: bg.Fingerprint, Try: bg.Try, Total: bg.Total, Stale: bg.Stale}, true, nil
}

// settle writes the retry or DLQ record first, then the ledger.
func (c *consumer) settle(ctx context.Context, consumer string, j queue.Job, s queue.Settlement) (queue.Settled, error) {
	b := c.r.b
	owner := ownerOf(consumer, j.Entry)
	ks := s
	switch s.Kind {
	case queue.SettleRetry:
		// The retry record's token is pending in the ledger before the
		// record exists: if it is promoted and read before the settlement
		// below is recorded, it is adopted, not dropped.
		ks.NewToken = newID()
		got, err := b.o.Ledger.Intend(ctx, c.r.name, j.Key, j.EventID, j.Token, owner, ks.NewToken)
		if err != nil {
			c.idle(j.Entry)
			return 0, err
		}
		if got != queue.Recorded {
			c.end(j.Entry)
			return got, nil
		}
		now := time.Now()
		tier := tierFor(s.Due.Sub(now))
		rec := &kgo.Record{Topic: b.tierTopic(c.r.name, tier), Key: []byte(j.Key), Value: j.Payload, Headers: []kgo.RecordHeader{
			{Key: hEventID, Value: []byte(j.EventID)}, {Key: hToken, Value: []byte(ks.NewToken)},
			{Key: hFirst, Value: strconv.AppendInt(nil, j.FirstSeen.UnixMilli(), 10)},
			{Key: hDue, Value: strconv.AppendInt(nil, s.Due.UnixMilli(), 10)},
			{Key: hAt, Value: strconv.AppendInt(nil, now.UnixMilli(), 10)},
		}}
		pctx, cancel := context.WithTimeout(ctx, produceTimeout)
		err = b.produce(pctx, rec)
		cancel()
		if err != nil {
			c.idle(j.Entry)
			return 0, unavailable("produce retry", err)
		}
	case queue.SettleDead:
		rec := &kgo.Record{Topic: b.dlqTopic(c.r.name), Key: []byte(j.Key), Value: j.Payload, Headers: []kgo.RecordHeader{
			{Key: hEventID, Value: []byte(j.EventID)},
			{Key: hFirst, Value: strconv.AppendInt(nil, j.FirstSeen.UnixMilli(), 10)},
			{Key: hReason, Value: []byte(s.Reason)},
			{Key: hStatus, Value: strconv.AppendInt(nil, int64(s.Status), 10)},
			{Key: hError, Value: []byte(s.Error)},
			{Key: hAttempts, Value: strconv.AppendInt(nil, j.Total, 10)},
			{Key: hDied, Value: strconv.AppendInt(nil, s.At.UnixMilli(), 10)},
		}}
		pctx, cancel := context.WithTimeout(ctx, produceTimeout)
		err := b.produce(pctx, rec)
		cancel()
		if err != nil {
			c.idle(j.Entry)
			return 0, unavailable("produce dead letter", err)
		}
		ks.DLQPos = pos(rec.Partition, rec.Offset)
		ks.Attempts = j.Total
	}
	ordered := false
	c.mu.Lock()
	if ls := c.leases[j.Entry]; ls != nil {
		ordered = header(ls.rec, hOrder) != ""
	}
	c.mu.Unlock()
	got, err := b.o.Ledger.Settle(ctx, c.r.name, j.Key, j.EventID, j.Token, owner, ks)
	if err != nil {
		c.idle(j.Entry)
		return 0, err
	}
	c.end(j.Entry)
	if ordered && got == queue.Recorded && s.Kind != queue.SettleRetry {
		// The head of an order value settled: the next event of the value,
		// when parked, is produced again, in this step of its own (the
		// sweeper redoes it should this instance die first).
		b.handBackDue(ctx, c.r.name, 0)
	}
	return got, nil
}

// consumerOf is the consumer (instance) part of a ledger owner
// "consumer/nonce".
func consumerOf(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// ownerOf is the ledger owner of the hand-out named by entry
// "partition/offset/nonce".
func ownerOf(consumer, entry string) string {
	return consumer + "/" + entry[strings.LastIndexByte(entry, '/')+1:]
}

// end: the lease's record has a durable outcome; its offset may be
// committed once every earlier one is.
func (c *consumer) end(entry string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := c.leases[entry]
	if ls == nil {
		return
	}
	delete(c.leases, entry)
	c.doneLocked(ls.rec.Partition, ls.rec.Offset)
	c.cond.Broadcast()
}

// doneLocked marks an offset done and moves the partition's commit point
// past every done record at its front.
func (c *consumer) doneLocked(part int32, off int64) {
	p := c.parts[part]
	if p == nil {
		return // the partition was revoked meanwhile
	}
	for i := range p.recs {
		if p.recs[i].off == off {
			p.recs[i].done = true
			break
		}
	}
	moved := false
	for len(p.recs) > 0 && p.recs[0].done {
		p.commit = p.recs[0].off + 1
		p.recs = p.recs[1:]
		moved = true
	}
	if moved {
		c.dirty[part] = true
		select {
		case c.commitQ <- struct{}{}:
		default:
		}
	}
}

// idle: the lease's try could not begin or settle; Reclaim hands it out
// again after it waited.
func (c *consumer) idle(entry string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ls := c.leases[entry]; ls != nil {
		ls.running, ls.since = false, time.Now()
		c.cond.Broadcast()
	}
}

func (c *consumer) handBack(l queue.Lease, idle time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ls := c.leases[l.Entry]; ls != nil {
		ls.running, ls.since = false, time.Now().Add(-idle)
		c.cond.Broadcast()
	}
}

// reclaim hands out again the leases that waited idle.
func (c *consumer) reclaim(consumer string, idle time.Duration) []queue.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []queue.Lease
	now := time.Now()
	for entry, ls := range c.leases {
		if ls.running || now.Sub(ls.since) < idle {
			continue
		}
		delete(c.leases, entry)
		nonce := newID()
		rec := ls.rec
		l := ls.l
		l.Entry = pos(rec.Partition, rec.Offset) + "/" + nonce
		l.Consumer = consumer
		c.leases[l.Entry] = &lease{rec: rec, l: l, owner: consumer + "/" + nonce, running: true, since: now}
		out = append(out, l)
	}
	return out
}

// commitLoop commits the partitions whose commit point moved, at most
// every 100 ms.
func (c *consumer) commitLoop() {
	defer close(c.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-c.commitQ:
		}
		c.commit(context.Background())
		t.Reset(100 * time.Millisecond)
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
	}
}

// commit commits the commit points that moved (of the given partitions
// only, when parts is not nil).
func (c *consumer) commit(ctx context.Context, parts ...int32) {
	c.mu.Lock()
	offs := map[int32]kgo.EpochOffset{}
	for part := range c.dirty {
		if parts != nil && !contains(parts, part) {
			continue
		}
		if p := c.parts[part]; p != nil && p.commit >= 0 {
			offs[part] = kgo.EpochOffset{Epoch: p.epoch, Offset: p.commit}
		}
		delete(c.dirty, part)
	}
	c.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var cerr error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.topic: offs}, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = err
		if err == nil {
			cerr = respErr(resp)
		}
	})
	if cerr != nil {
		// Left dirty: the next commit tries again; if the partition moves
		// to another instance first, it reads those records again and
		// the ledger drops them.
		c.mu.Lock()
		for part := range offs {
			c.dirty[part] = true
		}
		c.mu.Unlock()
		c.r.b.log.Warn("kafka: offset commit failed; will retry", "route", c.r.name, "error", cerr)
	}
}

// respErr is the first partition error of a commit's answer.
func respErr(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// revoked runs before the group takes partitions away: the tries in
// flight on them get DrainWait to settle, what is done is committed, and
// the rest is forgotten here (the next owner reads it again).
func (c *consumer) revoked(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := lost[c.topic]
	if len(parts) == 0 {
		return
	}
	deadline := time.Now().Add(c.r.b.o.DrainWait)
	stop := context.AfterFunc(ctx, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	timer := time.AfterFunc(c.r.b.o.DrainWait, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	c.mu.Lock()
	for !c.closing && ctx.Err() == nil && time.Now().Before(deadline) && c.runningOn(parts) {
		c.cond.Wait()
	}
	c.mu.Unlock()
	stop()
	timer.Stop()
	c.commit(context.WithoutCancel(ctx), parts...)
	c.forget(parts)
}

// lost: the group lost the partitions (this instance was thought dead);
// committing would fail, so only forget them.
func (c *consumer) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.forget(lost[c.topic])
}

func (c *consumer) runningOn(parts []int32) bool {
	for _, ls := range c.leases {
		if ls.running && contains(parts, ls.rec.Partition) {
			return true
		}
	}
	return false
}

func (c *consumer) forget(parts []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		delete(c.parts, p)
		delete(c.dirty, p)
	}
	for entry, ls := range c.leases {
		if contains(parts, ls.rec.Partition) {
			delete(c.leases, entry)
		}
	}
	c.cond.Broadcast()
}

// close commits what is done and leaves the group.
func (c *consumer) close() {
	c.mu.Lock()
	c.closing = true
	c.cond.Broadcast()
	c.mu.Unlock()
	close(c.quit)
	<-c.done
	c.commit(context.Background())
	c.cl.Close()
}
