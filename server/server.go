// Package server runs one clawgate instance: it opens the store, binds the
// delivery and admin listeners and serves them, and owns the background
// work (retry alerts, the key-reset subscription, the Redis durability
// watch) from Start to Shutdown; Reload applies a new config file.
//
// The delivery steps themselves live in proxy; cmd/clawgate only parses
// flags, loads the config and handles signals.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/alert"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/store"
)

// The listeners' limits, the same for the delivery and admin listeners.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 60 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Server is one running clawgate: its listeners, store and handler, and
// the background work it owns from Start to Shutdown.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	store   store.Store
	gw      *proxy.Gateway
	srv     *http.Server
	admin   *http.Server
	addr    net.Addr // the delivery listener's address
	errc    chan error
	// stopBG ends the background work (reset subscription, durability
	// watch).
	stopBG context.CancelFunc
	alerts *alert.Sender
}

// Options are what Start needs besides the config.
type Options struct {
	// Logger receives every line. Required.
	Logger *slog.Logger
	// Registry receives every metric and is served on /metrics. Required.
	Registry *prometheus.Registry
	// Version is logged at start-up.
	Version string
}

// resetBus is a store that carries an operator's key reset to every
// instance sharing it (Redis pub/sub).
type resetBus interface {
	admin.Broadcaster
	SubscribeResets(ctx context.Context, forget func(scopedKey string))
}

// durabilityWatcher is a store that can tell whether it keeps its keys
// through a restart (Redis).
type durabilityWatcher interface {
	WatchDurability(ctx context.Context, every time.Duration, report func(store.Durability, error))
}

// Start opens the store, binds both listeners (so a taken port fails here,
// before anything is served), starts the background work and serves.
func Start(cfg *config.Config, o Options) (*Server, error) {
	log, reg := o.Logger, o.Registry
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	m := metrics.New(reg)
	st, err := openStore(cfg, m, log)
	if err != nil {
		return nil, err
	}
	// bg ends the instance's background work: the reset subscription and
	// the Redis durability watch.
	bg, stopBG := context.WithCancel(context.Background())
	// Retry alerts go out from a background sender; without
	// alerts.webhook_url_env it is disabled (log line and metric only).
	al := alert.New(alert.Options{
		URL: cfg.Alerts.WebhookURL, RoutingKey: cfg.Alerts.PagerDutyRoutingKey,
		Sent: m.AlertsSent, Logger: log,
	})
	gw := proxy.New(cfg, proxy.Options{Store: st, Metrics: m, Logger: log, Alerter: al})
	in := &Server{cfg: cfg, log: log, metrics: m, store: st, gw: gw, alerts: al, errc: make(chan error, 2), stopBG: stopBG}
	// With Redis, an operator's key reset reaches every instance's window,
	// and Redis's persistence is watched.
	var bc admin.Broadcaster
	if r, ok := st.(resetBus); ok {
		bc = r
		r.SubscribeResets(bg, gw.Forget)
	}
	if w, ok := st.(durabilityWatcher); ok {
		w.WatchDurability(bg, durabilityInterval, durabilityReporter(log, m))
	}
	// Each answer gets its own write deadline (proxy.DefaultWriteTimeout,
	// set as it starts), so WriteTimeout stays 0 here: a server-wide one
	// would run from the request's arrival and cut slow upstreams' answers.
	in.srv = &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		stopBG()
		st.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	in.addr = ln.Addr()
	var aln net.Listener
	if cfg.Admin.Listen != "" {
		aln, err = net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			stopBG()
			ln.Close()
			st.Close()
			return nil, fmt.Errorf("admin.listen: %w", err)
		}
		in.admin = &http.Server{
			Handler: admin.Handler(admin.Options{
				Gatherer: reg, Store: st, Gateway: gw, Broadcaster: bc, Token: cfg.Admin.Token, Logger: log,
			}),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			// Long enough for a 30 s CPU profile, short enough that a
			// caller that stops reading lets go.
			WriteTimeout: 2 * time.Minute,
			ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go in.serve(in.admin, aln, false)
	}
	go in.serve(in.srv, ln, cfg.TLS.CertFile != "")
	log.Info("clawgate listening", "addr", in.addr.String(), "admin", cfg.Admin.Listen,
		"store", cfg.Store.Backend, "routes", len(cfg.Routes), "version", o.Version)
	return in, nil
}

func (in *Server) serve(srv *http.Server, ln net.Listener, tls bool) {
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

// Addr is the delivery listener's address.
func (in *Server) Addr() net.Addr { return in.addr }

// Err reports a listener that failed while serving.
func (in *Server) Err() <-chan error { return in.errc }

// Reload re-reads the config at path (SIGHUP); a file that fails
// validation keeps the running config. Listeners, store and the local
// window stay as started.
func (in *Server) Reload(path string) {
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

// Shutdown stops accepting, lets requests in flight finish for up to grace
// (and finished keys still being recorded), releases the locks of those it
// had to cut, stops the background work and closes the store.
func (in *Server) Shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := in.srv.Shutdown(ctx); err != nil {
		in.log.Warn("grace period over; cutting requests in flight", "error", err.Error())
		in.srv.Close()
	}
	// Keys the upstream accepted whose record could not be written yet
	// (the store was briefly down) get what is left of the grace period.
	if !in.gw.Drain(ctx) {
		in.log.Error("grace period over with finished keys not yet recorded in the store")
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	if n := in.gw.ReleaseHeld(rctx); n > 0 {
		in.log.Info("released locks of cut requests", "count", n)
	}
	if in.admin != nil {
		in.admin.Close()
	}
	in.stopBG()
	in.alerts.Close(rctx)
	in.store.Close()
}

// openStore builds the configured store. A Redis that is down does not stop
// the start: /readyz says 503 until it answers.
func openStore(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Backend {
	case config.BackendRedis:
		store.SetRedisLogger(log)
		r := cfg.Store.Redis
		return store.NewRedis(store.RedisOptions{
			Addrs: r.Addrs, MasterName: r.MasterName, Username: r.Username, Password: r.Password,
			DB: r.DB, TLS: r.TLS, KeyPrefix: r.KeyPrefix,
			WaitReplicas: r.WaitReplicas, WaitTimeout: r.WaitTimeout, OnReplicaShortfall: m.StoreReplicaShortfalls.Inc,
			ResetHold: cfg.Dedupe.LockTTL,
		})
	default:
		log.Info("memory store: idempotency state is kept in this process only and lost on restart")
		mem := store.NewMemory(store.MemoryOptions{
			MaxKeys: store.DefaultMaxKeys, MaxBytes: int64(cfg.Store.Memory.MaxBytes),
			OnEvict: m.StoreEvictions.Inc, ResetHold: cfg.Dedupe.LockTTL,
		})
		m.ObserveStoreBytes(mem.Bytes)
		m.SetStoreDurability("no", "no", "", 0) // nothing survives a restart
		return mem, nil
	}
}

// durabilityInterval is how often Redis's persistence settings are read
// again (and so how soon a restart is noticed).
const durabilityInterval = 30 * time.Second

// durabilityReporter logs what the durability watch finds when it changes
// (and every Redis restart), and keeps the store gauges current.
func durabilityReporter(log *slog.Logger, m *metrics.Metrics) func(store.Durability, error) {
	var last string
	return func(d store.Durability, err error) {
		if err != nil {
			m.SetStoreDurability("unknown", "unknown", "unknown", -1)
			if msg := "error: " + err.Error(); msg != last {
				last = msg
				log.Warn("could not read redis persistence settings", "error", err.Error())
			}
			return
		}
		aof, rdb, policy := d.InfoLabels()
		m.SetStoreDurability(aof, rdb, policy, d.Gauge())
		if d.Restarted {
			m.StoreRestarts.Inc()
			log.Warn("redis restarted (its run_id changed); without persistence its finished keys are gone and their next copies will be forwarded again",
				"aof", aof, "rdb", rdb)
		}
		if msg := strings.Join(d.Problems, "; "); msg != last {
			last = msg
			for _, p := range d.Problems {
				log.Warn("redis can lose idempotency keys: " + p)
			}
			if len(d.Problems) == 0 {
				log.Info("redis keeps its keys through a restart and does not evict them", "aof", aof, "rdb", rdb, "maxmemory_policy", policy)
			}
		}
	}
}
