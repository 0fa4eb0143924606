// Package kafkatest runs an in-process Kafka cluster (franz-go's kfake) for
// tests: real listeners on 127.0.0.1 ephemeral ports, closed when the test
// ends, a broker restart on the same address that keeps what was
// persisted, and fault helpers (fail the next N Produce or OffsetCommit
// requests, count the requests of a key).
//
// kfake is a fake: it speaks the Kafka protocol well enough for franz-go
// (produce, fetch, consumer groups, offset commits, admin requests), keeps
// everything in memory unless given a data directory, and runs every
// request on one goroutine.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// restartBound bounds how long a restarted broker may take to bind its old
// ports again.
const restartBound = 10 * time.Second

// Cluster is a kfake cluster started for one test.
type Cluster struct {
	t        testing.TB
	opts     []kfake.Opt
	ports    []int
	dataDir  string
	mu       sync.Mutex
	c        *kfake.Cluster
	counters []*Counter
	closed   bool
}

// Start runs a kfake cluster of one broker (kfake.NumBrokers in opts
// overrides it) on 127.0.0.1 ephemeral ports and closes it when the test
// ends. Its data is kept in memory: use StartPersistent for a cluster whose
// Restart keeps the records, groups and committed offsets.
func Start(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	return start(t, "", opts)
}

// StartPersistent is Start with a data directory (kfake.DataDir, under the
// test's temporary directory): Restart brings the cluster back with what it
// had stored.
func StartPersistent(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	return start(t, t.TempDir(), opts)
}

func start(t testing.TB, dir string, opts []kfake.Opt) *Cluster {
	t.Helper()
	all := append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	if dir != "" {
		all = append(all, kfake.DataDir(dir))
	}
	kc, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	c := &Cluster{t: t, opts: all, dataDir: dir, c: kc}
	for _, a := range kc.ListenAddrs() {
		_, p, err := net.SplitHostPort(a)
		if err != nil {
			kc.Close()
			t.Fatalf("kafkatest: listen address %q: %v", a, err)
		}
		port, _ := strconv.Atoi(p)
		c.ports = append(c.ports, port)
	}
	t.Cleanup(c.Close)
	return c
}

// Addrs are the brokers' host:port, stable across Restart.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.ports))
	for i, p := range c.ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out
}

// DataDir is the directory the cluster persists to; "" when it keeps its
// data in memory only.
func (c *Cluster) DataDir() string { return c.dataDir }

// Kfake is the running kfake cluster, for what this package has no helper
// for (GroupInfo, CreateTopic, ControlKey...). It changes on Restart.
func (c *Cluster) Kfake() *kfake.Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

// Close shuts the cluster down; idempotent. A persistent cluster writes its
// state to its data directory first.
func (c *Cluster) Close() {
	c.mu.Lock()
	kc := c.c
	c.closed = true
	c.mu.Unlock()
	kc.Close()
}

// Stop shuts the broker down (clients see refused connections) until
// Restart; a persistent cluster saves its state first.
func (c *Cluster) Stop() {
	c.mu.Lock()
	kc := c.c
	c.mu.Unlock()
	kc.Close()
}

// Restart stops the cluster (when it is running) and starts a new one on
// the same addresses with the same options: a persistent cluster comes
// back with its topics, records, groups and committed offsets; one in
// memory comes back empty. Faults installed before are gone; Counters go
// on counting.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.Stop()
	opts := append(append([]kfake.Opt(nil), c.opts...), kfake.Ports(c.ports...))
	var (
		kc  *kfake.Cluster
		err error
	)
	deadline := time.Now().Add(restartBound)
	for {
		kc, err = kfake.NewCluster(opts...)
		if err == nil || time.Now().After(deadline) {
			break
		}
		// The old listener's port may not be free yet.
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("kafkatest: restart kfake on %v: %v", c.Addrs(), err)
	}
	c.mu.Lock()
	c.c = kc
	if c.closed {
		// The test ended meanwhile.
		c.mu.Unlock()
		kc.Close()
		return
	}
	counters := append([]*Counter(nil), c.counters...)
	c.mu.Unlock()
	for _, n := range counters {
		n.install(kc)
	}
}

// Faults are failures injected into the cluster by one call.
type Faults struct {
	h *kfake.FaultHandle
}

// Hits is how many requests the faults have failed so far.
func (f *Faults) Hits() int { return f.h.Hits() }

// Wait blocks until the faults have failed at least n requests or ctx ends.
func (f *Faults) Wait(ctx context.Context, n int) error { return f.h.Wait(ctx, n) }

// Remove stops the faults from failing more requests.
func (f *Faults) Remove() { f.h.Remove() }

// Fail installs faults on the running cluster (see kfake.Fault): the
// general form of FailProduce and FailOffsetCommit.
func (c *Cluster) Fail(faults ...kfake.Fault) *Faults {
	return &Faults{h: c.Kfake().Fault(faults...)}
}

// FailProduce fails the next n Produce requests (n < 0: every one until
// Remove) that write to one of topics (none: any topic), each partition
// answered UNKNOWN_SERVER_ERROR: an error a producer does not retry, so
// the records of those requests fail at once. Nothing is stored.
func (c *Cluster) FailProduce(n int, topics ...string) *Faults {
	return c.failKey(kmsg.Produce, n, kerr.UnknownServerError, topics, nil)
}

// FailOffsetCommit fails the next n OffsetCommit requests (n < 0: every
// one until Remove) of one of groups (none: any group), each partition
// answered UNKNOWN_SERVER_ERROR. Nothing is committed.
func (c *Cluster) FailOffsetCommit(n int, groups ...string) *Faults {
	return c.failKey(kmsg.OffsetCommit, n, kerr.UnknownServerError, nil, groups)
}

// failKey fails n requests of key, over the topics or the groups given.
// With several topics (or groups) the budget is n requests for each.
func (c *Cluster) failKey(key kmsg.Key, n int, err *kerr.Error, topics, groups []string) *Faults {
	if n == 0 {
		n = 1
	}
	base := kfake.Fault{Keys: []kmsg.Key{key}, Err: err, Count: n}
	var fs []kfake.Fault
	for _, tp := range topics {
		f := base
		f.Topic = tp
		fs = append(fs, f)
	}
	for _, g := range groups {
		f := base
		f.Group = g
		fs = append(fs, f)
	}
	if len(fs) == 0 {
		fs = []kfake.Fault{base}
	}
	return c.Fail(fs...)
}

// Counter counts the requests of one key the cluster received, across
// Restart.
type Counter struct {
	key kmsg.Key
	n   atomic.Int64
	off atomic.Bool
}

// N is the requests counted so far.
func (n *Counter) N() int64 { return n.n.Load() }

// Stop ends counting.
func (n *Counter) Stop() { n.off.Store(true) }

func (n *Counter) install(kc *kfake.Cluster) {
	kc.ControlKey(int16(n.key), func(kmsg.Request) (kmsg.Response, error, bool) {
		if n.off.Load() {
			kc.DropControl()
			return nil, nil, false
		}
		n.n.Add(1)
		// Not handled: the cluster answers the request as usual and the
		// control stays for the next one.
		return nil, nil, false
	})
}

// Count starts counting the requests of key (kmsg.Produce, kmsg.Fetch,
// kmsg.OffsetCommit...) the cluster receives from now on.
func (c *Cluster) Count(key kmsg.Key) *Counter {
	n := &Counter{key: key}
	c.mu.Lock()
	c.counters = append(c.counters, n)
	kc := c.c
	c.mu.Unlock()
	n.install(kc)
	return n
}

// Client returns a franz-go client of the cluster, closed when the test
// ends; opts come after the seed brokers.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of the cluster, closed when the test ends.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// WaitGroupMembers waits until group is stable with members members (0:
// empty or gone), up to bound.
func (c *Cluster) WaitGroupMembers(ctx context.Context, group string, members int, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		gi := c.Kfake().GroupInfo(group)
		n := 0
		stable := members == 0
		if gi != nil {
			n = len(gi.Members)
			stable = gi.State == "Stable" || members == 0
		}
		if n == members && stable {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: group %s has %d members (want %d): %w", group, n, members, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
