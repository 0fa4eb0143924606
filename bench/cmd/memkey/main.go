// Command memkey measures what one finished idempotency key costs on the
// memory store: it fills ledger.NewMemoryStore with -keys finished keys (route-
// scoped UUID-shaped keys as the gateway stores them, a distinct canonical
// fingerprint each, content type application/json, a -body-byte replay
// body), then reports
//
//   - heap: live heap after a full GC (runtime.MemStats.HeapAlloc) grown
//     since the empty store, per key, and the same minus the body bytes
//     (the figure the target of 400 bytes applies to);
//   - rss: the process's resident set (VmRSS) grown since the empty store,
//     after debug.FreeOSMemory, per key, and minus the body bytes. RSS also
//     holds the map's spare buckets and allocator slack, so it is the
//     operator's number; heap is the store's.
//
// It measures the store alone: the gateway's 10 s window (dedupe.cache_size
// outcomes, 100,000 by default) is extra and bounded, and not counted.
//
// Prints one line: MEMKEY keys=... body=... heap_per_key=... heap_beyond_body=... rss_per_key=... rss_beyond_body=...
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

func main() {
	n := flag.Int("keys", 1_000_000, "finished keys to store")
	bodySize := flag.Int("body", 100, "replay body `bytes` per key")
	history := flag.Int("history", 0, "dedupe.history: `entries` each key's history keeps (0 off; with it on each key records its arrival and its settle, as a forwarded delivery does)")
	flag.Parse()
	ctx := context.Background()
	body := make([]byte, *bodySize) // the store copies it on Finish
	for i := range body {
		body[i] = 'x'
	}

	heap0, rss0 := measure()
	m := ledger.NewMemoryStore(store.MemoryOptions{MaxKeys: *n, MaxBytes: math.MaxInt64}) // bounded by -keys alone: this measures a key
	m.SetHistory(ledger.HistoryOptions{Cap: *history, Keep: 24 * time.Hour, Instance: "gw-1"})
	buf := []byte("bench:")
	var seed [8]byte
	for i := 0; i < *n; i++ {
		buf = fmt.Appendf(buf[:len("bench:")], "%08x-7c1e-4b7a-9d3f-%012x", i, uint64(i)*7919)
		key := string(buf)
		binary.BigEndian.PutUint64(seed[:], uint64(i))
		sum := sha256.Sum256(seed[:])
		fp := hex.EncodeToString(sum[:])
		// What a delivery tells the history: its request id (32 hex
		// digits), the secret that verified it, the client's address.
		note := store.Note{RequestID: fp[:32], Secret: "k1", Client: "203.0.113.7"}
		c, err := m.Claim(store.WithNote(ctx, note), key, fp, time.Minute)
		if err != nil || c.State != store.Claimed {
			fatalf("memkey: claim %d: %v %v", i, c.State, err)
		}
		out := store.Outcome{Status: 200, ContentType: "application/json", Body: body, Fingerprint: fp}
		note.Status, note.UpstreamMS = 200, 12
		if err := m.Finish(store.WithNote(ctx, note), key, c.Token, out, 24*time.Hour); err != nil {
			fatalf("memkey: finish %d: %v", i, err)
		}
	}
	heap1, rss1 := measure()
	if m.Len() != *n {
		fatalf("memkey: store holds %d keys, want %d (evicted?)", m.Len(), *n)
	}
	heap := float64(heap1-heap0) / float64(*n)
	rss := float64(rss1-rss0) / float64(*n)
	fmt.Printf("MEMKEY keys=%d body=%d history=%d key_bytes=%d heap_per_key=%.0f heap_beyond_body=%.0f rss_per_key=%.0f rss_beyond_body=%.0f estimate_per_key=%.0f\n",
		*n, *bodySize, *history, len(buf), heap, heap-float64(*bodySize), rss, rss-float64(*bodySize), float64(m.Bytes())/float64(*n))
	runtime.KeepAlive(m)
}

// measure returns the live heap after a full GC and the resident set after
// returning freed pages to the OS.
func measure() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, vmRSS()
}

func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
