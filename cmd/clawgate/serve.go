package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/logging"
	"github.com/clawgate/clawgate/server"
)

// cmdServe runs the gateway until SIGTERM or SIGINT; SIGHUP reloads the config.
func cmdServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stdout, stderr)
	path := configFlag(fs)
	grace := fs.Duration("grace", 25*time.Second, "how long requests in flight may take to finish at shutdown")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "lowest `level` logged: debug, info (one access line per delivery), warn, error")
	listen := fs.String("listen", "", "serve deliveries on this `address` instead of the config's listen (e.g. 127.0.0.1:8080 to stay on loopback); kept across reloads")
	flush := fs.Duration("log-flush", 100*time.Millisecond, "write log lines in batches at least once per `interval`; 0 writes each line at once")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var out io.Writer = stderr
	if *flush > 0 {
		bw := logging.NewBuffered(stderr, *flush, 64<<10)
		defer bw.Close()
		out = bw
	}
	log := slog.New(logging.NewHandler(out, level))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	srv, err := server.Start(cfg, server.Options{Logger: log, Registry: prometheus.NewRegistry(), Version: version, Listen: *listen})
	if err != nil {
		fmt.Fprintf(stderr, "clawgate: %v\n", err)
		return 1
	}
	for {
		select {
		case <-hup:
			srv.Reload(*path)
		case err := <-srv.Err():
			log.Error("stopping: the gateway cannot go on serving", "error", err.Error())
			srv.Shutdown(*grace)
			return 1
		case <-ctx.Done():
			log.Info("shutting down", "grace", grace.String())
			srv.Shutdown(*grace)
			return 0
		}
	}
}
