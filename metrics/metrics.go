// Package metrics defines every Prometheus series clawgate exports, with the
// names and labels the README's metrics table lists (dashboards and alert
// rules depend on them, so they never change). Collectors are
// registered on an injected prometheus.Registerer so tests can read them
// back with Gather().
package metrics

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Metrics holds the gateway's collectors.
type Metrics struct {
	Requests          *prometheus.CounterVec   // webhook_requests_total{route,code}
	Duplicates        *prometheus.CounterVec   // webhook_duplicate_requests_total{route,layer,outcome}
	Processing        *prometheus.HistogramVec // webhook_processing_duration_seconds{route,outcome}
	CacheHits         *prometheus.CounterVec   // idempotency_cache_hits_total{route}
	CacheMisses       *prometheus.CounterVec   // idempotency_cache_misses_total{route}
	SignatureFailures *prometheus.CounterVec   // webhook_signature_failures_total{route,reason}
	SignatureVerified *prometheus.CounterVec   // webhook_signature_verified_total{route,secret_id}
	UpstreamDuration  *prometheus.HistogramVec // webhook_upstream_duration_seconds{route}
	LockReleased      *prometheus.CounterVec   // webhook_lock_released_total{route,reason}
	StoreErrors       *prometheus.CounterVec   // webhook_store_errors_total{op}
	AttemptsExceeded  *prometheus.CounterVec   // webhook_attempts_exceeded_total{route}
	StoreEvictions    prometheus.Counter       // webhook_store_evictions_total
	AlertsSent        *prometheus.CounterVec   // webhook_alerts_total{result}
	ConfigReloads     *prometheus.CounterVec   // clawgate_config_reloads_total{result}
	FinishDeferred    *prometheus.CounterVec   // webhook_finish_deferred_total{route,result}
	SignatureReplays  *prometheus.CounterVec   // webhook_signature_replays_total{route}

	// Store durability and size (store/ owner's block). Set from the
	// store package's checks by the serve wiring: SetStoreDurability,
	// StoreRestarts, StoreReplicaShortfalls, ObserveStoreBytes.
	StoreDurable           prometheus.Gauge     // clawgate_store_durable: 1, 0, -1 unknown
	StorePersistence       *prometheus.GaugeVec // clawgate_store_persistence_info{aof,rdb,maxmemory_policy}
	StoreRestarts          prometheus.Counter   // clawgate_store_restarts_total
	StoreReplicaShortfalls prometheus.Counter   // clawgate_store_replica_shortfalls_total
	storeBytesMu           sync.Mutex
	storeBytes             func() int64 // clawgate_store_memory_bytes; nil: no series

	// Edge refusals (edge controls owner's block): deliveries refused by a
	// route's allow_ips or rate_limit, counted by RouteMetrics.Refused.
	Refused *prometheus.CounterVec // webhook_refused_total{route,reason}

	// Build, config reloads and store latency (operations owner's block).
	BuildInfo     *prometheus.GaugeVec     // clawgate_build_info{version,goversion}
	StoreDuration *prometheus.HistogramVec // webhook_store_duration_seconds{op}

	// In-flight deliveries (tracing and access log owner's block): no
	// labels, since a delivery is counted before its route is matched.
	InFlight prometheus.Gauge // webhook_in_flight_requests

	// Delivery queue (delivery queue owner's block, queue.go): series of
	// `delivery: queue` routes only, created by the route's first
	// SetQueueStats (or any other queue method).
	DLQSize       *prometheus.GaugeVec     // dead_letter_queue_size{route}
	DLQFill       *prometheus.GaugeVec     // dead_letter_queue_fill_ratio{route}
	QueueDepth    *prometheus.GaugeVec     // webhook_queue_depth{route}
	QueueLag      *prometheus.GaugeVec     // webhook_queue_lag_seconds{route}
	QueueAttempts *prometheus.CounterVec   // webhook_delivery_attempts_total{route,outcome}
	QueueDelays   *prometheus.HistogramVec // webhook_queue_delivery_delay_seconds{route}
	QueueReclaims *prometheus.CounterVec   // webhook_queue_reclaimed_total{route}
	DLQReplays    *prometheus.CounterVec   // webhook_dlq_replays_total{route}
	DLQPurges     *prometheus.CounterVec   // webhook_dlq_purges_total{route}
	KafkaLag      *prometheus.GaugeVec     // kafka_consumer_lag{route} (queue.backend kafka)
	queueRoutes   sync.Map                 // route -> struct{}: its queue series exist
	orderRoutes   sync.Map                 // route -> struct{}: its order series exist

	// Route controls (control.go): pause, breaker, pace.
	controls
	ordering
}

// Outcome label values of webhook_processing_duration_seconds and of the
// access log.
const (
	OutcomeForwarded    = "forwarded"
	OutcomeQueued       = "queued" // stored on a queue route and acknowledged
	OutcomeReplayed     = "replayed"
	OutcomeInFlight     = "in_flight"
	OutcomeConflict     = "conflict"
	OutcomeRejected     = "rejected"
	OutcomeUnauthorized = "unauthorized"
	OutcomeUnkeyed      = "unkeyed"
	OutcomeError        = "error"
)

// New creates the collectors and registers them, with the Go and process
// collectors, on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_requests_total",
			Help: "Deliveries answered, by route and HTTP status code.",
		}, []string{"route", "code"}),
		Duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_duplicate_requests_total",
			Help: "Duplicate deliveries caught, by the layer that caught them (cache, store) and what was answered (replayed, in_flight, conflict).",
		}, []string{"route", "layer", "outcome"}),
		Processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhook_processing_duration_seconds",
			Help:    "Time from a delivery's arrival to its answer, by outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "outcome"}),
		CacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idempotency_cache_hits_total",
			Help: "Keyed deliveries answered from the in-process window.",
		}, []string{"route"}),
		CacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idempotency_cache_misses_total",
			Help: "Keyed deliveries not found in the in-process window.",
		}, []string{"route"}),
		SignatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_signature_failures_total",
			Help: "Deliveries refused with 401, by reason.",
		}, []string{"route", "reason"}),
		SignatureVerified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_signature_verified_total",
			Help: "Deliveries whose signature matched, by the secret that matched.",
		}, []string{"route", "secret_id"}),
		UpstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "webhook_upstream_duration_seconds",
			Help:    "Time the upstream took to answer a forwarded delivery.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		LockReleased: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_lock_released_total",
			Help: "Locks released without finishing the key, so the next retry is forwarded, by reason.",
		}, []string{"route", "reason"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_store_errors_total",
			Help: "Store operations that failed, by operation.",
		}, []string{"op"}),
		AttemptsExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_attempts_exceeded_total",
			Help: "Keys delivered more often than alerts.max_attempts (counted once per key).",
		}, []string{"route"}),
		StoreEvictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "webhook_store_evictions_total",
			Help: "Finished keys the memory store evicted before their retention because it was full.",
		}),
		AlertsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_alerts_total",
			Help: "Retry alerts posted to alerts.webhook_url_env, by result (sent, failed, dropped).",
		}, []string{"result"}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clawgate_config_reloads_total",
			Help: "Config reloads (SIGHUP or POST /admin/reload), by result (ok, error: the running config was kept).",
		}, []string{"result"}),
		FinishDeferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_finish_deferred_total",
			Help: "Finished keys the store could not record before the answer went out, kept trying in the background, by result (deferred: started; recorded; not_owner: another copy held the key; gave_up).",
		}, []string{"route", "result"}),
		SignatureReplays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "webhook_signature_replays_total",
			Help: "Validly signed deliveries refused because the same signed request was already accepted under another idempotency key.",
		}, []string{"route"}),
	}
	reg.MustRegister(m.Requests, m.Duplicates, m.Processing, m.CacheHits, m.CacheMisses,
		m.SignatureFailures, m.SignatureVerified, m.UpstreamDuration, m.LockReleased,
		m.StoreErrors, m.AttemptsExceeded, m.StoreEvictions, m.AlertsSent, m.ConfigReloads,
		m.FinishDeferred, m.SignatureReplays,
		ratioCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Series that alerts take increase() of exist from the start at 0.
	for _, op := range []string{"claim", "finish", "release"} {
		m.StoreErrors.WithLabelValues(op)
	}
	// Store durability and size (store/ owner's block).
	m.StoreDurable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clawgate_store_durable",
		Help: "1 when no finished key can be lost by a store restart or eviction (every Redis master persists with AOF or RDB and has maxmemory-policy noeviction), 0 when keys can be lost, -1 when unknown (not checked yet, check failed, or CONFIG refused without AOF).",
	})
	m.StoreDurable.Set(-1)
	m.StorePersistence = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clawgate_store_persistence_info",
		Help: "The Redis store's persistence as last checked, always 1: aof (yes, no), rdb (yes, no, unknown) and maxmemory_policy; unknown when the check failed.",
	}, []string{"aof", "rdb", "maxmemory_policy"})
	m.StoreRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clawgate_store_restarts_total",
		Help: "Durability checks that found a Redis master restarted (its run_id changed since the previous check).",
	})
	m.StoreReplicaShortfalls = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clawgate_store_replica_shortfalls_total",
		Help: "Writes that record an outcome or acknowledge an event (finishes; queue enqueues, settles, replays, purges) that fewer Redis replicas acknowledged than store.redis.wait_replicas asks for (kept on the master all the same).",
	})
	reg.MustRegister(m.StoreDurable, m.StorePersistence, m.StoreRestarts, m.StoreReplicaShortfalls, storeBytesCollector{m})
	// Edge refusals (edge controls owner's block).
	m.Refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "webhook_refused_total",
		Help: "Deliveries refused before their body was read, by reason: ip_not_allowed (403, client not in the route's allow_ips), rate_limited (429, past the route's rate_limit).",
	}, []string{"route", "reason"})
	reg.MustRegister(m.Refused)
	// Build, config reloads and store latency (operations owner's block).
	m.BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clawgate_build_info",
		Help: "Always 1, labelled with the running binary's version and the Go version it was built with.",
	}, []string{"version", "goversion"})
	m.StoreDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "webhook_store_duration_seconds",
		Help:    "Time of each idempotency store call, failed ones included, by operation (claim, finish, release, get, delete, ping).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}, []string{"op"})
	reg.MustRegister(m.BuildInfo, m.StoreDuration)
	for _, op := range StoreOps {
		m.StoreDuration.WithLabelValues(op)
	}
	// A first failed reload must show as an increase from 0; so must the
	// first alert sent or lost.
	for _, result := range []string{"ok", "error"} {
		m.ConfigReloads.WithLabelValues(result)
	}
	for _, result := range []string{"sent", "failed", "dropped"} {
		m.AlertsSent.WithLabelValues(result)
	}
	// In-flight deliveries (tracing and access log owner's block).
	m.InFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "webhook_in_flight_requests",
		Help: "Deliveries being handled right now, from their arrival to their answer (all routes, unmatched requests included).",
	})
	reg.MustRegister(m.InFlight)
	// Delivery queue (delivery queue owner's block).
	m.newQueue(reg)
	m.newControls(reg)
	m.newOrdering(reg)
	return m
}

var ratioDesc = prometheus.NewDesc("idempotency_cache_hit_ratio",
	"Share of keyed deliveries answered from the in-process window: hits / (hits + misses).",
	[]string{"route"}, nil)

type ratioCollector struct{ m *Metrics }

func (c ratioCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ratioDesc }

// Collect derives idempotency_cache_hit_ratio = hits / (hits + misses) per
// route from the two counters at scrape time, so the request path only
// counts.
func (c ratioCollector) Collect(ch chan<- prometheus.Metric) {
	hits, misses := byRoute(c.m.CacheHits), byRoute(c.m.CacheMisses)
	for route, h := range hits {
		v := 0.0
		if total := h + misses[route]; total > 0 {
			v = h / total
		}
		ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, v, route)
	}
}

// byRoute reads a counter vector labelled by route alone.
func byRoute(v *prometheus.CounterVec) map[string]float64 {
	out := map[string]float64{}
	mc := make(chan prometheus.Metric, 16)
	go func() { v.Collect(mc); close(mc) }()
	for pm := range mc {
		var d dto.Metric
		if pm.Write(&d) == nil && len(d.GetLabel()) == 1 {
			out[d.GetLabel()[0].GetValue()] = d.GetCounter().GetValue()
		}
	}
	return out
}

// Series a route has from its start, at 0. The counters alert rules take
// increase() of, the gateway's own 5xx (Upstream5xxRatio, and the
// dashboard's route list) and rare events whose first occurrence matters
// are there before any traffic; the rest, the histograms first of all
// (18 series per label combination), appear with their first observation.
// An idle route costs at most 40 series (queue routes included).
var (
	// preCodes are the webhook_requests_total codes created at 0: the 5xx
	// the gateway answers itself (500, 502 unreachable, 503 store down or
	// queue full, 504 timeout).
	preCodes = []int{500, 502, 503, 504}
	// preDuplicates are the webhook_duplicate_requests_total outcomes
	// created at 0 for both layers: a copy sent while the first is in
	// flight, and a key reused with another body (422). Replays, the
	// common case, appear with the first.
	preDuplicates = []string{OutcomeInFlight, OutcomeConflict}
	// lockReleaseReasons and finishDeferredResults are created at 0
	// (FinishGaveUp takes increase() of result="gave_up").
	lockReleaseReasons    = []string{"timeout", "unreachable", "upstream_status", "client_closed", "expired", "dead_lettered", "queued"}
	finishDeferredResults = []string{"deferred", "recorded", "not_owner", "gave_up"}
)

// Route returns one route's series handle. The series listed above exist
// at 0 from this call; the others are bound on first use and cached, so
// the request path does no label lookups once a series exists.
func (m *Metrics) Route(name string) *RouteMetrics {
	rm := &RouteMetrics{
		m:         m,
		name:      name,
		cacheHit:  m.CacheHits.WithLabelValues(name),
		cacheMiss: m.CacheMisses.WithLabelValues(name),
		upstream: sync.OnceValue(func() prometheus.Observer {
			return m.UpstreamDuration.WithLabelValues(name)
		}),
	}
	m.AttemptsExceeded.WithLabelValues(name)
	for _, reason := range lockReleaseReasons {
		m.LockReleased.WithLabelValues(name, reason)
	}
	for _, result := range finishDeferredResults {
		m.FinishDeferred.WithLabelValues(name, result)
	}
	m.SignatureReplays.WithLabelValues(name)
	for _, layer := range []string{"cache", "store"} {
		for _, o := range preDuplicates {
			rm.dups.get([2]string{layer, o}, rm.newDup)
		}
	}
	for _, c := range preCodes {
		rm.codes.get(c, rm.newCode)
	}
	m.bindRefused(rm) // edge controls owner's block
	return rm
}

// lazy is a copy-on-write map of series bound on first use: reads take no
// lock and do not allocate; a miss binds the series under mu and
// publishes a copy of the map with it.
type lazy[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (l *lazy[K, V]) get(k K, bind func(K) V) V {
	if m := l.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	var next map[K]V
	if old == nil {
		next = make(map[K]V, 1)
	} else {
		next = make(map[K]V, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
	}
	v := bind(k)
	next[k] = v
	l.m.Store(&next)
	return v
}

func (r *RouteMetrics) newCode(code int) prometheus.Counter {
	return r.m.Requests.WithLabelValues(r.name, strconv.Itoa(code))
}

func (r *RouteMetrics) newDup(k [2]string) prometheus.Counter {
	return r.m.Duplicates.WithLabelValues(r.name, k[0], k[1])
}

func (r *RouteMetrics) newProcessing(outcome string) prometheus.Observer {
	return r.m.Processing.WithLabelValues(r.name, outcome)
}

// RouteMetrics is one route's series.
type RouteMetrics struct {
	m          *Metrics
	name       string
	cacheHit   prometheus.Counter
	cacheMiss  prometheus.Counter
	upstream   func() prometheus.Observer // bound on the first forward
	processing lazy[string, prometheus.Observer]
	codes      lazy[int, prometheus.Counter]
	dups       lazy[[2]string, prometheus.Counter] // by layer, outcome
	verified   sync.Map                            // secret id -> prometheus.Counter
	// Edge refusals (edge controls owner's block): webhook_refused_total
	// by reason, bound once in Route().
	refusedIP, refusedRate prometheus.Counter
}

// CacheHit counts a keyed delivery answered from the local window.
func (r *RouteMetrics) CacheHit() { r.cacheHit.Inc() }

// CacheMiss counts a keyed delivery not in the local window.
func (r *RouteMetrics) CacheMiss() { r.cacheMiss.Inc() }

// Duplicate counts a duplicate caught by layer (cache, store).
func (r *RouteMetrics) Duplicate(layer, outcome string) {
	r.dups.get([2]string{layer, outcome}, r.newDup).Inc()
}

// Done records an answered delivery.
// Its webhook_processing_duration_seconds{outcome} series appears with
// the route's first delivery of that outcome.
func (r *RouteMetrics) Done(code int, outcome string, seconds float64) {
	r.codes.get(code, r.newCode).Inc()
	r.processing.get(outcome, r.newProcessing).Observe(seconds)
}

// Upstream records how long the upstream took (the route's
// webhook_upstream_duration_seconds series appears with its first).
func (r *RouteMetrics) Upstream(seconds float64) { r.upstream().Observe(seconds) }

// SignatureFailed counts a 401 by reason.
func (r *RouteMetrics) SignatureFailed(reason string) {
	r.m.SignatureFailures.WithLabelValues(r.name, reason).Inc()
}

// SignatureVerified counts a matched signature by secret id.
func (r *RouteMetrics) SignatureVerified(secretID string) {
	c, ok := r.verified.Load(secretID)
	if !ok {
		c, _ = r.verified.LoadOrStore(secretID, r.m.SignatureVerified.WithLabelValues(r.name, secretID))
	}
	c.(prometheus.Counter).Inc()
}

// LockReleased counts a lock released without finishing, by reason.
func (r *RouteMetrics) LockReleased(reason string) {
	r.m.LockReleased.WithLabelValues(r.name, reason).Inc()
}

// FinishDeferred counts a finish moved to the background, and how it ended.
func (r *RouteMetrics) FinishDeferred(result string) {
	r.m.FinishDeferred.WithLabelValues(r.name, result).Inc()
}

// SignatureReplay counts a signed request refused because it was already
// accepted under another key.
func (r *RouteMetrics) SignatureReplay() { r.m.SignatureReplays.WithLabelValues(r.name).Inc() }

// AttemptsExceeded counts a key past alerts.max_attempts.
func (r *RouteMetrics) AttemptsExceeded() { r.m.AttemptsExceeded.WithLabelValues(r.name).Inc() }

// Edge refusals (edge controls owner's block).

// Reasons of webhook_refused_total.
const (
	RefusedIPNotAllowed = "ip_not_allowed" // 403: client not in allow_ips
	RefusedRateLimited  = "rate_limited"   // 429: past rate_limit
)

// bindRefused creates rm's webhook_refused_total series at 0, for each
// reason, so that a refusal (most often during a flood) does no label
// lookups; the 403 and 429 series of webhook_requests_total are bound by
// the first refusal.
func (m *Metrics) bindRefused(rm *RouteMetrics) {
	rm.refusedIP = m.Refused.WithLabelValues(rm.name, RefusedIPNotAllowed)
	rm.refusedRate = m.Refused.WithLabelValues(rm.name, RefusedRateLimited)
}

// Refused counts a delivery refused by allow_ips (RefusedIPNotAllowed) or
// rate_limit (RefusedRateLimited).
func (r *RouteMetrics) Refused(reason string) {
	switch reason {
	case RefusedIPNotAllowed:
		r.refusedIP.Inc()
	case RefusedRateLimited:
		r.refusedRate.Inc()
	default:
		r.m.Refused.WithLabelValues(r.name, reason).Inc()
	}
}

// Store durability and size (store/ owner's block).

// SetStoreDurability sets clawgate_store_durable to durable (1, 0 or -1)
// and replaces every clawgate_store_persistence_info series with the one
// of these labels.
func (m *Metrics) SetStoreDurability(aof, rdb, policy string, durable float64) {
	m.StoreDurable.Set(durable)
	m.StorePersistence.Reset()
	m.StorePersistence.WithLabelValues(aof, rdb, policy).Set(1)
}

// ObserveStoreBytes makes clawgate_store_memory_bytes report f() at every
// scrape (the memory store's estimated size); without it there is no such
// series.
func (m *Metrics) ObserveStoreBytes(f func() int64) {
	m.storeBytesMu.Lock()
	m.storeBytes = f
	m.storeBytesMu.Unlock()
}

var storeBytesDesc = prometheus.NewDesc("clawgate_store_memory_bytes",
	"Estimated size in bytes of the keys the memory store holds, the figure its byte budget bounds.", nil, nil)

type storeBytesCollector struct{ m *Metrics }

func (c storeBytesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- storeBytesDesc }

func (c storeBytesCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.storeBytesMu.Lock()
	f := c.m.storeBytes
	c.m.storeBytesMu.Unlock()
	if f != nil {
		ch <- prometheus.MustNewConstMetric(storeBytesDesc, prometheus.GaugeValue, float64(f()))
	}
}

// Build, config reloads and store latency (operations owner's block).

// StoreOps are the op labels of webhook_store_duration_seconds, one per
// store.Store call.
var StoreOps = []string{"claim", "finish", "release", "get", "delete", "ping"}

// SetBuildInfo sets clawgate_build_info{version,goversion} to 1 for this
// binary ("unknown" when version is empty).
func (m *Metrics) SetBuildInfo(version string) {
	if version == "" {
		version = "unknown"
	}
	m.BuildInfo.Reset()
	m.BuildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// StoreObserver returns the webhook_store_duration_seconds series of op,
// to be bound once (store.NewTimed does) rather than looked up per call.
func (m *Metrics) StoreObserver(op string) prometheus.Observer {
	return m.StoreDuration.WithLabelValues(op)
}
