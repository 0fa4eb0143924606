// Command rate is the benchmark's open-loop load generator: it sends the
// pre-signed deliveries of a request file (bench/internal/reqfile) at a
// fixed rate for a fixed duration and prints latency percentiles measured
// from each request's *scheduled* send time, so a stalled server is charged
// for every request it delayed (no coordinated omission, unlike wrk).
//
//	rate -url http://127.0.0.1:8080 -requests requests.txt -rate 2000 -duration 10s
//
// A dispatcher releases request i at start + i/rate onto a queue; -conns
// workers, each with its own keep-alive connection, take requests off it.
// When all workers are busy the queue grows and the waiting shows up in the
// latency. The first -warmup of the run is sent but not recorded. Prints one
// line:
//
//	RATE target_rps=2000 sent=... ok=... non2xx=... errors=... p50_us=... p90_us=... p99_us=... p999_us=... max_us=... behind_max_us=...
//
// With -once it sends delivery -index once and exits 0 only on a 2xx: the
// harness's pre-flight check (signing, routing) and the priming of the
// duplicates case. Only loopback targets are accepted.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/clawgate/clawgate/bench/internal/reqfile"
)

func main() {
	target := flag.String("url", "", "base `URL` of the target, loopback only (http://127.0.0.1:PORT)")
	file := flag.String("requests", "", "request `file` written by presign")
	mode := flag.String("mode", "unique", "unique (each request a new key) | dup (delivery -index every time)")
	rate := flag.Int("rate", 2000, "requests per second")
	duration := flag.Duration("duration", 10*time.Second, "how long to send, warm-up included")
	warmup := flag.Duration("warmup", time.Second, "sent but not recorded")
	conns := flag.Int("conns", 64, "concurrent connections (workers)")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout")
	offset := flag.Int("offset", 0, "first delivery used in unique mode")
	once := flag.Bool("once", false, "send delivery -index once, print its status, exit 0 on 2xx")
	index := flag.Int("index", 0, "delivery sent by -once and by -mode dup")
	expect := flag.Int("expect", 0, "with -once: the status required (0: any 2xx)")
	flag.Parse()

	u, err := url.Parse(*target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		fatalf("rate: -url %q must be http://127.0.0.1:PORT", *target)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		fatalf("rate: -url %q: only loopback IP targets are allowed", *target)
	}
	f, err := reqfile.Read(*file)
	if err != nil {
		fatalf("rate: %v", err)
	}
	if *index < 0 || *index >= len(f.Keys) {
		fatalf("rate: -index %d out of range (file has %d)", *index, len(f.Keys))
	}
	hc := &fasthttp.HostClient{
		Addr:                     u.Host,
		MaxConns:                 *conns,
		NoDefaultUserAgentHeader: true,
		MaxIdleConnDuration:      time.Minute,
		ReadTimeout:              *timeout,
		WriteTimeout:             *timeout,
		MaxConnWaitTimeout:       *timeout,
	}
	send := func(i int, req *fasthttp.Request, resp *fasthttp.Response) (int, error) {
		req.Reset()
		req.Header.SetMethod(f.Method)
		req.SetRequestURI(f.Path)
		req.Header.SetHost(u.Host)
		for _, h := range f.Headers {
			req.Header.Set(h[0], h[1])
		}
		req.Header.Set(f.KeyHeader, f.Keys[i])
		req.Header.Set(f.SigHeader, f.Sigs[i])
		req.SetBodyRaw(f.Body(nil, i))
		if err := hc.DoTimeout(req, resp, *timeout); err != nil {
			return 0, err
		}
		return resp.StatusCode(), nil
	}

	if *once {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		code, err := send(*index, req, resp)
		if err != nil {
			fatalf("rate: %s: %v", *target, err)
		}
		fmt.Printf("status %d %s\n", code, resp.Body())
		if (*expect == 0 && (code < 200 || code > 299)) || (*expect != 0 && code != *expect) {
			os.Exit(1)
		}
		return
	}

	if *rate < 1 || *duration <= *warmup {
		fatalf("rate: need -rate >= 1 and -duration > -warmup")
	}
	total := int(duration.Seconds() * float64(*rate))
	skip := int(warmup.Seconds() * float64(*rate))
	pick := func(i int) int { return *index }
	switch *mode {
	case "unique":
		if *offset+total > len(f.Keys) {
			fatalf("rate: %d requests from offset %d need more than the file's %d deliveries", total, *offset, len(f.Keys))
		}
		pick = func(i int) int { return *offset + i }
	case "dup":
	default:
		fatalf("rate: unknown -mode %q", *mode)
	}

	type job struct {
		i     int
		sched time.Time
	}
	lat := make([]int64, total) // microseconds from scheduled send to answer; -1 failed
	status := make([]int32, total)
	queue := make(chan job, total)
	var wg sync.WaitGroup
	var errCount atomic.Int64
	var firstErr atomic.Value
	for w := 0; w < *conns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			for j := range queue {
				code, err := send(pick(j.i), req, resp)
				lat[j.i] = time.Since(j.sched).Microseconds()
				status[j.i] = int32(code)
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}

	interval := time.Second / time.Duration(*rate)
	start := time.Now().Add(10 * time.Millisecond)
	var behindMax time.Duration // how late the dispatcher itself ran
	for i := 0; i < total; {
		now := time.Now()
		next := start.Add(time.Duration(i) * interval)
		if d := next.Sub(now); d > 0 {
			time.Sleep(d)
			continue
		}
		// Release every request already due (the sleep may overshoot).
		for ; i < total; i++ {
			s := start.Add(time.Duration(i) * interval)
			if s.After(now) {
				break
			}
			behindMax = max(behindMax, now.Sub(s))
			queue <- job{i, s}
		}
	}
	close(queue)
	wg.Wait()

	rec := lat[skip:]
	var ok, non2xx int
	for k, c := range status[skip:] {
		switch {
		case c >= 200 && c <= 299:
			ok++
		case c != 0:
			non2xx++
		default:
			rec[k] = -1
		}
	}
	sorted := slices.DeleteFunc(slices.Clone(rec), func(v int64) bool { return v < 0 })
	slices.Sort(sorted)
	pct := func(p float64) int64 {
		if len(sorted) == 0 {
			return 0
		}
		k := int(p/100*float64(len(sorted))+0.5) - 1
		return sorted[min(max(k, 0), len(sorted)-1)]
	}
	fmt.Printf("RATE target_rps=%d recorded=%d ok=%d non2xx=%d errors=%d p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d behind_max_us=%d\n",
		*rate, len(rec), ok, non2xx, errCount.Load(), pct(50), pct(90), pct(99), pct(99.9), pct(100), behindMax.Microseconds())
	if e, _ := firstErr.Load().(string); e != "" {
		fmt.Fprintln(os.Stderr, "rate: first error:", errors.New(e))
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
