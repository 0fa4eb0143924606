package main

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The delay histogram's own buckets, as the gateway exposes them.
var les = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 43200, math.Inf(1)}

func hist(counts ...float64) []bucket {
	var bs []bucket
	cum := 0.0
	for i, le := range les {
		if i < len(counts) {
			cum += counts[i]
		}
		bs = append(bs, bucket{le, cum})
	}
	return bs
}

func TestBucketQuantileInterpolates(t *testing.T) {
	// 100 observations: 10 in (0, 1ms], 60 in (1ms, 5ms], 25 in (5ms, 10ms], 5 in (10ms, 25ms].
	bs := hist(10, 60, 25, 5)
	cases := []struct {
		q, want, lo, hi float64
	}{
		// rank 50: 40 of the 60 in (1ms, 5ms] -> 1ms + 4ms*40/60
		{0.5, 0.001 + 0.004*40.0/60, 0.001, 0.005},
		// rank 99: 4 of the 5 in (10ms, 25ms] -> 10ms + 15ms*4/5
		{0.99, 0.010 + 0.015*4.0/5, 0.010, 0.025},
		// rank 5: half of the lowest bucket, whose lower bound is 0
		{0.05, 0.0005, 0, 0.001},
		// rank 70: exactly the top of (1ms, 5ms]
		{0.70, 0.005, 0.001, 0.005},
		// rank 100: the top of the last bucket holding observations
		{1, 0.025, 0.010, 0.025},
	}
	for _, c := range cases {
		v, lo, hi := bucketQuantile(c.q, bs)
		if !near(v, c.want) || !near(lo, c.lo) || !near(hi, c.hi) {
			t.Errorf("q=%v: got %v in (%v, %v], want %v in (%v, %v]", c.q, v, lo, hi, c.want, c.lo, c.hi)
		}
	}
}

func TestBucketQuantileEdges(t *testing.T) {
	// Observations past the last finite bucket: its bound, as Prometheus.
	bs := hist(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4)
	if v, lo, hi := bucketQuantile(0.5, bs); v != 43200 || lo != 43200 || !math.IsInf(hi, 1) {
		t.Errorf("+Inf bucket: %v (%v, %v]", v, lo, hi)
	}
	if v, _, _ := bucketQuantile(0.5, hist()); !math.IsNaN(v) {
		t.Errorf("no observations: %v", v)
	}
	if v, _, _ := bucketQuantile(0.5, []bucket{{0.1, 3}, {1, 4}}); !math.IsNaN(v) {
		t.Errorf("no +Inf bucket: %v", v)
	}
	// Unsorted input with a dip (counts scraped one by one) is sorted and
	// made monotonic first: (0.01 -> 5), so rank 5 is the top of (0, 1ms].
	bs = []bucket{{math.Inf(1), 10}, {0.01, 4}, {0.001, 5}}
	if v, lo, hi := bucketQuantile(0.5, bs); v != 0.001 || lo != 0 || hi != 0.001 {
		t.Errorf("unsorted: %v (%v, %v]", v, lo, hi)
	}
}

const scrape = `# HELP webhook_queue_depth Undelivered events.
# TYPE webhook_queue_depth gauge
webhook_queue_depth{route="bench"} 0
webhook_queue_depth{route="other"} 7
# TYPE webhook_delivery_attempts_total counter
webhook_delivery_attempts_total{outcome="delivered",route="bench"} 100
webhook_delivery_attempts_total{outcome="retried",route="bench"} 2
webhook_delivery_attempts_total{outcome="dead_lettered",route="bench"} 0
webhook_delivery_attempts_total{outcome="rejected",route="bench"} 1
webhook_processing_duration_seconds_count{outcome="queued",route="bench"} 101
webhook_processing_duration_seconds_count{outcome="replayed",route="bench"} 50
webhook_requests_total{code="202",route="we\"ird\\name"} 3 1712345678000
webhook_queue_delivery_delay_seconds_bucket{route="bench",le="0.001"} 10
webhook_queue_delivery_delay_seconds_bucket{route="bench",le="0.005"} 70
webhook_queue_delivery_delay_seconds_bucket{route="bench",le="0.01"} 95
webhook_queue_delivery_delay_seconds_bucket{route="bench",le="0.025"} 100
webhook_queue_delivery_delay_seconds_bucket{route="bench",le="+Inf"} 100
webhook_queue_delivery_delay_seconds_bucket{route="other",le="+Inf"} 9
webhook_queue_delivery_delay_seconds_sum{route="bench"} 0.4
webhook_queue_delivery_delay_seconds_count{route="bench"} 100
go_gc_duration_seconds{quantile="0.5"} 1.5e-05
process_start_time_seconds 1.7e+09
`

func TestParseAndRead(t *testing.T) {
	ss, err := parseText(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.name == "webhook_requests_total" && s.labels["route"] != `we"ird\name` {
			t.Errorf("escaped label: %q", s.labels["route"])
		}
	}
	st := read(ss, "bench")
	if !st.found || st.depth != 0 || st.queued != 101 || st.attempts["delivered"] != 100 || st.settled() != 101 || st.delayCount() != 100 {
		t.Fatalf("%+v", st)
	}
	v, lo, hi := bucketQuantile(0.5, st.delay)
	if !near(v, 0.001+0.004*40.0/60) || lo != 0.001 || hi != 0.005 {
		t.Errorf("p50 %v (%v, %v]", v, lo, hi)
	}
	if us(v) != "3667" || us(math.Inf(1)) != "inf" {
		t.Errorf("us: %s", us(v))
	}
	if st := read(ss, "missing"); st.found {
		t.Error("missing route found")
	}
	if _, err := parseText(strings.NewReader("x{a=\"1} 2\n")); err == nil {
		t.Error("unterminated label accepted")
	}
}
