package queue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/metrics"
)

// Regression: a worker that stalled past lock_ttl between reading an
// entry and beginning it began it anyway, beside the instance that had
// taken the entry over (Begin checked the key's token but not that the
// entry was still pending to the caller, and did not renew its idle
// time): the upstream got two copies with nobody dying between its 2xx
// and the settle. Begin now refuses a lease that is no longer the
// entry's latest read or takeover, whoever took it over.
func TestBackendStallBeforeBeginNotOwner(t *testing.T) {
	for _, by := range []string{"B", "A"} { // another instance; the same one
		t.Run("taken over by "+by, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b Backend) {
				ctx := context.Background()
				mustEnqueue(t, b, testEntry("k", "fp"), 10)
				stale := readOne(t, b, "A")
				// A stalls; the entry's idle passes the (tiny) threshold
				// and by takes it over.
				var taken []Lease
				waitFor(t, by+" to take the entry over", func() bool {
					ls, err := b.Reclaim(ctx, testRoute, 0, by, 0)
					if err != nil {
						t.Fatalf("Reclaim: %v", err)
					}
					taken = append(taken, ls...)
					return len(taken) > 0
				})
				if len(taken) != 1 || taken[0].Entry != stale.Entry {
					t.Fatalf("%s took over %+v, want A's entry %s", by, taken, stale.Entry)
				}
				j := mustBegin(t, b, taken[0])

				_, ok, err := b.Begin(ctx, stale)
				if !errors.Is(err, ErrNotOwner) || ok {
					t.Fatalf("stale Begin by A after %s's takeover: ok=%v err=%v, want ErrNotOwner", by, ok, err)
				}
				if ks := mustGet(t, b, "k"); ks.State != StateQueued || ks.Attempts != 1 {
					t.Fatalf("Get after the refused Begin = %+v, want queued with one try", ks)
				}
				mustSettle(t, b, by, j, delivered(200, "", "fp"), Recorded)
				if ks := mustGet(t, b, "k"); ks.State != StateFinished || ks.Attempts != 1 {
					t.Fatalf("Get = %+v, want finished after one try", ks)
				}
				assertNoEntries(t, b)
			})
		})
	}
}

// A lease read by one consumer cannot be begun by another.
func TestBackendBeginOtherConsumerNotOwner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		mustEnqueue(t, b, testEntry("k", "fp"), 10)
		l := readOne(t, b, "A")
		other := l
		other.Consumer = "B"
		if _, ok, err := b.Begin(context.Background(), other); !errors.Is(err, ErrNotOwner) || ok {
			t.Fatalf("Begin by B of A's entry: ok=%v err=%v, want ErrNotOwner", ok, err)
		}
		mustSettle(t, b, "A", mustBegin(t, b, l), delivered(200, "", "fp"), Recorded)
		assertNoEntries(t, b)
	})
}

// Begin renews the lease: the lock TTL runs from the begin, not from the
// read, so a slow start does not leave the try open to a takeover.
func TestBackendBeginRenewsLease(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		m := NewMemory()
		m.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		const ttl = time.Minute
		mustEnqueue(t, m, testEntry("k", "fp"), 10)
		l := readOne(t, m, "A")
		clock.Add(int64(ttl))
		j := mustBegin(t, m, l)
		if ls, err := m.Reclaim(context.Background(), testRoute, 0, "B", ttl); err != nil || len(ls) != 0 {
			t.Fatalf("Reclaim right after a begin = %+v, %v; want nothing (the begin renews the lease)", ls, err)
		}
		clock.Add(int64(ttl))
		if ls, err := m.Reclaim(context.Background(), testRoute, 0, "B", ttl); err != nil || len(ls) != 1 {
			t.Fatalf("Reclaim lock_ttl after the begin = %+v, %v; want A's entry", ls, err)
		}
		mustSettle(t, m, "A", j, delivered(200, "", "fp"), NotOwner)
	})
	t.Run("redis", func(t *testing.T) {
		ctx := context.Background()
		b := newRedisBackend(t, 0)
		mustEnqueue(t, b, testEntry("k", "fp"), 10)
		l := readOne(t, b, "A")
		idle := func() time.Duration {
			t.Helper()
			p, err := b.client.XPendingExt(ctx, &redis.XPendingExtArgs{
				Stream: b.stream(testRoute, 0), Group: Group, Start: l.Entry, End: l.Entry, Count: 1,
			}).Result()
			if err != nil || len(p) != 1 || p[0].Consumer != "A" {
				t.Fatalf("XPENDING %s = %+v, %v; want pending to A", l.Entry, p, err)
			}
			return p[0].Idle
		}
		var before time.Duration
		waitFor(t, "the entry to idle", func() bool { before = idle(); return before >= 20*time.Millisecond })
		j := mustBegin(t, b, l)
		if after := idle(); after >= before {
			t.Fatalf("idle after Begin = %v, before %v; want the begin to renew it", after, before)
		}
		mustSettle(t, b, "A", j, delivered(200, "", "fp"), Recorded)
	})
}

// stallingBegin holds the first Begin until release is closed, then
// reports what the backend answered.
type stallingBegin struct {
	Backend
	reached chan struct{}
	release chan struct{}
	done    chan error
	first   atomic.Bool
}

func (s *stallingBegin) Begin(ctx context.Context, l Lease) (Job, bool, error) {
	if !s.first.CompareAndSwap(false, true) {
		return s.Backend.Begin(ctx, l)
	}
	close(s.reached)
	<-s.release
	j, ok, err := s.Backend.Begin(ctx, l)
	if err == nil && !ok {
		err = errors.New("dropped as a leftover")
	}
	s.done <- err
	return j, ok, err
}

// The manager's side of the regression: instance A stalls between reading
// the entry and beginning it, B takes the entry over and is forwarding it
// when A wakes up. A's try is refused and counted not_owner; the upstream
// sees one copy.
func TestManagerStallBeforeBeginOneCopy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		ctx := context.Background()
		sb := &stallingBegin{Backend: b, reached: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
		upstream := newSender(func(context.Context, string, int64) Result { return answer(200) })
		route := testQueueRoute()
		route.LockTTL = time.Hour // A never takes anything over itself here
		a := startManager(t, sb, upstream, route, func(o *Options) { o.Consumer = "A" })
		a.enqueue(t, "k")
		select {
		case <-sb.reached:
		case <-time.After(waitBound):
			t.Fatal("A never began its try")
		}

		// B (driven by hand) takes the stalled entry over and begins it.
		var taken []Lease
		waitFor(t, "B to take the entry over", func() bool {
			ls, err := b.Reclaim(ctx, testRoute, 0, "B", 0)
			if err != nil {
				t.Fatalf("Reclaim: %v", err)
			}
			taken = append(taken, ls...)
			return len(taken) > 0
		})
		jb := mustBegin(t, b, taken[0])

		// A wakes up while B's copy is on its way.
		close(sb.release)
		select {
		case err := <-sb.done:
			if !errors.Is(err, ErrNotOwner) {
				t.Fatalf("A's Begin after B's takeover: %v, want ErrNotOwner", err)
			}
		case <-time.After(waitBound):
			t.Fatal("A's Begin never returned")
		}
		waitFor(t, "A's try to be counted not_owner", func() bool { return a.rec.attempt(metrics.AttemptNotOwner) == 1 })
		upstream.Send(ctx, testRoute, jb.Payload, jb.Total) // B's copy
		mustSettle(t, b, "B", jb, delivered(200, "", "fp-k"), Recorded)

		if calls := upstream.byKey()["k"]; len(calls) != 1 {
			t.Fatalf("the upstream saw %d copies of k, want 1: %+v", len(calls), calls)
		}
		if ks := mustGet(t, b, "k"); ks.State != StateFinished || ks.Attempts != 1 {
			t.Fatalf("Get = %+v, want finished after one try", ks)
		}
	})
}
