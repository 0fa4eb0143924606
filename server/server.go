// Package server runs one clawgate instance: it opens the store, binds the
// delivery and admin listeners and serves them, and owns the background
// work (retry alerts, the key-reset subscription, the Redis durability
// watch) from Start to Shutdown; Reload applies a new config file.
//
// The delivery steps themselves live in proxy; cmd/clawgate only parses
// flags, loads the config and handles signals.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/alert"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/control"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/queue/kafka"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/tracing"
)

// Server is one running clawgate: its listeners, store and handler, and
// the background work it owns from Start to Shutdown.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	store   store.Store
	gw      *proxy.Gateway
	// queue runs the workers of the delivery: queue routes.
	queue *queue.Manager
	// qb is the queue's backend, closed after the queue (Kafka's clients
	// commit and leave their groups).
	qb queue.Backend
	// door serves deliveries (net/http or fasthttp, as cfg.Server says).
	door  proxy.Door
	admin *http.Server
	addr  net.Addr // the delivery listener's address
	// adminAddr is the admin listener's address; nil when it is off.
	adminAddr net.Addr
	errc      chan error
	// stopBG ends the background work (reset subscription, durability
	// watch).
	stopBG context.CancelFunc
	alerts *alert.Sender
	// tracer exports the deliveries' spans; nil when tracing is off.
	tracer *tracing.Provider

	// reloadMu serialises reloads (SIGHUP and POST /admin/reload).
	reloadMu sync.Mutex
	// listen is Options.Listen: the listen address that overrides the file's.
	listen string
	// access is log.access_file; nil when access lines go to the log.
	access *accessLog
	// acme is tls.acme; nil when it is off.
	acme *acmeRunner
	// cert is the delivery listener's TLS certificate (nil without TLS),
	// read at every handshake and replaced by Reload.
	cert atomic.Pointer[tls.Certificate]
}

// Options are what Start needs besides the config.
type Options struct {
	// Logger receives every line. Required.
	Logger *slog.Logger
	// Registry receives every metric and is served on /metrics. Required.
	Registry *prometheus.Registry
	// Version is logged at start-up and exported as
	// clawgate_build_info{version}.
	Version string
	// Listen, when set, replaces the config's listen address, at start and
	// at every reload (serve -listen). Empty: the config's.
	Listen string
	// ControlFresh is how long this instance trusts the routes' shared
	// control state (pause, breaker) it read before reading it again. 0:
	// control.DefaultFresh.
	ControlFresh time.Duration
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
func Start(cfg *config.Config, o Options) (_ *Server, err error) {
	// What Start opened, closed in reverse order when it fails part-way.
	var opened closers
	defer func() {
		if err != nil {
			opened.close()
		}
	}()
	log, reg := o.Logger, o.Registry
	if o.Listen != "" {
		c := *cfg
		c.Listen = o.Listen
		cfg = &c
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	access, err := openAccessLog(cfg)
	if err != nil {
		return nil, err
	}
	opened.push(access.close)
	acmeRun, err := startACME(cfg, log)
	if err != nil {
		return nil, err
	}
	opened.push(acmeRun.close)
	m := metrics.New(reg)
	m.SetBuildInfo(o.Version)
	var cert *tls.Certificate
	if cfg.TLS.CertFile != "" {
		c, err := loadCertificate(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		cert = c
	}
	raw, err := openStore(cfg, m, log)
	if err != nil {
		return nil, err
	}
	opened.push(func() { raw.Close() })
	// A store written by a newer schema is refused before anything is
	// written to it; one that does not answer is checked once it does.
	schemaPending, err := checkSchema(raw, log)
	if err != nil {
		return nil, err
	}
	// Tracing is off unless tracing.enabled or an OTEL_* variable turns it
	// on (then nil); Shutdown flushes and stops it.
	tp, err := tracing.New(context.Background(), cfg.Tracing, tracing.Options{Version: o.Version, Logger: log})
	if err != nil {
		return nil, err
	}
	opened.push(func() { tp.Shutdown(context.Background()) })
	// bg ends the instance's background work: the reset subscription and
	// the Redis durability watch.
	bg, stopBG := context.WithCancel(context.Background())
	opened.push(stopBG)
	// Retry alerts go out from a background sender; without
	// alerts.webhook_url_env it is disabled (log line and metric only).
	al := alert.New(alert.Options{
		URL: cfg.Alerts.WebhookURL, RoutingKey: cfg.Alerts.PagerDutyRoutingKey,
		Sent: m.AlertsSent, Logger: log,
	})
	qb, err := openQueue(cfg, raw, m, log)
	if err != nil {
		return nil, err
	}
	opened.push(func() { closeBackend(qb) })
	// On Redis a sync route's keys live in the key records of the route's
	// queue (package ledger), so that a route switching mode finds them.
	keys, err := syncStore(cfg, raw, qb)
	if err != nil {
		return nil, err
	}
	if q, ok := qb.(*queue.Redis); ok {
		if rs, ok := keys.(*ledger.RedisStore); ok {
			// The enqueue reads schema-1 sync records while they may live.
			q.CheckSyncRecordsWhile(rs.LegacyOpen)
		}
	}
	// Every store call is timed (webhook_store_duration_seconds{op});
	// the optional interfaces below are asked of the store itself.
	st := store.NewTimed(keys, func(op string) store.Observer { return m.StoreObserver(op) })
	// Pause, breaker and pace: shared by every instance on Redis.
	ctl := openControls(raw, m, log)
	ctl.Fresh = o.ControlFresh
	qm := queue.New(queue.Options{
		Backend: qb, Metrics: m, Log: log, ReplayRate: cfg.Queue.ReplayRate,
		OnDead: al.DeadLettered, OnDrained: al.DLQDrained, Controls: ctl,
	})
	readsSync := false
	if r, ok := qb.(interface{ ChecksSyncRecords() bool }); ok {
		readsSync = r.ChecksSyncRecords()
	}
	// With Redis and a Redis Streams or Kafka queue, and with the memory
	// store and the memory or Kafka queue (openQueue gives them the
	// store's ledger), a key has one record whatever the route's mode.
	_, ledgerKeys := keys.(*ledger.RedisStore)
	_, memQueue := qb.(*queue.Memory)
	if ms, ok := keys.(*ledger.MemoryStore); ok {
		mq, isMem := qb.(*queue.Memory)
		ledgerKeys, memQueue = !isMem || mq.Keys() == ms.Ledger(), false
	}
	gw := proxy.New(cfg, proxy.Options{Store: st, Metrics: m, Logger: log, AccessLog: access.logger(), Alerter: al, Tracer: tp.Tracer(), Queue: qm,
		QueueReadsSyncRecords: readsSync, SharedKeys: ledgerKeys && !memQueue, Breaker: ctl, Modes: ctl})
	opened.push(func() { qm.Close(0) })
	qm.SetSender(gw)
	if err := qm.Apply(context.Background(), queueRoutes(cfg)); err != nil {
		return nil, err
	}
	in := &Server{cfg: cfg, log: log, metrics: m, store: st, gw: gw, queue: qm, qb: qb, alerts: al, errc: make(chan error, 2), stopBG: stopBG, listen: o.Listen, access: access, acme: acmeRun}
	in.cert.Store(cert)
	in.tracer = tp
	// With Redis, an operator's key reset reaches every instance's window,
	// and Redis's persistence is watched.
	var bc admin.Broadcaster
	if r, ok := raw.(resetBus); ok {
		bc = r
		r.SubscribeResets(bg, gw.Forget)
	}
	if w, ok := raw.(durabilityWatcher); ok {
		w.WatchDurability(bg, durabilityInterval, durabilityReporter(log, m, func() []string { return redisQueueRoutes(gw.Config()) }))
	}
	if schemaPending {
		go in.awaitSchema(bg, raw.(schemaChecker))
	}
	go watchControls(bg, ctl, m, func() []config.Route { return gw.Config().Routes })
	var tlsConfig *tls.Config
	if cert != nil {
		// The certificate is read at each handshake, so that Reload can
		// replace it (cert-manager rotates the files) without a restart.
		tlsConfig = &tls.Config{GetCertificate: in.certificate}
	}
	if acmeRun != nil {
		tlsConfig = acmeRun.tlsConfig()
	}
	in.door = proxy.NewDoor(cfg.Server, gw, proxy.DefaultLimits, tlsConfig, log)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	opened.push(func() { ln.Close() })
	in.addr = ln.Addr()
	var aln net.Listener
	if cfg.Admin.Listen != "" {
		aln, err = net.Listen("tcp", cfg.Admin.Listen)
		if err != nil {
			return nil, fmt.Errorf("admin.listen: %w", err)
		}
		in.adminAddr = aln.Addr()
		in.admin = &http.Server{
			Handler: admin.Handler(admin.Options{
				Gatherer: reg, Store: st, Gateway: gw, Broadcaster: bc, Token: cfg.Admin.Token, Logger: log, Queue: qm, Controls: ctl,
				QueueBackend: pinger(qb),
				Reloader:     configReloader{in},
				Body:         proxy.QueuedBody,
				Counters:     m,
			}),
			// The delivery listener's limits.
			ReadHeaderTimeout: proxy.DefaultLimits.ReadHeaderTimeout,
			ReadTimeout:       proxy.DefaultLimits.ReadTimeout,
			IdleTimeout:       proxy.DefaultLimits.IdleTimeout,
			MaxHeaderBytes:    proxy.DefaultLimits.MaxHeaderBytes,
			// Long enough for a 30 s CPU profile, short enough that a
			// caller that stops reading lets go.
			WriteTimeout: 2 * time.Minute,
			ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go func() {
			if err := in.admin.Serve(aln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				in.errc <- err
			}
		}()
	}
	go func() {
		if err := in.door.Serve(ln); err != nil {
			in.errc <- err
		}
	}()
	attrs := []any{"addr", in.addr.String(), "server", string(cfg.Server), "admin", cfg.Admin.Listen,
		"store", cfg.Store.Backend, "routes", len(cfg.Routes), "version", o.Version}
	if in.adminAddr != nil {
		// The web console's address, on the admin listener (localhost
		// when it listens on every address).
		host := in.adminAddr.String()
		if ta, ok := in.adminAddr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			host = net.JoinHostPort("localhost", strconv.Itoa(ta.Port))
		}
		attrs = append(attrs, "console", "http://"+host+"/ui/")
	}
	log.Info("clawgate listening", attrs...)
	// Both listeners are bound: a systemd Type=notify unit is started.
	in.notify("READY=1")
	return in, nil
}

// closers is a stack of cleanups: close runs them last pushed first.
type closers []func()

func (c *closers) push(f func()) { *c = append(*c, f) }

func (c closers) close() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// Addr is the delivery listener's address.
func (in *Server) Addr() net.Addr { return in.addr }

// AdminAddr is the admin listener's address, nil when admin.listen is
// empty.
func (in *Server) AdminAddr() net.Addr { return in.adminAddr }

// Err reports a failure that stops the gateway: a listener that failed
// while serving, or a store found (once it answered) to be written by a
// newer schema.
func (in *Server) Err() <-chan error { return in.errc }

// Reload re-reads the config at path (SIGHUP, POST /admin/reload) and,
// with TLS, the certificate files the running tls block names. When
// either fails to load, it logs and returns the error, counts
// clawgate_config_reloads_total{result="error"} and keeps the running
// config and certificate. Listeners, store and the local window stay as
// started: each of their settings the file changes is logged as taking
// effect at the next restart.
func (in *Server) Reload(path string) error {
	in.reloadMu.Lock()
	defer in.reloadMu.Unlock()
	cfg, err := config.Load(path)
	if err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload failed; keeping the running config", "error", err.Error())
		return err
	}
	var cert *tls.Certificate
	if in.cfg.TLS.CertFile != "" {
		if cert, err = loadCertificate(in.cfg.TLS); err != nil {
			in.metrics.ConfigReloads.WithLabelValues("error").Inc()
			in.log.Error("config reload failed: the TLS certificate does not load; keeping the running config and certificate", "error", err.Error())
			return fmt.Errorf("tls: %w", err)
		}
	}
	if err := in.access.reopen(cfg.Log.AccessFile, in.log); err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload failed: log.access_file does not open; keeping the running config and access log", "error", err.Error())
		return err
	}
	for _, w := range cfg.Warnings {
		in.log.Warn(w)
	}
	started := in.cfg
	if in.listen != "" {
		cfg.Listen = in.listen
	}
	for _, field := range config.RestartFields(started, cfg) {
		in.log.Warn("config reload: " + field + " changed; it takes effect at the next restart")
	}
	config.KeepRestartFields(started, cfg)
	// A queue route that still holds events stays one until they drain.
	if err := in.checkQueueLeaving(cfg, path); err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload refused; keeping the running config", "error", err.Error())
		return err
	}
	leaving := leavingQueue(in.gw.Config(), cfg)
	// The queue routes' workers follow the new routes before the gateway
	// sends them deliveries.
	if err := in.queue.Apply(context.Background(), queueRoutes(cfg)); err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload failed; keeping the running config", "error", err.Error())
		return err
	}
	if err := prepareSyncRoutes(cfg, in.qb); err != nil {
		in.metrics.ConfigReloads.WithLabelValues("error").Inc()
		in.log.Error("config reload failed; keeping the running config", "error", err.Error())
		return err
	}
	in.gw.Reload(cfg)
	in.reportParked(leaving)
	if cert != nil {
		if old := in.cert.Swap(cert); old == nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
			attrs := []any{"cert_file", started.TLS.CertFile}
			if cert.Leaf != nil {
				attrs = append(attrs, "not_after", cert.Leaf.NotAfter)
			}
			in.log.Info("tls certificate replaced", attrs...)
		}
	}
	in.metrics.ConfigReloads.WithLabelValues("ok").Inc()
	in.log.Info("config reloaded", "routes", len(cfg.Routes))
	return nil
}

// configReloader is the admin API's POST /admin/reload: a reload of the
// file the running config was loaded from.
type configReloader struct{ in *Server }

func (r configReloader) Reload() error {
	if r.in.cfg.Path == "" {
		return errors.New("the running config was not loaded from a file")
	}
	return r.in.Reload(r.in.cfg.Path)
}

// certificate returns the current TLS certificate (tls.Config.GetCertificate).
func (in *Server) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return in.cert.Load(), nil
}

// loadCertificate reads the key pair t names.
func loadCertificate(t config.TLS) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Shutdown stops accepting, lets requests in flight finish for up to grace
// (and finished keys still being recorded), releases the locks of those it
// had to cut, stops the background work and closes the store.
func (in *Server) Shutdown(grace time.Duration) {
	in.notify("STOPPING=1")
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := in.door.Shutdown(ctx); err != nil {
		in.log.Warn("grace period over; cutting requests in flight", "error", err.Error())
		in.door.Close()
	}
	// The queue's workers stop reading and get what is left of the grace
	// period for the tries they hold; the rest go back for another
	// instance (or the next start) to take.
	in.queue.Close(time.Until(deadline(ctx)))
	closeBackend(in.qb)
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
	in.gw.Close()
	if in.admin != nil {
		in.admin.Close()
	}
	in.stopBG()
	in.alerts.Close(rctx)
	// The spans still queued go to the collector, for at most
	// tracing.ShutdownTimeout.
	tctx, tcancel := context.WithTimeout(context.Background(), tracing.ShutdownTimeout)
	defer tcancel()
	if err := in.tracer.Shutdown(tctx); err != nil {
		in.log.Warn("tracing: spans still queued at shutdown were not exported", "error", err.Error())
	}
	in.store.Close()
	in.access.close()
	in.acme.close()
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// syncStore is the store the sync routes' keys live in: with Redis, the
// ledger's key records, placed where the route's queue keeps its keys
// (the Redis Streams queue's shards, or the Kafka queue's ledger; with
// the memory queue, where a Redis Streams queue of queue.shards would);
// the memory store otherwise.
func syncStore(cfg *config.Config, raw storeBackend, qb queue.Backend) (store.Store, error) {
	r, ok := raw.(*store.Redis)
	if !ok {
		return raw.(store.Store), nil
	}
	var place ledger.Place
	switch q := qb.(type) {
	case *queue.Redis:
		if err := prepareSyncRoutes(cfg, q); err != nil {
			return nil, err
		}
		place = q.SyncPlace()
	default:
		if cfg.Queue.Backend == config.QueueKafka {
			place = ledger.KafkaPlace(r.KeyPrefix())
		} else {
			shards := max(cfg.Queue.Shards, 1)
			place = ledger.StreamsPlace(r.KeyPrefix(), func(string) int { return shards })
		}
	}
	// Records of the previous schema are answered for as long as they
	// can live: the longest retention, and a lock's TTL.
	var legacy time.Duration
	for i := range cfg.Routes {
		legacy = max(legacy, cfg.Routes[i].Retention)
	}
	legacy += cfg.Dedupe.LockTTL
	rs := ledger.NewRedisStore(r, place, ledger.SyncOptions{ResetHold: cfg.Dedupe.LockTTL}, legacy)
	rs.SetHistory(historyOptions(cfg))
	return rs, nil
}

// historyOptions are the keys' history as cfg sets it.
func historyOptions(cfg *config.Config) ledger.HistoryOptions {
	return ledger.HistoryOptions{Cap: cfg.Dedupe.History, Keep: cfg.Dedupe.Retention, Instance: instanceName}
}

// instanceName names this instance in the keys' history: host and
// process id.
var instanceName = func() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}()

// prepareSyncRoutes fixes the shard count of cfg's sync routes on the
// Redis Streams queue (their keys live in their shards' slots); a Redis
// that does not answer is no error (the count is used all the same).
func prepareSyncRoutes(cfg *config.Config, qb queue.Backend) error {
	q, ok := qb.(*queue.Redis)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		if r.Queued() {
			continue
		}
		if err := q.PrepareKeys(ctx, r.Name, max(cfg.Queue.Shards, 1)); err != nil && !errors.Is(err, queue.ErrUnavailable) {
			return err
		}
	}
	return nil
}

// redisClient is a store on Redis whose client the queue shares.
type redisClient interface {
	Client() redis.UniversalClient
	RunScript(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd
	RunDurable(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd
	KeyPrefix() string
	OpTimeout() time.Duration
}

// syncKeyer names the sync store's Redis keys of a scoped key.
type syncKeyer interface {
	SyncKeys(scoped string) (lock, done, attempts string)
}

// openQueue builds the queue backend: Kafka (keys in the store), the
// store's Redis, or this process's memory.
func openQueue(cfg *config.Config, st storeBackend, m *metrics.Metrics, log *slog.Logger) (queue.Backend, error) {
	queued := 0
	for i := range cfg.Routes {
		if cfg.Routes[i].Queued() {
			queued++
		}
	}
	switch cfg.Queue.Backend {
	case config.QueueKafka:
		return openKafka(cfg, st, m, log)
	case config.QueueRedis:
		rc, ok := st.(redisClient)
		if !ok {
			return nil, fmt.Errorf("queue.backend: redis needs the store on Redis")
		}
		q := queue.NewRedis(rc.Client(), rc.KeyPrefix(), rc.OpTimeout())
		q.SetHistory(historyOptions(cfg))
		q.UseBatcher(rc.RunScript)
		q.UseDurable(rc.RunDurable)
		// A route switched from sync to queue before the store moved to
		// schema 2 answers a retry of an event finished before the switch
		// from its schema-1 sync record, read in the enqueue's script
		// where it shares the slot (while such records may live): not on
		// a Cluster, where the gateway reads it first instead (proxy).
		if sk, ok := st.(syncKeyer); ok {
			if _, cluster := rc.Client().(*redis.ClusterClient); !cluster {
				q.CheckSyncRecords(func(route, key string) (string, string, string) { return sk.SyncKeys(idkey.Scoped(route, key)) })
			}
		}
		return q, nil
	default:
		if queued > 0 {
			log.Warn("memory queue: queued events are kept in this process only and lost when it stops; use store.backend: redis to keep them", "queue_routes", queued)
		}
		if ms, ok := st.(*ledger.MemoryStore); ok {
			// One record per key: the queue keeps its keys in the memory
			// store's ledger, under the store's budget.
			return queue.NewMemoryOn(ms.Ledger()), nil
		}
		mq := queue.NewMemory()
		budget(mq.Keys(), cfg, st, m)
		return mq, nil
	}
}

// budget counts the finished keys a memory ledger of its own remembers
// against the memory store's budget, after the store's own keys (a store
// that is not the ledger's MemoryStore, as in tests).
func budget(keys *ledger.Memory, cfg *config.Config, st storeBackend, m *metrics.Metrics) {
	keys.MaxBytes = int64(cfg.Store.Memory.MaxBytes)
	keys.OnEvict = m.StoreEvictions.Inc
	if mem, ok := st.(interface{ Bytes() int64 }); ok {
		keys.Others = mem.Bytes
	}
}

// openKafka builds the Kafka backend; the keys' ledger is the store's
// Redis, or this process's memory with the memory store.
func openKafka(cfg *config.Config, st storeBackend, m *metrics.Metrics, log *slog.Logger) (queue.Backend, error) {
	k := cfg.Queue.Kafka
	var keys ledger.Ledger
	if rc, ok := st.(redisClient); ok {
		l := ledger.NewRedis(rc.Client(), rc.KeyPrefix(), rc.OpTimeout())
		l.UseBatcher(rc.RunScript)
		l.UseDurable(rc.RunDurable)
		l.SetHistory(historyOptions(cfg))
		keys = l
	} else if ms, ok := st.(*ledger.MemoryStore); ok {
		// One record per key: the memory store's ledger.
		keys = ms.Ledger()
	} else {
		mem := ledger.NewMemory(nil)
		budget(mem, cfg, st, m)
		keys = mem
	}
	var mech sasl.Mechanism
	switch a := (scram.Auth{User: k.SASL.Username, Pass: k.SASL.Password}); k.SASL.Mechanism {
	case config.SASLPlain:
		mech = plain.Auth{User: k.SASL.Username, Pass: k.SASL.Password}.AsMechanism()
	case config.SASLScramSHA256:
		mech = a.AsSha256Mechanism()
	case config.SASLScramSHA512:
		mech = a.AsSha512Mechanism()
	}
	return kafka.New(kafka.Options{
		Brokers: k.Brokers, TopicPrefix: k.TopicPrefix, ClientID: k.ClientID, Group: k.Group,
		Partitions: int32(k.Partitions), Replication: int16(k.ReplicationFactor), CreateTopics: k.CreateTopics,
		TLS: k.TLSConfig, SASL: mech, Ledger: keys, Lag: m.SetKafkaLag, Reclaimed: m.QueueReclaimed, Log: log,
		// A rebalance waits for the tries in flight, which the routes'
		// timeouts bound inside lock_ttl.
		DrainWait: cfg.Dedupe.LockTTL,
	})
}

// pinger is the queue backend when /readyz must check it too (Kafka).
func pinger(qb queue.Backend) admin.Pinger {
	if p, ok := qb.(admin.Pinger); ok {
		return p
	}
	return nil
}

// closeBackend closes a queue backend with connections of its own (Kafka).
func closeBackend(qb queue.Backend) {
	if c, ok := qb.(interface{ Close() }); ok {
		c.Close()
	}
}

// queueRoutes are cfg's delivery: queue routes as the queue runs them.
func queueRoutes(cfg *config.Config) []queue.Route {
	var out []queue.Route
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		if !r.Queued() {
			continue
		}
		out = append(out, queue.Route{
			Name: r.Name, Workers: r.Workers, MaxDepth: cfg.Queue.MaxDepth, Retention: r.Retention,
			MaxDLQ: cfg.Queue.MaxDLQ, MaxDLQBytes: int64(cfg.Queue.MaxDLQBytes),
			LockTTL: cfg.Dedupe.LockTTL, Shards: cfg.Queue.Shards,
			Retry:   queue.Retry{MaxAttempts: r.Retry.MaxAttempts, Initial: r.Retry.Initial, Max: r.Retry.Max},
			Pace:    control.Pace{Rate: r.PaceLimit.Rate, Per: r.PaceLimit.Per},
			Breaker: control.Breaker{Failures: r.Breaker.Failures, Cooldown: r.Breaker.Cooldown},
			Ordered: r.Ordered(), OrderHold: r.Order.OnDead == config.OnDeadHold,
		})
	}
	return out
}

// schemaChecker is a store that records its schema version (Redis).
type schemaChecker interface {
	CheckSchema(ctx context.Context) (int, error)
}

// schemaTimeout bounds the schema check at start; schemaRetry is how often
// it is tried again while the store does not answer.
const (
	schemaTimeout = 5 * time.Second
	schemaRetry   = time.Second
)

// checkSchema reads the store's schema version at start (writing it on a
// new store): a newer one than this build knows is an error and the
// gateway does not start. A store that does not answer is not: the
// gateway starts without it, as it always has, and pending is true so the
// check runs again once it answers (awaitSchema).
func checkSchema(st storeBackend, log *slog.Logger) (pending bool, err error) {
	sc, ok := st.(schemaChecker)
	if !ok {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), schemaTimeout)
	defer cancel()
	v, err := sc.CheckSchema(ctx)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		log.Warn("store: the Redis store does not answer, so its schema version is checked once it does", "error", err.Error())
		return true, nil
	case err != nil:
		return false, err
	}
	log.Debug("store: schema version", "version", v)
	return false, nil
}

// awaitSchema checks the store's schema version until the store answers.
// On a newer one the instance fails as a listener would (Err), and the
// process stops.
func (in *Server) awaitSchema(ctx context.Context, sc schemaChecker) {
	t := time.NewTicker(schemaRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, schemaTimeout)
		_, err := sc.CheckSchema(cctx)
		cancel()
		switch {
		case err == nil:
			in.log.Info("store: the Redis store answers; its schema version is one this build knows")
			return
		case errors.Is(err, store.ErrUnavailable):
			continue
		}
		in.log.Error("store: refusing to serve on this store", "error", err.Error())
		select {
		case in.errc <- err:
		default:
		}
		return
	}
}

// storeBackend is where the keys live: the memory store (a store.Store
// itself), or a Redis connection the sync routes' store, the queue and
// the controls share (syncStore makes the store.Store).
type storeBackend interface {
	Ping(ctx context.Context) error
	Close() error
}

// openStore builds the configured store. A Redis that is down does not stop
// the start: /readyz says 503 until it answers.
func openStore(cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (storeBackend, error) {
	switch cfg.Store.Backend {
	case config.BackendRedis:
		store.SetRedisLogger(log)
		r := cfg.Store.Redis
		return store.NewRedis(store.RedisOptions{
			Addrs: r.Addrs, MasterName: r.MasterName, Username: r.Username, Password: r.Password,
			DB: r.DB, TLS: r.TLS, KeyPrefix: r.KeyPrefix,
			WaitReplicas: r.WaitReplicas, WaitTimeout: r.WaitTimeout, OnReplicaShortfall: m.StoreReplicaShortfalls.Inc,
		})
	default:
		log.Info("memory store: idempotency state is kept in this process only and lost on restart")
		mem := ledger.NewMemoryStore(store.MemoryOptions{
			MaxKeys: store.DefaultMaxKeys, MaxBytes: int64(cfg.Store.Memory.MaxBytes),
			OnEvict: m.StoreEvictions.Inc, ResetHold: cfg.Dedupe.LockTTL,
		})
		mem.SetHistory(historyOptions(cfg))
		m.ObserveStoreBytes(mem.Bytes)
		m.SetStoreDurability("no", "no", "", 0) // nothing survives a restart
		return mem, nil
	}
}

// durabilityInterval is how often Redis's persistence settings are read
// again (and so how soon a restart is noticed).
const durabilityInterval = 30 * time.Second

// redisQueueRoutes names cfg's queue routes whose events live in Redis
// (queue.backend redis).
func redisQueueRoutes(cfg *config.Config) []string {
	if cfg == nil || cfg.Queue.Backend != config.QueueRedis {
		return nil
	}
	var names []string
	for i := range cfg.Routes {
		if cfg.Routes[i].Queued() {
			names = append(names, cfg.Routes[i].Name)
		}
	}
	return names
}

// durabilityReporter logs what the durability watch finds when it changes
// (and every Redis restart), and keeps the store gauges current. queued
// names the queue routes kept in Redis (nil: none): a Redis that can lose
// keys loses their queued and dead-lettered events too, which the
// warnings then say.
func durabilityReporter(log *slog.Logger, m *metrics.Metrics, queued func() []string) func(store.Durability, error) {
	var last string
	queueRoutes := func() string {
		if queued == nil {
			return ""
		}
		return strings.Join(queued(), ", ")
	}
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
			if qr := queueRoutes(); qr != "" && aof != "yes" && rdb != "yes" {
				log.Error("redis restarted and writes nothing to disk (no AOF, no snapshots): the queue routes' events that were still queued or dead-lettered are gone too, each already acknowledged to its provider",
					"queue_routes", qr, "aof", aof, "rdb", rdb)
			}
		}
		if msg := strings.Join(d.Problems, "; "); msg != last {
			last = msg
			for _, p := range d.Problems {
				log.Warn("redis can lose idempotency keys: " + p)
			}
			if qr := queueRoutes(); qr != "" && len(d.Problems) > 0 {
				log.Warn("redis can lose the queue routes' events: a restart without persistence (or an eviction) drops every event still queued or dead-lettered, each already acknowledged to its provider; turn on appendonly and set maxmemory-policy noeviction",
					"queue_routes", qr)
			}
			if len(d.Problems) == 0 {
				log.Info("redis keeps its keys through a restart and does not evict them", "aof", aof, "rdb", rdb, "maxmemory_policy", policy)
			}
		}
	}
}
