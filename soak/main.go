// Command soak is a bounded fault soak of clawgate: two gateway instances on
// one persistent Redis, an upstream that fails and hangs at random, a
// provider that delivers every event 1-5 times and retries like a real one,
// gateway SIGKILLs and Redis restarts in the middle. It then checks that no
// acknowledged event was lost, none went undelivered, and that every event
// the upstream accepted twice is explained by a kill.
//
//	go run ./soak            # 10,000 events, 3 kills, 2 Redis restarts (make soak)
//	go run ./soak -short     # the 1,500-event preset the Go test runs
//	go run ./soak -queue     # a queue route on Redis Streams
//	go run ./soak -queue-backend kafka   # a queue route on Kafka (kfake in this process)
//
// Everything listens on 127.0.0.1; the run stops by itself by -duration,
// and exits 1 when the report fails, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/clawgate/clawgate/config"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	short := fs.Bool("short", false, "the short preset (1,500 events, 1 kill, 1 Redis restart), as the Go test runs it")
	def := Preset(false)
	events := fs.Int("events", def.Events, "`number` of events (1500 with -short)")
	seed := fs.Uint64("seed", def.Seed, "PRNG `seed` for copies, targets, backoff, upstream answers and the fault plan")
	duration := fs.Duration("duration", def.Duration, "hard cap on the whole run, build included; children are killed at it (100s with -short)")
	kills := fs.Int("kills", def.Kills, "gateway SIGKILLs, each followed by a restart ~1 s later (1 with -short)")
	terms := fs.Int("terms", def.Terms, "gateway SIGTERMs (a drain of -grace 3s), each followed by a restart ~1 s later")
	queued := fs.Bool("queue", false, "the route with delivery: queue (on -queue-backend): acknowledged is the 202, and the run waits for the queue to deliver")
	backend := fs.String("queue-backend", "redis", "the queue's `backend` with -queue: redis (Redis Streams) or kafka (one kfake broker inside the soak, the keys' ledger on Redis); implies -queue")
	kafkaRestarts := fs.Int("kafka-restarts", 0, "restarts of the in-process Kafka broker (clean stop and start, data kept), down 1-2 s each; -queue-backend kafka only")
	restarts := fs.Int("redis-restarts", def.RedisRestarts, "Redis restarts, SIGKILL and SIGTERM alternately, down 1-2 s each (1 with -short)")
	rate := fs.Float64("rate", def.Rate, "events started per second (100 with -short)")
	conc := fs.Int("concurrency", def.Concurrency, "deliveries in flight at most")
	keep := fs.Bool("keep", false, "keep the temp dir (configs, gateway and Redis logs) and print its path")
	server := fs.String("server", "net/http", "the gateways' front `door`: net/http or fasthttp")
	verbose := fs.Bool("v", false, "progress and fault lines on stderr, and every double in the report")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	o := Preset(*short)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "events":
			o.Events = *events
		case "seed":
			o.Seed = *seed
		case "duration":
			o.Duration = *duration
		case "kills":
			o.Kills = *kills
		case "terms":
			o.Terms = *terms
		case "redis-restarts":
			o.RedisRestarts = *restarts
		case "rate":
			o.Rate = *rate
		case "concurrency":
			o.Concurrency = *conc
		case "queue-backend":
			o.QueueBackend = *backend
			*queued = true
		case "kafka-restarts":
			o.KafkaRestarts = *kafkaRestarts
		}
	})
	o.Keep, o.Verbose, o.Log = *keep, *verbose, os.Stderr
	if *queued {
		o.Queue = true
		if o.DrainWait == 0 {
			o.DrainWait = 60 * time.Second
		}
	}
	o.Server = config.ServerKind(*server)
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 1
	}
	rep.Write(os.Stdout)
	if rep.Failed() {
		return 1
	}
	return 0
}
