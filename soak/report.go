package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// killRec is one SIGKILL (or SIGTERM) of a gateway instance; At is when
// the process was seen dead.
type killRec struct {
	Inst   int
	At     time.Time
	Signal string // "SIGKILL" or "SIGTERM"
}

// restartRec is one Redis restart.
type restartRec struct {
	Signal           string
	Stopped, Started time.Time
}

// double is an accepted copy of an event the upstream had accepted before.
type double struct {
	ID         string
	Prev, Next acceptance
	// Kill is set when the double is inside a kill window: the instance
	// that forwarded Prev was SIGKILLed after the upstream received Prev and
	// no later than lock_ttl after the upstream's 200 for it.
	Kill *killRec
	// Outage is set when the double is inside a Redis outage window: the
	// upstream's 200 for Prev came while Redis was down, and Redis was not
	// reachable again before Prev's lock ran out (see classifyDoubles).
	Outage *restartRec
}

// Excused reports whether a fault the gateway does not promise to survive
// explains the double.
func (d double) Excused() bool { return d.Kill != nil || d.Outage != nil }

// finishMargin and reconnect: a finished key is recorded in the
// background until finishMargin before its lock's expiry (dedupe's own
// margin); the gateway's Redis client, once its dials fail, tries again
// once a second (go-redis's pool), so it reaches a Redis that came back
// up to about reconnect later.
const (
	finishMargin = time.Second
	reconnect    = 1500 * time.Millisecond
)

// classifyDoubles finds every accepted copy beyond an event's first and
// says whether a kill explains it. Copies of one event are taken in the
// order of their 200s; each is judged against the one just before it.
//
// A double is inside a kill window when the earlier copy's instance was
// SIGKILLed at a time t with prev.Recv <= t <= prev.At + lockTTL. The brief
// is "t_accept <= t <= t_accept + lock_ttl"; the window also starts at the
// copy's arrival because an instance killed between the upstream's receipt
// and its 200 cannot have recorded that 200 either (the kill time is when the
// process was seen dead, so a 200 written just after the death has
// t_accept > t).
//
// A double is inside a Redis outage window when the upstream's 200 for the
// earlier copy came while Redis was down (stopped, not yet started again)
// and the gateway could not reach Redis again (reconnect after its start)
// before the earlier copy's lock ran out (its arrival + lock_ttl, less
// finishMargin): "Redis unreachable for the rest of the lock's life", which
// the guarantees leave out. Nothing else is let off.
func classifyDoubles(acc []acceptance, kills []killRec, restarts []restartRec, lockTTL time.Duration) []double {
	byID := map[string][]acceptance{}
	for _, a := range acc {
		byID[a.ID] = append(byID[a.ID], a)
	}
	var out []double
	for id, list := range byID {
		if len(list) < 2 {
			continue
		}
		sort.SliceStable(list, func(i, j int) bool { return list[i].At.Before(list[j].At) })
		for j := 1; j < len(list); j++ {
			d := double{ID: id, Prev: list[j-1], Next: list[j]}
			for k := range kills {
				kr := kills[k]
				if kr.Inst == d.Prev.Inst && !kr.At.Before(d.Prev.Recv) && !kr.At.After(d.Prev.At.Add(lockTTL)) {
					d.Kill = &kr
					break
				}
			}
			for k := range restarts {
				rr := restarts[k]
				down := !d.Prev.At.Before(rr.Stopped) && (rr.Started.IsZero() || d.Prev.At.Before(rr.Started))
				if down && (rr.Started.IsZero() || !rr.Started.Add(reconnect).Before(d.Prev.Recv.Add(lockTTL-finishMargin))) {
					d.Outage = &rr
					break
				}
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Next.At.Before(out[j].Next.At) })
	return out
}

// Report is the outcome of one soak run.
type Report struct {
	Opts    Options
	T0      time.Time
	Runtime time.Duration
	// Aborted says why the run did not finish normally (hard deadline,
	// interrupt, a process that would not come back); "" when it did.
	Aborted string

	Events, Deliveries, Retries, Duplicates, Failovers, Replayed int64
	ConnErrs, Timeouts, GaveUp                                   int64
	Status                                                       map[int]int64

	Received, Upstream500, UpstreamHangs, Gone, WriteFail, HangMaxed, BadRequest int64

	Kills          []killRec
	RedisRestarts  []restartRec
	BrokerRestarts []restartRec // of the in-process Kafka broker
	PlannedKills   int
	PlannedRestart int
	PlannedBroker  int

	AcceptedCopies, AcceptedEvents int
	Acknowledged, Lost             int
	Undelivered, Wrong, Refused    int
	Inside, Outside                []double

	LostIDs, UndeliveredIDs []string // with the last answer, first few

	GatewayErrors, GatewayWarns int
	LogMessages                 map[string]int // "LEVEL msg" -> count
	Forensics                   []string       // log lines about outside doubles and lost events
	KeptDir                     string
}

// Failed reports whether the run found a fault in the gateway or could not
// do what it set out to do.
func (r *Report) Failed() bool {
	return r.Aborted != "" || r.Lost > 0 || r.Undelivered > 0 || len(r.Outside) > 0 ||
		r.Wrong > 0 || r.Refused > 0 || r.BadRequest > 0 ||
		len(r.Kills) < r.PlannedKills || len(r.RedisRestarts) < r.PlannedRestart ||
		len(r.BrokerRestarts) < r.PlannedBroker
}

func (r *Report) rel(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(r.T0).Seconds()) }

// Write prints the report, one figure per line, then the details of what
// went wrong.
func (r *Report) Write(w io.Writer) {
	o := r.Opts
	fmt.Fprintf(w, "soak: seed %d, 2 instances on one redis, lock_ttl %v, route timeout %v, window %v, %d in flight\n",
		o.Seed, lockTTL, routeTimeout, dedupeWindow, o.Concurrency)
	if o.Queue {
		on := "Redis Streams"
		if o.kafka() {
			on = "Kafka (kfake, one broker in the soak process; the keys' ledger on the Redis)"
		}
		fmt.Fprintf(w, "mode: delivery: queue on %s; the 202 is the acknowledgement, drained for up to %v after the traffic\n", on, o.DrainWait)
	}
	fmt.Fprintf(w, "events %d\n", r.Events)
	fmt.Fprintf(w, "deliveries %d (retries %d, duplicates %d, load-balancer failovers %d)\n",
		r.Deliveries, r.Retries, r.Duplicates, r.Failovers)
	fmt.Fprintf(w, "answers: %s, connection errors %d, client timeouts %d\n", r.statusLine(), r.ConnErrs, r.Timeouts)
	fmt.Fprintf(w, "faults: upstream 500s %d, upstream hangs %d, gateway kills %d, redis restarts %d\n",
		r.Upstream500, r.UpstreamHangs, len(r.Kills), len(r.RedisRestarts))
	var ks []string
	for _, k := range r.Kills {
		ks = append(ks, fmt.Sprintf("instance %d %s at %s", k.Inst, orDefault(k.Signal, "SIGKILL"), r.rel(k.At)))
	}
	fmt.Fprintf(w, "gateway kills at: %s\n", orNone(ks))
	var rs []string
	for _, x := range r.RedisRestarts {
		s := fmt.Sprintf("%s at %s", x.Signal, r.rel(x.Stopped))
		if !x.Started.IsZero() {
			s += fmt.Sprintf(", up again at %s", r.rel(x.Started))
		}
		rs = append(rs, s)
	}
	fmt.Fprintf(w, "redis restarts at: %s\n", orNone(rs))
	if o.kafka() {
		var bs []string
		for _, x := range r.BrokerRestarts {
			s := fmt.Sprintf("stopped at %s", r.rel(x.Stopped))
			if !x.Started.IsZero() {
				s += fmt.Sprintf(", up again at %s", r.rel(x.Started))
			}
			bs = append(bs, s)
		}
		fmt.Fprintf(w, "kafka broker restarts: %s\n", orNone(bs))
	}
	fmt.Fprintf(w, "upstream: received %d copies, accepted %d copies of %d events (hung-up before the 200 %d, failed writes %d)\n",
		r.Received, r.AcceptedCopies, r.AcceptedEvents, r.Gone, r.WriteFail)
	fmt.Fprintf(w, "acknowledged %d\n", r.Acknowledged)
	fmt.Fprintf(w, "lost %d\n", r.Lost)
	fmt.Fprintf(w, "undelivered %d\n", r.Undelivered)
	fmt.Fprintf(w, "wrong answers %d\n", r.Wrong)
	fmt.Fprintf(w, "refused deliveries %d\n", r.Refused)
	fmt.Fprintf(w, "doubles inside kill windows %d\n", len(r.Inside)) // a gateway killed, or Redis down, before the 200 was recorded
	fmt.Fprintf(w, "doubles outside kill windows %d\n", len(r.Outside))
	fmt.Fprintf(w, "gateway log: %d errors, %d warnings\n", r.GatewayErrors, r.GatewayWarns)
	fmt.Fprintf(w, "runtime %.1fs\n", r.Runtime.Seconds())
	if r.Aborted != "" {
		fmt.Fprintf(w, "ABORTED: %s\n", r.Aborted)
	}
	if r.Failed() {
		fmt.Fprintln(w, "result: FAIL")
	} else {
		fmt.Fprintln(w, "result: PASS")
	}
	r.writeDetails(w)
}

func (r *Report) statusLine() string {
	var codes []int
	for c := range r.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var parts []string
	for _, c := range codes {
		s := fmt.Sprintf("%d %d", c, r.Status[c])
		if c == 200 {
			s += fmt.Sprintf(" (replayed %d)", r.Replayed)
		}
		parts = append(parts, s)
	}
	return orNone(parts)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

func (r *Report) writeDetails(w io.Writer) {
	const maxList = 10
	failed := r.Failed()
	if len(r.Kills) < r.PlannedKills || len(r.RedisRestarts) < r.PlannedRestart || len(r.BrokerRestarts) < r.PlannedBroker {
		fmt.Fprintf(w, "\nfaults not injected as planned: %d of %d kills, %d of %d redis restarts, %d of %d kafka broker restarts\n",
			len(r.Kills), r.PlannedKills, len(r.RedisRestarts), r.PlannedRestart, len(r.BrokerRestarts), r.PlannedBroker)
	}
	if r.HangMaxed > 0 || r.BadRequest > 0 {
		fmt.Fprintf(w, "\nupstream oddities: %d hangs the gateway never hung up on, %d copies without an event id\n", r.HangMaxed, r.BadRequest)
	}
	show := func(title string, ds []double) {
		if len(ds) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s (%d; copies by time of the upstream's 200):\n", title, len(ds))
		for i, d := range ds {
			if i == maxList {
				fmt.Fprintf(w, "  ... %d more\n", len(ds)-maxList)
				break
			}
			fmt.Fprintf(w, "  %s: instance %d accepted at %s (received %s, request %s, attempt %s); again via instance %d at %s (request %s, attempt %s)",
				d.ID, d.Prev.Inst, r.rel(d.Prev.At), r.rel(d.Prev.Recv), d.Prev.ReqID, d.Prev.Attempt,
				d.Next.Inst, r.rel(d.Next.At), d.Next.ReqID, d.Next.Attempt)
			if d.Outage != nil {
				fmt.Fprintf(w, "; Redis down from %.3fs before that 200 until %.3fs after it (%s)", d.Prev.At.Sub(d.Outage.Stopped).Seconds(), d.Outage.Started.Sub(d.Prev.At).Seconds(), d.Outage.Signal)
			}
			if d.Kill != nil {
				fmt.Fprintf(w, "; instance %d killed %.3fs after that 200", d.Kill.Inst, d.Kill.At.Sub(d.Prev.At).Seconds())
			} else {
				fmt.Fprintf(w, "; %s", r.nearestFaults(d.Prev.At))
			}
			fmt.Fprintln(w)
		}
	}
	show("doubles outside kill windows", r.Outside)
	if r.Opts.Verbose || failed {
		show("doubles inside kill windows", r.Inside)
	}
	if len(r.LostIDs) > 0 {
		fmt.Fprintf(w, "\nlost (acknowledged, never accepted):\n  %s\n", strings.Join(r.LostIDs, "\n  "))
	}
	if len(r.UndeliveredIDs) > 0 {
		fmt.Fprintf(w, "\nundelivered (last answer):\n  %s\n", strings.Join(r.UndeliveredIDs, "\n  "))
	}
	if (failed || r.Opts.Verbose) && len(r.LogMessages) > 0 {
		type mc struct {
			m string
			n int
		}
		var ms []mc
		for m, n := range r.LogMessages {
			ms = append(ms, mc{m, n})
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].n > ms[j].n || ms[i].n == ms[j].n && ms[i].m < ms[j].m })
		fmt.Fprintln(w, "\ngateway log warnings and errors (count, level, message):")
		for _, m := range ms {
			fmt.Fprintf(w, "  %6d %s\n", m.n, m.m)
		}
	}
	if len(r.Forensics) > 0 {
		fmt.Fprintln(w, "\ngateway log lines for the first outside doubles, lost and undelivered events (instance: line):")
		for _, l := range r.Forensics {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if r.KeptDir != "" {
		what := "configs, gateway logs, redis log and AOF"
		if r.Opts.kafka() {
			what += ", kafka data"
		}
		fmt.Fprintf(w, "\nkept: %s (%s)\n", r.KeptDir, what)
	}
}

// nearestFaults names the faults around t, to help read an unexplained double.
func (r *Report) nearestFaults(t time.Time) string {
	var parts []string
	for _, k := range r.Kills {
		parts = append(parts, fmt.Sprintf("kill of instance %d %+.3fs", k.Inst, k.At.Sub(t).Seconds()))
	}
	for _, x := range r.RedisRestarts {
		s := fmt.Sprintf("redis %s %+.3fs", x.Signal, x.Stopped.Sub(t).Seconds())
		if !x.Started.IsZero() {
			s += fmt.Sprintf(" (up %+.3fs)", x.Started.Sub(t).Seconds())
		}
		parts = append(parts, s)
	}
	for _, x := range r.BrokerRestarts {
		s := fmt.Sprintf("kafka broker stop %+.3fs", x.Stopped.Sub(t).Seconds())
		if !x.Started.IsZero() {
			s += fmt.Sprintf(" (up %+.3fs)", x.Started.Sub(t).Seconds())
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no fault injected"
	}
	return "faults relative to the earlier 200: " + strings.Join(parts, ", ")
}

// scanLogs counts the gateways' warnings and errors by message and collects
// the lines that mention any of the needles (event ids, request ids).
func scanLogs(paths []string, needles []string, maxPerNeedle int) (errs, warns int, msgs map[string]int, hits map[string][]string) {
	msgs = map[string]int{}
	hits = map[string][]string{}
	for inst, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "{") {
				var rec struct {
					Level string `json:"level"`
					Msg   string `json:"msg"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil {
					switch rec.Level {
					case "ERROR":
						errs++
						msgs["ERROR "+rec.Msg]++
					case "WARN":
						warns++
						msgs["WARN "+rec.Msg]++
					}
				}
			}
			for _, n := range needles {
				if n != "" && strings.Contains(line, n) && len(hits[n]) < maxPerNeedle {
					hits[n] = append(hits[n], fmt.Sprintf("%d: %s", inst, line))
					break
				}
			}
		}
		f.Close()
	}
	// JSON lines start with their time: sorting after the instance prefix
	// puts both instances' lines in time order.
	for _, h := range hits {
		sort.SliceStable(h, func(i, j int) bool { return h[i][3:] < h[j][3:] })
	}
	return errs, warns, msgs, hits
}
