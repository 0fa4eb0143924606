package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/verify"
)

// The gateways' settings. A lock must outlive the upstream's timeout with
// room to settle the key: routeTimeout + 3s <= lockTTL.
const (
	lockTTL      = 4 * time.Second
	routeTimeout = 1 * time.Second
	dedupeWindow = 2 * time.Second
	routePath    = "/webhook/soak"
	soakSecret   = "soak-secret-0123456789"
)

// Options sets the size, faults and pace of a run.
type Options struct {
	Events        int
	Seed          uint64
	Duration      time.Duration // hard deadline for the whole run, build included
	Kills         int           // gateway SIGKILLs
	Terms         int           // gateway SIGTERMs (a drain, then a restart)
	RedisRestarts int
	Rate          float64 // events started per second
	Concurrency   int     // deliveries in flight at most

	MaxCopies      int           // each event is delivered 1..MaxCopies times
	DupSpread      time.Duration // a duplicate starts up to this long after the first delivery
	MaxTries       int           // per delivery
	DeliveryBudget time.Duration // per delivery, first try to last
	BackoffMin     time.Duration
	BackoffMax     time.Duration
	ClientTimeout  time.Duration
	P500, PHang    float64 // upstream: share of copies answered 500, hung

	// Server is the gateways' front door, as the config's server key
	// says it: "" (net/http) or "fasthttp".
	Server config.ServerKind
	// Queue runs the route with delivery: queue on Redis Streams: the
	// provider's acknowledgement is the 202, and the run waits up to
	// DrainWait after the traffic for the queue to deliver every
	// acknowledged event (one still undelivered then counts as lost).
	Queue     bool
	DrainWait time.Duration
	// QueueBackend is the queue route's backend with Queue: "" or
	// "redis" (Redis Streams, on the one Redis of the keys) or "kafka"
	// (kfake, one Kafka broker inside the soak process on a loopback
	// port; the keys' ledger stays on the Redis the restarts hit).
	QueueBackend string
	// KafkaRestarts are restarts of the in-process Kafka broker (kafka
	// only), down 1-2 s each: a clean stop that saves its data, not a
	// SIGKILL, which would kill the soak with it.
	KafkaRestarts int

	Short   bool
	Verbose bool
	Keep    bool      // keep the temp dir (logs, configs) and say where
	Log     io.Writer // progress and fault lines with Verbose; nil: discard
}

// Preset returns the defaults: the full run for `make soak`, or the short
// one the Go test runs.
func Preset(short bool) Options {
	o := Options{
		Events: 10000, Seed: 1, Duration: 5 * time.Minute, Kills: 3, RedisRestarts: 2,
		Rate: 125, Concurrency: 64,
		MaxCopies: 5, DupSpread: 6 * time.Second, MaxTries: 15, DeliveryBudget: 30 * time.Second,
		BackoffMin: 100 * time.Millisecond, BackoffMax: 2 * time.Second, ClientTimeout: 10 * time.Second,
		P500: 0.10, PHang: 0.03,
	}
	if short {
		o.Short = true
		o.Events, o.Rate, o.Kills, o.RedisRestarts, o.Duration = 1500, 100, 1, 1, 100*time.Second
	}
	return o
}

func (o Options) validate() error {
	switch {
	case routeTimeout+3*time.Second > lockTTL:
		return errors.New("route timeout + 3s must not exceed lock_ttl")
	case o.Events < 1:
		return errors.New("-events must be at least 1")
	case o.Rate <= 0:
		return errors.New("-rate must be positive")
	case o.Concurrency < 1:
		return errors.New("-concurrency must be at least 1")
	case o.Kills < 0 || o.Terms < 0 || o.RedisRestarts < 0 || o.KafkaRestarts < 0:
		return errors.New("-kills, -terms, -redis-restarts and -kafka-restarts must not be negative")
	case o.QueueBackend != "" && o.QueueBackend != "redis" && o.QueueBackend != "kafka":
		return fmt.Errorf("-queue-backend %q: want redis or kafka", o.QueueBackend)
	case o.QueueBackend != "" && !o.Queue:
		return errors.New("a queue backend needs the queue mode (-queue)")
	case o.KafkaRestarts > 0 && o.QueueBackend != "kafka":
		return errors.New("-kafka-restarts needs -queue-backend kafka")
	case o.Duration <= 0:
		return errors.New("-duration must be positive")
	case o.MaxCopies < 1 || o.MaxTries < 1:
		return errors.New("copies and tries must be at least 1")
	}
	return nil
}

// kafka reports whether the run's queue is on Kafka.
func (o Options) kafka() bool { return o.Queue && o.QueueBackend == "kafka" }

func (o Options) logf(format string, args ...any) {
	if o.Verbose && o.Log != nil {
		fmt.Fprintf(o.Log, "soak: "+format+"\n", args...)
	}
}

// fault is one planned kill, Redis restart or Kafka broker restart, at an
// offset from the start.
type fault struct {
	at     time.Duration
	kill   bool
	broker bool // a restart of the in-process Kafka broker
	inst   int
	sig    syscall.Signal
	down   time.Duration
}

// planFaults spreads the kills and restarts, alternating, over the middle
// of the time events are started in, so traffic flows around each. The
// Kafka broker restarts go evenly between them; without any the plan is
// the one a seed always gave.
func planFaults(o Options) []fault {
	rng := rand.New(rand.NewPCG(o.Seed, 0x6661756c))
	period := time.Duration(float64(o.Events) / o.Rate * float64(time.Second))
	const (
		kindKill = iota
		kindRedis
		kindBroker
	)
	var kinds []int
	k, r := 0, 0
	for i := 0; i < o.Kills+o.Terms+o.RedisRestarts; i++ {
		if (i%2 == 0 && k < o.Kills+o.Terms) || r >= o.RedisRestarts {
			kinds = append(kinds, kindKill)
			k++
		} else {
			kinds = append(kinds, kindRedis)
			r++
		}
	}
	m, l := o.KafkaRestarts, len(kinds)
	for j := m - 1; j >= 0; j-- { // from the last, so earlier positions hold
		pos := ((j+1)*l + m) / (m + 1) // rounded up
		kinds = append(kinds[:pos], append([]int{kindBroker}, kinds[pos:]...)...)
	}
	n := len(kinds)
	first := rng.IntN(2)
	var fs []fault
	k, r = 0, 0
	for i, kind := range kinds {
		// Evenly spaced, each moved by up to a fifth of its slot.
		at := time.Duration(float64(period) * (0.1 + 0.8*(float64(i)+0.5+0.4*(rng.Float64()-0.5))/float64(n)))
		switch kind {
		case kindKill:
			// The SIGKILLs first, then the SIGTERMs.
			sig := syscall.SIGKILL
			if k >= o.Kills {
				sig = syscall.SIGTERM
			}
			fs = append(fs, fault{at: at, kill: true, inst: (first + k) % 2, sig: sig,
				down: 800*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))})
			k++
		case kindRedis:
			sig := syscall.SIGKILL
			if r%2 == 1 {
				sig = syscall.SIGTERM
			}
			fs = append(fs, fault{at: at, sig: sig,
				down: time.Second + time.Duration(rng.Int64N(int64(time.Second)))})
			r++
		default:
			fs = append(fs, fault{at: at, broker: true,
				down: time.Second + time.Duration(rng.Int64N(int64(time.Second)))})
		}
	}
	return fs
}

// Run runs one soak and returns its report. An error means the soak could
// not be set up (no redis-server, the build or the config check failed);
// everything it started is stopped and its temp dir removed before it
// returns, on every path.
func Run(parent context.Context, o Options) (rep *Report, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(parent, o.Duration)
	defer cancel()

	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server is not on PATH: `make test` installs it (scripts/ensure-pkg.sh), or apt-get install -y redis-server")
	}
	tmp, err := os.MkdirTemp("", "clawgate-soak-")
	if err != nil {
		return nil, err
	}
	// Deferred in this order, run in reverse: children first, then the dir.
	defer func() {
		if o.Keep && rep != nil {
			rep.KeptDir = tmp
			return
		}
		os.RemoveAll(tmp)
	}()
	var stopMu sync.Mutex
	var stops []func()
	onExit := func(f func()) { stopMu.Lock(); stops = append(stops, f); stopMu.Unlock() }
	defer func() {
		stopMu.Lock()
		defer stopMu.Unlock()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()

	// 1. The binary.
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(tmp, "clawgate")
	o.logf("building %s", bin)
	build := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/clawgate")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/clawgate: %v\n%s", err, out)
	}

	// 2. Redis, persistent.
	rdir := filepath.Join(tmp, "redis")
	if err := os.Mkdir(rdir, 0o700); err != nil {
		return nil, err
	}
	redis, err := startRedis(ctx, rdir)
	if err != nil {
		return nil, err
	}
	onExit(func() { redis.stop(syscall.SIGTERM) })
	o.logf("redis-server on %s (appendonly, appendfsync always)", redis.addr)

	// 2b. Kafka, for a queue on Kafka.
	var kafka *kafkaBroker
	if o.kafka() {
		kdir := filepath.Join(tmp, "kafka")
		if kafka, err = startKafka(kdir); err != nil {
			return nil, err
		}
		onExit(func() { kafka.stop() })
		o.logf("kafka (kfake, in this process) on %s, data in %s", kafka.addr(), kdir)
	}

	// 3. The upstream.
	up, err := startUpstream(o.Seed, o.P500, o.PHang, routeTimeout+3*time.Second)
	if err != nil {
		return nil, err
	}
	onExit(up.close)

	// 4. Two gateways, each checked with `clawgate check`.
	var gws [2]*gatewayProc
	var urls [2]string
	var signer verify.Signer
	for i := range gws {
		lp, err := pickPort()
		if err != nil {
			return nil, err
		}
		ap, err := pickPort()
		if err != nil {
			return nil, err
		}
		g := &gatewayProc{
			idx: i, bin: bin,
			cfgPath: filepath.Join(tmp, fmt.Sprintf("gateway-%d.yaml", i)),
			listen:  fmt.Sprintf("127.0.0.1:%d", lp),
			admin:   fmt.Sprintf("127.0.0.1:%d", ap),
			logPath: filepath.Join(tmp, fmt.Sprintf("gateway-%d.log", i)),
		}
		kafkaAddr := ""
		if kafka != nil {
			kafkaAddr = kafka.addr()
		}
		gcfg := gatewayConfig(o.Server, g.listen, g.admin, redis.addr, up.addrs[i], o.Queue, kafkaAddr)
		if err := os.WriteFile(g.cfgPath, []byte(gcfg), 0o600); err != nil {
			return nil, err
		}
		out, err := exec.CommandContext(ctx, bin, "check", "-config", g.cfgPath).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("clawgate check -config %s failed: %v\n%s\n--- config:\n%s", g.cfgPath, err, out, gcfg)
		}
		if i == 0 {
			cfg, err := config.Load(g.cfgPath)
			if err != nil {
				return nil, err
			}
			rt := &cfg.Routes[0]
			if rt.Timeout+3*time.Second > cfg.Dedupe.LockTTL {
				return nil, fmt.Errorf("config: timeout %v + 3s exceeds lock_ttl %v", rt.Timeout, cfg.Dedupe.LockTTL)
			}
			if signer, err = verify.NewSigner(rt.Verify, verify.Env{Dir: cfg.Dir}, nil); err != nil {
				return nil, fmt.Errorf("signer: %w", err)
			}
		}
		gws[i], urls[i] = g, "http://"+g.listen+routePath
		onExit(g.stop)
	}
	t0 := time.Now()
	for _, g := range gws {
		if err := g.start(ctx, t0, true); err != nil {
			return nil, err
		}
		o.logf("gateway %d on %s (admin %s)", g.idx, g.listen, g.admin)
	}

	// 5. Traffic and faults.
	rep = &Report{Opts: o, T0: t0, Events: int64(o.Events), PlannedKills: o.Kills + o.Terms, PlannedRestart: o.RedisRestarts,
		PlannedBroker: o.KafkaRestarts}
	var abortMu sync.Mutex
	abort := func(why string) {
		abortMu.Lock()
		if rep.Aborted == "" {
			rep.Aborted = why
		}
		abortMu.Unlock()
	}
	if period := float64(o.Events) / o.Rate; time.Duration(period*float64(time.Second))+o.DupSpread+o.DeliveryBudget > o.Duration-time.Since(began) {
		o.logf("warning: %d events at %.0f/s take %.0fs to start; the -duration cap %v may cut the run short", o.Events, o.Rate, period, o.Duration)
	}
	prov := newProvider(o, urls, signer)
	var faultMu sync.Mutex
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		for _, f := range planFaults(o) {
			if !sleep(ctx, time.Until(t0.Add(f.at))) {
				return
			}
			if f.kill {
				g := gws[f.inst]
				pid := g.pid()
				var at time.Time
				name := "SIGKILL"
				if f.sig == syscall.SIGTERM {
					name = "SIGTERM"
					at = g.signalAndWait(syscall.SIGTERM, 6*time.Second)
				} else {
					at = g.kill()
				}
				faultMu.Lock()
				rep.Kills = append(rep.Kills, killRec{Inst: f.inst, At: at, Signal: name})
				faultMu.Unlock()
				o.logf("%+.3fs %s gateway %d (pid %d); back in %v", at.Sub(t0).Seconds(), name, f.inst, pid, f.down)
				if !sleep(ctx, f.down) {
					return
				}
				if err := g.start(ctx, t0, false); err != nil {
					if ctx.Err() == nil {
						abort(fmt.Sprintf("gateway %d did not come back after its kill: %v", f.inst, err))
					}
					return
				}
				o.logf("%+.3fs gateway %d up again", time.Since(t0).Seconds(), f.inst)
				continue
			}
			if f.broker {
				at := kafka.stop()
				o.logf("%+.3fs kafka broker stopped; back in %v", at.Sub(t0).Seconds(), f.down)
				faultMu.Lock()
				rep.BrokerRestarts = append(rep.BrokerRestarts, restartRec{Signal: "stop", Stopped: at})
				faultMu.Unlock()
				if !sleep(ctx, f.down) {
					return
				}
				if err := kafka.start(); err != nil {
					if ctx.Err() == nil {
						abort(fmt.Sprintf("the kafka broker did not come back: %v", err))
					}
					return
				}
				faultMu.Lock()
				rep.BrokerRestarts[len(rep.BrokerRestarts)-1].Started = time.Now()
				faultMu.Unlock()
				o.logf("%+.3fs kafka broker up again", time.Since(t0).Seconds())
				continue
			}
			name := "SIGKILL"
			if f.sig == syscall.SIGTERM {
				name = "SIGTERM"
			}
			at := redis.stop(f.sig)
			o.logf("%+.3fs redis stopped (%s); back in %v", at.Sub(t0).Seconds(), name, f.down)
			faultMu.Lock()
			rep.RedisRestarts = append(rep.RedisRestarts, restartRec{Signal: name, Stopped: at})
			faultMu.Unlock()
			if !sleep(ctx, f.down) {
				return
			}
			if err := redis.start(ctx); err != nil {
				if ctx.Err() == nil {
					abort(fmt.Sprintf("redis did not come back: %v", err))
				}
				return
			}
			faultMu.Lock()
			rep.RedisRestarts[len(rep.RedisRestarts)-1].Started = time.Now()
			faultMu.Unlock()
			o.logf("%+.3fs redis up again", time.Since(t0).Seconds())
		}
	}()
	progressDone := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				o.logf("%+.1fs %s", time.Since(t0).Seconds(), prov.progress())
			case <-progressDone:
				return
			}
		}
	}()
	prov.run(ctx, t0)
	<-faultsDone
	if o.Queue {
		// The queue delivers after the 202s: wait for every acknowledged
		// event to reach the upstream, or for DrainWait.
		drain := time.Now().Add(o.DrainWait)
		for time.Now().Before(drain) && ctx.Err() == nil && prov.ackedNotAccepted(up.snapshot()) > 0 {
			sleep(ctx, 100*time.Millisecond)
		}
		o.logf("%+.1fs queue drained: %d acknowledged events not delivered", time.Since(t0).Seconds(), prov.ackedNotAccepted(up.snapshot()))
	}
	close(progressDone)
	switch {
	case parent.Err() != nil:
		rep.Aborted = "interrupted"
	case ctx.Err() != nil:
		rep.Aborted = fmt.Sprintf("hard deadline (-duration %v) reached before every delivery ended", o.Duration)
	}

	// 6. Stop the gateways (their last log lines land), then count.
	for _, g := range gws {
		g.stop()
	}
	rep.Runtime = time.Since(began)
	acc := up.snapshot()
	fill(rep, prov, up, acc)
	needles := []string{}
	for i, d := range rep.Outside {
		if i == 3 {
			break
		}
		needles = append(needles, d.ID)
	}
	needles = append(needles, firstIDs(rep.LostIDs, 3)...)
	needles = append(needles, firstIDs(rep.UndeliveredIDs, 3)...)
	var hits map[string][]string
	rep.GatewayErrors, rep.GatewayWarns, rep.LogMessages, hits = scanLogs(
		[]string{gws[0].logPath, gws[1].logPath}, needles, 40)
	for _, n := range needles {
		rep.Forensics = append(rep.Forensics, "-- "+n+":")
		rep.Forensics = append(rep.Forensics, hits[n]...)
	}
	return rep, nil
}

// fill computes the figures from what the provider and upstream saw.
func fill(rep *Report, p *provider, u *upstream, acc []acceptance) {
	rep.Deliveries, rep.Retries, rep.Duplicates = p.deliveries.Load(), p.retries.Load(), p.duplicates.Load()
	rep.Failovers, rep.Replayed = p.failovers.Load(), p.replayed.Load()
	rep.ConnErrs, rep.Timeouts, rep.GaveUp = p.connErrs.Load(), p.timeouts.Load(), p.gaveUp.Load()
	p.mu.Lock()
	rep.Status = map[int]int64{}
	for c, n := range p.status {
		rep.Status[c] = n
	}
	p.mu.Unlock()
	rep.Received, rep.Upstream500, rep.UpstreamHangs = u.received.Load(), u.n500.Load(), u.nHang.Load()
	rep.Gone, rep.WriteFail, rep.HangMaxed, rep.BadRequest = u.gone.Load(), u.writeFail.Load(), u.hangMaxed.Load(), u.badRequest.Load()

	accepted := map[string]int{}
	for _, a := range acc {
		accepted[a.ID]++
	}
	rep.AcceptedCopies, rep.AcceptedEvents = len(acc), len(accepted)
	for i := range p.events {
		ev := &p.events[i]
		ev.mu.Lock()
		acked, wrong, refused, last := ev.acked, ev.wrong, ev.refused, ev.last
		ev.mu.Unlock()
		rep.Wrong += wrong
		rep.Refused += refused
		switch {
		case acked > 0:
			rep.Acknowledged++
			if accepted[ev.id] == 0 {
				rep.Lost++
				if len(rep.LostIDs) < 10 {
					rep.LostIDs = append(rep.LostIDs, ev.id)
				}
			}
		default:
			rep.Undelivered++
			if len(rep.UndeliveredIDs) < 10 {
				rep.UndeliveredIDs = append(rep.UndeliveredIDs, ev.id+" ("+orDash(last)+")")
			}
		}
	}
	for _, d := range classifyDoubles(acc, rep.Kills, rep.RedisRestarts, lockTTL) {
		if d.Excused() {
			rep.Inside = append(rep.Inside, d)
		} else {
			rep.Outside = append(rep.Outside, d)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "never answered"
	}
	return s
}

// firstIDs returns the event ids (the text before " (") of the first n.
func firstIDs(s []string, n int) []string {
	var out []string
	for i, x := range s {
		if i == n {
			break
		}
		id, _, _ := strings.Cut(x, " (")
		out = append(out, id)
	}
	return out
}

// gatewayConfig is one instance's config. With kafkaAddr the queue route's
// events go to that broker (the keys' ledger stays on redisAddr).
func gatewayConfig(server config.ServerKind, listen, admin, redisAddr, upstream string, queued bool, kafkaAddr string) string {
	if server == "" {
		server = config.ServerNetHTTP
	}
	delivery := ""
	if queued {
		// Enough tries that the upstream's 500s and hangs never exhaust
		// them: a dead-lettered event would count as lost.
		delivery = "\n    delivery: queue\n    workers: 16\n    retry: { max_attempts: 30, initial: 50ms, max: 500ms }"
	}
	queue := ""
	if kafkaAddr != "" {
		queue = fmt.Sprintf("queue:\n  backend: kafka\n  kafka: { brokers: [%q], partitions: 4, replication_factor: 1 }\n", kafkaAddr)
	}
	return fmt.Sprintf(`# generated by the clawgate soak
server: %q
listen: %q
admin: { listen: %q }
store:
  backend: redis
  redis: { addrs: [%q], key_prefix: "soak:" }
  on_error: reject
%sdedupe:
  window: %s
  lock_ttl: %s
alerts:
  max_attempts: 1000
routes:
  - name: soak
    match: { path: %s, methods: [POST] }
    upstream: http://%s
    timeout: %s%s
    idempotency: { required: true, key: ["json:id"] }
    verify: { scheme: hmac, header: X-Signature, prefix: "sha256=", secrets: [{ id: s, secret: %q }] }
`, server, listen, admin, redisAddr, queue, dedupeWindow, lockTTL, routePath, upstream, routeTimeout, delivery, soakSecret)
}

// moduleRoot is the directory of the go.mod this soak belongs to, from
// wherever it runs (`go run ./soak` at the root, `go test` in soak/).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the clawgate module: run from the repository")
	}
	return filepath.Dir(mod), nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
