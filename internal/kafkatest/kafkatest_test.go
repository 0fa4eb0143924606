package kafkatest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topic = "harness"

// consumeAll reads topic from the start until it has n records, failing
// after a bound.
func consumeAll(t *testing.T, c *Cluster, n int, opts ...kgo.Opt) []string {
	t.Helper()
	cl := c.Client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(got), n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	cl.Close()
	return got
}

func TestClusterProduceConsumeRestart(t *testing.T) {
	c := StartPersistent(t)
	addrs := c.Addrs()
	if len(addrs) != 1 || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		t.Fatalf("Addrs = %v, want one 127.0.0.1 address", addrs)
	}
	if err := c.Kfake().CreateTopic(topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	produced := c.Count(kmsg.Produce)
	p := c.Client(t, kgo.DefaultProduceTopic(topic))
	for _, v := range []string{"a", "b", "c"} {
		if err := p.ProduceSync(t.Context(), kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	p.Close()
	if produced.N() < 3 {
		t.Fatalf("counted %d Produce requests, want at least 3", produced.N())
	}

	c.Restart()
	if got := c.Addrs(); got[0] != addrs[0] {
		t.Fatalf("restarted on %v, want %v", got, addrs)
	}
	if got := consumeAll(t, c, 3); len(got) != 3 {
		t.Fatalf("after restart read %v, want the 3 records", got)
	}
	before := produced.N()
	p = c.Client(t, kgo.DefaultProduceTopic(topic))
	if err := p.ProduceSync(t.Context(), kgo.StringRecord("d")).FirstErr(); err != nil {
		t.Fatalf("produce after restart: %v", err)
	}
	if produced.N() <= before {
		t.Fatalf("the counter stopped counting across the restart: %d", produced.N())
	}
}

func TestClusterFailProduce(t *testing.T) {
	c := Start(t, kfakeSeed())
	f := c.FailProduce(1, topic)
	p := c.Client(t, kgo.DefaultProduceTopic(topic))
	err := p.ProduceSync(t.Context(), kgo.StringRecord("x")).FirstErr()
	if !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("first produce: %v, want UNKNOWN_SERVER_ERROR", err)
	}
	if f.Hits() != 1 {
		t.Fatalf("fault hits %d, want 1", f.Hits())
	}
	if err := p.ProduceSync(t.Context(), kgo.StringRecord("y")).FirstErr(); err != nil {
		t.Fatalf("second produce: %v", err)
	}
	if got := consumeAll(t, c, 1); len(got) != 1 || got[0] != "y" {
		t.Fatalf("read %v, want only y", got)
	}
}

func TestClusterFailOffsetCommit(t *testing.T) {
	c := Start(t, kfakeSeed())
	p := c.Client(t, kgo.DefaultProduceTopic(topic))
	if err := p.ProduceSync(t.Context(), kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f := c.FailOffsetCommit(-1, "g")
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("g"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) == 0 && ctx.Err() == nil {
		recs = cl.PollFetches(ctx).Records()
	}
	if len(recs) != 1 {
		t.Fatalf("read %d records: %v", len(recs), ctx.Err())
	}
	if err := cl.CommitRecords(ctx, recs...); err == nil {
		t.Fatal("commit passed with OffsetCommit failing")
	}
	f.Remove()
	if f.Hits() < 1 {
		t.Fatalf("fault hits %d, want at least 1", f.Hits())
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		t.Fatalf("commit after Remove: %v", err)
	}
	gi := c.Kfake().GroupInfo("g")
	if gi == nil || gi.Commits[topic][recs[0].Partition].Offset != recs[0].Offset+1 {
		t.Fatalf("group g: %+v, want offset %d committed", gi, recs[0].Offset+1)
	}
}

func kfakeSeed() kfake.Opt { return kfake.SeedTopics(1, topic) }
