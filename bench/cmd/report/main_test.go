package main

import (
	"math"
	"strings"
	"testing"
)

func parse(lines string) []rec {
	var out []rec
	for _, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		r := rec{}
		for _, kv := range strings.Fields(l) {
			k, v, _ := strings.Cut(kv, "=")
			r[k] = v
		}
		out = append(out, r)
	}
	return out
}

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Error(m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Error(m)
	}
	if m := median([]float64{math.NaN(), 5}); m != 5 {
		t.Error(m)
	}
	if m := median(nil); !math.IsNaN(m) {
		t.Error(m)
	}
}

// Ratios are taken per round against nginx, then the median of them.
func TestRatiosPerRound(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=nginx rps=100 p50_us=1000 p99_us=2000 requests=1 cpu_proxy=50
kind=wrk round=1 case=unique target=clawgate-memory rps=80 p50_us=2000 p99_us=4000 requests=1 cpu_proxy=80
kind=wrk round=2 case=unique target=nginx rps=50 p50_us=1000 p99_us=2000 requests=1 cpu_proxy=50
kind=wrk round=2 case=unique target=clawgate-memory rps=30 p50_us=2000 p99_us=4000 requests=1 cpu_proxy=80
kind=wrk round=3 case=unique target=nginx rps=200 p50_us=1000 p99_us=2000 requests=1 cpu_proxy=50
kind=wrk round=3 case=unique target=clawgate-memory rps=150 p50_us=2000 p99_us=4000 requests=1 cpu_proxy=80
kind=rate round=1 target=direct p99_us=1000 p50_us=500
kind=rate round=1 target=nginx p99_us=1200 p50_us=600
kind=rate round=1 target=clawgate-memory p99_us=2500 p50_us=700
kind=memkey heap_beyond_body=292 body=100
`))
	row := r.rows["unique"]["clawgate-memory"]
	// per-round ratios 0.8, 0.6, 0.75: median 0.75 (not 80/100 from medians)
	if row.rpsX != 0.75 || row.rps != 80 {
		t.Fatalf("rps %v ratio %v", row.rps, row.rpsX)
	}
	if rr := r.rate["clawgate-memory"]; rr.added != 1500 || rr.vsNginx != 1300 {
		t.Fatalf("rate row %+v", rr)
	}
	verdict := map[string]string{}
	for _, c := range r.checks {
		verdict[c.name] = c.verdict()
	}
	if v := verdict["unique, clawgate (memory) req/s / nginx"]; v != "met" {
		t.Error("unique memory:", v)
	}
	if v := verdict["fixed rate, p99 added by clawgate (memory) minus nginx's"]; v != "MISSED" {
		t.Error("fixed rate:", v)
	}
	if v := verdict["memory store, bytes per finished key beyond the body"]; v != "met" {
		t.Error("memory:", v)
	}
	if v := verdict["unique, clawgate (redis) req/s / nginx"]; v != "not measured" {
		t.Error("redis:", v)
	}
	if len(r.errors) != 0 {
		t.Error(r.errors)
	}
}

func TestErrorsAndWraps(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis rps=1 requests=5 status_err=3 statuses=503:3
kind=wrk round=1 case=unique target=clawgate-memory rps=1 requests=5 wrapped=10
kind=wrk round=1 case=unique target=direct rps=1 requests=5 wrapped=10
kind=wrk round=1 case=unique target=nginx rps=1 requests=5 read_err=2
kind=rate round=1 target=nginx non2xx=1 errors=0
`))
	if len(r.errors) != 4 || len(r.warnings) != 1 {
		t.Fatalf("errors %q warnings %q", r.errors, r.warnings)
	}
	if !strings.Contains(r.errors[0], "503:3") {
		t.Error(r.errors[0])
	}
}

// The queue's acks/s are compared with clawgate-redis's req/s from the
// medians; its drain and delay come from what promq read.
func TestQueue(t *testing.T) {
	q := "queued=100 delivered=100 retried=0 dead_lettered=0 rejected=0 not_owner=0 depth=0"
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis rps=100 requests=1
kind=wrk round=2 case=unique target=clawgate-redis rps=200 requests=1
kind=wrk round=3 case=unique target=clawgate-redis rps=300 requests=1
kind=wrk round=1 case=unique target=clawgate-redis-queue rps=500 requests=1 ` + q + ` drained=1 drain_ms=1000 delay_p50_us=2000 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=9000 delay_p99_lo_us=5000 delay_p99_hi_us=10000
kind=wrk round=2 case=unique target=clawgate-redis-queue rps=100 requests=1 ` + q + ` drained=1 drain_ms=3000 delay_p50_us=3000 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=20000 delay_p99_lo_us=10000 delay_p99_hi_us=25000
kind=wrk round=3 case=unique target=clawgate-redis-queue rps=300 requests=1 ` + q + ` drained=0 drain_ms=60000 delay_p50_us=4000 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=30000 delay_p99_lo_us=25000 delay_p99_hi_us=50000
kind=rate round=1 target=clawgate-redis-queue p50_us=500 p99_us=900 non2xx=0 errors=0 queued=10 delivered=9 dead_lettered=1 rejected=0 drained=1 drain_ms=5 delay_p50_us=1500 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=4800 delay_p99_lo_us=1000 delay_p99_hi_us=5000
`))
	// medians 300 and 200 (per-round ratios would give 5, 0.5, 1: median 1)
	if v := r.queueRatio("unique", queueTarget); v != 1.5 {
		t.Fatalf("ratio %v", v)
	}
	qs := r.rows["unique"][queueTarget].q
	if qs.drainMs != 2000 || qs.undrained != 1 || qs.p99 != 20000 || qs.p99Lo != 5000 || qs.p99Hi != 50000 {
		t.Fatalf("%+v", qs)
	}
	verdict := map[string]string{}
	for _, c := range r.checks {
		verdict[c.name] = c.verdict()
	}
	if v := verdict["unique, clawgate (redis, queue) acks/s / clawgate (redis) req/s"]; v != "met" {
		t.Error("queue ratio:", v)
	}
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "dead-lettered") {
		t.Errorf("errors %q", r.errors)
	}
	if len(r.warnings) != 1 || !strings.Contains(r.warnings[0], "did not drain") {
		t.Errorf("warnings %q", r.warnings)
	}
	var b strings.Builder
	r.text(&b)
	for _, want := range []string{"1.50 (300 acks/s ÷ 200 req/s", "20.00 ms (5 ms to 50 ms)", "1.50 ms (1 ms to 5 ms)", "2.0 s (1 round(s) not drained)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	// A queue run without promq's figures is an error.
	r = analyse(parse(`kind=wrk round=1 case=dup target=clawgate-redis-queue rps=1 requests=1`))
	if len(r.errors) != 1 {
		t.Errorf("errors %q", r.errors)
	}
}

// The Kafka target (against kfake) gets the queue's rows, checks and CPU
// column, and its ratio to sync forwarding on Redis as information, never
// as a target; the markdown says the figures are kfake's.
func TestKafkaQueue(t *testing.T) {
	q := "queued=100 delivered=100 retried=0 dead_lettered=0 rejected=0 not_owner=0 depth=0 drained=1 drain_ms=1500 delay_p50_us=2000 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=9000 delay_p99_lo_us=5000 delay_p99_hi_us=10000"
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis rps=200 requests=1 cpu_redis=40 cpu_kafka=0
kind=wrk round=1 case=unique target=clawgate-redis-queue rps=400 requests=1 ` + q + `
kind=wrk round=1 case=unique target=clawgate-kafka-queue rps=250 requests=1 cpu_proxy=90 cpu_redis=30 cpu_kafka=17 ` + q + `
kind=wrk round=1 case=dup target=clawgate-kafka-queue rps=900 requests=1 cpu_kafka=1 queued=1 delivered=1 drained=0 drain_ms=60000 dead_lettered=2 rejected=0
kind=rate round=1 target=clawgate-kafka-queue p50_us=500 p99_us=900 non2xx=0 errors=0 ` + q + `
`))
	if v := r.queueRatio("unique", kafkaTarget); v != 1.25 {
		t.Fatalf("kafka ratio %v", v)
	}
	for _, c := range r.checks {
		if strings.Contains(c.name, "kafka") {
			t.Errorf("kafka has a target: %+v", c)
		}
	}
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "dup, clawgate-kafka-queue") || !strings.Contains(r.errors[0], "dead-lettered") {
		t.Errorf("errors %q", r.errors)
	}
	if len(r.warnings) != 1 || !strings.Contains(r.warnings[0], "did not drain") {
		t.Errorf("warnings %q", r.warnings)
	}
	var b strings.Builder
	r.text(&b)
	txt := b.String()
	for _, want := range []string{
		kafkaLineName + ": 1.25 (250 acks/s ÷ 200 req/s",
		"unique (new key each)  clawgate (kafka, queue)",
		"NOTE: kafka (kfake) is an in-process Go fake",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	var md strings.Builder
	r.markdown(&md, []string{"Kafka: kfake (v0), 1 broker"})
	doc := md.String()
	for _, want := range []string{
		"> **Note.** The Kafka figures are against kfake",
		"no disk and no replication",
		"**" + kafkaLineName + "**: 1.25",
		"| clawgate (kafka, queue) | 100 | 2.00 ms (1 ms to 5 ms) | 9.00 ms (5 ms to 10 ms) | 1.5 s |",
		"| unique (new key each) | clawgate (kafka, queue) | 90% | 3600 µs | - | - | 30% | 17% |",
		"| unique (new key each) | clawgate (redis) | - | - | - | - | 40% | - |",
		"Kafka queue's req/s are acknowledgements against kfake",
		"bench/cmd/kfake: kfake (v0), 1 broker",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("markdown lacks %q:\n%s", want, doc)
		}
	}
	// Without the Kafka target, no Kafka line and no note in the queue section.
	r = analyse(parse(`kind=wrk round=1 case=unique target=clawgate-redis-queue rps=400 requests=1 ` + q))
	b.Reset()
	r.text(&b)
	if strings.Contains(b.String(), kafkaLineName) || strings.Contains(b.String(), "NOTE: kafka") {
		t.Errorf("kafka line without the kafka target:\n%s", b.String())
	}
}
