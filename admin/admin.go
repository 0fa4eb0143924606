// Package admin serves the admin listener: /metrics, /healthz, /readyz, the
// operator's key API, the dead-letter queues of the queue routes and config
// reload under /admin/, Go's profiler under /debug/pprof/ (behind the
// admin token, like /admin/) and the web console under /ui/.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// Gateway is what the admin API needs of the running gateway.
type Gateway interface {
	// Config is the running config: its route names for the key API, its
	// store.on_error for /readyz.
	Config() *config.Config
	// Forget drops a "route:key" from the local window of this instance.
	Forget(scopedKey string)
	// WindowState is this instance's count of a key's deliveries,
	// including the replays from its local window, and when it saw the
	// last one.
	WindowState(scopedKey string) (attempts int64, lastSeen time.Time, ok bool)
}

// Broadcaster tells the other instances that a "route:key" was reset, so
// their local windows stop replaying it. Nil: single instance.
type Broadcaster interface {
	PublishReset(ctx context.Context, scopedKey string) error
}

// Reloader reloads the running config from its file, as SIGHUP does. An
// error leaves the running config in place; when it is a *config.Error
// each of its problems is reported on its own.
type Reloader interface {
	Reload() error
}

// Options wires the admin handler.
type Options struct {
	// Gatherer is served on /metrics. When it is also a
	// prometheus.Registerer (a *prometheus.Registry is), Handler registers
	// clawgate_ready and clawgate_store_up on it: gauges read from a store
	// ping at each scrape, matching what /readyz would answer.
	Gatherer    prometheus.Gatherer
	Store       store.Store
	Gateway     Gateway
	Broadcaster Broadcaster
	// Reloader serves POST /admin/reload. Nil: that call answers 501.
	Reloader Reloader
	// Queue serves /admin/dlq/ and the key API of the routes with
	// delivery: queue. Nil: there are none, and the DLQ endpoints answer
	// 404.
	Queue Queue
	// Body reads a dead-lettered event's payload for GET
	// /admin/dlq/{route}/{id}: the body the upstream would get and the
	// request's Content-Type (the gateway passes proxy.QueuedBody). Nil:
	// the payload is shown as the body, without a Content-Type.
	Body func(payload []byte) (body []byte, contentType string, err error)
	// QueueBackend, when set (Kafka), is pinged by /readyz too: while its
	// brokers do not answer, queue routes cannot take events and the
	// instance is not ready.
	QueueBackend Pinger
	// Controls serves /admin/routes: pause and resume of queue routes, and
	// the breaker state in the listing. Nil: the listing shows neither and
	// pause answers 400.
	Controls Controls
	// Counters gives GET /admin/routes this instance's counts of each
	// route's answers (the gateway passes its *metrics.Metrics). Nil:
	// the counts are 0.
	Counters Counters
	// Token, when set, is required as "Authorization: Bearer TOKEN" on /admin/.
	Token  string
	Logger *slog.Logger
}

// Pinger is a backend /readyz checks besides the store.
type Pinger interface {
	Ping(ctx context.Context) error
}

// KeyState is the JSON body of the key API. On a route with delivery:
// queue, State is absent, queued, dead_lettered or finished, ID names the
// key's event (its DLQ entry when dead_lettered) and Attempts counts the
// event's tries.
type KeyState struct {
	Route       string     `json:"route"`
	Key         string     `json:"key"`
	State       string     `json:"state"`
	ID          string     `json:"id,omitempty"`
	Attempts    int64      `json:"attempts"`
	FirstSeen   *time.Time `json:"first_seen"`
	LastSeen    *time.Time `json:"last_seen"`
	Status      int        `json:"status,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
}

// ResetResult is the JSON answer to a reset (DELETE): the key was
// forgotten, and Forgot is the state it had just before.
type ResetResult struct {
	Route string `json:"route"`
	Key   string `json:"key"`
	// Reset is always true: the key's lock, stored outcome and attempt
	// count are gone, and its next delivery is forwarded.
	Reset  bool     `json:"reset"`
	Forgot KeyState `json:"forgot"`
}

// Handler returns the admin listener's handler.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &api{o}
	// The readiness gauges go on the registry behind /metrics when the
	// Gatherer is one (a *prometheus.Registry is).
	if reg, ok := o.Gatherer.(prometheus.Registerer); ok {
		if err := reg.Register(readyCollector{a}); err != nil {
			o.Logger.Warn("admin: clawgate_ready and clawgate_store_up are not exported", "error", err.Error())
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.ready)
	mux.Handle("GET /admin/keys/{route}/{key...}", a.auth(a.getKey))
	mux.Handle("DELETE /admin/keys/{route}/{key...}", a.auth(a.deleteKey))
	mux.Handle("POST /admin/reload", a.auth(a.reload))
	a.dlqRoutes(mux)
	a.routeHandlers(mux)
	// Go's profiler, behind the same token as the key API.
	mux.Handle("GET /debug/pprof/", a.auth(pprof.Index))
	mux.Handle("GET /debug/pprof/profile", a.auth(pprof.Profile))
	mux.Handle("GET /debug/pprof/trace", a.auth(pprof.Trace))
	mux.Handle("GET /debug/pprof/symbol", a.auth(pprof.Symbol))
	mux.Handle("/admin/", a.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}))
	// The console is served before the mux, which would redirect a path
	// with a dot-segment instead of refusing it.
	ui := a.console()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/") {
			ui.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type api struct{ Options }

// pingTimeout bounds the store ping of /readyz and of each scrape.
const pingTimeout = 2 * time.Second

// readiness is what this instance can do, from one store ping.
type readiness struct {
	// status is "ready" (the store answers), "degraded" (it does not, and
	// store.on_error is forward: deliveries are still forwarded, protected
	// by this instance's local window only) or "unavailable" (it does not,
	// and on_error is reject: keyed deliveries are answered 503).
	status string
	// ready: /readyz answers 200 (ready or degraded).
	ready bool
	// storeUp: the store answered the ping.
	storeUp bool
	// err is the store's error when it did not answer.
	err error
	// queueErr is the queue backend's error (Kafka brokers unreachable):
	// the instance is then not ready.
	queueErr error
}

// check pings the store and reads store.on_error from the running config.
func (a *api) check(ctx context.Context) readiness {
	err := a.Store.Ping(ctx)
	if a.QueueBackend != nil {
		if qerr := a.QueueBackend.Ping(ctx); qerr != nil {
			return readiness{status: "unavailable", storeUp: err == nil, err: err, queueErr: qerr}
		}
	}
	switch {
	case err == nil:
		return readiness{status: "ready", ready: true, storeUp: true}
	case a.forwardsOnStoreError():
		return readiness{status: "degraded", ready: true, err: err}
	}
	return readiness{status: "unavailable", err: err}
}

// forwardsOnStoreError reports store.on_error: forward.
func (a *api) forwardsOnStoreError() bool {
	if a.Gateway == nil {
		return false
	}
	cfg := a.Gateway.Config()
	return cfg != nil && cfg.Store.OnError == config.OnErrorForward
}

// ready answers whether this instance can serve deliveries:
//
//   - store answers: 200 {"status":"ready","store":"ok"};
//   - store down, on_error forward: 200 {"status":"degraded","store":"unavailable"}
//     (deliveries are still forwarded, each instance protecting them with
//     its own local window only, so a load balancer or Kubernetes must keep
//     sending them here);
//   - store down, on_error reject: 503 {"status":"unavailable","store":"unavailable"}
//     (keyed deliveries are answered 503 until the store is back).
//
// The store's error text (which names addresses) is added only for a
// caller with the admin token, or on a listener without one.
func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), pingTimeout)
	defer cancel()
	rd := a.check(ctx)
	if rd.queueErr != nil {
		body := map[string]string{"status": rd.status, "store": "ok", "queue": "unavailable",
			"detail": "the delivery queue's Kafka brokers do not answer; queue routes answer 503 until they do"}
		if !rd.storeUp {
			body["store"] = "unavailable"
		}
		if a.Token == "" || a.tokenOK(r) {
			body["error"] = rd.queueErr.Error()
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	if rd.storeUp {
		writeJSON(w, http.StatusOK, map[string]string{"status": rd.status, "store": "ok"})
		return
	}
	body := map[string]string{"status": rd.status, "store": "unavailable"}
	code := http.StatusServiceUnavailable
	if rd.ready {
		code = http.StatusOK
		body["detail"] = "the store does not answer; with store.on_error forward deliveries are forwarded, protected against duplicates by this instance's local window only"
	} else {
		body["detail"] = "the store does not answer; with store.on_error reject keyed deliveries are answered 503 until it does"
	}
	if a.Token == "" || a.tokenOK(r) {
		body["error"] = rd.err.Error()
	}
	writeJSON(w, code, body)
}

// The readiness gauges, computed from a store ping at each scrape.
var (
	readyDesc = prometheus.NewDesc("clawgate_ready",
		"1 when /readyz answers 200 (the store answers, or store.on_error is forward), 0 when keyed deliveries are answered 503 or, with queue.backend kafka, the brokers do not answer.", nil, nil)
	storeUpDesc = prometheus.NewDesc("clawgate_store_up",
		"1 when the idempotency store answered a ping at this scrape, else 0. With clawgate_ready 1 and this 0 the gateway is degraded: store.on_error forward, local protection only.", nil, nil)
)

// readyCollector exports clawgate_ready and clawgate_store_up.
type readyCollector struct{ a *api }

func (c readyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- storeUpDesc
}

func (c readyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	rd := c.a.check(ctx)
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, gaugeBool(rd.ready))
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, gaugeBool(rd.storeUp))
}

func gaugeBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// auth guards /admin/ and the profiler. With a token, the caller must send
// "Authorization: Bearer TOKEN" (the scheme in any case, the token compared
// in constant time). Without one, the listener is on loopback, and only a
// request whose Host names a loopback address is served: a web page that
// rebinds its own domain to 127.0.0.1 (DNS rebinding) cannot reset keys or
// read profiles through a browser. A state-changing request must also be
// one a browser cannot send cross-site without a preflight (crossSite).
func (a *api) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case a.Token == "" && !loopbackHost(r.Host):
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "without an admin token only a loopback Host (localhost, 127.0.0.1, [::1]) is served"})
			return
		case a.Token != "" && !a.tokenOK(r):
			w.Header().Set("WWW-Authenticate", `Bearer realm="clawgate admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong admin token"})
			return
		}
		if msg := crossSite(r); msg != "" {
			a.Logger.Warn("admin: state-changing request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", msg)
			writeJSON(w, http.StatusForbidden, map[string]string{"error": msg})
			return
		}
		next(w, r)
	})
}

// Header must be sent (with any value, such as 1) on every admin request
// that changes state (POST, PUT, PATCH, DELETE), unless the request's
// Content-Type is application/json. Neither can be sent by a web page to
// another site without a CORS preflight, which the admin listener never
// answers: a page the operator opens cannot replay a DLQ, purge an event,
// reset a key or reload the config through the operator's browser, token
// or not. The clawgate CLI sends it.
const Header = "X-Clawgate-Admin"

// originCheck refuses a state-changing request a browser marks as sent
// from another origin: Sec-Fetch-Site not same-origin (or none), or else
// an Origin whose host is not the request's Host.
var originCheck = http.NewCrossOriginProtection()

// crossSite returns why a state-changing request is refused as one a
// browser could have sent from another site, or "" to serve it. Reads
// (GET, HEAD, OPTIONS) are always served: a page cannot read their
// answers cross-site.
func crossSite(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ""
	}
	if err := originCheck.Check(r); err != nil {
		return "a state-changing admin request from another origin is refused (its Origin or Sec-Fetch-Site does not match the admin listener)"
	}
	if r.Header.Get(Header) != "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mt == "application/json" {
		return ""
	}
	return "a state-changing admin request needs the header " + Header + ": 1 (or Content-Type: application/json), which a browser cannot send cross-site without a preflight"
}

// tokenOK reports whether r carries the admin token as a bearer token.
func (a *api) tokenOK(r *http.Request) bool {
	if a.Token == "" {
		return false
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimLeft(token, " ")), []byte(a.Token)) == 1
}

// loopbackHost reports a Host header naming this machine only: localhost,
// 127.0.0.0/8 or ::1, with any port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return config.IsLoopback(host)
}

// routeKey reads {route} and {key}, answering 404 for an unknown route.
func (a *api) routeKey(w http.ResponseWriter, r *http.Request) (route, key string, ok bool) {
	route, key = r.PathValue("route"), r.PathValue("key")
	if !a.knownRoute(w, route) {
		return "", "", false
	}
	if key == "" || strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid key", "route": route})
		return "", "", false
	}
	return route, key, true
}

// knownRoute reports whether the running config has route, answering 404
// when it does not.
func (a *api) knownRoute(w http.ResponseWriter, route string) bool {
	for _, rc := range a.Gateway.Config().Routes {
		if rc.Name == route {
			return true
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("unknown route %q", route), "route": route})
	return false
}

// queueKey reports whether route is a queue route, whose keys live in the
// queue rather than in the store.
func (a *api) queueKey(route string) bool {
	return a.Queue != nil && a.Queue.IsRoute(route)
}

func (a *api) getKey(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.EscapedPath(), "/history") {
		a.getHistory(w, r)
		return
	}
	route, key, ok := a.routeKey(w, r)
	if !ok {
		return
	}
	if ks, ok := a.readKey(w, r, route, key); ok {
		writeJSON(w, http.StatusOK, ks)
	}
}

// readKey reads route's key as the key API reports it; ok false when the
// store or queue did not answer (the error answered).
func (a *api) readKey(w http.ResponseWriter, r *http.Request, route, key string) (KeyState, bool) {
	if a.queueKey(route) {
		qs, err := a.Queue.Get(r.Context(), route, key)
		if err != nil {
			a.queueError(w, route, "", err)
			return KeyState{}, false
		}
		if qs.State == queue.StateAbsent {
			// A route switched from sync to queue answers a key the sync
			// path finished from the store's record: so does the key API.
			st, err := a.Store.Get(r.Context(), idkey.Scoped(route, key))
			if err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
				return KeyState{}, false
			}
			if st.State != store.Absent {
				return a.syncKeyState(route, key, st), true
			}
		}
		return queueKeyState(route, key, qs), true
	}
	st, err := a.Store.Get(r.Context(), idkey.Scoped(route, key))
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
		return KeyState{}, false
	}
	return a.syncKeyState(route, key, st), true
}

// syncKeyState is a sync route's key as the key API reports it, both to a
// get and as what a reset forgot: the store's record with this instance's
// local window counted in. The window answers a copy of a finished key
// without asking the store, so the store alone undercounts the attempts
// (an event sent 5 times, 4 of them replayed from the window, has 1 in
// the store); a reset must read the window before it forgets the key.
func (a *api) syncKeyState(route, key string, st store.KeyState) KeyState {
	if n, last, ok := a.Gateway.WindowState(idkey.Scoped(route, key)); ok {
		st.Attempts = max(st.Attempts, n)
		if last.After(st.LastSeen) {
			st.LastSeen = last
		}
	}
	return keyState(route, key, st)
}

func (a *api) deleteKey(w http.ResponseWriter, r *http.Request) {
	route, key, ok := a.routeKey(w, r)
	if !ok {
		return
	}
	var forgot KeyState
	if a.queueKey(route) {
		// A queued key's delivery is cancelled: its leftover entry is
		// dropped when a worker reads it.
		qs, err := a.Queue.Delete(noted(r, "admin reset"), route, key)
		if err != nil {
			a.queueError(w, route, "", err)
			return
		}
		forgot = queueKeyState(route, key, qs)
		// The store's record of the key, from before a switch from sync,
		// is forgotten too: it would still be answered.
		ctx := noted(r, "admin reset")
		if qs.State != queue.StateAbsent {
			// The queue's delete recorded the reset in the key's history
			// (the store keeps the same record, or none of this key).
			ctx = store.WithNote(ctx, store.Note{Unrecorded: true})
		}
		st, err := a.Store.Delete(ctx, idkey.Scoped(route, key))
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
			return
		}
		if qs.State == queue.StateAbsent && st.State != store.Absent {
			forgot = a.syncKeyState(route, key, st)
		}
	} else {
		st, err := a.Store.Delete(noted(r, "admin reset"), idkey.Scoped(route, key))
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
			return
		}
		forgot = a.syncKeyState(route, key, st)
	}
	a.Gateway.Forget(idkey.Scoped(route, key))
	if a.Broadcaster != nil {
		if err := a.Broadcaster.PublishReset(r.Context(), idkey.Scoped(route, key)); err != nil {
			a.Logger.Warn("admin: could not tell other instances of a key reset", "route", route, "key", key, "error", err.Error())
		}
	}
	a.Logger.Info("admin: key reset", "route", route, "key", key, "state", forgot.State)
	writeJSON(w, http.StatusOK, ResetResult{Route: route, Key: key, Reset: true, Forgot: forgot})
}

// ReloadResult is the JSON answer to POST /admin/reload.
type ReloadResult struct {
	// Status is "reloaded" (200) or "failed" (400: the running config is
	// kept).
	Status string `json:"status"`
	// Errors holds one line per problem when the reload failed.
	Errors []string `json:"errors,omitempty"`
}

// reload reloads the config, as SIGHUP does: 200 {"status":"reloaded"},
// or 400 {"status":"failed","errors":[...]} with the running config kept.
func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if a.Reloader == nil {
		writeJSON(w, http.StatusNotImplemented, map[string]string{"error": "reload is not available on this listener"})
		return
	}
	a.Logger.Info("admin: config reload requested", "remote", r.RemoteAddr)
	if err := a.Reloader.Reload(); err != nil {
		var ce *config.Error
		lines := []string{err.Error()}
		if errors.As(err, &ce) {
			lines = ce.Lines()
		}
		writeJSON(w, http.StatusBadRequest, ReloadResult{Status: "failed", Errors: lines})
		return
	}
	writeJSON(w, http.StatusOK, ReloadResult{Status: "reloaded"})
}

func keyState(route, key string, st store.KeyState) KeyState {
	ks := KeyState{Route: route, Key: key, State: st.State.String(), Attempts: st.Attempts,
		Status: st.Status, Fingerprint: st.Fingerprint}
	if !st.FirstSeen.IsZero() {
		t := st.FirstSeen.UTC()
		ks.FirstSeen = &t
	}
	if !st.LastSeen.IsZero() {
		t := st.LastSeen.UTC()
		ks.LastSeen = &t
	}
	return ks
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
