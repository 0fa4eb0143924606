// Command promq reads the delivery queue's series of one route from
// clawgate's admin /metrics (Prometheus text format) for bench/run.sh: how
// many events were accepted and how many delivered, after waiting for the
// queue to drain, and the accepted-to-delivered delay's p50 and p99 from the
// webhook_queue_delivery_delay_seconds histogram. Prints one line:
//
//	PROMQ queued=N delivered=N retried=N dead_lettered=N rejected=N not_owner=N depth=N drained=1 drain_ms=N
//	      delay_count=N delay_p50_us=N delay_p50_lo_us=N delay_p50_hi_us=N delay_p99_us=N delay_p99_lo_us=N delay_p99_hi_us=N
//
// queued is webhook_processing_duration_seconds_count{outcome="queued"}:
// the events stored and acknowledged (a copy of an event still queued is
// "replayed" and not counted). The others are
// webhook_delivery_attempts_total by outcome and the webhook_queue_depth
// gauge (refreshed by the gateway only every 5 s, so it may lag the
// counters; shown, not waited on). With -drain D it polls until delivered + dead_lettered + rejected
// reaches queued (on two polls in a row, so an answer still being counted
// is not missed), at most D; drain_ms is measured from -since (the end of
// the load run), drained=0 when D ran out. The quantiles are interpolated
// linearly inside their bucket the way Prometheus's histogram_quantile does,
// so they are approximate within the bucket bounds, which are printed too
// (lo, hi; hi is "inf" past the last finite bucket).
//
// -file reads a saved scrape instead of -url (no waiting). Only loopback
// URLs are accepted.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	delayMetric    = "webhook_queue_delivery_delay_seconds"
	attemptsMetric = "webhook_delivery_attempts_total"
	depthMetric    = "webhook_queue_depth"
	acceptedMetric = "webhook_processing_duration_seconds_count"
)

func main() {
	rawURL := flag.String("url", "", "admin /metrics `URL`, loopback only (http://127.0.0.1:PORT/metrics)")
	file := flag.String("file", "", "read a saved scrape from this `file` instead of -url")
	route := flag.String("route", "bench", "the queue route's `name`")
	drain := flag.Duration("drain", 0, "wait up to this long for every accepted event to be settled (0: read once)")
	since := flag.Float64("since", 0, "Unix time in `seconds` (fractions allowed) the drain is measured from; 0: now")
	every := flag.Duration("every", 25*time.Millisecond, "poll interval while draining")
	flag.Parse()

	if (*rawURL == "") == (*file == "") {
		fatalf("promq: give one of -url and -file")
	}
	start := time.Now()
	if *since > 0 {
		sec, frac := math.Modf(*since)
		start = time.Unix(int64(sec), int64(frac*1e9))
	}
	var scrape func() ([]sample, error)
	if *file != "" {
		scrape = func() ([]sample, error) {
			fh, err := os.Open(*file)
			if err != nil {
				return nil, err
			}
			defer fh.Close()
			return parseText(fh)
		}
	} else {
		u, err := url.Parse(*rawURL)
		if err != nil || u.Scheme != "http" || u.Host == "" {
			fatalf("promq: -url %q must be http://127.0.0.1:PORT/metrics", *rawURL)
		}
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			fatalf("promq: -url %q: only loopback IP targets are allowed", *rawURL)
		}
		hc := &http.Client{Timeout: 5 * time.Second}
		scrape = func() ([]sample, error) {
			resp, err := hc.Get(*rawURL)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %s", *rawURL, resp.Status)
			}
			return parseText(resp.Body)
		}
	}

	ss, err := scrape()
	if err != nil {
		fatalf("promq: %v", err)
	}
	st := read(ss, *route)
	drained, drainedAt := st.settled() >= st.queued, time.Now()
	if *drain > 0 && *file == "" {
		deadline := start.Add(*drain)
		streak := 0
		for {
			if st.settled() >= st.queued {
				if streak == 0 {
					drainedAt = time.Now()
				}
				streak++
			} else {
				streak = 0
			}
			if streak >= 2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(*every)
			if ss, err = scrape(); err != nil {
				fatalf("promq: %v", err)
			}
			st = read(ss, *route)
		}
		drained = streak >= 2
	}
	if !st.found {
		fatalf("promq: no %s series for route %q: is it a delivery: queue route?", depthMetric, *route)
	}
	b := 0
	if drained {
		b = 1
	}
	line := fmt.Sprintf("PROMQ queued=%.0f delivered=%.0f retried=%.0f dead_lettered=%.0f rejected=%.0f not_owner=%.0f depth=%.0f drained=%d",
		st.queued, st.attempts["delivered"], st.attempts["retried"], st.attempts["dead_lettered"], st.attempts["rejected"], st.attempts["not_owner"], st.depth, b)
	if drained {
		line += fmt.Sprintf(" drain_ms=%.0f", max(0, drainedAt.Sub(start).Seconds()*1000))
	} else {
		line += fmt.Sprintf(" drain_ms=%.0f", max(0, time.Since(start).Seconds()*1000)) // how long it was waited for
	}
	line += fmt.Sprintf(" delay_count=%.0f", st.delayCount())
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		v, lo, hi := bucketQuantile(q.q, st.delay)
		line += fmt.Sprintf(" delay_%s_us=%s delay_%s_lo_us=%s delay_%s_hi_us=%s", q.name, us(v), q.name, us(lo), q.name, us(hi))
	}
	fmt.Println(line)
}

// us formats seconds as whole microseconds; "inf" and "nan" as such.
func us(s float64) string {
	switch {
	case math.IsNaN(s):
		return "nan"
	case math.IsInf(s, 1):
		return "inf"
	}
	return strconv.FormatFloat(math.Round(s*1e6), 'f', 0, 64)
}

// sample is one line of the text format: a series and its value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseText reads the Prometheus text exposition format (version 0.0.4):
// comments and blank lines are skipped; an optional timestamp is ignored.
func parseText(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v: %q", n, err, line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseLine(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, errors.New("no value")
	}
	s.name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t,")
			if line == "" {
				return s, errors.New("unterminated label set")
			}
			if line[0] == '}' {
				line = line[1:]
				break
			}
			eq := strings.IndexByte(line, '=')
			if eq <= 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, errors.New("malformed label")
			}
			name := strings.TrimSpace(line[:eq])
			line = line[eq+2:]
			var v strings.Builder
			closed := false
			for j := 0; j < len(line); j++ {
				c := line[j]
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						v.WriteByte('\n')
					default: // \\ and \"
						v.WriteByte(line[j])
					}
					continue
				}
				if c == '"' {
					line, closed = line[j+1:], true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return s, errors.New("unterminated label value")
			}
			s.labels[name] = v.String()
		}
	}
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return s, errors.New("want a value and an optional timestamp")
	}
	v, err := parseValue(f[0])
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// bucket is one cumulative histogram bucket: the observations <= le.
type bucket struct {
	le    float64
	count float64
}

// state is what promq reads of one route.
type state struct {
	found    bool // the route has a queue depth series
	queued   float64
	depth    float64
	attempts map[string]float64
	delay    []bucket
}

func (s state) settled() float64 {
	return s.attempts["delivered"] + s.attempts["dead_lettered"] + s.attempts["rejected"]
}

func (s state) delayCount() float64 {
	for _, b := range s.delay {
		if math.IsInf(b.le, 1) {
			return b.count
		}
	}
	return 0
}

func read(ss []sample, route string) state {
	st := state{attempts: map[string]float64{}}
	for _, s := range ss {
		if s.labels["route"] != route {
			continue
		}
		switch s.name {
		case depthMetric:
			st.found, st.depth = true, s.value
		case attemptsMetric:
			st.attempts[s.labels["outcome"]] += s.value
		case acceptedMetric:
			if s.labels["outcome"] == "queued" {
				st.queued += s.value
			}
		case delayMetric + "_bucket":
			le, err := parseValue(s.labels["le"])
			if err == nil {
				st.delay = append(st.delay, bucket{le, s.value})
			}
		}
	}
	return st
}

// bucketQuantile is the q-quantile of cumulative buckets, as Prometheus's
// histogram_quantile computes it: find the bucket the rank q*count falls
// in and interpolate linearly between its lower and upper bound (the
// lowest bucket's lower bound is 0 when its upper bound is positive). A
// rank in the +Inf bucket returns the highest finite bound. It also
// returns the bounds of the bucket used. NaN when there is no +Inf bucket
// or no observation.
func bucketQuantile(q float64, bs []bucket) (v, lo, hi float64) {
	nan := math.NaN()
	if math.IsNaN(q) || q < 0 || q > 1 {
		return nan, nan, nan
	}
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	// Equal bounds (from adding series) are summed.
	merged := bs[:0]
	for _, b := range bs {
		if n := len(merged); n > 0 && merged[n-1].le == b.le {
			merged[n-1].count += b.count
			continue
		}
		merged = append(merged, b)
	}
	bs = merged
	if len(bs) < 2 || !math.IsInf(bs[len(bs)-1].le, 1) {
		return nan, nan, nan
	}
	// Counts scraped one by one may dip; keep them non-decreasing.
	for i := 1; i < len(bs); i++ {
		bs[i].count = max(bs[i].count, bs[i-1].count)
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return nan, nan, nan
	}
	rank := q * total
	b, _ := slices.BinarySearchFunc(bs[:len(bs)-1], rank, func(x bucket, r float64) int {
		if x.count >= r {
			return 1
		}
		return -1
	})
	if b == len(bs)-1 {
		return bs[len(bs)-2].le, bs[len(bs)-2].le, math.Inf(1)
	}
	if b == 0 && bs[0].le <= 0 {
		return bs[0].le, bs[0].le, bs[0].le
	}
	start, end, count := 0.0, bs[b].le, bs[b].count
	if b > 0 {
		start = bs[b-1].le
		count -= bs[b-1].count
		rank -= bs[b-1].count
	}
	return start + (end-start)*(rank/count), start, end
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
