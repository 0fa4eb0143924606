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
kind=memkey heap_beyond_body=540 body=100 history=50 rss_beyond_body=600
`))
	if got := r.memLine(); !strings.Contains(got, "`dedupe.history: 50` (the default), each key also holding its arrival and its settle: 540 bytes beyond the body (resident 600), of which the history 248") {
		t.Fatalf("memory line without the history's figure: %s", got)
	}
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
	if v := verdict["fixed rate, p99 added by clawgate (memory) minus nginx's"]; v != "MISSED" {
		t.Error("fixed rate:", v)
	}
	if v := verdict["memory store, bytes per finished key beyond the body"]; v != "met" {
		t.Error("memory:", v)
	}
	if v := verdict["unique, clawgate (redis) req/s / clawgate (memory), same round"]; v != "not measured" {
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
	mustContain(t, "text", b.String(), []string{"1.50 (300 acks/s ÷ 200 req/s", "20.00 ms (5 ms to 50 ms)", "1.50 ms (1 ms to 5 ms)", "2.0 s (1 round(s) not drained)"})
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
	mustContain(t, "text", txt, []string{
		kafkaLineName + ": 1.25 (250 acks/s ÷ 200 req/s",
		"unique (new key each)  clawgate (kafka, queue)",
		"NOTE: kafka (kfake) is an in-process Go fake",
	})
	var md strings.Builder
	r.markdown(&md, []string{"Kafka: kfake (v0), 1 broker"})
	doc := md.String()
	mustContain(t, "markdown", doc, []string{
		"> **Note.** The Kafka figures are against kfake",
		"no disk and no replication",
		"**" + kafkaLineName + "**: 1.25",
		"| clawgate (kafka, queue) | 100 | 2.00 ms (1 ms to 5 ms) | 9.00 ms (5 ms to 10 ms) | 1.5 s |",
		"| unique (new key each) | clawgate (kafka, queue) | 90% | 3600 µs | - | - | 30% | 17% |",
		"| unique (new key each) | clawgate (redis) | - | - | - | - | 40% | - |",
		"Kafka queue's req/s are acknowledgements against kfake",
		"bench/cmd/kfake: kfake (v0), 1 broker",
	})
	// Without the Kafka target, no Kafka line and no note in the queue section.
	r = analyse(parse(`kind=wrk round=1 case=unique target=clawgate-redis-queue rps=400 requests=1 ` + q))
	b.Reset()
	r.text(&b)
	if strings.Contains(b.String(), kafkaLineName) || strings.Contains(b.String(), "NOTE: kafka") {
		t.Errorf("kafka line without the kafka target:\n%s", b.String())
	}
}

// The ordered queue is compared with the unordered queue in the same round:
// acks/s and delivered events per second (deliveredRate: events delivered
// after the pre-flight over wrk's duration plus the drain), medians of the
// per-round ratios, each against its goal in the targets table; a round
// where a queue did not drain counts for acks/s only.
func TestOrderedQueue(t *testing.T) {
	q := "retried=0 dead_lettered=0 rejected=0 not_owner=0 depth=0 delay_p50_us=2000 delay_p50_lo_us=1000 delay_p50_hi_us=5000 delay_p99_us=9000 delay_p99_lo_us=5000 delay_p99_hi_us=10000 duration_us=2000000 delivered_before=1 total_cpu_us=200000"
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis-queue rps=1000 requests=2000 queued=2001 delivered=2001 drained=1 drain_ms=0 ` + q + `
kind=wrk round=1 case=unique target=clawgate-redis-queue-ordered rps=950 requests=1900 queued=1901 delivered=1901 drained=1 drain_ms=500 ` + q + `
kind=wrk round=2 case=unique target=clawgate-redis-queue rps=500 requests=1000 queued=1001 delivered=1001 drained=1 drain_ms=0 ` + q + `
kind=wrk round=2 case=unique target=clawgate-redis-queue-ordered rps=400 requests=800 queued=801 delivered=801 drained=1 drain_ms=0 ` + q + `
kind=wrk round=3 case=unique target=clawgate-redis-queue rps=600 requests=1200 queued=1201 delivered=1201 drained=1 drain_ms=0 ` + q + `
kind=wrk round=3 case=unique target=clawgate-redis-queue-ordered rps=600 requests=1200 queued=1201 delivered=900 drained=0 drain_ms=60000 ` + q + `
kind=wrk round=1 case=dup target=clawgate-redis-queue-ordered rps=5000 requests=10000 queued=1 delivered=1 drained=1 drain_ms=0 ` + q + `
`))
	// acks/s 0.95, 0.80, 1.00: median 0.95 (the medians' ratio, 600/600, would be 1);
	// delivered/s 1900/2.5 s = 760 over 2000/2 s = 1000 (0.76), 400 over 500 (0.80),
	// round 3 not drained: median 0.78
	ack, dps := r.orderedRatios("unique")
	if math.Abs(ack-0.95) > 1e-9 || math.Abs(dps-0.78) > 1e-9 {
		t.Fatalf("ratios %v %v, want 0.95 0.78", ack, dps)
	}
	if o := r.rows["unique"][orderedTarget].q; o.dps != 580 { // median of 760 and 400
		t.Fatalf("ordered delivered/s %v", o.dps)
	}
	verdict := map[string]string{}
	for _, c := range r.checks {
		verdict[c.name] = c.verdict() + " " + c.got
	}
	if v := verdict[orderedAckName]; v != "met 0.95" {
		t.Error("acks/s:", v)
	}
	if v := verdict[orderedDeliveredName]; v != "MISSED 0.78" {
		t.Error("delivered/s:", v)
	}
	if len(r.errors) != 0 || len(r.warnings) != 1 || !strings.Contains(r.warnings[0], "round 3, unique, clawgate-redis-queue-ordered: the queue did not drain") {
		t.Errorf("errors %q warnings %q", r.errors, r.warnings)
	}
	var b strings.Builder
	r.text(&b)
	txt := strings.Join(strings.Fields(b.String()), " ")
	mustContain(t, "text", txt, []string{
		orderedLineName + ": acks/s 0.95 (medians 600 ÷ 600; goal: at least 0.9: met), delivered events/s 0.78 (medians 580 ÷ 600; goal: at least 0.8: MISSED)",
		// CPU per request 200000 µs over the requests: 100/105.3 (0.95), 200/250 (0.80), 1.00
		"the unordered queue's ÷ the ordered's, 0.95 (no goal",
		orderedAckName + " 0.95 >= 0.90 met",
		orderedDeliveredName + " 0.78 >= 0.80 MISSED",
		"unique (new key each) clawgate (redis, queue, ordered) 600 - 1201 900 580 0.2 s (1 round(s) not drained)",
	})
	var md strings.Builder
	r.markdown(&md, []string{"Ordered objects: 1000", "Ordered request file: 9 MiB for 100 deliveries over 1000 objects (presign -objects 1000)"})
	doc := md.String()
	mustContain(t, "markdown", doc, []string{
		"*clawgate (redis, queue, ordered)* is the Redis queue's route plus per-object order",
		"`data.object.id`, 1000 of them",
		"\"delivered/s\" is the events a throughput run delivered",
		"| unique (new key each) | clawgate (redis, queue, ordered) | 600 | - | 1201 | 900 | 580 | 0.2 s (1 round(s) not drained) |",
		"| unique (new key each) | clawgate (redis, queue) | 600 | - | 1201 | 1201 | 600 | 0.0 s |",
		"**" + orderedLineName + "**: acks/s 0.95",
		"| " + orderedAckName + " | 0.95 | >= 0.90 | met |",
		"| " + orderedDeliveredName + " | 0.78 | >= 0.80 | MISSED |",
		"*clawgate (redis, queue, ordered)*, the same route plus per-object order",
		"The ordered queue is fed a second file of the same deliveries",
		"(9 MiB for 100 deliveries over 1000 objects (presign -objects 1000))",
	})
	// Without the ordered target: its goals not measured, no line, no paragraph.
	r = analyse(parse(`kind=wrk round=1 case=unique target=clawgate-redis-queue rps=400 requests=1 queued=1 delivered=1 drained=1 drain_ms=0 ` + q))
	for _, c := range r.checks {
		if (c.name == orderedAckName || c.name == orderedDeliveredName) && c.verdict() != "not measured" {
			t.Errorf("%s: %s without the ordered target", c.name, c.verdict())
		}
	}
	b.Reset()
	r.text(&b)
	md.Reset()
	r.markdown(&md, nil)
	if strings.Contains(b.String(), orderedLineName) || strings.Contains(md.String(), orderedLineName) || strings.Contains(md.String(), "The ordered queue is fed") {
		t.Errorf("ordered line without the ordered target:\n%s", b.String())
	}
}

func TestDeliveredRate(t *testing.T) {
	for _, tc := range []struct {
		line string
		want float64
	}{
		{"drained=1 delivered=3001 delivered_before=1 duration_us=2000000 drain_ms=1000", 1000},
		{"drained=1 delivered=3000 duration_us=2000000 drain_ms=1000", 1000}, // no delivered_before: none
		{"drained=0 delivered=3001 delivered_before=1 duration_us=2000000 drain_ms=60000", math.NaN()},
		{"drained=1 delivered=3001 delivered_before=1 drain_ms=5", math.NaN()}, // a fixed-rate record: no wrk duration
		{"drained=1 delivered_before=1 duration_us=2000000 drain_ms=0", math.NaN()},
	} {
		got := deliveredRate(parse(tc.line)[0])
		if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s: %v, want %v", tc.line, got, tc.want)
		}
	}
}

// CPU per request: all processes (total_cpu_us) and the proxy's
// (proxy_cpu_us) over the requests; the ratios to nginx are nginx's over
// the target's (higher is cheaper), per round then the median, next to the
// req/s ratio; the front doors' goals check both, against nginx or caddy.
func TestCPUPerRequestAndGoals(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=nginx rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=50000 cpu_others=2 cpu_machine=90
kind=wrk round=2 case=unique target=nginx rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=60000 cpu_others=40 cpu_machine=100
kind=wrk round=1 case=unique target=caddy rps=40 requests=400 proxy_cpu_us=40000 total_cpu_us=60000 cpu_others=0 cpu_machine=90
kind=wrk round=2 case=unique target=caddy rps=50 requests=500 proxy_cpu_us=50000 total_cpu_us=75000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=unique target=clawgate-memory rps=60 requests=600 proxy_cpu_us=30000 total_cpu_us=60000 cpu_others=0 cpu_machine=90
kind=wrk round=2 case=unique target=clawgate-memory rps=70 requests=700 proxy_cpu_us=35000 total_cpu_us=70000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=unique target=clawgate-fasthttp-memory rps=70 requests=700 proxy_cpu_us=28000 total_cpu_us=56000 cpu_others=0 cpu_machine=90
kind=wrk round=2 case=unique target=clawgate-fasthttp-memory rps=60 requests=600 proxy_cpu_us=24000 total_cpu_us=48000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=dup target=nginx rps=100 requests=1000 proxy_cpu_us=10000 total_cpu_us=40000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=dup target=clawgate-fasthttp-memory rps=210 requests=2100 proxy_cpu_us=10000 total_cpu_us=40000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=unique target=direct rps=200 requests=2000 total_cpu_us=40000 cpu_others=0 cpu_machine=90
kind=wrk round=1 case=unique target=haproxy rps=90 requests=900 proxy_cpu_us=18000 total_cpu_us=45000 cpu_others=0 cpu_machine=90 cpu_redis=0
`))
	r.meta = []string{"Load average (1, 5, 15 min) at start: 0.10 0.20 0.30", "Load average at end: 1.00 2.00 3.00"}
	row := r.rows["unique"]["clawgate-memory"]
	// all CPU 100 µs per request in both rounds; nginx's 50 and 60: ratios 0.5, 0.6
	if row.cpuAll != 100 || math.Abs(row.cpuAllX-0.55) > 1e-9 || row.cpuPerReq != 50 || row.cpuPerReqX != 0.4 {
		t.Fatalf("clawgate-memory %+v", row)
	}
	if d := r.rows["unique"]["direct"]; d.cpuAll != 20 || d.cpuAllX != 2.5 || !math.IsNaN(d.cpuPerReq) {
		t.Fatalf("direct %+v", d)
	}
	byName := map[string]goalResult{}
	for _, g := range r.goals {
		byName[g.name()] = g
	}
	check := func(name string, rpsX, cpuX float64, rv, cv string) {
		t.Helper()
		g, ok := byName[name]
		if !ok {
			t.Fatalf("no goal %q in %v", name, byName)
		}
		if math.Abs(g.rpsX-rpsX) > 1e-9 || math.Abs(g.cpuX-cpuX) > 1e-9 {
			t.Errorf("%s: ratios %v %v, want %v %v", name, g.rpsX, g.cpuX, rpsX, cpuX)
		}
		if v := verdictOf(g.rpsX, g.want); v != rv {
			t.Errorf("%s: req/s verdict %s, want %s", name, v, rv)
		}
		if v := verdictOf(g.cpuX, g.want); v != cv {
			t.Errorf("%s: CPU verdict %s, want %s", name, v, cv)
		}
	}
	// fasthttp unique: req/s 0.7, 0.6 (median 0.65: met at the line); CPU 50/80, 60/80 (median 0.6875)
	check("unique (new key each), clawgate fasthttp (memory) ÷ nginx", 0.65, 0.6875, "MET", "MET")
	// dup: req/s 2.1 met; CPU per request 40/19.05 = 2.1 met
	check("duplicates (one key), clawgate fasthttp (memory) ÷ nginx", 2.1, 2.1, "MET", "MET")
	check("unique (new key each), clawgate fasthttp (redis) ÷ nginx", math.NaN(), math.NaN(), "not measured", "not measured")
	// net/http against caddy: req/s 1.5, 1.4 (1.45); CPU 150/100 both (1.5)
	check("unique (new key each), clawgate (memory) ÷ caddy", 1.45, 1.5, "MET", "MET")
	if len(r.warnings) != 1 || !strings.Contains(r.warnings[0], "in 1 of 12 throughput runs other work") {
		t.Errorf("warnings %q", r.warnings)
	}
	var b strings.Builder
	r.text(&b)
	txt := strings.Join(strings.Fields(b.String()), " ") // the aligned columns' spacing aside
	mustContain(t, "text", txt, []string{
		"unique (new key each) clawgate (memory) 65 0.65 100 µs 0.55 50 µs 0%",
		"Machine load: other tenants took a median 0% of one core (at most 40%) during the 12 throughput runs; the machine was busy a median 90% of all its cores; load average 0.10 0.20 0.30 at the start, 1.00 2.00 3.00 at the end",
		"unique (new key each), clawgate (memory) ÷ caddy >= 1.30 1.45 MET 1.50 MET",
		"unique (new key each), clawgate fasthttp (memory) ÷ nginx >= 0.65 0.65 MET 0.69 MET",
	})
	var md strings.Builder
	r.markdown(&md, r.meta)
	doc := md.String()
	mustContain(t, "markdown", doc, []string{
		"| unique (new key each) | haproxy | 90 | 0.90 | 50 µs | 1.00 | 20 µs | 0% |",
		"| unique (new key each) | clawgate fasthttp (memory) | 65 | 0.65 | 80 µs | 0.69 | 40 µs | 0% |",
		"| duplicates (one key), clawgate fasthttp (memory) ÷ nginx | >= 2.00 | 2.10 | MET | 2.10 | MET |",
		"| unique (new key each), clawgate fasthttp (redis) ÷ nginx | >= 0.35 | - | not measured | - | not measured |",
		"| unique (new key each) | caddy | 45 | 0.45 | 150 µs | 0.37 | 100 µs | 0% |",
		"| unique (new key each) | caddy | - | 100 µs | 0.20 | - | - | - | - | 0% | 90% |",
		"- **Other work on the machine**: other tenants took a median 0%",
		"(c) *haproxy*",
	})
}

// A fasthttp target on Redis shows Redis's CPU; the fixed-rate table
// compares every proxy's added p99 with nginx's, not only clawgate's.
func TestNewTargetsColumns(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-fasthttp-redis rps=10 requests=10 cpu_proxy=50 cpu_redis=40
kind=rate round=1 target=direct p99_us=1000 p50_us=500
kind=rate round=1 target=nginx p99_us=1200 p50_us=600
kind=rate round=1 target=caddy p99_us=2000 p50_us=700
`))
	rows := r.cpuRows()
	if len(rows) != 1 || rows[0][6] != "40%" {
		t.Errorf("cpu rows %q", rows)
	}
	var caddy []string
	for _, row := range r.rateRows() {
		if row[0] == "caddy" {
			caddy = row
		}
	}
	if caddy == nil || caddy[5] != "1.00 ms" || caddy[6] != "+0.80 ms" {
		t.Errorf("caddy rate row %q", caddy)
	}
}

// mustContain fails t for each of wants that got lacks; what names the
// output ("text", "markdown").
func mustContain(t *testing.T, what, got string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, got)
		}
	}
}

// Every clawgate target is compared with its floor from the same round:
// floor-forward on unique and mix, floor-answer on duplicates (never
// floor-forward, which runs that case too); medians of the per-round ratios,
// req/s the target's over the floor's, CPU per request the floor's over the
// target's, beside the ratios to nginx; the fasthttp door's floor goals.
func TestFloors(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=nginx rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=50000
kind=wrk round=1 case=unique target=floor-forward rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=40000
kind=wrk round=1 case=unique target=clawgate-fasthttp-memory rps=90 requests=900 proxy_cpu_us=27000 total_cpu_us=45000
kind=wrk round=1 case=unique target=clawgate-redis rps=50 requests=500 proxy_cpu_us=20000 total_cpu_us=40000
kind=wrk round=2 case=unique target=nginx rps=200 requests=2000 proxy_cpu_us=40000 total_cpu_us=100000
kind=wrk round=2 case=unique target=floor-forward rps=200 requests=2000 proxy_cpu_us=40000 total_cpu_us=80000
kind=wrk round=2 case=unique target=clawgate-fasthttp-memory rps=160 requests=1600 proxy_cpu_us=40000 total_cpu_us=64000
kind=wrk round=3 case=unique target=nginx rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=50000
kind=wrk round=3 case=unique target=floor-forward rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=40000
kind=wrk round=3 case=unique target=clawgate-fasthttp-memory rps=70 requests=700 proxy_cpu_us=21000 total_cpu_us=35000
kind=wrk round=1 case=dup target=floor-answer rps=300 requests=3000 proxy_cpu_us=30000 total_cpu_us=90000
kind=wrk round=1 case=dup target=floor-forward rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=40000
kind=wrk round=1 case=dup target=clawgate-fasthttp-memory rps=270 requests=2700 proxy_cpu_us=27000 total_cpu_us=81000
kind=wrk round=1 case=mix target=floor-forward rps=100 requests=1000 proxy_cpu_us=20000 total_cpu_us=40000
kind=wrk round=1 case=mix target=clawgate-memory rps=110 requests=1100 proxy_cpu_us=33000 total_cpu_us=55000
kind=wrk round=2 case=mix target=clawgate-memory rps=50 requests=500 proxy_cpu_us=15000 total_cpu_us=25000
`))
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 || math.IsNaN(a) && math.IsNaN(b) }
	for _, tc := range []struct {
		c, t              string
		rpsF, cpuF, proxF float64
	}{
		// req/s 0.9, 0.8, 0.7 (the ratio of the medians would be 90/100);
		// CPU all 40/50, 40/40, 40/50; the proxy's 20/30, 20/25, 20/30
		{"unique", "clawgate-fasthttp-memory", 0.8, 0.8, 2.0 / 3},
		{"unique", "clawgate-redis", 0.5, 0.5, 0.5},
		// against floor-answer (floor-forward's 100 req/s would give 2.7)
		{"dup", "clawgate-fasthttp-memory", 0.9, 1, 1},
		// round 2 has no floor: round 1 only
		{"mix", "clawgate-memory", 1.1, 0.8, 2.0 / 3},
		// not a clawgate target: no ratio to a floor
		{"unique", "nginx", math.NaN(), math.NaN(), math.NaN()},
		{"unique", floorForward, math.NaN(), math.NaN(), math.NaN()},
	} {
		t.Run(tc.c+"/"+tc.t, func(t *testing.T) {
			row := r.rows[tc.c][tc.t]
			if row == nil {
				t.Fatal("no row")
			}
			if !near(row.rpsF, tc.rpsF) || !near(row.cpuAllF, tc.cpuF) || !near(row.cpuPerReqF, tc.proxF) {
				t.Errorf("ratios to the floor %v %v %v, want %v %v %v", row.rpsF, row.cpuAllF, row.cpuPerReqF, tc.rpsF, tc.cpuF, tc.proxF)
			}
		})
	}
	byName := map[string]goalResult{}
	for _, g := range r.goals {
		byName[g.name()] = g
	}
	for name, want := range map[string][2]string{
		"unique (new key each), clawgate fasthttp (memory) ÷ floor (forward)": {"MISSED", "MISSED"}, // 0.80, 0.80
		"duplicates (one key), clawgate fasthttp (memory) ÷ floor (answer)":   {"MET", "MET"},       // 0.90, 1.00
	} {
		g, ok := byName[name]
		if !ok {
			t.Fatalf("no goal %q", name)
		}
		if v, c := verdictOf(g.rpsX, g.want), verdictOf(g.cpuX, g.want); v != want[0] || c != want[1] {
			t.Errorf("%s: verdicts %s %s, want %v", name, v, c, want)
		}
	}
	for _, row := range r.floorRows() {
		if !strings.HasPrefix(row[1], "clawgate") {
			t.Errorf("floor table row for %s", row[1])
		}
	}
	var b strings.Builder
	r.text(&b)
	txt := strings.Join(strings.Fields(b.String()), " ")
	mustContain(t, "text", txt, []string{
		"Against the floors (bench/cmd/floor; unique and mix: floor-forward, duplicates: floor-answer)",
		"unique (new key each) clawgate fasthttp (memory) floor (forward) 0.80 0.80 0.80 1.00 30 µs 20 µs 0.67",
		"unique (new key each), clawgate fasthttp (memory) ÷ floor (forward) >= 0.85 0.80 MISSED 0.80 MISSED",
	})
	var md strings.Builder
	r.markdown(&md, nil)
	doc := md.String()
	mustContain(t, "markdown", doc, []string{
		"## Against the floors\n\nThe floors are two targets",
		"| case | target | floor | req/s ÷ floor | req/s ÷ nginx |",
		"| unique (new key each) | clawgate fasthttp (memory) | floor (forward) | 0.80 | 0.80 | 0.80 | 1.00 | 30 µs | 20 µs | 0.67 |",
		"| duplicates (one key) | clawgate fasthttp (memory) | floor (answer) | 0.90 | - | 1.00 | - | 10 µs | 10 µs | 1.00 |",
		"| mix (80/20) | clawgate (memory) | floor (forward) | 1.10 | - | 0.80 | - | 30 µs | 20 µs | 0.67 |",
		"| duplicates (one key), clawgate fasthttp (memory) ÷ floor (answer) | >= 0.85 | 0.90 | MET | 1.00 | MET |",
		"| unique (new key each) | floor (forward) | 100 | 1.00 |", // the floors in the other tables, against nginx
		"- **Floors**: bench/cmd/floor",
	})
	// Without the floors: no fractions, and the section says so.
	r = analyse(parse(`kind=wrk round=1 case=unique target=clawgate-memory rps=10 requests=10 total_cpu_us=100`))
	if row := r.rows["unique"]["clawgate-memory"]; !math.IsNaN(row.rpsF) {
		t.Errorf("ratio to a floor not measured: %v", row.rpsF)
	}
	md.Reset()
	r.markdown(&md, nil)
	mustContain(t, "markdown", md.String(), []string{"## Against the floors", "Not measured (needs floor-forward and floor-answer in BENCH_TARGETS)."})
}

func TestScaleTable(t *testing.T) {
	out := `goos: linux
BenchmarkScaleBody/body=1KiB-2  	    2000	     40295 ns/op	  25.41 MB/s	        41.64 cpu-us/op	    1599 B/op	      16 allocs/op
BenchmarkScaleBody/body=1MiB-2  	    2000	   3851480 ns/op	 272.25 MB/s	      5291 cpu-us/op	 4201270 B/op	      50 allocs/op
BenchmarkScaleKeysHeld/held=1M/copy-2   	    2000	      9504 ns/op	 107.74 MB/s	         9.604 cpu-us/op	       334.9 held-bytes/key	    1026 B/op	      11 allocs/op
BenchmarkScaleQueueDepth/redis/depth=0/ack-2          	    2000	    160233 ns/op	        80.79 cpu-us/op	    1447 B/op	      35 allocs/op
BenchmarkScaleQueueDepth/redis/depth=1M/ack-2          	    2000	    160233 ns/op	        161.58 cpu-us/op	    1447 B/op	      35 allocs/op
PASS
`
	rows, err := parseScale(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5: %+v", len(rows), rows)
	}
	var b strings.Builder
	scaleTable(&b, true, rows)
	for _, want := range []string{
		"| body size | 1MiB | 3851.5 | 5291.0 | 127.07 | 4201270 | 50 |  |",
		"| finished keys held (memory) | 1M, copy | 9.5 | 9.6 | 1.00 | 1026 | 11 | 335 B heap |",
		"| queue depth | redis, 1M, ack | 160.2 | 161.6 | 2.00 | 1447 | 35 |  |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := parseScale(strings.NewReader("BenchmarkScaleBody/body=1KiB-2 10 x ns/op\n")); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}

// The key history's cost: clawgate-redis (history on, the default) over
// clawgate-redis-nohistory in the same round, unique case, median of the
// per-round ratios, against its goal.
func TestHistoryCost(t *testing.T) {
	cpu := "total_cpu_us=100000"
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis rps=960 requests=1000 ` + cpu + `
kind=wrk round=1 case=unique target=clawgate-redis-nohistory rps=1000 requests=1000 ` + cpu + `
kind=wrk round=2 case=unique target=clawgate-redis rps=450 requests=1000 ` + cpu + `
kind=wrk round=2 case=unique target=clawgate-redis-nohistory rps=500 requests=1000 ` + cpu + `
kind=wrk round=3 case=unique target=clawgate-redis rps=990 requests=1000 ` + cpu + `
kind=wrk round=3 case=unique target=clawgate-redis-nohistory rps=1000 requests=1000 ` + cpu + `
`))
	// 0.96, 0.90, 0.99: median 0.96 (the medians' ratio, 960/1000, agrees
	// here by chance only).
	verdict := map[string]string{}
	for _, c := range r.checks {
		verdict[c.name] = c.verdict() + " " + c.got
	}
	if v := verdict[historyName]; v != "met 0.96" {
		t.Errorf("history check: %q", v)
	}
	var b strings.Builder
	r.text(&b)
	txt := strings.Join(strings.Fields(b.String()), " ")
	mustContain(t, "text", txt, []string{
		historyLineName + ": req/s 0.96 (medians 960 ÷ 1000; goal: at least 0.95: met)",
		historyName + " 0.96 >= 0.95 met",
	})
	var md strings.Builder
	r.markdown(&md, nil)
	mustContain(t, "markdown", md.String(), []string{
		"**" + historyLineName + "**: req/s 0.96",
		"| " + historyName + " | 0.96 | >= 0.95 | met |",
		"`dedupe: { history: 0 }`",
	})
	// A round where the history costs more than 5 % of the median: missed.
	r = analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-redis rps=900 requests=1000 ` + cpu + `
kind=wrk round=1 case=unique target=clawgate-redis-nohistory rps=1000 requests=1000 ` + cpu + `
`))
	for _, c := range r.checks {
		if c.name == historyName && c.verdict() != "MISSED" {
			t.Errorf("0.90: %s", c.verdict())
		}
	}
	// Without the target: not measured, and no line.
	r = analyse(parse(`kind=wrk round=1 case=unique target=clawgate-redis rps=900 requests=1000 ` + cpu))
	for _, c := range r.checks {
		if c.name == historyName && c.verdict() != "not measured" {
			t.Errorf("without the target: %s", c.verdict())
		}
	}
	b.Reset()
	r.text(&b)
	if strings.Contains(b.String(), historyLineName) {
		t.Errorf("history line without the target:\n%s", b.String())
	}
}

// The speed goals of the targets table: proxy CPU per request, Redis over
// memory on the same door, the queue's delay at the fixed rate and the
// tail against Nginx's, each from the rounds' own figures.
func TestSpeedGoals(t *testing.T) {
	r := analyse(parse(`
kind=wrk round=1 case=unique target=clawgate-fasthttp-memory rps=1000 requests=1000 proxy_cpu_us=34000
kind=wrk round=1 case=unique target=clawgate-fasthttp-redis rps=700 requests=1000 proxy_cpu_us=51000
kind=wrk round=2 case=unique target=clawgate-fasthttp-memory rps=1000 requests=1000 proxy_cpu_us=36000
kind=wrk round=2 case=unique target=clawgate-fasthttp-redis rps=800 requests=1000 proxy_cpu_us=50000
kind=wrk round=1 case=dup target=clawgate-fasthttp-memory rps=1000 requests=1000 proxy_cpu_us=16000
kind=rate round=1 target=direct p99_us=1000 p999_us=2000
kind=rate round=1 target=nginx p99_us=1200 p999_us=2000
kind=rate round=1 target=clawgate-fasthttp-memory p99_us=1600 p999_us=3000
kind=rate round=2 target=direct p99_us=1000 p999_us=2000
kind=rate round=2 target=nginx p99_us=1200 p999_us=4000
kind=rate round=2 target=clawgate-fasthttp-memory p99_us=1700 p999_us=5000
kind=rate round=1 target=clawgate-redis-queue p99_us=3000 p999_us=4000 queued=10 delivered=10 drained=1 delay_p99_us=12000
`))
	got := map[string]string{}
	for _, c := range r.checks {
		got[c.name] = c.verdict() + " " + c.got
	}
	for name, want := range map[string]string{
		// 34 and 36 µs: median 35, right on the goal.
		"unique, clawgate fasthttp (memory) proxy CPU per request":     "met 35.0 µs",
		"duplicates, clawgate fasthttp (memory) proxy CPU per request": "MISSED 16.0 µs",
		// 0.7 and 0.8 of memory in the same round: median 0.75.
		"unique, clawgate fasthttp (redis) req/s / clawgate fasthttp (memory), same round": "met 0.75",
		"unique, clawgate fasthttp (redis) proxy CPU per request":                          "MISSED 50.5 µs",
		"unique, clawgate (redis) proxy CPU per request":                                   "not measured ",
		// p99 added over nginx's: +0.4 and +0.5 ms; p99.9 over nginx's
		// in the same round: 1.5 and 1.25.
		"fixed rate, p99 added by clawgate fasthttp (memory) minus nginx's":         "met +0.45 ms",
		"fixed rate, p99.9 of clawgate fasthttp (memory) / nginx's, same round":     "met 1.38",
		"fixed rate, clawgate (redis, queue) accepted to delivered p99 (histogram)": "MISSED 12.00 ms",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}
