package queue

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// Regression test: the memory queue's Read copied the whole ready list to
// drop the entries it took, so each delivery cost time and garbage in
// proportion to the events waiting (1.3 MB allocated per read with 20,000
// waiting; found by BenchmarkScaleQueueDepth). Reading one entry of 50,000
// must allocate about what the entry needs, not a copy of the list.
func TestMemoryReadDoesNotCopyTheReadyList(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	now := time.Now()
	const waiting = 50_000
	for i := range waiting {
		if _, err := m.Enqueue(ctx, Entry{Route: "r", Key: "k" + strconv.Itoa(i), Fingerprint: "fp", Payload: []byte("x"), FirstSeen: now}, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	const reads = 100
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range reads {
		ls, err := m.Read(ctx, "r", 0, "c", 1, time.Second)
		if err != nil || len(ls) != 1 {
			t.Fatal(ls, err)
		}
	}
	runtime.ReadMemStats(&after)
	perRead := (after.TotalAlloc - before.TotalAlloc) / reads
	// A copy of the list is waiting x 64 bytes (memEntry: four strings) =
	// 3.2 MB; a read's own work is a few hundred bytes.
	if perRead > 16<<10 {
		t.Fatalf("a read of one entry allocated %d bytes with %d events waiting: the ready list is copied", perRead, waiting)
	}
	// Every event is still read, once, in order.
	seen := reads
	for {
		ls, err := m.Read(ctx, "r", 0, "c", 1000, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			if l.Key != "k"+strconv.Itoa(seen) {
				t.Fatalf("read %s, want k%d", l.Key, seen)
			}
			seen++
		}
	}
	if seen != waiting {
		t.Fatalf("read %d events, want %d", seen, waiting)
	}
}
