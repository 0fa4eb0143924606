package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/alert"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/logging"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
)

// cmdServe runs the gateway until SIGTERM or SIGINT; SIGHUP reloads the config.
func cmdServe(args []string, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	path := configFlag(fs)
	grace := fs.Duration("grace", 25*time.Second, "how long `duration` requests in flight may take to finish at shutdown")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "lowest `level` logged: debug, info (one access line per delivery), warn, error")
	flush := fs.Duration("log-flush", 100*time.Millisecond, "log lines are written in batches at least this often (`interval`); 0 writes each line at once")
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

	inst, err := start(cfg, log, prometheus.NewRegistry())
	if err != nil {
		fmt.Fprintf(stderr, "clawgate: %v\n", err)
		return 1
	}
	for {
		select {
		case <-hup:
			inst.reload(*path)
		case err := <-inst.errc:
			log.Error("listener failed", "error", err.Error())
			inst.shutdown(*grace)
			return 1
		case <-ctx.Done():
			log.Info("shutting down", "grace", grace.String())
			inst.shutdown(*grace)
			return 0
		}
	}
}

// instance is one running gateway: its listeners, store and handler.
type instance struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	store   store.Store
	gw      *proxy.Gateway
	srv     *http.Server
	admin   *http.Server
	addr    net.Addr // the delivery listener's address
	errc    chan error
	// stopSubs ends the reset subscription (nil without Redis).
	stopSubs context.CancelFunc
	alerts   *alert.Sender
}

// start opens the store, binds both listeners (so a taken port fails here,
// before anything is served) and serves in the background.
func start(cfg *config.Config, log *slog.Logger, reg *prometheus.Registry) (*instance, error) {
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	m := metrics.New(reg)
	st, err := openStore(cfg, m, log)
	if err != nil {
		return nil, err
	}
	// Retry alerts go out from a background sender; without
	// alerts.webhook_url_env it is disabled (log line and metric only).
	al := alert.New(alert.Options{
		URL: cfg.Alerts.WebhookURL, RoutingKey: os.Getenv("CLAWGATE_ALERT_ROUTING_KEY"),
		Sent: m.AlertsSent, Logger: log,
	})
	gw := proxy.New(cfg, proxy.Options{Store: st, Metrics: m, Logger: log, Alerter: al})
	in := &instance{cfg: cfg, log: log, metrics: m, store: st, gw: gw, alerts: al, errc: make(chan error, 2)}
	// With Redis, an operator's key reset reaches every instance's window.
	var bc admin.Broadcaster
	if r, ok := st.(*store.Redis); ok {
		bc = r
		ctx, cancel := context.WithCancel(context.Background())
		in.stopSubs = cancel
		r.SubscribeResets(ctx, gw.Forget)
	}
	in.srv = &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	in.addr = ln.Addr()
	var aln net.Listener
	if cfg.Admin.Listen != "" {
		aln, err = net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			ln.Close()
			st.Close()
			return nil, fmt.Errorf("admin.listen: %w", err)
		}
		in.admin = &http.Server{
			Handler: admin.Handler(admin.Options{
				Gatherer: reg, Store: st, Gateway: gw, Broadcaster: bc, Token: cfg.Admin.Token, Logger: log,
			}),
			ReadHeaderTimeout: 10 * time.Second,
		}
		go in.serve(in.admin, aln, false)
	}
	go in.serve(in.srv, ln, cfg.TLS.CertFile != "")
	log.Info("clawgate listening", "addr", in.addr.String(), "admin", cfg.Admin.Listen,
		"store", cfg.Store.Backend, "routes", len(cfg.Routes), "version", version)
	return in, nil
}

func (in *instance) serve(srv *http.Server, ln net.Listener, tls bool) {
	var err error
	if tls {
		err = srv.ServeTLS(ln, in.cfg.TLS.CertFile, in.cfg.TLS.KeyFile)
	} else {
		err = srv.Serve(ln)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		in.errc <- err
	}
}

// reload re-reads the config; a file that fails validation keeps the
// running config. Listeners, store and the local window stay as started.
func (in *instance) reload(path string) {
	cfg, err := config.Load(path)
	if err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload failed; keeping the running config", "error", err.Error())
		return
	}
	for _, w := range cfg.Warnings {
		in.log.Warn(w)
	}
	old := in.gw.Config()
	if cfg.Listen != old.Listen || cfg.Admin != old.Admin || !reflect.DeepEqual(cfg.Store, old.Store) ||
		cfg.Dedupe.Window != old.Dedupe.Window || cfg.Dedupe.CacheSize != old.Dedupe.CacheSize || cfg.TLS != old.TLS {
		in.log.Warn("config reload: listen, tls, admin, store and dedupe.window/cache_size changes take effect at the next restart")
	}
	cfg.Listen, cfg.Admin, cfg.Store, cfg.TLS = old.Listen, old.Admin, old.Store, old.TLS
	in.gw.Reload(cfg)
	in.metrics.ConfigReloads.WithLabelValues("ok").Inc()
	in.log.Info("config reloaded", "routes", len(cfg.Routes))
}

// shutdown stops accepting, lets requests in flight finish for up to grace,
// releases the locks of those it had to cut, and closes the store.
func (in *instance) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := in.srv.Shutdown(ctx); err != nil {
		in.log.Warn("grace period over; cutting requests in flight", "error", err.Error())
		in.srv.Close()
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	if n := in.gw.ReleaseHeld(rctx); n > 0 {
		in.log.Info("released locks of cut requests", "count", n)
	}
	if in.admin != nil {
		in.admin.Close()
	}
	if in.stopSubs != nil {
		in.stopSubs()
	}
	in.alerts.Close(rctx)
	in.store.Close()
}

// openStore builds the configured store. A Redis that is down does not stop
// the start: /readyz says 503 until it answers.
func openStore(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Backend {
	case "redis":
		store.SetRedisLogger(log)
		r := cfg.Store.Redis
		return store.NewRedis(store.RedisOptions{
			Addrs: r.Addrs, MasterName: r.MasterName, Username: r.Username, Password: r.Password,
			DB: r.DB, TLS: r.TLS, KeyPrefix: r.KeyPrefix,
		})
	default:
		log.Info("memory store: idempotency state is kept in this process only and lost on restart")
		return store.NewMemory(store.MemoryOptions{MaxKeys: store.DefaultMaxKeys, OnEvict: m.StoreEvictions.Inc}), nil
	}
}
