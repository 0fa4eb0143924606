// Command report turns the result lines bench/run.sh collected into the
// comparison tables: medians over rounds, each target's ratio to Nginx from
// the same round (req/s, and CPU per request: Nginx's over the target's, so
// higher is better on both), every clawgate target's ratios to its floor
// from the same round (bench/cmd/floor: floor-forward for the unique and mix
// cases, floor-answer for duplicates), the delivery queue's acknowledgements (on
// Redis, and on Kafka against kfake) against sync forwarding on Redis, the
// ordered queue's acknowledgements and delivered events per second against
// the unordered queue's, the
// fixed-rate latency added over direct and the queues' accepted-to-delivered
// delay, CPU use and what other work on the machine took, memory per key,
// and the targets met or missed (the issue's, the fasthttp front door's
// against Nginx and its floors, and net/http's against Caddy). It prints them and writes
// docs/benchmarks.md (or -doc).
//
// Input (-results): one record per line, space-separated key=value pairs:
//
//	kind=wrk round=1 case=unique target=nginx rps=... p50_us=... p99_us=... status_err=... cpu_proxy=...
//	  proxy_cpu_us=... total_cpu_us=... cpu_others=... (CPU microseconds over the run: the proxy's, and
//	  wrk's load + the upstream + the proxy + Redis + kfake; divided by requests=...)
//	kind=rate round=1 target=clawgate-memory p50_us=... p99_us=... non2xx=... errors=...
//	kind=memkey keys=... heap_beyond_body=... rss_beyond_body=...
//
// The queue targets' wrk and rate lines also carry what bench/cmd/promq read
// from its /metrics after the queue drained: queued=... delivered=...
// drained=0|1 drain_ms=... delay_p50_us=... delay_p50_lo_us=...
// delay_p50_hi_us=... delay_p99_us=... (and _lo_us, _hi_us), and
// delivered_before=... (the events delivered before the load: the
// pre-flight's).
//
// -meta: "Name: value" lines describing the machine and the settings, shown
// in order. Exits 1 when any run had errors (non-2xx answers, socket errors,
// a unique run that ran out of keys), so `make bench` fails loudly; a target
// missed is reported, not an error.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

type rec map[string]string

func (r rec) f(k string) float64 {
	v, err := strconv.ParseFloat(r[k], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

var (
	cases   = []string{"unique", "dup", "mix"}
	targets = []string{"direct", "nginx", "haproxy", "caddy", floorForward, floorAnswer, "clawgate-memory", "clawgate-redis",
		"clawgate-fasthttp-memory", "clawgate-fasthttp-redis", historyOffTarget, queueTarget, orderedTarget, kafkaTarget}
	caseDoc = map[string]string{
		"unique": "unique (new key each)",
		"dup":    "duplicates (one key)",
		"mix":    "mix (80/20)",
	}
	targetDoc = map[string]string{
		"direct":                   "direct",
		"nginx":                    "nginx",
		"haproxy":                  "haproxy",
		"caddy":                    "caddy",
		floorForward:               "floor (forward)",
		floorAnswer:                "floor (answer)",
		"clawgate-memory":          "clawgate (memory)",
		"clawgate-redis":           "clawgate (redis)",
		"clawgate-fasthttp-memory": "clawgate fasthttp (memory)",
		"clawgate-fasthttp-redis":  "clawgate fasthttp (redis)",
		historyOffTarget:           "clawgate (redis, no history)",
		queueTarget:                "clawgate (redis, queue)",
		orderedTarget:              "clawgate (redis, queue, ordered)",
		kafkaTarget:                "clawgate (kafka, queue)",
	}
	// queueTargets are the targets with delivery: queue.
	queueTargets = []string{queueTarget, orderedTarget, kafkaTarget}
)

// queueTarget is clawgate on Redis with delivery: queue: its req/s are
// acknowledgements (202 once the event is stored), delivery runs behind.
const queueTarget = "clawgate-redis-queue"

// orderedTarget is queueTarget's route plus per-object order (order.by
// json:data.object.id), fed deliveries over 1,000 objects. Its
// acknowledgements and delivered events per second are compared with
// queueTarget's in the same round (orderedAckGoal, orderedDeliveredGoal).
const orderedTarget = "clawgate-redis-queue-ordered"

// The ordered queue's goals in the unique case, medians of the per-round
// ratios to the unordered queue: acks/s, and delivered events per second
// (deliveredRate).
const (
	orderedAckGoal       = 0.9
	orderedDeliveredGoal = 0.8
)

// historyOffTarget is clawgate-redis with dedupe.history: 0: the keys
// keep no history. clawgate-redis (the default, 50 entries a key) over it
// in the same round, unique case, is what writing the history costs
// (historyGoal).
const historyOffTarget = "clawgate-redis-nohistory"

// historyGoal: clawgate-redis's req/s with the history at least this
// times clawgate-redis-nohistory's, unique case, median of the per-round
// ratios.
const historyGoal = 0.95

// The history's row in the targets table, and its line.
const (
	historyName     = "unique, clawgate (redis) req/s / clawgate (redis, no history) req/s, same round"
	historyLineName = "Key history on Redis (dedupe.history: 50, the default) against none (dedupe.history: 0), unique case, same round"
)

// historyLine says the history's cost: clawgate-redis over
// clawgate-redis-nohistory, unique case, with its goal.
func (r *report) historyLine() string {
	rps, cpu := r.ratioTo("unique", "clawgate-redis", historyOffTarget)
	on, off := r.rows["unique"]["clawgate-redis"], r.rows["unique"][historyOffTarget]
	if on == nil || off == nil || math.IsNaN(rps) {
		return "not measured (needs the unique case on clawgate-redis and clawgate-redis-nohistory)"
	}
	verdict := "MISSED"
	if rps >= historyGoal-1e-9 {
		verdict = "met"
	}
	return fmt.Sprintf("req/s %s (medians %.0f ÷ %.0f; goal: at least %.2f: %s), median of the per-round ratios; CPU per request of all "+
		"the processes during the load, without history ÷ with, %s (no goal)", x(rps), on.rps, off.rps, historyGoal, verdict, x(cpu))
}

// hasHistoryOff tells whether clawgate-redis-nohistory took part.
func (r *report) hasHistoryOff() bool {
	for _, c := range cases {
		if r.rows[c][historyOffTarget] != nil {
			return true
		}
	}
	return false
}

// kafkaTarget is the same queue route with queue.backend kafka against
// kfake (bench/cmd/kfake), the keys' ledger on the same Redis. Its ratio to
// sync forwarding on Redis is shown, with no goal: kfake is an in-process
// Go fake with no disk and no replication, not a Kafka cluster.
const kafkaTarget = "clawgate-kafka-queue"

// kfakeNote says what the Kafka target's figures are measured against.
const kfakeNote = "The Kafka figures are against kfake (franz-go's `pkg/kfake`, run by `bench/cmd/kfake`): an in-process Go fake of Kafka " +
	"on loopback, one broker, every record in memory, no disk and no replication, which handles every request on one goroutine. " +
	"They are not a real Kafka cluster's figures: a cluster writes to disk and waits for its replicas (`acks=all`), and runs on other machines, " +
	"so both its produce latency and its capacity differ; rerun against your own cluster before relying on them"

// The floors (bench/cmd/floor): fasthttp servers doing only what a Go
// gateway cannot avoid. floorForward reads the body, hashes it (SHA-256)
// and forwards it with a fasthttp HostClient: the floor of a unique
// delivery. floorAnswer reads and hashes the body and answers a fixed JSON
// 200 from memory: the floor of a duplicate; it runs the duplicates case
// only.
const (
	floorForward = "floor-forward"
	floorAnswer  = "floor-answer"
)

// floorOf is the floor of case c: floorAnswer for duplicates, floorForward
// for the cases that forward (unique, and mix, 80 % new keys).
func floorOf(c string) string {
	if c == "dup" {
		return floorAnswer
	}
	return floorForward
}

func isQueue(t string) bool { return slices.Contains(queueTargets, t) }

// usesRedis tells the targets whose store (or, on Kafka, ledger) is the
// bench Redis.
func usesRedis(t string) bool { return strings.Contains(t, "redis") || t == kafkaTarget }

// goal is a target of the front doors: on case c, target t against ref
// (Nginx, or Caddy) in the same round, both req/s (t's over ref's) and CPU
// per request (ref's over t's: higher is cheaper) at least want.
type goal struct {
	c, t, ref string
	want      float64
}

// goals: the fasthttp front door against Nginx, and the net/http one
// against Caddy (a Go reverse proxy on the same net/http server).
var goals = []goal{
	{"unique", "clawgate-fasthttp-memory", "nginx", 0.65},
	{"dup", "clawgate-fasthttp-memory", "nginx", 2.0},
	{"unique", "clawgate-fasthttp-redis", "nginx", 0.35},
	{"unique", "clawgate-memory", "caddy", 1.3},
	{"unique", "clawgate-fasthttp-memory", floorForward, floorGoal},
	{"dup", "clawgate-fasthttp-memory", floorAnswer, floorGoal},
}

// floorGoal is the fasthttp front door on the memory store against its
// floor in the same round, on both ratios, that is aimed at.
const floorGoal = 0.85

// othersWarn is the share of one core (percent) that other tenants took
// during a run above which the report warns that the machine was busy.
const othersWarn = 25

// queueGoal is the unique case's acks/s of the queue over sync forwarding
// on Redis (clawgate-redis), from the medians, that is aimed at.
const queueGoal = 1.5

func main() {
	results := flag.String("results", "", "result lines `file`")
	meta := flag.String("meta", "", "machine and settings `file` (Name: value lines)")
	doc := flag.String("doc", "", "markdown `file` to write (empty: none)")
	analysis := flag.String("analysis", "", "markdown `file` of hand-written analysis (profiles, what bounds each target) to include in -doc")
	scale := flag.String("scale", "", "Go benchmark output `file` of the BenchmarkScale* benchmarks (empty: no scaling table)")
	flag.Parse()
	if *results == "" && *scale != "" {
		// make bench-scale: the scaling table alone, as markdown.
		rows, err := readScale(*scale)
		if err != nil {
			fatalf("report: %v", err)
		}
		scaleMarkdown(os.Stdout, rows)
		return
	}
	recs, err := readRecords(*results)
	if err != nil {
		fatalf("report: %v", err)
	}
	var metaLines []string
	if *meta != "" {
		b, err := os.ReadFile(*meta)
		if err != nil {
			fatalf("report: %v", err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.TrimSpace(l) != "" {
				metaLines = append(metaLines, l)
			}
		}
	}
	r := analyse(recs)
	r.meta = metaLines
	var scaleRows []scaleRow
	if *scale != "" {
		if scaleRows, err = readScale(*scale); err != nil {
			fatalf("report: %v", err)
		}
	}
	var text strings.Builder
	r.text(&text)
	if len(scaleRows) > 0 {
		text.WriteString("\nHow the cost grows (BenchmarkScale*, one at a time):\n")
		scaleTable(&text, false, scaleRows)
	}
	fmt.Print(text.String())
	if *doc != "" {
		var md strings.Builder
		r.markdown(&md, metaLines)
		if len(scaleRows) > 0 {
			scaleMarkdown(&md, scaleRows)
		}
		if *analysis != "" {
			a, err := os.ReadFile(*analysis)
			if err != nil {
				fatalf("report: %v", err)
			}
			md.WriteString("\n")
			md.Write(a)
		}
		if err := os.WriteFile(*doc, []byte(md.String()), 0o644); err != nil {
			fatalf("report: %v", err)
		}
		fmt.Printf("\nwrote %s\n", *doc)
	}
	if len(r.errors) > 0 {
		os.Exit(1)
	}
}

func readRecords(path string) ([]rec, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []rec
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := rec{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			r[k] = v
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// n is f with a missing or malformed value read as 0.
func (r rec) n(k string) float64 {
	if v := r.f(k); !math.IsNaN(v) {
		return v
	}
	return 0
}

func median(xs []float64) float64 {
	xs = slices.DeleteFunc(slices.Clone(xs), func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) })
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// row is one case and target of the throughput table, medians over rounds.
type row struct {
	n                     int
	rps, p50, p99         float64 // p50, p99 in microseconds
	rpsX, p50X, p99X      float64 // median of per-round ratios to nginx
	cpuProxy, cpuUp       float64 // percent of one core
	cpuRedis, cpuWrk, cpu float64 // cpu: the whole machine's busy share, percent
	cpuKafka              float64 // kfake's, on the Kafka target
	cpuOthers             float64 // other tenants, percent of one core
	cpuPerReq, cpuPerReqX float64 // proxy CPU microseconds per request; nginx's over it
	cpuAll, cpuAllX       float64 // all CPU per request (wrk's load, upstream, proxy, redis, kafka); nginx's over it
	wrkSetupMs            float64 // wrk's loading of the request file, left out of the figures above
	// The clawgate targets' medians of per-round ratios to their floor
	// (floorOf): req/s the target's over the floor's, CPU per request (all
	// processes; the proxy alone) the floor's over the target's. NaN for
	// the other targets and when no round has the floor.
	rpsF, cpuAllF, cpuPerReqF float64
	logBytes                  float64
	q                         *queueStats // the queue targets only
}

// queueStats are a queue target's medians over rounds of what promq read
// after the run: events accepted (stored and acknowledged) and delivered,
// how long after the run the queue took to drain, and the
// accepted-to-delivered delay's quantiles from the gateway's histogram
// (microseconds; lo and hi: the widest bounds of the buckets they fell in).
type queueStats struct {
	queued, delivered, drainMs float64
	dps                        float64 // delivered events per second (deliveredRate), throughput runs only
	undrained                  int     // rounds whose queue did not drain in time
	p50, p50Lo, p50Hi          float64
	p99, p99Lo, p99Hi          float64
}

func queueOf(xs []rec) *queueStats {
	var qd, dl, dr, p50, p99, dps []float64
	q := &queueStats{p50Lo: math.Inf(1), p99Lo: math.Inf(1), p50Hi: math.Inf(-1), p99Hi: math.Inf(-1)}
	for _, x := range xs {
		if _, ok := x["queued"]; !ok {
			continue
		}
		qd = append(qd, x.f("queued"))
		dl = append(dl, x.f("delivered"))
		dps = append(dps, deliveredRate(x))
		if x["drained"] == "1" {
			dr = append(dr, x.f("drain_ms"))
		} else {
			q.undrained++
		}
		p50 = append(p50, x.f("delay_p50_us"))
		p99 = append(p99, x.f("delay_p99_us"))
		q.p50Lo, q.p50Hi = min(q.p50Lo, x.f("delay_p50_lo_us")), max(q.p50Hi, x.f("delay_p50_hi_us"))
		q.p99Lo, q.p99Hi = min(q.p99Lo, x.f("delay_p99_lo_us")), max(q.p99Hi, x.f("delay_p99_hi_us"))
	}
	if len(qd) == 0 {
		return nil
	}
	q.queued, q.delivered, q.drainMs, q.p50, q.p99, q.dps = median(qd), median(dl), median(dr), median(p50), median(p99), median(dps)
	return q
}

// deliveredRate is a queue target's throughput run's delivered events per
// second: the events delivered from the start of the load until the queue
// drained (delivered minus delivered_before, the pre-flight's) over the time
// from the first 202 to the last delivery, taken as wrk's duration of the
// load (duration_us) plus the time from its end until promq saw every
// accepted event delivered (drain_ms; 0 when delivery kept up). NaN when the
// queue did not drain or the record lacks a figure (fixed-rate runs).
func deliveredRate(x rec) float64 {
	if x["drained"] != "1" {
		return math.NaN()
	}
	secs := x.f("duration_us")/1e6 + x.f("drain_ms")/1e3
	n := x.f("delivered") - x.n("delivered_before")
	if !(secs > 0) || math.IsNaN(n) {
		return math.NaN()
	}
	return n / secs
}

type rateRow struct {
	n                   int
	p50, p99, p999, max float64
	added, vsNginx      float64     // p99 minus direct's; that minus nginx's added
	p999X               float64     // median of the per-round p99.9 over nginx's
	q                   *queueStats // the queue targets only
}

type check struct {
	name, got, want string
	ok              bool
	have            bool
}

type report struct {
	rows   map[string]map[string]*row
	rate   map[string]*rateRow
	wrk    map[string]map[string]map[string]rec // case, round, target
	memkey rec
	// memkeyH is memkey with dedupe.history at its default (nil: not
	// measured).
	memkeyH  rec
	rounds   int
	checks   []check
	goals    []goalResult
	others   []float64 // every throughput run's other tenants, percent of one core
	busy     []float64 // every throughput run's machine busy share, percent
	meta     []string  // "Name: value" lines, for the load averages
	errors   []string
	warnings []string
}

// goalResult is a goal's medians of per-round ratios and verdicts.
type goalResult struct {
	goal
	rpsX, cpuX float64 // NaN: not measured
}

func analyse(recs []rec) *report {
	r := &report{rows: map[string]map[string]*row{}, rate: map[string]*rateRow{}}
	// Index throughput runs by case, round, target.
	wrk := map[string]map[string]map[string]rec{}
	r.wrk = wrk
	rate := map[string]map[string]rec{}
	for _, x := range recs {
		switch x["kind"] {
		case "wrk":
			c, rd, t := x["case"], x["round"], x["target"]
			if wrk[c] == nil {
				wrk[c] = map[string]map[string]rec{}
			}
			if wrk[c][rd] == nil {
				wrk[c][rd] = map[string]rec{}
			}
			wrk[c][rd][t] = x
			r.checkWrk(x)
			if _, ok := x["cpu_others"]; ok {
				r.others = append(r.others, x.f("cpu_others"))
				r.busy = append(r.busy, x.f("cpu_machine"))
			}
		case "rate":
			rd, t := x["round"], x["target"]
			if rate[rd] == nil {
				rate[rd] = map[string]rec{}
			}
			rate[rd][t] = x
			if x.f("non2xx") > 0 || x.f("errors") > 0 {
				r.errors = append(r.errors, fmt.Sprintf("fixed-rate round %s %s: %s non-2xx, %s failed requests", rd, t, x["non2xx"], x["errors"]))
			}
			r.checkQueue(fmt.Sprintf("fixed-rate round %s, %s", rd, t), x)
		case "memkey":
			if x.f("history") > 0 {
				r.memkeyH = x
			} else {
				r.memkey = x
			}
		}
	}
	for _, c := range cases {
		rounds := wrk[c]
		r.rounds = max(r.rounds, len(rounds))
		for _, t := range targets {
			var rps, p50, p99, rpsX, p50X, p99X, cp, cu, cr, ck, cw, cm, co, lb, cpr, cprX, ca, caX, ws, rpsF, caF, cprF []float64
			var all []rec
			for _, byT := range rounds {
				x, ok := byT[t]
				if !ok {
					continue
				}
				all = append(all, x)
				rps = append(rps, x.f("rps"))
				p50 = append(p50, x.f("p50_us"))
				p99 = append(p99, x.f("p99_us"))
				cp = append(cp, x.f("cpu_proxy"))
				cu = append(cu, x.f("cpu_upstream"))
				cr = append(cr, x.f("cpu_redis"))
				ck = append(ck, x.f("cpu_kafka"))
				cw = append(cw, x.f("cpu_wrk"))
				cm = append(cm, x.f("cpu_machine"))
				co = append(co, x.f("cpu_others"))
				lb = append(lb, x.f("log_bytes_per_req"))
				cpr = append(cpr, cpuPerReq(x))
				ca = append(ca, cpuAll(x))
				ws = append(ws, x.f("cpu_wrk_setup_ms"))
				if ng, ok := byT["nginx"]; ok {
					cprX = append(cprX, cpuPerReq(ng)/cpuPerReq(x))
					caX = append(caX, cpuAll(ng)/cpuAll(x))
					rpsX = append(rpsX, x.f("rps")/ng.f("rps"))
					p50X = append(p50X, x.f("p50_us")/ng.f("p50_us"))
					p99X = append(p99X, x.f("p99_us")/ng.f("p99_us"))
				}
				if fl, ok := byT[floorOf(c)]; ok && strings.HasPrefix(t, "clawgate-") {
					rpsF = append(rpsF, x.f("rps")/fl.f("rps"))
					caF = append(caF, cpuAll(fl)/cpuAll(x))
					cprF = append(cprF, cpuPerReq(fl)/cpuPerReq(x))
				}
			}
			if len(rps) == 0 {
				continue
			}
			if r.rows[c] == nil {
				r.rows[c] = map[string]*row{}
			}
			r.rows[c][t] = &row{
				n: len(rps), rps: median(rps), p50: median(p50), p99: median(p99),
				rpsX: median(rpsX), p50X: median(p50X), p99X: median(p99X),
				cpuProxy: median(cp), cpuUp: median(cu), cpuRedis: median(cr), cpuKafka: median(ck), cpuWrk: median(cw), cpu: median(cm), cpuOthers: median(co),
				logBytes: median(lb), cpuPerReq: median(cpr), cpuPerReqX: median(cprX),
				cpuAll: median(ca), cpuAllX: median(caX), wrkSetupMs: median(ws),
				rpsF: median(rpsF), cpuAllF: median(caF), cpuPerReqF: median(cprF),
				q: queueOf(all),
			}
		}
	}
	for _, t := range targets {
		var p50, p99, p999, mx, added, vs, p999X []float64
		var all []rec
		for _, byT := range rate {
			x, ok := byT[t]
			if !ok {
				continue
			}
			all = append(all, x)
			p50 = append(p50, x.f("p50_us"))
			p99 = append(p99, x.f("p99_us"))
			p999 = append(p999, x.f("p999_us"))
			mx = append(mx, x.f("max_us"))
			if ng, ok := byT["nginx"]; ok {
				p999X = append(p999X, x.f("p999_us")/ng.f("p999_us"))
			}
			if d, ok := byT["direct"]; ok {
				a := x.f("p99_us") - d.f("p99_us")
				added = append(added, a)
				if ng, ok := byT["nginx"]; ok {
					vs = append(vs, a-(ng.f("p99_us")-d.f("p99_us")))
				}
			}
		}
		if len(p50) > 0 {
			r.rate[t] = &rateRow{n: len(p50), p50: median(p50), p99: median(p99), p999: median(p999), max: median(mx),
				added: median(added), vsNginx: median(vs), p999X: median(p999X), q: queueOf(all)}
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(r.others), func(v float64) bool { return !(v > othersWarn) })); n > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("in %d of %d throughput runs other work on the machine took more than %d%% of a core (at most %.0f%%): "+
			"those runs' req/s are low by about that share; CPU per request and the per-round ratios are less affected", n, len(r.others), othersWarn, slices.Max(r.others)))
	}
	r.targetChecks()
	for _, g := range goals {
		rx, cx := r.ratioTo(g.c, g.t, g.ref)
		r.goals = append(r.goals, goalResult{goal: g, rpsX: rx, cpuX: cx})
	}
	return r
}

// ratioTo is case c's medians of the per-round ratios of target t to ref:
// req/s (t's over ref's) and all CPU per request (ref's over t's, so higher
// is better on both). NaN when no round has both.
func (r *report) ratioTo(c, t, ref string) (rpsX, cpuX float64) {
	var rx, cx []float64
	for _, byT := range r.wrk[c] {
		x, ok1 := byT[t]
		y, ok2 := byT[ref]
		if !ok1 || !ok2 {
			continue
		}
		rx = append(rx, x.f("rps")/y.f("rps"))
		cx = append(cx, cpuAll(y)/cpuAll(x))
	}
	return median(rx), median(cx)
}

// cpuPerReq is the proxy's CPU time per request in microseconds (NaN for
// direct, which has no proxy): from proxy_cpu_us over the requests, or,
// in older result lines, from its percent of a core over the req/s.
func cpuPerReq(x rec) float64 {
	if x["target"] == "direct" {
		return math.NaN()
	}
	if _, ok := x["proxy_cpu_us"]; ok {
		return x.f("proxy_cpu_us") / x.f("requests")
	}
	return x.f("cpu_proxy") / 100 * 1e6 / x.f("rps")
}

// cpuAll is the CPU time per request in microseconds of everything that
// served it: wrk's load (its setup left out), the upstream, the proxy,
// Redis and kfake (NaN in result lines without total_cpu_us).
func cpuAll(x rec) float64 {
	return x.f("total_cpu_us") / x.f("requests")
}

func (r *report) checkWrk(x rec) {
	where := fmt.Sprintf("round %s, %s, %s", x["round"], x["case"], x["target"])
	if x.f("status_err") > 0 {
		st := x["statuses"]
		if st == "" {
			st = "see the access log"
		}
		r.errors = append(r.errors, fmt.Sprintf("%s: %s responses with status >= 400 (status:count %s; 401: signing is wrong, 409: a key still in flight, 422: key reused, 503: store unavailable)", where, x["status_err"], st))
	}
	if sock := x.n("connect_err") + x.n("read_err") + x.n("write_err") + x.n("timeout_err"); sock > 0 {
		r.errors = append(r.errors, fmt.Sprintf("%s: socket errors connect=%s read=%s write=%s timeout=%s", where, x["connect_err"], x["read_err"], x["write_err"], x["timeout_err"]))
	}
	if x.f("wrapped") > 0 {
		msg := fmt.Sprintf("%s: ran out of unique keys (%s requests reused a key, so they were replays): raise BENCH_KEYS", where, x["wrapped"])
		if strings.HasPrefix(x["target"], "clawgate") {
			r.errors = append(r.errors, msg)
		} else {
			r.warnings = append(r.warnings, msg+" (harmless here: this target does not dedupe)")
		}
	}
	if x.f("requests") == 0 {
		r.errors = append(r.errors, where+": no request completed")
	}
	r.checkQueue(where, x)
}

// checkQueue looks at the delivery queue's record of a run against a
// queue target. The bench upstream answers every request 200, so an event
// dead-lettered or rejected means delivery itself failed: an error. A
// queue that did not drain in time is a result, not a harness failure
// (acknowledgements outran delivery): a warning, as are retries.
func (r *report) checkQueue(where string, x rec) {
	if !isQueue(x["target"]) {
		return
	}
	if _, ok := x["queued"]; !ok {
		r.errors = append(r.errors, where+": no queue figures (bench/cmd/promq did not run)")
		return
	}
	if n := x.n("dead_lettered") + x.n("rejected"); n > 0 {
		r.errors = append(r.errors, fmt.Sprintf("%s: %.0f events dead-lettered (%s exhausted, %s rejected) although the upstream answers 200", where, n, x["dead_lettered"], x["rejected"]))
	}
	if x["drained"] != "1" {
		r.warnings = append(r.warnings, fmt.Sprintf("%s: the queue did not drain within %.0f s after the run: %s of %s accepted events delivered (the rest were dropped by the next run's FLUSHALL and fresh kfake); its drain time is left out of the medians", where, x.n("drain_ms")/1000, x["delivered"], x["queued"]))
	}
	if x.n("retried") > 0 || x.n("not_owner") > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%s: %s delivery attempts retried, %s taken over (not_owner): the bench upstream should accept every one at the first try", where, x["retried"], x["not_owner"]))
	}
}

// The speed goals of the targets table, besides the queue's, the ordered
// queue's, the history's and the memory store's: medians over rounds,
// ratios taken in the same round.
const (
	// floorGoal (below): the fasthttp door on memory over its floors.
	cpuUniqueGoal = 35 // µs of proxy CPU per unique delivery, fasthttp door, memory
	cpuDupGoal    = 15 // µs per duplicate, the same
	cpuRedisGoal  = 50 // µs per unique delivery on Redis, both doors
	redisGoal     = 0.75
	delayGoalUs   = 10000 // queue accepted-to-delivered p99 at the fixed rate
	tailAddGoalUs = 500   // fixed-rate p99 added over Nginx's
	tailP999Goal  = 1.5   // fixed-rate p99.9 over Nginx's, same round
)

// tailTargets are the targets held to the fixed-rate tail goals: both
// doors, memory and Redis.
var tailTargets = []string{"clawgate-memory", "clawgate-redis", "clawgate-fasthttp-memory", "clawgate-fasthttp-redis"}

func (r *report) targetChecks() {
	add := func(name, want string, v float64, ok func(float64) bool, format string) {
		ch := check{name: name, want: want}
		if !math.IsNaN(v) {
			ch.have, ch.ok, ch.got = true, ok(v), fmt.Sprintf(format, v)
		}
		r.checks = append(r.checks, ch)
	}
	atLeast := func(goal float64) func(float64) bool { return func(v float64) bool { return v >= goal-1e-9 } }
	atMost := func(goal float64) func(float64) bool { return func(v float64) bool { return v <= goal+1e-9 } }
	rps := func(c, t, ref string) float64 { v, _ := r.ratioTo(c, t, ref); return v }
	cpu := func(c, t string) float64 {
		if row := r.rows[c][t]; row != nil {
			return row.cpuPerReq
		}
		return math.NaN()
	}
	add("unique, clawgate fasthttp (memory) req/s / floor (forward), same round", fmt.Sprintf(">= %.2f", floorGoal),
		rps("unique", "clawgate-fasthttp-memory", floorForward), atLeast(floorGoal), "%.2f")
	add("duplicates, clawgate fasthttp (memory) req/s / floor (answer), same round", fmt.Sprintf(">= %.2f", floorGoal),
		rps("dup", "clawgate-fasthttp-memory", floorAnswer), atLeast(floorGoal), "%.2f")
	add("unique, clawgate fasthttp (memory) proxy CPU per request", fmt.Sprintf("<= %d µs", cpuUniqueGoal),
		cpu("unique", "clawgate-fasthttp-memory"), atMost(cpuUniqueGoal), "%.1f µs")
	add("duplicates, clawgate fasthttp (memory) proxy CPU per request", fmt.Sprintf("<= %d µs", cpuDupGoal),
		cpu("dup", "clawgate-fasthttp-memory"), atMost(cpuDupGoal), "%.1f µs")
	for _, d := range [][2]string{{"clawgate-fasthttp-redis", "clawgate-fasthttp-memory"}, {"clawgate-redis", "clawgate-memory"}} {
		add(fmt.Sprintf("unique, %s req/s / %s, same round", targetDoc[d[0]], targetDoc[d[1]]), fmt.Sprintf(">= %.2f", redisGoal),
			rps("unique", d[0], d[1]), atLeast(redisGoal), "%.2f")
	}
	for _, t := range []string{"clawgate-fasthttp-redis", "clawgate-redis"} {
		add(fmt.Sprintf("unique, %s proxy CPU per request", targetDoc[t]), fmt.Sprintf("<= %d µs", cpuRedisGoal),
			cpu("unique", t), atMost(cpuRedisGoal), "%.1f µs")
	}
	add("unique, clawgate (redis, queue) acks/s / clawgate (redis) req/s", fmt.Sprintf(">= %.2f", queueGoal),
		r.queueRatio("unique", queueTarget), atLeast(queueGoal), "%.2f")
	delay := math.NaN()
	if rr := r.rate[queueTarget]; rr != nil && rr.q != nil {
		delay = rr.q.p99
	}
	add("fixed rate, clawgate (redis, queue) accepted to delivered p99 (histogram)", fmt.Sprintf("<= %d ms", delayGoalUs/1000),
		delay/1000, atMost(delayGoalUs/1000), "%.2f ms")
	ack, dps := r.orderedRatios("unique")
	add(orderedAckName, fmt.Sprintf(">= %.2f", orderedAckGoal), ack, atLeast(orderedAckGoal), "%.2f")
	add(orderedDeliveredName, fmt.Sprintf(">= %.2f", orderedDeliveredGoal), dps, atLeast(orderedDeliveredGoal), "%.2f")
	add(historyName, fmt.Sprintf(">= %.2f", historyGoal), rps("unique", "clawgate-redis", historyOffTarget), atLeast(historyGoal), "%.2f")
	for _, t := range tailTargets {
		added, p999 := math.NaN(), math.NaN()
		if rr := r.rate[t]; rr != nil {
			added, p999 = rr.vsNginx/1000, rr.p999X
		}
		add(fmt.Sprintf("fixed rate, p99 added by %s minus nginx's", targetDoc[t]), fmt.Sprintf("<= %.2f ms", tailAddGoalUs/1000.0),
			added, atMost(tailAddGoalUs/1000.0), "%+.2f ms")
		add(fmt.Sprintf("fixed rate, p99.9 of %s / nginx's, same round", targetDoc[t]), fmt.Sprintf("<= %.1f", tailP999Goal),
			p999, atMost(tailP999Goal), "%.2f")
	}
	mem := math.NaN()
	if r.memkey != nil {
		mem = r.memkey.f("heap_beyond_body")
	}
	add("memory store, bytes per finished key beyond the body", "<= 400", mem, atMost(400), "%.0f")
}

// The ordered queue's rows in the targets table.
const (
	orderedAckName       = "unique, clawgate (redis, queue, ordered) acks/s / clawgate (redis, queue) acks/s, same round"
	orderedDeliveredName = "unique, clawgate (redis, queue, ordered) delivered/s / clawgate (redis, queue) delivered/s, same round"
)

// orderedRatios is case c's medians of the per-round ratios of the ordered
// queue to the unordered one: acks/s, and delivered events per second
// (deliveredRate; rounds where either queue did not drain are left out).
// NaN when no round has both.
func (r *report) orderedRatios(c string) (ack, dps float64) {
	var dx []float64
	for _, byT := range r.wrk[c] {
		o, ok1 := byT[orderedTarget]
		u, ok2 := byT[queueTarget]
		if ok1 && ok2 {
			dx = append(dx, deliveredRate(o)/deliveredRate(u))
		}
	}
	ack, _ = r.ratioTo(c, orderedTarget, queueTarget)
	return ack, median(dx)
}

// orderedLine says, for the queue section, the ordered queue's two ratios
// to the unordered queue with their goals.
func (r *report) orderedLine() string {
	ack, dps := r.orderedRatios("unique")
	_, cpu := r.ratioTo("unique", orderedTarget, queueTarget)
	o, u := r.rows["unique"][orderedTarget], r.rows["unique"][queueTarget]
	if o == nil || u == nil || o.q == nil || u.q == nil {
		return "not measured (needs the unique case on clawgate-redis-queue and clawgate-redis-queue-ordered)"
	}
	verdict := func(v, goal float64) string {
		switch {
		case math.IsNaN(v):
			return "not measured"
		case v >= goal-1e-9:
			return "met"
		}
		return "MISSED"
	}
	return fmt.Sprintf("acks/s %s (medians %.0f ÷ %.0f; goal: at least %.1f: %s), delivered events/s %s (medians %s ÷ %s; goal: at least %.1f: %s); "+
		"medians of the per-round ratios; CPU per request of all the processes during the load, the unordered queue's ÷ the ordered's, %s (no goal: "+
		"steadier than req/s on a busy machine)",
		x(ack), o.rps, u.rps, orderedAckGoal, verdict(ack, orderedAckGoal),
		x(dps), count(o.q.dps), count(u.q.dps), orderedDeliveredGoal, verdict(dps, orderedDeliveredGoal), x(cpu))
}

const orderedLineName = "Ordered queue against the unordered queue on Redis, unique case, same round"

// hasOrdered tells whether the ordered queue took part in the run.
func (r *report) hasOrdered() bool {
	if r.rate[orderedTarget] != nil {
		return true
	}
	for _, c := range cases {
		if r.rows[c][orderedTarget] != nil {
			return true
		}
	}
	return false
}

// queueRatio is case c's median acks/s of queue target t over the median
// req/s of clawgate-redis (sync forwarding on the same Redis), from the
// same run; NaN when either is missing.
func (r *report) queueRatio(c, t string) float64 {
	q, s := r.rows[c][t], r.rows[c]["clawgate-redis"]
	if q == nil || s == nil || !(s.rps > 0) {
		return math.NaN()
	}
	return q.rps / s.rps
}

func ms(us float64) string {
	if math.IsNaN(us) {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", us/1000)
}

func x(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", v)
}

func (c check) verdict() string {
	switch {
	case !c.have:
		return "not measured"
	case c.ok:
		return "met"
	}
	return "MISSED"
}

// table renders rows with a header, as aligned text or markdown.
func table(w io.Writer, md bool, head []string, rows [][]string) {
	if md {
		fmt.Fprintf(w, "| %s |\n|", strings.Join(head, " | "))
		for range head {
			fmt.Fprint(w, " --- |")
		}
		fmt.Fprintln(w)
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(cells []string) {
		for i, c := range cells {
			if i == 0 || i == 1 || head[i] == "floor" { // names left, figures right
				fmt.Fprintf(w, "%-*s  ", width[i], c)
			} else {
				fmt.Fprintf(w, "%*s  ", width[i], c)
			}
		}
		fmt.Fprintln(w)
	}
	line(head)
	for _, r := range rows {
		line(r)
	}
}

func (r *report) throughputRows() [][]string {
	var rows [][]string
	for _, c := range cases {
		for _, t := range targets {
			row := r.rows[c][t]
			if row == nil {
				continue
			}
			rows = append(rows, []string{caseDoc[c], targetDoc[t],
				fmt.Sprintf("%.0f", row.rps), x(row.rpsX), ms(row.p50), x(row.p50X), ms(row.p99), x(row.p99X)})
		}
	}
	return rows
}

var throughputHead = []string{"case", "target", "req/s", "req/s ÷ nginx", "p50", "p50 ÷ nginx", "p99", "p99 ÷ nginx"}

func (r *report) rateRows() [][]string {
	var rows [][]string
	for _, t := range targets {
		rr := r.rate[t]
		if rr == nil {
			continue
		}
		added, vs := "-", "-"
		if t != "direct" {
			added = ms(rr.added)
		}
		if t != "direct" && t != "nginx" && !math.IsNaN(rr.vsNginx) {
			vs = fmt.Sprintf("%+.2f ms", rr.vsNginx/1000)
		}
		rows = append(rows, []string{targetDoc[t], ms(rr.p50), ms(rr.p99), ms(rr.p999), ms(rr.max), added, vs})
	}
	return rows
}

var rateHead = []string{"target", "p50", "p99", "p99.9", "max", "p99 added over direct", "added minus nginx's"}

// bound formats a bucket bound given in microseconds.
func bound(us float64) string {
	switch {
	case math.IsNaN(us):
		return "?"
	case math.IsInf(us, 1):
		return "+Inf"
	case us == 0:
		return "0"
	case us < 1e6:
		return strconv.FormatFloat(us/1000, 'g', -1, 64) + " ms"
	}
	return strconv.FormatFloat(us/1e6, 'g', -1, 64) + " s"
}

// delay shows a quantile interpolated inside its bucket with the bucket's
// bounds, the only thing the histogram really knows.
func delay(v, lo, hi float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	val := ms(v)
	if v >= 1e6 {
		val = fmt.Sprintf("%.2f s", v/1e6)
	}
	return fmt.Sprintf("%s (%s to %s)", val, bound(lo), bound(hi))
}

func count(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func drain(q *queueStats) string {
	s := "-"
	if !math.IsNaN(q.drainMs) {
		s = fmt.Sprintf("%.1f s", q.drainMs/1000)
	}
	if q.undrained > 0 {
		s += fmt.Sprintf(" (%d round(s) not drained)", q.undrained)
	}
	return s
}

// queueRows: the queue targets' acknowledgements per case against sync
// forwarding on Redis, and what their background delivery did after them.
func (r *report) queueRows() [][]string {
	var rows [][]string
	for _, c := range cases {
		for _, t := range queueTargets {
			row := r.rows[c][t]
			if row == nil || row.q == nil {
				continue
			}
			q := row.q
			rows = append(rows, []string{caseDoc[c], targetDoc[t], fmt.Sprintf("%.0f", row.rps), x(r.queueRatio(c, t)), count(q.queued), count(q.delivered), count(q.dps), drain(q),
				delay(q.p50, q.p50Lo, q.p50Hi), delay(q.p99, q.p99Lo, q.p99Hi)})
		}
	}
	return rows
}

var queueHead = []string{"case", "target", "acks/s", "÷ clawgate (redis) req/s", "accepted", "delivered", "delivered/s", "drained after the run in", "accepted to delivered p50", "p99"}

// queueLine is the unique case's ratio of queue acks/s on Redis to sync
// forwarding on Redis, with the goal.
func (r *report) queueLine() string {
	v := r.queueRatio("unique", queueTarget)
	if math.IsNaN(v) {
		return "not measured (needs the unique case on clawgate-redis and clawgate-redis-queue)"
	}
	verdict := "met"
	if v < queueGoal {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%.2f (%.0f acks/s ÷ %.0f req/s, medians of this run; goal: at least %.1f: %s)",
		v, r.rows["unique"][queueTarget].rps, r.rows["unique"]["clawgate-redis"].rps, queueGoal, verdict)
}

const queueLineName = "Queue acks/s on Redis as a ratio to sync forwarding on Redis (clawgate-redis), unique case, same run"

// kafkaLine is the unique case's ratio of queue acks/s on Kafka (kfake) to
// sync forwarding on Redis: information, no goal.
func (r *report) kafkaLine() string {
	v := r.queueRatio("unique", kafkaTarget)
	if math.IsNaN(v) {
		return "not measured (needs the unique case on clawgate-redis and clawgate-kafka-queue)"
	}
	return fmt.Sprintf("%.2f (%.0f acks/s ÷ %.0f req/s, medians of this run; information, no goal: against kfake, not a Kafka cluster)",
		v, r.rows["unique"][kafkaTarget].rps, r.rows["unique"]["clawgate-redis"].rps)
}

const kafkaLineName = "Kafka queue acks/s ÷ sync on Redis (clawgate-kafka-queue over clawgate-redis), unique case, same run"

// hasKafka tells whether the Kafka target took part in the run.
func (r *report) hasKafka() bool {
	if r.rate[kafkaTarget] != nil {
		return true
	}
	for _, c := range cases {
		if r.rows[c][kafkaTarget] != nil {
			return true
		}
	}
	return false
}

func (r *report) delayRows() [][]string {
	var rows [][]string
	for _, t := range queueTargets {
		rr := r.rate[t]
		if rr == nil || rr.q == nil {
			continue
		}
		q := rr.q
		rows = append(rows, []string{targetDoc[t], count(q.delivered), delay(q.p50, q.p50Lo, q.p50Hi), delay(q.p99, q.p99Lo, q.p99Hi), drain(q)})
	}
	return rows
}

var delayHead = []string{"target", "delivered", "p50 (bucket)", "p99 (bucket)", "drained after the run in"}

func (r *report) cpuRows() [][]string {
	var rows [][]string
	for _, c := range cases {
		for _, t := range targets {
			row := r.rows[c][t]
			if row == nil {
				continue
			}
			proxy, redis, kafka := pct(row.cpuProxy), pct(row.cpuRedis), pct(row.cpuKafka)
			if t == "direct" {
				proxy = "-"
			}
			if !usesRedis(t) {
				redis = "-"
			}
			if t != kafkaTarget {
				kafka = "-"
			}
			perReq := "-"
			if !math.IsNaN(row.cpuPerReq) {
				perReq = fmt.Sprintf("%.0f µs", row.cpuPerReq)
			}
			rows = append(rows, []string{caseDoc[c], targetDoc[t], proxy, perReq, x(row.cpuPerReqX), pct(row.cpuUp), redis, kafka, pct(row.cpuWrk), pct(row.cpuOthers), pct(row.cpu)})
		}
	}
	return rows
}

var cpuHead = []string{"case", "target", "proxy", "proxy CPU per request", "nginx's ÷ this", "upstream", "redis", "kafka (kfake)", "wrk", "other tenants", "machine busy"}

func us(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	if v < 10 {
		return fmt.Sprintf("%.1f µs", v)
	}
	return fmt.Sprintf("%.0f µs", v)
}

// effRows: per case and target, req/s and all CPU per request, both as
// ratios to nginx (per round, then the median), the proxy's own CPU per
// request, and what other work took from the machine meanwhile.
func (r *report) effRows() [][]string {
	var rows [][]string
	for _, c := range cases {
		for _, t := range targets {
			row := r.rows[c][t]
			if row == nil {
				continue
			}
			rows = append(rows, []string{caseDoc[c], targetDoc[t], fmt.Sprintf("%.0f", row.rps), x(row.rpsX),
				us(row.cpuAll), x(row.cpuAllX), us(row.cpuPerReq), pct(row.cpuOthers)})
		}
	}
	return rows
}

var effHead = []string{"case", "target", "req/s", "req/s ÷ nginx", "CPU per request (all)", "nginx's ÷ this", "proxy CPU per request", "other tenants"}

// floorRows: per case the floor ran, every clawgate target against its
// floor (floorOf) beside its ratios to nginx, medians of per-round ratios; the proxy CPU per
// request of the target and of the floor, medians.
func (r *report) floorRows() [][]string {
	var rows [][]string
	for _, c := range cases {
		fl := floorOf(c)
		f := r.rows[c][fl]
		if f == nil {
			continue // the floor did not run this case
		}
		for _, t := range targets {
			row := r.rows[c][t]
			if row == nil || !strings.HasPrefix(t, "clawgate-") {
				continue
			}
			rows = append(rows, []string{caseDoc[c], targetDoc[t], targetDoc[fl], x(row.rpsF), x(row.rpsX),
				x(row.cpuAllF), x(row.cpuAllX), us(row.cpuPerReq), us(f.cpuPerReq), x(row.cpuPerReqF)})
		}
	}
	return rows
}

var floorHead = []string{"case", "target", "floor", "req/s ÷ floor", "req/s ÷ nginx", "CPU per request (all): floor's ÷ this", "nginx's ÷ this",
	"proxy CPU per request", "floor's", "floor's ÷ this"}

// floorDoc says what the floors are and how to read the fractions.
const floorDoc = "The floors are two targets built from the bench's own code (`bench/cmd/floor`) that do what a Go webhook gateway " +
	"cannot avoid and nothing else. *floor (forward)* is a fasthttp server that reads the request body, hashes it (SHA-256, as the " +
	"gateway's fingerprint does) and forwards it with a fasthttp `HostClient` set up as the gateway's to the same upstream, " +
	"answering the upstream's status, body and content type: the floor of a unique delivery. *floor (answer)* reads and hashes " +
	"the body and answers a fixed small JSON 200 from memory: the floor of a duplicate answered by the gateway. Neither checks " +
	"a signature, parses a key, touches a store, writes an access line or counts a metric: every one of those is in the " +
	"gateway's fraction. Each clawgate target is compared with its floor in the same round (unique and mix: floor (forward), " +
	"the mix being 80 % new keys; duplicates: floor (answer), which runs that case only, since it never forwards), then " +
	"the median of the per-round ratios is shown, beside the same ratios to Nginx. req/s is the target's over the floor's, " +
	"CPU per request the floor's over the target's, so on both 1.00 is the floor itself and 0.80 means the gateway's own work " +
	"costs a quarter on top of it (1 ÷ 0.80 = 1.25). A fraction is meant to be steadier than a ratio to Nginx, since the floor shares the " +
	"gateway's runtime (Go scheduler, GC, fasthttp) and the machine's state in the round. It is an upper bound of what the gateway can reach, " +
	"not a goal of 1.00: on the Redis targets the round trips to Redis come on top, and the queue targets' req/s are " +
	"acknowledgements, not deliveries, so their fraction is of another kind. The mix case can exceed the floor's req/s, since a " +
	"fifth of its requests are answered from the gateway's window without a forward. The fasthttp front door on the memory store " +
	"aims at 0.85 of its floor on both ratios, unique and duplicates (the front doors' goals, under Targets)"

// floorMethod is the floors' line of the method.
const floorMethod = "`-mode forward` (read the body, SHA-256 of it, forward it with a fasthttp `HostClient` set up as the gateway's: " +
	"no retry, 4 s idle connections, 8 KiB read buffer; the upstream's status, content type and body back) and `-mode answer` " +
	"(read the body, SHA-256 of it, a fixed `{\"ok\":true}` 200 from memory), both on fasthttp's server with its defaults"

// verdictOf is a goal's verdict on one ratio.
func verdictOf(v, want float64) string {
	switch {
	case math.IsNaN(v):
		return "not measured"
	case v >= want-1e-9: // a median of ratios right on the line counts as met
		return "MET"
	}
	return "MISSED"
}

func (g goal) name() string {
	return fmt.Sprintf("%s, %s ÷ %s", caseDoc[g.c], targetDoc[g.t], targetDoc[g.ref])
}

func (r *report) goalRows() [][]string {
	var rows [][]string
	for _, g := range r.goals {
		rows = append(rows, []string{g.name(), fmt.Sprintf(">= %.2f", g.want), x(g.rpsX), verdictOf(g.rpsX, g.want), x(g.cpuX), verdictOf(g.cpuX, g.want)})
	}
	return rows
}

var goalHead = []string{"goal", "want", "req/s ratio", "verdict", "CPU per request ratio", "verdict"}

// loadLine says how busy the machine was with other work during the
// throughput runs, and its load averages from -meta.
func (r *report) loadLine() string {
	if len(r.others) == 0 {
		return "not measured"
	}
	s := fmt.Sprintf("other tenants took a median %.0f%% of one core (at most %.0f%%) during the %d throughput runs; the machine was busy a median %.0f%% of all its cores",
		median(r.others), slices.Max(r.others), len(r.others), median(r.busy))
	if v := r.metaValue("Load average (1, 5, 15 min) at start"); v != "" {
		s += "; load average " + v + " at the start"
		if e := r.metaValue("Load average at end"); e != "" {
			s += ", " + e + " at the end"
		}
	}
	return s
}

func (r *report) metaValue(name string) string {
	for _, l := range r.meta {
		if k, v, ok := strings.Cut(l, ": "); ok && k == name {
			return v
		}
	}
	return ""
}

func (r *report) checkRows() [][]string {
	var rows [][]string
	for _, c := range r.checks {
		got := c.got
		if !c.have {
			got = "-"
		}
		rows = append(rows, []string{c.name, got, c.want, c.verdict()})
	}
	return rows
}

func (r *report) memLine() string {
	m := r.memkey
	if m == nil {
		return "not measured"
	}
	return fmt.Sprintf("%s bytes per finished key beyond its %s-byte body (live heap after GC: %s bytes per key in all; "+
		"resident set grew %s bytes per key, %s beyond the body; %s keys of %s bytes)",
		m["heap_beyond_body"], m["body"], m["heap_per_key"], m["rss_per_key"], m["rss_beyond_body"], m["keys"], m["key_bytes"]) +
		r.memHistoryLine()
}

// memHistoryLine is the memory per key with each key's history on, as
// the default dedupe.history keeps it ("" when not measured).
func (r *report) memHistoryLine() string {
	m := r.memkeyH
	if m == nil {
		return ""
	}
	return fmt.Sprintf("; with `dedupe.history: %s` (the default), each key also holding its arrival and its settle: "+
		"%s bytes beyond the body (resident %s), of which the history %.0f",
		m["history"], m["heap_beyond_body"], m["rss_beyond_body"], m.f("heap_beyond_body")-r.memkey.f("heap_beyond_body"))
}

func (r *report) text(w io.Writer) {
	fmt.Fprintf(w, "\nThroughput: medians of %d round(s); ratios are per round against nginx, then the median\n\n", r.rounds)
	table(w, false, throughputHead, r.throughputRows())
	fmt.Fprintf(w, "\nPer request: req/s and CPU per request (all: wrk's load + upstream + proxy + redis + kafka, from /proc), medians;\n"+
		"ratios per round to nginx, then the median (CPU: nginx's over the target's, so higher is better on both)\n\n")
	table(w, false, effHead, r.effRows())
	if rows := r.floorRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\nAgainst the floors (bench/cmd/floor; unique and mix: floor-forward, duplicates: floor-answer): medians of per-round ratios,\n"+
			"beside the same ratios to nginx (req/s: the target's over the floor's; CPU per request: the floor's over the target's)\n\n")
		table(w, false, floorHead, rows)
	}
	fmt.Fprintf(w, "\nMachine load: %s\n", r.loadLine())
	if rows := r.queueRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\nDelivery queue (the queue targets): acks/s are 202s answered once the event is stored; the queue was waited for after each run.\n"+
			"delivered/s: events delivered from the load's start until drained, over wrk's duration plus the drain time. Delay: accepted to\n"+
			"delivered, from the gateway's histogram (approximate within the bucket bounds)\n\n")
		table(w, false, queueHead, rows)
	}
	fmt.Fprintf(w, "\n%s: %s\n", queueLineName, r.queueLine())
	if r.hasOrdered() {
		fmt.Fprintf(w, "%s: %s\n", orderedLineName, r.orderedLine())
	}
	if r.hasHistoryOff() {
		fmt.Fprintf(w, "%s: %s\n", historyLineName, r.historyLine())
	}
	if r.hasKafka() {
		fmt.Fprintf(w, "%s: %s\n", kafkaLineName, r.kafkaLine())
		fmt.Fprintf(w, "NOTE: kafka (kfake) is an in-process Go fake of Kafka on loopback, no disk, no replication: not a real cluster's figures\n")
	}
	fmt.Fprintf(w, "\nFixed rate (open loop, latency from the scheduled send time), medians\n\n")
	table(w, false, rateHead, r.rateRows())
	if rows := r.delayRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\nFixed rate, accepted to delivered, from the gateway's histogram: approximate within the bucket bounds (medians)\n\n")
		table(w, false, delayHead, rows)
	}
	fmt.Fprintf(w, "\nCPU during the throughput runs, medians (percent of one core; machine busy: percent of all cores)\n\n")
	table(w, false, cpuHead, r.cpuRows())
	fmt.Fprintf(w, "\nMemory store: %s\n", r.memLine())
	fmt.Fprintf(w, "\nTargets\n\n")
	table(w, false, []string{"target", "got", "want", "verdict"}, r.checkRows())
	fmt.Fprintf(w, "\nTargets of the front doors: fasthttp against nginx and its floors, net/http against caddy (medians of per-round ratios;\n"+
		"req/s: the target's over the reference's; CPU per request, all processes: the reference's over the target's)\n\n")
	table(w, false, goalHead, r.goalRows())
	for _, s := range r.warnings {
		fmt.Fprintln(w, "WARNING:", s)
	}
	for _, s := range r.errors {
		fmt.Fprintln(w, "ERROR:", s)
	}
}

func (r *report) markdown(w io.Writer, meta []string) {
	get := func(name string) string {
		for _, l := range meta {
			if k, v, ok := strings.Cut(l, ": "); ok && k == name {
				return v
			}
		}
		return "?"
	}
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "clawgate (its net/http and fasthttp front doors) next to Nginx, HAProxy and Caddy in front of the same upstream, on one machine over loopback. "+
		"Generated by `make bench` (`bench/run.sh`); every number below is from the run described here, "+
		"so rerun it on your own hardware before relying on it.\n\n")
	fmt.Fprintf(w, "## Machine and run\n\n")
	for _, l := range meta {
		k, v, _ := strings.Cut(l, ": ")
		fmt.Fprintf(w, "- **%s**: %s\n", k, v)
	}
	fmt.Fprintf(w, "- **Other work on the machine**: %s\n", r.loadLine())
	fmt.Fprintf(w, "\n## Throughput\n\n")
	fmt.Fprintf(w, "Medians of %d rounds. Each ratio is taken against Nginx in the same round (same case, "+
		"minutes apart at most), then the median of those ratios is shown, so slow drift of a shared machine "+
		"cancels out. For req/s higher is better, for latency lower is better. Latency here is wrk's: closed loop, "+
		"%s connections kept busy, so it is mostly queueing at saturation; see the fixed-rate table for latency "+
		"at a realistic load.\n\n", r.rounds, get("Connections"))
	if r.hasKafka() {
		fmt.Fprintf(w, "The queue targets' req/s are acknowledgements (see the delivery queue below); the Kafka queue's req/s are acknowledgements against kfake, "+
			"an in-process Go fake of Kafka on loopback with no disk and no replication, not a Kafka cluster.\n\n")
	}
	table(w, true, throughputHead, r.throughputRows())
	fmt.Fprintf(w, "\n## Per request: throughput and CPU against Nginx\n\n")
	fmt.Fprintf(w, "\"CPU per request (all)\" is the CPU time, from `/proc/PID/stat`, of every process that served the run's requests: "+
		"wrk's load (its loading of the request file, before the load starts, is measured on its main thread and left out), "+
		"the upstream, the proxy (Nginx's master and workers, HAProxy's master and workers, Caddy, clawgate) and, for the targets that use them, "+
		"Redis and kfake; divided by the requests completed. On a machine that wrk, the proxy and the upstream saturate together, "+
		"req/s follow it; unlike req/s it hardly depends on how the cores were shared, so it is the steadier comparison on a busy machine. "+
		"Both are shown as ratios to Nginx taken in the same round, then the median: req/s the target's over Nginx's, "+
		"CPU Nginx's over the target's, so higher is better on both. \"other tenants\" is the CPU other work on the machine took "+
		"during the run, in percent of one core (see the CPU section).\n\n")
	table(w, true, effHead, r.effRows())
	fmt.Fprintf(w, "\n## Against the floors\n\n%s.\n\n", floorDoc)
	if rows := r.floorRows(); len(rows) > 0 {
		table(w, true, floorHead, rows)
	} else {
		fmt.Fprintf(w, "Not measured (needs floor-forward and floor-answer in BENCH_TARGETS).\n")
	}
	fmt.Fprintf(w, "\n## The delivery queue: acknowledgements\n\n")
	fmt.Fprintf(w, "*clawgate (redis, queue)* is the Redis target's route with `delivery: queue`: it answers 202 as soon as the "+
		"event and its key's claim are stored in Redis, and 8 workers (the default) forward it to the upstream in the background. "+
		"Its req/s above are therefore acknowledgements per second, not deliveries. After each of its runs the script waits "+
		"(at most %s) until every accepted event was delivered, reading the admin listener's /metrics, so background delivery never "+
		"overlaps the next run; before each run it waits until the pre-flight delivery reached the upstream, so the load starts with the "+
		"workers consuming (on Kafka, once the consumer group's first join and partition assignment are done). The CPU figures cover the wrk run only, the workers' share during it included, so their \"proxy CPU "+
		"per request\" leaves out the deliveries still queued when the run ended. \"accepted\" counts events stored and "+
		"acknowledged (copies of an event still queued are answered 202 too but not counted), \"delivered\" the upstream's 2xx. "+
		"The delay is `webhook_queue_delivery_delay_seconds`, from acceptance to delivery, for every event of the run; its p50 and p99 are "+
		"interpolated linearly inside their bucket as Prometheus's `histogram_quantile` does, so they are approximate within the "+
		"bucket bounds shown. Under saturation it measures the backlog the workers had to catch up on.\n\n", get("Queue drain wait"))
	if r.hasKafka() {
		fmt.Fprintf(w, "*clawgate (kafka, queue)* is the same route with `queue.backend: kafka`: the 202 goes out once the broker "+
			"acknowledged the record (idempotent producer, `acks=all`) and the key was recorded in the same Redis (its ledger), and "+
			"the workers consume the route's topic (`bench.bench`, 8 partitions, created at start) and forward. The store is flushed "+
			"and a fresh kfake started before each of its runs, so no run sees another's topics, consumer groups or keys; "+
			"the same drain wait and histogram apply.\n\n")
		fmt.Fprintf(w, "> **Note.** %s.\n\n", kfakeNote)
	}
	if r.hasOrdered() {
		fmt.Fprintf(w, "*clawgate (redis, queue, ordered)* is the Redis queue's route plus per-object order, "+
			"`order: { by: \"json:data.object.id\" }`: the events of one object are delivered one at a time, in the order they were "+
			"acknowledged, other objects in parallel. It is fed the same deliveries (keys, 1 KiB bodies, JSON) with an object id at "+
			"`data.object.id`, %s of them (delivery i's is i mod their number), so the 8 workers always have many objects to work on; "+
			"the same flush, drain wait and histogram apply. Its goals are against the unordered queue in the same round, unique case: "+
			"acknowledgements per second at least %.1f times, delivered events per second at least %.1f times.\n\n", get("Ordered objects"), orderedAckGoal, orderedDeliveredGoal)
	}
	fmt.Fprintf(w, "\"delivered/s\" is the events a throughput run delivered (the pre-flight's left out) over the time from its first 202 to "+
		"its last delivery, taken as wrk's duration of the load plus the time from the end of the load until every accepted event was "+
		"delivered (\"drained after the run in\"; polled every 25 ms, so within about that): the rate the workers delivered at while the load ran and "+
		"until they caught up, measured the same way on every queue target (rounds that did not drain are left out).\n\n")
	if rows := r.queueRows(); len(rows) > 0 {
		table(w, true, queueHead, rows)
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "**%s**: %s.\n", queueLineName, r.queueLine())
	if r.hasOrdered() {
		fmt.Fprintf(w, "\n**%s**: %s.\n", orderedLineName, r.orderedLine())
	}
	if r.hasHistoryOff() {
		fmt.Fprintf(w, "\n**%s**: %s. *clawgate (redis, no history)* is clawgate (redis)'s config plus `dedupe: { history: 0 }`: "+
			"no key keeps a history, so the ratio is what writing each key's history (inside the same Lua script as the claim and the "+
			"finish: no extra round trip) costs.\n", historyLineName, r.historyLine())
	}
	if r.hasKafka() {
		fmt.Fprintf(w, "\n**%s**: %s.\n", kafkaLineName, r.kafkaLine())
	}
	fmt.Fprintf(w, "\n## Fixed rate: latency at %s\n\n", get("Fixed rate"))
	fmt.Fprintf(w, "`bench/cmd/rate` sends unique signed deliveries open loop at a fixed rate and measures each "+
		"request from the moment it was *scheduled* to be sent, so a stall is charged to every request it delayed "+
		"(no coordinated omission). Medians of the per-round values; \"p99 added\" is the target's p99 minus "+
		"direct's p99 in the same round, and the last column compares that with Nginx's.\n\n")
	table(w, true, rateHead, r.rateRows())
	if rows := r.delayRows(); len(rows) > 0 {
		fmt.Fprintf(w, "\nFor the queue targets the latency above is the time to the 202 (on Kafka: to kfake's acknowledgement and the key recorded). Accepted to delivered, from the "+
			"gateway's histogram: approximate within the bucket bounds (medians of the rounds, every event of the run counted, "+
			"the warm-up second and the pre-flight delivery included; read after the queue drained):\n\n")
		table(w, true, delayHead, rows)
	}
	fmt.Fprintf(w, "\n## Memory per finished key\n\n")
	fmt.Fprintf(w, "%s. Measured by `bench/cmd/memkey`, which fills `ledger.NewMemoryStore` directly with finished keys "+
		"(route-scoped UUID-shaped keys, a distinct SHA-256 fingerprint each, `application/json`, 100-byte bodies), "+
		"and reads the live heap after a full GC (`runtime.MemStats.HeapAlloc`) before and after; it counts the store "+
		"alone, not the gateway's bounded 10 s window of recent outcomes (`dedupe.cache_size`).\n\n", r.memLine())
	fmt.Fprintf(w, "## Targets\n\n")
	table(w, true, []string{"target", "got", "want", "verdict"}, r.checkRows())
	fmt.Fprintf(w, "\n### The front doors\n\n")
	fmt.Fprintf(w, "The fasthttp front door (`server: fasthttp`) against Nginx and against its floors (see above), and the default net/http one against Caddy "+
		"(a Go reverse proxy on the same net/http server). Each goal is checked on both ratios, medians of the per-round ratios: "+
		"req/s (the target's over the reference's) and CPU per request of all the processes (the reference's over the target's).\n\n")
	table(w, true, goalHead, r.goalRows())
	for _, s := range r.warnings {
		fmt.Fprintf(w, "\nWarning: %s\n", s)
	}
	for _, s := range r.errors {
		fmt.Fprintf(w, "\n**Error**: %s\n", s)
	}
	fmt.Fprintf(w, "\n## CPU\n\n")
	fmt.Fprintf(w, "CPU time of each process over the throughput run (from `/proc/PID/stat`), in percent of one core "+
		"(\"kafka (kfake)\": the kfake process of the Kafka target, which a real cluster would run on other machines); "+
		"\"machine busy\" is the whole machine's share of all its cores (from `/proc/stat`), and \"other tenants\" is what "+
		"the machine's busy time leaves after the bench's own processes: CPU that other work on the machine took during the run. "+
		"\"proxy CPU per request\" is the proxy's CPU time divided by the requests it served, and \"nginx's ÷ this\" Nginx's "+
		"figure over the target's in the same round (higher: the proxy is cheaper than Nginx). "+
		"wrk's figure is its load only: its main thread's loading of the request file is left out.\n\n")
	table(w, true, cpuHead, r.cpuRows())
	fmt.Fprintf(w, "\n## Reading the results\n\n%s\n", reading)
	fmt.Fprintf(w, "\n## Method\n\n%s\n", method(get, r))
	fmt.Fprintf(w, "\n## Reproduce\n\n```sh\nmake bench                      # the full run; writes this file\nBENCH_QUICK=1 bench/run.sh      # smoke run: 1 round of 2 s; writes no file unless BENCH_DOC=PATH\nROUNDS=5 DURATION=10 CONNECTIONS=128 bench/run.sh   # knobs\nBENCH_RESULTS=run.txt make bench # also keeps the raw lines (run.txt, .meta, .scale) to render again\nbench/profile.sh                # a CPU profile of one case (SERVER, STORE, CASE, HISTORY, DELIVERY)\nbench/tail.sh                   # what the fixed-rate tail is made of on a busy machine\n```\n\n"+
		"`bench/run.sh` installs what is missing (`wrk`, `nginx-light`, `haproxy`, `caddy`, `redis-server`) with `scripts/ensure-pkg.sh`, "+
		"builds clawgate and the tools in `bench/cmd/` into a temp dir, starts its own upstream, Nginx (its own config, "+
		"pid file, logs and temp paths; never the system's), HAProxy and Caddy (their own configs and logs in the temp dir; "+
		"Caddy with no admin endpoint and no automatic HTTPS, so a packaged caddy service on :80, :443 and :2019 is no conflict), "+
		"`redis-server` and, for the Kafka target, kfake "+
		"(`bench/cmd/kfake`) on ephemeral loopback ports, and stops them all when it exits. Every load run has a fixed duration and targets 127.0.0.1 only.\n")
}

const reading = `Everything runs on one machine: wrk, the proxy under test, the upstream and Redis share the same cores, so
a run is a contest for CPU. With few cores the throughput of a target is set by how much CPU each request costs
all those processes together, not by a limit inside the proxy: the CPU table shows each one's share, and "CPU per
request" (all the processes, in the per-request table) and "proxy CPU per request" (the proxy alone, in the CPU table)
are the figures to compare across targets (and across machines). The direct row is the ceiling of this
machine for the upstream and wrk alone. Latency in the throughput table is measured at saturation (every connection
always busy), so it is queueing; the fixed-rate table is the one that says what a proxy adds to a request at a
normal load.`

func method(get func(string) string, r *report) string {
	var b strings.Builder
	lb := math.NaN()
	if row := r.rows["unique"]["clawgate-memory"]; row != nil {
		lb = row.logBytes
	}
	logNote := "clawgate's access log (one JSON line per request, on stderr) goes to a file in the temp dir, as users run it"
	if !math.IsNaN(lb) && lb > 0 {
		logNote += fmt.Sprintf(" (%.0f bytes per request: a formatted line and one write(2) each)", lb)
	}
	logNote += "; Nginx's access log does the same (combined format), HAProxy's its standard HTTP log line (`option httplog`; it logs only to syslog or " +
		"to a file descriptor, so to its stdout, appended to a file) and Caddy's its JSON access lines (`log` with `output file`)"
	if get("Access logs") == "null" {
		logNote = "Access logs are off (BENCH_LOGS=null): clawgate's go to /dev/null, Nginx's `access_log off`, no log line in HAProxy's and Caddy's configs"
	}
	fmt.Fprintf(&b, `- **Upstream**: bench/cmd/upstream, a fasthttp server answering 200 with {"ok":true} and logging nothing, so it is never the bottleneck. Every target reaches this same process.
- **Targets**: (a) *direct* to the upstream; (b) *nginx* %s: `+"`proxy_pass`"+` to an upstream block with `+"`keepalive 64`"+`, HTTP/1.1 and an empty Connection header to the upstream, `+"`worker_processes auto`"+`, the default access log (combined format, to a file), keepalive_requests raised so no side reconnects mid-run (clawgate never closes a keep-alive connection); (c) *haproxy* %s: one frontend and one backend server (bench/haproxy.cfg.tmpl), `+"`mode http`"+`, keep-alive on both sides with `+"`http-reuse always`"+` (idle upstream connections shared by every client connection), `+"`nbthread`"+` the number of CPUs, timeouts of 120 s that no run meets, run in master-worker mode in the foreground (`+"`haproxy -W -db`"+`; its CPU is the master's and the workers'); (d) *caddy* %s: `+"`reverse_proxy`"+` to the upstream (bench/Caddyfile.tmpl) with keep-alive to it (64 idle connections kept), `+"`admin off`"+`, `+"`auto_https off`"+`, only its own loopback port; (e) *clawgate* on the memory store; (f) *clawgate* on Redis (%s, own process on an ephemeral port, `+"`--save \"\" --appendonly no`"+`, FLUSHALL before every run); (g) *clawgate fasthttp (memory)* and *clawgate fasthttp (redis)*: the configs of (e) and (f) plus `+"`server: fasthttp`"+`, the front door on fasthttp's server instead of net/http's (FLUSHALL before every Redis run too); (h) *clawgate (redis, queue)*: the same route on the same Redis with `+"`delivery: queue`"+` (default 8 workers) and `+"`queue.max_depth: 10000000`"+`, far above what a run sends, so no run meets the 503 of a full queue (FLUSHALL before every run too), and *clawgate (redis, queue, ordered)*, the same route plus per-object order, `+"`order: { by: \"json:data.object.id\" }`"+` (`+"`stale`"+` unset, `+"`on_dead: continue`"+`), fed the ordered request file (see Deliveries; FLUSHALL before every run too); (i) *clawgate (kafka, queue)*: the queue route of (h) with `+"`queue.backend: kafka`"+` (`+"`brokers`"+` one kfake broker, `+"`topic_prefix: bench.`"+`, `+"`partitions: 8`"+`, every other Kafka setting at its default), the keys' ledger on the same Redis; FLUSHALL and a fresh kfake (%s) before every run. clawgate is built once from this checkout (`+"`go build ./cmd/clawgate`"+`), GOMAXPROCS left at its default, one route: generic hmac (HMAC-SHA256 of the raw body, hex, prefix sha256=) and `+"`idempotency: {required: true, key: [\"json:id\"]}`"+` (the signed body's id), every other setting at its default (10 s window of 100,000 outcomes, 24 h retention). %s.
- **Deliveries**: bench/cmd/presign signs %s deliveries up front: 1 KiB JSON bodies carrying a distinct 36-byte UUID-shaped key, each with its own X-Signature. The file stores the body template once and one "key signature" line per delivery (%s).%s bench/wrk/deliveries.lua loads it into each wrk thread and rebuilds each request with `+"`wrk.format`"+`; thread t takes deliveries t, t+T, t+2T… so threads never share a key.
- **Cases**: *unique*: every request a new key, so clawgate verifies, claims, forwards and stores each one. clawgate is restarted (fresh memory store; Redis flushed) before every run, so a key can only repeat if a run outlasts the file: the Lua script counts that ("wrapped") and the report fails the run for clawgate. *duplicates*: one key, primed with a single delivery before the run, then replayed from the local window by every request. *mix*: every 5th request (20 %%) repeats a key the same wrk thread sent 1,000 to 5,000 requests earlier (finished by then, within the 10 s window); the other 80 %% are new keys. Direct, Nginx, HAProxy and Caddy get exactly the same requests and simply forward them.
- **Load**: %s, %s connections over %s threads, %s per run, no warm-up beyond clawgate's start; req/s and p50/p99 come from wrk's own counters via the script's done(); CPU from `+"`/proc`"+` around the wrk run, divided by the requests it completed. Any answer with status >= 400 or socket error fails the run (401 = signing broken, 409 = a key still in flight, 422 = key reused). Rounds: %s; in each round the cases run in turn; the target order rotates by one per round, so no target is always first after an idle pause, and runs backwards in every second round, so two targets a round compares run in both orders over the rounds.
- **Fixed rate**: bench/cmd/rate, %s for %s per target (first second not recorded), up to 64 connections, unique keys, %s round(s); clawgate restarted before each. On the queue targets the script then waits for the queue to drain and reads the delay histogram from /metrics (bench/cmd/promq).
- **Floors**: bench/cmd/floor, %s. A fresh process on an ephemeral loopback port before every run, as clawgate, with a pre-flight request; GOMAXPROCS at its default, no log. floor (forward) runs every case and the fixed rate; floor (answer) the duplicates case only.
- **Kafka**: kfake is not Kafka. %s.
- **Noise**: the machine is shared. The load average at the start and end of the run and what other work took during the runs are listed above; the CPU table shows how busy the machine was during each run.
`, get("nginx"), get("haproxy"), get("caddy"), get("redis"), kfakeMethod(get), logNote, get("Deliveries"), get("Request file"), orderedMethod(get), get("wrk"), get("Connections"), get("Threads"), get("Duration"), get("Rounds"), get("Fixed rate"), get("Fixed-rate duration"), get("Fixed-rate rounds"), floorMethod, kfakeNote)
	return b.String()
}

// orderedMethod is the Deliveries line's sentence on the ordered queue's
// request file, from the meta lines "Ordered objects" and "Ordered request
// file"; empty when the ordered queue did not run.
func orderedMethod(get func(string) string) string {
	if get("Ordered objects") == "?" {
		return ""
	}
	return fmt.Sprintf(" The ordered queue is fed a second file of the same deliveries (keys, signing, 1 KiB) whose bodies also carry an object id "+
		"at `data.object.id`, %s objects, delivery i's being i mod their number (`presign -objects`): the template has a third part and every line "+
		"the object id as a third field (%s).", get("Ordered objects"), get("Ordered request file"))
}

// kfakeMethod names the kfake the run used, from the meta line "Kafka".
func kfakeMethod(get func(string) string) string {
	if v := get("Kafka"); v != "?" {
		return "bench/cmd/kfake: " + v
	}
	return "bench/cmd/kfake, franz-go's in-process fake of Kafka"
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}
