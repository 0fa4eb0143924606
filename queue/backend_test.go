package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// Helpers of this package's tests. The conformance suite every backend
// runs is queue/queuetest (conformance_test.go runs it on memory and
// Redis).

const testRoute = "hooks"

// waitBound bounds every wait for a condition in these tests: it ends a
// test that would hang, and is no measure of speed. 30 s, since on a
// loaded CI machine TestRedisRestartWithoutPersistenceWhileEventsArriveDeliversOnce
// once took over 10 s for 200 deliveries after a Redis restart (the
// consumer groups made again, two managers on a shared 2-CPU machine).
const waitBound = 30 * time.Second

// forEachBackend runs f against a fresh Memory and a fresh Redis backend
// (its own redis-server, route testRoute prepared with one shard).
func forEachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) { f(t, NewMemory()) })
	t.Run("redis", func(t *testing.T) { f(t, newRedisBackend(t, 0)) })
}

// newRedisClient returns a client of the redis-server at addr, closed when
// the test ends.
func newRedisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	// No command retries, as the gateway's own client (store.NewRedis):
	// the library's default would run a script again after a lost reply.
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newRedisBackend starts a redis-server and returns the queue on it with
// testRoute prepared (one shard); timeout 0 is the default.
func newRedisBackend(t testing.TB, timeout time.Duration) *Redis {
	t.Helper()
	b := NewRedis(newRedisClient(t, redistest.Start(t)), "test:", timeout)
	if err := b.Prepare(context.Background(), testRoute, 1); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	return b
}

// waitFor polls cond every few milliseconds and fails the test when it
// does not hold within waitBound.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitBound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// msNow is the current time at millisecond precision (what Redis keeps).
func msNow() time.Time { return time.UnixMilli(time.Now().UnixMilli()).UTC() }

func testEntry(key, fp string) Entry {
	return Entry{Route: testRoute, Key: key, Fingerprint: fp, Payload: []byte(key), FirstSeen: msNow()}
}

func mustEnqueue(t testing.TB, b Backend, e Entry, maxDepth int) Ack {
	t.Helper()
	ack, err := b.Enqueue(context.Background(), e, maxDepth)
	if err != nil {
		t.Fatalf("Enqueue %q: %v", e.Key, err)
	}
	return ack
}

func mustGet(t testing.TB, b Backend, key string) KeyState {
	t.Helper()
	ks, err := b.Get(context.Background(), testRoute, key)
	if err != nil {
		t.Fatalf("Get %q: %v", key, err)
	}
	return ks
}

func mustStats(t testing.TB, b Backend) Stats {
	t.Helper()
	st, err := b.Stats(context.Background(), testRoute)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// tryRead reads at most n ready entries of shard 0 without waiting long.
func tryRead(t testing.TB, b Backend, consumer string, n int) []Lease {
	t.Helper()
	ls, err := b.Read(context.Background(), testRoute, 0, consumer, n, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return ls
}

// readOne waits for one ready entry of shard 0.
func readOne(t testing.TB, b Backend, consumer string) Lease {
	t.Helper()
	var got []Lease
	waitFor(t, "a ready entry", func() bool {
		got = tryRead(t, b, consumer, 1)
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("Read(n=1) returned %d entries", len(got))
	}
	return got[0]
}

func mustBegin(t testing.TB, b Backend, l Lease) Job {
	t.Helper()
	j, ok, err := b.Begin(context.Background(), l)
	if err != nil || !ok {
		t.Fatalf("Begin %+v: ok=%v err=%v, want a job", l, ok, err)
	}
	return j
}

func mustSettle(t testing.TB, b Backend, consumer string, j Job, s Settlement, want Settled) {
	t.Helper()
	got, err := b.Settle(context.Background(), consumer, j, s)
	if err != nil {
		t.Fatalf("Settle %s: %v", j.Key, err)
	}
	if got != want {
		t.Fatalf("Settle %s by %s = %s, want %s", j.Key, consumer, settledName(got), settledName(want))
	}
}

// assertNoEntries fails when any entry is ready or held by anyone.
func assertNoEntries(t testing.TB, b Backend) {
	t.Helper()
	if ls := tryRead(t, b, "probe", 100); len(ls) != 0 {
		t.Fatalf("ready entries left: %+v", ls)
	}
	ls, err := b.Reclaim(context.Background(), testRoute, 0, "probe", 0)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if len(ls) != 0 {
		t.Fatalf("held entries left: %+v", ls)
	}
}

func settledName(s Settled) string {
	switch s {
	case Recorded:
		return "Recorded"
	case NotOwner:
		return "NotOwner"
	case Stale:
		return "Stale"
	}
	return fmt.Sprintf("Settled(%d)", int(s))
}

func delivered(status int, body, fp string) Settlement {
	return Settlement{Kind: SettleDelivered, Retention: time.Hour, At: msNow(),
		Outcome: store.Outcome{Status: status, ContentType: "application/json", Body: []byte(body), Fingerprint: fp}}
}

func dead(reason string, status int, at time.Time) Settlement {
	return Settlement{Kind: SettleDead, Reason: reason, Status: status, Error: "upstream said no", At: at}
}

// deadLetter enqueues key and dead-letters it after one try; it returns
// the event id.
func deadLetter(t testing.TB, b Backend, key string, at time.Time) string {
	t.Helper()
	ack := mustEnqueue(t, b, testEntry(key, "fp-"+key), 1000)
	if ack.State != Enqueued {
		t.Fatalf("Enqueue %q: %+v, want Enqueued", key, ack)
	}
	j := mustBegin(t, b, readOne(t, b, "c"))
	if j.Key != key {
		t.Fatalf("read %q, want %q", j.Key, key)
	}
	mustSettle(t, b, "c", j, dead("exhausted", 500, at), Recorded)
	return ack.ID
}
