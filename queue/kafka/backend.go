// Package kafka is the delivery queue's Kafka backend: the events of the
// routes with `delivery: queue` live in Kafka topics, the state of their
// keys in a Ledger (the store's Redis for several instances, memory for
// one). It implements queue.Backend, so the queue's workers, the DLQ
// commands and the admin API work on it unchanged.
//
// Topics of route R, with the configured prefix P:
//
//	P R              events ready for delivery; record key = idempotency key,
//	                 value = the outgoing request, headers clawgate-eid,
//	                 clawgate-tok, clawgate-first
//	P R.retry.<T>    retries waiting, one topic per tier T (1s 5s 30s 2m
//	                 10m 1h 6h); a retry waits in the longest tier not
//	                 longer than its remaining delay, then hops to a
//	                 shorter tier or back to P R when due. Every record of
//	                 a tier topic is due the tier's delay after it was
//	                 written, in order, so a partition's head is always the
//	                 next due record and no due record waits behind one
//	                 that is not.
//	P R.dlq          dead-lettered events, retention infinite
//
// Consumer groups: G.R reads the main topic, G.R.retry the tiers.
// Offsets are committed by hand, only up to records whose outcome is
// durable (delivered and recorded, retry record produced and recorded,
// DLQ record produced and recorded, or dropped as a leftover). Whatever a
// crash or a rebalance cuts, the record is read again and the ledger's
// fence decides: a record passes Begin only while its key has the
// record's event id and token, and only from the first position that
// began that token; so a record read twice, promoted twice or left over
// from an older round is dropped, never delivered again.
package kafka

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/queue"
)

// Options configure a Backend.
type Options struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// TopicPrefix starts every topic's name. Default "clawgate.".
	TopicPrefix string
	// ClientID names the client to the brokers. Default "clawgate".
	ClientID string
	// Group starts the consumer groups' names. Default "clawgate".
	Group string
	// Partitions and Replication are what missing topics are created
	// with: default 3 partitions, the broker's default replication (-1).
	Partitions  int32
	Replication int16
	// CreateTopics creates missing topics at start; false reports them
	// as an error instead.
	CreateTopics bool
	// TLS, when set, encrypts the connections; SASL authenticates them.
	TLS  *tls.Config
	SASL sasl.Mechanism
	// Ledger keeps the keys' state. Required.
	Ledger ledger.Ledger
	// Lease bounds an enqueue: the key's reservation, and so the produce,
	// ends after it. Default 10s.
	Lease time.Duration
	// DrainWait bounds how long a rebalance waits for tries of the
	// partitions it takes away before committing them. Default 30s.
	DrainWait time.Duration
	// SessionTimeout is how long the group waits for an instance that
	// stopped heartbeating before giving its partitions to the others:
	// how long a dead instance's events wait. Default 10s. (An instance
	// that dies during a rebalance holds them until the rebalance times
	// out, DrainWait + 5s.)
	SessionTimeout time.Duration
	// Reclaimed is called (webhook_queue_reclaimed_total) for each record
	// another instance had begun and never settled, when this one begins
	// it again: the consumer group moved the partition of an instance that
	// died or stalled. May be nil.
	Reclaimed func(route string, n int)
	// Lag receives kafka_consumer_lag for each route every LagEvery
	// (default 5s); may be nil.
	Lag      func(route string, lag int64)
	LagEvery time.Duration
	// HandBackRedo is how long an ordered event handed back (its turn
	// came while it was parked) may go without being begun before the
	// sweeper produces its record again: the instance that was to
	// produce it may have died first, or its call to the ledger timed
	// out after the ledger had handed the event back. Default 10s: a lost
	// hand-back holds its order value that long; a record produced again
	// while the first is still unread is dropped as a leftover.
	HandBackRedo time.Duration
	Log          *slog.Logger
}

// Tiers are the retry topics' delays, shortest first.
var Tiers = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}

// Backend is the Kafka queue backend.
type Backend struct {
	o     Options
	log   *slog.Logger
	prod  *kgo.Client // producer, and the admin client's connection
	adm   *kadm.Client
	stop  context.CancelFunc
	bg    context.Context
	loops sync.WaitGroup

	// up is whether the brokers answered the last ping (every second):
	// while they do not, Enqueue answers unavailable at once instead of
	// holding the provider's request for the produce timeout.
	up     atomic.Bool
	upErr  atomic.Pointer[error]
	mu     sync.Mutex
	routes map[string]*route
	closed bool
}

var _ queue.Backend = (*Backend)(nil)

// Record headers.
const (
	hEventID = "clawgate-eid"
	hToken   = "clawgate-tok"
	hFirst   = "clawgate-first" // first seen, Unix ms
	hDue     = "clawgate-due"   // a retry's due time, Unix ms
	hAt      = "clawgate-at"    // when a retry record was written, Unix ms
	// DLQ records also carry these, for tools that read the topic.
	hReason   = "clawgate-reason"
	hStatus   = "clawgate-status"
	hError    = "clawgate-error"
	hAttempts = "clawgate-attempts"
	hDied     = "clawgate-died"
	// hOrder marks a record of an ordered event (its order value): its
	// settle may hand the next event of the value back.
	hOrder = "clawgate-order"
)

// New connects to the brokers (a first answer is not required: Enqueue
// answers unavailable until they do).
func New(o Options) (*Backend, error) {
	if o.Ledger == nil {
		return nil, errors.New("kafka: no ledger")
	}
	if len(o.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers")
	}
	if o.TopicPrefix == "" {
		o.TopicPrefix = "clawgate."
	}
	if o.ClientID == "" {
		o.ClientID = "clawgate"
	}
	if o.Group == "" {
		o.Group = "clawgate"
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Replication == 0 {
		o.Replication = -1
	}
	if o.Lease <= 0 {
		o.Lease = 10 * time.Second
	}
	if o.DrainWait <= 0 {
		o.DrainWait = 30 * time.Second
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.LagEvery <= 0 {
		o.LagEvery = 5 * time.Second
	}
	if o.HandBackRedo <= 0 {
		o.HandBackRedo = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	prod, err := kgo.NewClient(append(o.common(),
		// Idempotent (the default) with acks from every in-sync replica:
		// an acknowledged record survives a broker's loss, and a retried
		// produce is never written twice.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(o.Lease/2),
		// A record the gateway gave up on (its produce took too long) is
		// failed rather than kept buffered while the brokers are away, so
		// an outage holds no memory beyond the lease. Should it land anyway,
		// or twice, the ledger's fence drops it when read.
		kgo.AllowIdempotentProduceCancellation(),
		kgo.RecordDeliveryTimeout(o.Lease),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: producer: %w", err)
	}
	b := &Backend{o: o, log: o.Log, prod: prod, adm: kadm.NewClient(prod), routes: map[string]*route{}}
	b.bg, b.stop = context.WithCancel(context.Background())
	b.loops.Go(b.healthLoop)
	return b, nil
}

// healthLoop pings the brokers every second.
func (b *Backend) healthLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(b.bg, time.Second)
		err := b.prod.Ping(ctx)
		cancel()
		if b.bg.Err() != nil {
			return
		}
		if err != nil {
			err = unavailable("brokers do not answer", err)
			b.upErr.Store(&err)
		}
		if was := b.up.Swap(err == nil); was != (err == nil) {
			if err == nil {
				b.log.Info("kafka: brokers answer")
			} else {
				b.log.Error("kafka: brokers do not answer; queue routes answer 503", "error", err)
			}
		}
		select {
		case <-b.bg.Done():
			return
		case <-t.C:
		}
	}
}

// down is the brokers' last error while they do not answer, else nil.
func (b *Backend) down() error {
	if b.up.Load() {
		return nil
	}
	if e := b.upErr.Load(); e != nil {
		return *e
	}
	return fmt.Errorf("%w: kafka: brokers not reached yet", queue.ErrUnavailable)
}

// common are the connection options of every client.
func (o Options) common() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(o.Brokers...), kgo.ClientID(o.ClientID)}
	if o.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(o.TLS.Clone()))
	}
	if o.SASL != nil {
		opts = append(opts, kgo.SASL(o.SASL))
	}
	return opts
}

// Ping asks the brokers for their metadata: /readyz is not ready while
// none answers.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.prod.Ping(ctx); err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// Close stops every route: what was settled is committed, the groups are
// left so that another instance takes the partitions at once (the
// records not yet settled are read again there), and the producer is
// flushed.
func (b *Backend) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	rs := b.routes
	b.mu.Unlock()
	b.stop()
	b.loops.Wait()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.close)
	}
	wg.Wait()
	b.prod.Close()
}

func (b *Backend) topic(route string) string { return b.o.TopicPrefix + route }
func (b *Backend) dlqTopic(route string) string {
	return b.o.TopicPrefix + route + ".dlq"
}
func (b *Backend) tierTopic(route string, t time.Duration) string {
	return b.o.TopicPrefix + route + ".retry." + tierName(t)
}

// tierName is a tier's delay as topic names spell it: 1s, 2m, 6h.
func tierName(t time.Duration) string {
	switch {
	case t%time.Hour == 0:
		return strconv.Itoa(int(t/time.Hour)) + "h"
	case t%time.Minute == 0:
		return strconv.Itoa(int(t/time.Minute)) + "m"
	}
	return strconv.Itoa(int(t/time.Second)) + "s"
}

// tierFor is the longest tier not longer than the remaining delay, or
// the shortest.
func tierFor(remaining time.Duration) time.Duration {
	t := Tiers[0]
	for _, d := range Tiers {
		if d <= remaining {
			t = d
		}
	}
	return t
}

// Topics lists route's topics: main, retry tiers, DLQ.
func (b *Backend) Topics(route string) []string {
	ts := []string{b.topic(route)}
	for _, t := range Tiers {
		ts = append(ts, b.tierTopic(route, t))
	}
	return append(ts, b.dlqTopic(route))
}

// Prepare starts route's consumers (once) and makes sure its topics
// exist: created when missing and allowed, else an error naming them.
// Unreachable brokers give queue.ErrUnavailable; the topics are then
// checked again before the first enqueue and read.
func (b *Backend) Prepare(ctx context.Context, name string, _ int) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("kafka: backend closed")
	}
	r := b.routes[name]
	if r == nil {
		var err error
		r, err = b.newRoute(name)
		if err != nil {
			b.mu.Unlock()
			return err
		}
		b.routes[name] = r
		b.loops.Go(func() { r.promoter.pollLoop(b.bg) })
		b.loops.Go(func() { b.lagLoop(r) })
		b.loops.Go(func() { b.sweepLoop(r) })
	}
	b.mu.Unlock()
	err := r.ensureTopics(ctx)
	if err == nil {
		b.up.Store(true) // the brokers answered
	}
	return err
}

// Shards is 1: the consumer group spreads a route's partitions over the
// instances.
func (b *Backend) Shards(string) int { return 1 }

func (b *Backend) route(name string) (*route, error) {
	r := b.existing(name)
	if r == nil {
		return nil, fmt.Errorf("kafka: route %q not prepared", name)
	}
	return r, r.ensureTopics(context.Background())
}

// errTopicsMissing: topics are missing and may not be created.
var errTopicsMissing = errors.New("kafka: topics missing")

// ensureTopics checks (and creates) the route's topics until it once
// succeeded; failures are retried at most every 2 seconds.
func (r *route) ensureTopics(ctx context.Context) error {
	if r.topicsOK.Load() {
		return nil // every call on the hot path, once the topics exist
	}
	r.topicsMu.Lock()
	defer r.topicsMu.Unlock()
	if r.topicsOK.Load() {
		return nil
	}
	if time.Since(r.topicsTried) < 2*time.Second && r.topicsErr != nil {
		return r.topicsErr
	}
	r.topicsTried = time.Now()
	r.topicsErr = r.b.createTopics(ctx, r.name)
	r.topicsOK.Store(r.topicsErr == nil)
	return r.topicsErr
}

func (b *Backend) createTopics(ctx context.Context, route string) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.Lease)
	defer cancel()
	names := b.Topics(route)
	details, err := b.adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("%w: kafka: list topics: %v", queue.ErrUnavailable, err)
	}
	var missing []string
	for _, n := range names {
		d, ok := details[n]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, n)
		} else if d.Err != nil {
			return fmt.Errorf("kafka: topic %s: %w", n, d.Err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !b.o.CreateTopics {
		return fmt.Errorf("%w: %s (create them, or set queue.kafka.create_topics: true)", errTopicsMissing, strings.Join(missing, ", "))
	}
	dlq := b.dlqTopic(route)
	for _, n := range missing {
		var cfg map[string]*string
		if n == dlq {
			// A dead-letter queue is never trimmed: an operator purges.
			cfg = map[string]*string{"retention.ms": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1")}
		}
		res, err := b.adm.CreateTopics(ctx, b.o.Partitions, b.o.Replication, cfg, n)
		if err != nil {
			return fmt.Errorf("%w: kafka: create topic %s: %v", queue.ErrUnavailable, n, err)
		}
		for _, c := range res {
			if c.Err != nil && !errors.Is(c.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("kafka: create topic %s: %w (%s)", n, c.Err, c.ErrMessage)
			}
		}
		b.log.Info("kafka: created topic", "topic", n, "partitions", b.o.Partitions)
	}
	return nil
}

// produceTimeout bounds a produce the gateway waits for.
const produceTimeout = 3 * time.Second

// produce writes recs (acks from every in-sync replica) and waits for them
// until ctx ends. A record given up on may still be written later: every
// caller treats it as not written, and if it lands it is a leftover that
// the ledger's fence drops (its token never becomes, or stops being, the
// live one). Each record's partition and offset are set on success.
func (b *Backend) produce(ctx context.Context, recs ...*kgo.Record) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		perr error
	)
	for _, r := range recs {
		wg.Add(1)
		b.prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if perr == nil {
					perr = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return perr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newID returns 16 random hex digits: event ids, tokens, lease nonces.
func newID() string {
	var p [8]byte
	_, _ = rand.Read(p[:])
	return hex.EncodeToString(p[:])
}

// unavailable wraps a Kafka error as queue.ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: kafka: %s: %v", queue.ErrUnavailable, op, err)
}

// Enqueue reserves the key in the ledger, produces the event and confirms
// the reservation: only then is the event acknowledged. A produce that
// fails releases the reservation (the caller answers 503 and the provider
// retries); a crash between the produce and the confirmation leaves a
// record that a consumer adopts while the reservation lasts, or drops
// after it expired (the provider, never answered, retries).
func (b *Backend) Enqueue(ctx context.Context, e queue.Entry, maxDepth int) (queue.Ack, error) {
	if err := b.down(); err != nil {
		return queue.Ack{}, err
	}
	if _, err := b.route(e.Route); err != nil {
		return queue.Ack{}, err
	}
	eid, tok := newID(), newID()
	res, err := b.o.Ledger.Reserve(ctx, ledger.Reservation{
		Route: e.Route, Key: e.Key, Fingerprint: e.Fingerprint, EventID: eid, Token: tok,
		FirstSeen: e.FirstSeen, Lease: b.o.Lease, MaxDepth: maxDepth, Order: e.Order, Stale: e.Stale,
	})
	if err != nil {
		return queue.Ack{}, err
	}
	ack := queue.Ack{State: res.State, ID: res.ID, Fingerprint: res.Fingerprint, Dead: res.Dead, Outcome: res.Outcome, Copies: res.Copies}
	if res.State != queue.Enqueued {
		return ack, nil
	}
	ack.ID = eid
	rec := &kgo.Record{Topic: b.topic(e.Route), Key: []byte(e.Key), Value: e.Payload, Headers: []kgo.RecordHeader{
		{Key: hEventID, Value: []byte(eid)}, {Key: hToken, Value: []byte(tok)},
		{Key: hFirst, Value: strconv.AppendInt(nil, e.FirstSeen.UnixMilli(), 10)},
	}}
	if e.Order != "" {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: hOrder, Value: []byte(e.Order)})
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(b.o.Lease/2, produceTimeout))
	err = b.produce(pctx, rec)
	cancel()
	if err != nil {
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if aerr := b.o.Ledger.Abort(actx, e.Route, e.Key, tok); aerr != nil {
			// The reservation expires after the lease by itself.
			b.log.Warn("kafka: could not release a reservation after a failed produce", "route", e.Route, "error", aerr)
		}
		cancel()
		return queue.Ack{}, unavailable("produce", err)
	}
	ok, err := b.o.Ledger.Confirm(context.WithoutCancel(ctx), e.Route, e.Key, tok)
	if err != nil {
		return queue.Ack{}, err
	}
	if !ok {
		return queue.Ack{}, fmt.Errorf("%w: kafka: the produce outlasted the key's reservation", queue.ErrUnavailable)
	}
	return ack, nil
}

// Read waits up to block for at most n records of the route's main topic
// on the partitions the group gave this instance.
func (b *Backend) Read(ctx context.Context, name string, _ int, consumer string, n int, block time.Duration) ([]queue.Lease, error) {
	r, err := b.route(name)
	if err != nil {
		return nil, err
	}
	return r.main.read(ctx, consumer, n, block)
}

// Begin fences the record in the ledger and counts the try.
func (b *Backend) Begin(ctx context.Context, l queue.Lease) (queue.Job, bool, error) {
	r, err := b.route(l.Route)
	if err != nil {
		return queue.Job{}, false, err
	}
	return r.main.begin(ctx, l)
}

// Settle records the try's end: a retry record or a DLQ record is
// produced first (a leftover if the ledger then refuses), the ledger
// records the outcome, and the main record's offset may be committed.
func (b *Backend) Settle(ctx context.Context, consumer string, j queue.Job, s queue.Settlement) (queue.Settled, error) {
	r, err := b.route(j.Route)
	if err != nil {
		return 0, err
	}
	return r.main.settle(ctx, consumer, j, s)
}

// Promote moves the retries that are due back to the main topic (or to
// a shorter tier): those the retry topics' consumer has read already, so
// a retry written just before may wait for a later Promote. It counts
// the records it sent to the main topic, each once.
func (b *Backend) Promote(ctx context.Context, name string, _ int, now time.Time) (int, error) {
	r, err := b.route(name)
	if err != nil {
		return 0, err
	}
	return r.promoter.promote(ctx, now)
}

// Reclaim hands back this instance's records whose try could not begin or
// settle (the ledger did not answer) once they waited idle; records of
// instances that died are taken over by the consumer group's rebalance.
func (b *Backend) Reclaim(ctx context.Context, name string, _ int, consumer string, idle time.Duration) ([]queue.Lease, error) {
	r, err := b.route(name)
	if err != nil {
		return nil, err
	}
	return r.main.reclaim(consumer, idle), nil
}

// HandBack makes leases a stopped worker will not settle available to
// Reclaim at once; when the backend closes they are read again by
// whichever instance gets their partitions.
func (b *Backend) HandBack(_ context.Context, _ string, leases []queue.Lease, idle time.Duration) error {
	for _, l := range leases {
		if r := b.existing(l.Route); r != nil {
			r.main.handBack(l, idle)
		}
	}
	return nil
}

// existing is the prepared route name, or nil.
func (b *Backend) existing(name string) *route {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.routes[name]
}

// Stats is the ledger's view of the route (depth, DLQ, oldest).
func (b *Backend) Stats(ctx context.Context, route string) (queue.Stats, error) {
	return b.o.Ledger.Stats(ctx, route)
}

// ListDLQ lists the route's dead-lettered events from the ledger, in
// its order: each once across the pages, in no set order (not the order
// they died; the DLQ topic's partitions have none across them).
func (b *Backend) ListDLQ(ctx context.Context, route, cursor string, limit int) ([]queue.DeadEntry, string, error) {
	return b.o.Ledger.ListDead(ctx, route, cursor, limit)
}

// Dead reads the event's details from the ledger and its payload from its
// record in the DLQ topic, at the position the ledger keeps (one direct
// fetch, bounded by Lease).
func (b *Backend) Dead(ctx context.Context, name, id string) (queue.DeadEntry, []byte, error) {
	d, pos, err := b.o.Ledger.DeadEntry(ctx, name, id)
	if err != nil {
		return queue.DeadEntry{}, nil, err
	}
	p, off, ok := parsePos(pos)
	if !ok {
		return queue.DeadEntry{}, nil, fmt.Errorf("%w: kafka: dead-letter position %q", queue.ErrCorrupt, pos)
	}
	rec, err := b.fetch(ctx, b.dlqTopic(name), p, off)
	if err != nil {
		return queue.DeadEntry{}, nil, err
	}
	if eid := header(rec, hEventID); eid != id {
		return queue.DeadEntry{}, nil, fmt.Errorf("%w: kafka: the DLQ record at %s holds event %q, not %q", queue.ErrCorrupt, pos, eid, id)
	}
	return d, rec.Value, nil
}

// Replay reads the event's record from the DLQ topic, produces it to the
// main topic with a new token and records that in the ledger; if the
// event was replayed or purged meanwhile, the new record is a leftover and
// dropped when read.
func (b *Backend) Replay(ctx context.Context, name, id string) error {
	if _, err := b.route(name); err != nil {
		return err
	}
	// The new record's token is the key's pending token first, so that a
	// consumer reading the record before Replay below records it adopts
	// it instead of dropping it.
	tok := newID()
	key, pos, err := b.o.Ledger.Dead(ctx, name, id, tok)
	if err != nil {
		return err
	}
	p, off, ok := parsePos(pos)
	if !ok {
		return fmt.Errorf("%w: kafka: dead-letter position %q", queue.ErrCorrupt, pos)
	}
	rec, err := b.fetch(ctx, b.dlqTopic(name), p, off)
	if err != nil {
		return err
	}
	first := header(rec, hFirst)
	out := &kgo.Record{Topic: b.topic(name), Key: []byte(key), Value: rec.Value, Headers: []kgo.RecordHeader{
		{Key: hEventID, Value: []byte(id)}, {Key: hToken, Value: []byte(tok)}, {Key: hFirst, Value: []byte(first)},
	}}
	pctx, cancel := context.WithTimeout(ctx, produceTimeout)
	defer cancel()
	if err := b.produce(pctx, out); err != nil {
		return unavailable("produce", err)
	}
	err = b.o.Ledger.Replay(ctx, name, id, pos, tok)
	if errors.Is(err, queue.ErrNotFound) {
		// A consumer adopted the record already (or another replay of the
		// event won): it is queued again, or even delivered, either way.
		ks, gerr := b.o.Ledger.Get(ctx, name, key)
		if gerr == nil && ks.EventID == id && (ks.State == queue.StateQueued || ks.State == queue.StateFinished) {
			return nil
		}
	}
	return err
}

// fetch reads the one record at topic/partition/offset.
func (b *Backend) fetch(ctx context.Context, topic string, p int32, off int64) (*kgo.Record, error) {
	cl, err := kgo.NewClient(append(b.o.common(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(off)}}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: fetch client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, b.o.Lease)
	defer cancel()
	for {
		fs := cl.PollRecords(ctx, 1)
		for _, rec := range fs.Records() {
			if rec.Offset == off {
				return rec, nil
			}
			if rec.Offset > off {
				return nil, fmt.Errorf("%w: kafka: record %s/%d/%d is gone", queue.ErrCorrupt, topic, p, off)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, unavailable("fetch "+topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, e error) { ferr = e })
		if errors.Is(ferr, kerr.OffsetOutOfRange) {
			return nil, fmt.Errorf("%w: kafka: record %s/%d/%d is gone", queue.ErrCorrupt, topic, p, off)
		}
	}
}

// Purge forgets a dead-lettered event in the ledger; the DLQ topic is
// append-only, so its record stays until the topic's retention (infinite
// by default) but is no longer listed or replayable.
func (b *Backend) Purge(ctx context.Context, route, id string, retention time.Duration) error {
	err := b.o.Ledger.Purge(ctx, route, id, retention)
	if err == nil {
		b.handBackDue(ctx, route, 0) // a purged event held its value (on_dead: hold)
	}
	return err
}

// Get reports a key's state from the ledger.
func (b *Backend) Get(ctx context.Context, route, key string) (queue.KeyState, error) {
	return b.o.Ledger.Get(ctx, route, key)
}

// Delete forgets a key; its records are dropped when read.
func (b *Backend) Delete(ctx context.Context, route, key string) (queue.KeyState, error) {
	ks, err := b.o.Ledger.Delete(ctx, route, key)
	if err == nil {
		b.handBackDue(ctx, route, 0) // the key may have held its value
	}
	return ks, err
}

// lagLoop reports kafka_consumer_lag for the route: the main topic's end
// offsets minus the group's committed offsets, summed over partitions.
func (b *Backend) lagLoop(r *route) {
	if b.o.Lag == nil {
		return
	}
	t := time.NewTicker(b.o.LagEvery)
	defer t.Stop()
	for {
		if lag, err := b.Lag(b.bg, r.name); err == nil {
			b.o.Lag(r.name, lag)
		}
		select {
		case <-b.bg.Done():
			return
		case <-t.C:
		}
	}
}

// Lag is the route's consumer lag on its main topic.
func (b *Backend) Lag(ctx context.Context, route string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.Lease)
	defer cancel()
	group := b.o.Group + "." + route
	lags, err := b.adm.Lag(ctx, group)
	if err != nil {
		return 0, unavailable("lag", err)
	}
	l, ok := lags[group]
	if !ok {
		return 0, nil
	}
	if err := l.Error(); err != nil {
		return 0, unavailable("lag", err)
	}
	var sum int64
	for _, p := range l.Lag[b.topic(route)] {
		if p.Lag > 0 {
			sum += p.Lag
		}
	}
	return sum, nil
}

// header is the value of record header k ("" when absent).
func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// pos names a record of a topic the route owns: "partition/offset".
func pos(p int32, off int64) string {
	return strconv.FormatInt(int64(p), 10) + "/" + strconv.FormatInt(off, 10)
}

func parsePos(s string) (int32, int64, bool) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, false
	}
	p, err1 := strconv.ParseInt(a, 10, 32)
	off, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || off < 0 {
		return 0, 0, false
	}
	return int32(p), off, true
}
