package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// forEachBackendSlow is forEachBackend with a generous per-call Redis
// timeout, for tests that put a thousand calls in flight at once.
func forEachBackendSlow(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	t.Run("memory", func(t *testing.T) { f(t, NewMemory()) })
	t.Run("redis", func(t *testing.T) { f(t, newRedisBackend(t, 10*time.Second)) })
}

func TestConcurrentEnqueueOfOneKey(t *testing.T) {
	forEachBackendSlow(t, func(t *testing.T, b Backend) {
		const n = 1000
		acks := make([]Ack, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				acks[i], errs[i] = b.Enqueue(context.Background(), testEntry("same", "fp"), n)
			})
		}
		close(start)
		wg.Wait()
		enqueued, pending := 0, 0
		id := ""
		copies := map[int64]bool{}
		for i, a := range acks {
			if errs[i] != nil {
				t.Fatalf("Enqueue %d: %v", i, errs[i])
			}
			copies[a.Copies] = true
			switch a.State {
			case Enqueued:
				enqueued++
				if id == "" {
					id = a.ID
				}
			case Pending:
				pending++
			default:
				t.Fatalf("Enqueue %d = %+v", i, a)
			}
		}
		if enqueued != 1 || pending != n-1 {
			t.Fatalf("%d Enqueued, %d Pending; want 1 and %d", enqueued, pending, n-1)
		}
		if len(copies) != n {
			t.Fatalf("%d distinct copy counts, want %d (each call counted once)", len(copies), n)
		}
		for i, a := range acks {
			if a.ID != id {
				t.Fatalf("Enqueue %d answered id %q, want %q", i, a.ID, id)
			}
		}
		if st := mustStats(t, b); st.Depth != 1 {
			t.Fatalf("Depth = %d, want 1", st.Depth)
		}
		if ks := mustGet(t, b, "same"); ks.Copies != n {
			t.Fatalf("Copies = %d, want %d", ks.Copies, n)
		}
		ls := tryRead(t, b, "c", 10)
		if len(ls) != 1 || ls[0].EventID != id {
			t.Fatalf("readable entries %+v, want exactly one of %s", ls, id)
		}
	})
}

func TestConcurrentPromoters(t *testing.T) {
	forEachBackendSlow(t, func(t *testing.T, b Backend) {
		ctx := context.Background()
		const n = 200
		for i := range n {
			mustEnqueue(t, b, testEntry(fmt.Sprintf("k%03d", i), "fp"), n)
		}
		due := msNow()
		settled := 0
		for settled < n {
			ls := tryRead(t, b, "c", 50)
			if len(ls) == 0 {
				t.Fatalf("only %d of %d entries were readable", settled, n)
			}
			for _, l := range ls {
				mustSettle(t, b, "c", mustBegin(t, b, l), Settlement{Kind: SettleRetry, Due: due}, Recorded)
				settled++
			}
		}

		const promoters = 2
		var wg sync.WaitGroup
		counts := make([]int, promoters)
		errs := make([]error, promoters)
		start := make(chan struct{})
		for p := range promoters {
			wg.Go(func() {
				<-start
				for {
					k, err := b.Promote(ctx, testRoute, 0, due)
					if err != nil {
						errs[p] = err
						return
					}
					if k == 0 {
						return
					}
					counts[p] += k
				}
			})
		}
		close(start)
		wg.Wait()
		for p, err := range errs {
			if err != nil {
				t.Fatalf("promoter %d: %v", p, err)
			}
		}
		if counts[0]+counts[1] != n {
			t.Fatalf("promoters promoted %v, want %d in all", counts, n)
		}

		reads := map[string]int{}
		for {
			ls := tryRead(t, b, "c", 100)
			if len(ls) == 0 {
				break
			}
			for _, l := range ls {
				reads[l.EventID]++
			}
		}
		if len(reads) != n {
			t.Fatalf("%d events readable, want %d", len(reads), n)
		}
		for id, k := range reads {
			if k != 1 {
				t.Fatalf("event %s readable %d times, want once", id, k)
			}
		}
	})
}
