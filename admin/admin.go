// Package admin serves the admin listener: /metrics, /healthz, /readyz, the
// operator's key API under /admin/ and Go's profiler under /debug/pprof/
// (behind the admin token, like /admin/).
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/store"
)

// Gateway is what the key API needs of the running gateway.
type Gateway interface {
	Config() *config.Config
	// Forget drops a "route:key" from the local window of this instance.
	Forget(scopedKey string)
	// WindowAttempts is this instance's count of a key's deliveries,
	// including the replays from its local window.
	WindowAttempts(scopedKey string) (int64, bool)
}

// Broadcaster tells the other instances that a "route:key" was reset, so
// their local windows stop replaying it. Nil: single instance.
type Broadcaster interface {
	PublishReset(ctx context.Context, scopedKey string) error
}

// Options wires the admin handler.
type Options struct {
	Gatherer    prometheus.Gatherer
	Store       store.Store
	Gateway     Gateway
	Broadcaster Broadcaster
	// Token, when set, is required as "Authorization: Bearer TOKEN" on /admin/.
	Token  string
	Logger *slog.Logger
}

// KeyState is the JSON body of the key API.
type KeyState struct {
	Route       string     `json:"route"`
	Key         string     `json:"key"`
	State       string     `json:"state"`
	Attempts    int64      `json:"attempts"`
	FirstSeen   *time.Time `json:"first_seen"`
	LastSeen    *time.Time `json:"last_seen"`
	Status      int        `json:"status,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
}

// Handler returns the admin listener's handler.
func Handler(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	a := &api{o}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.ready)
	mux.Handle("GET /admin/keys/{route}/{key...}", a.auth(a.getKey))
	mux.Handle("DELETE /admin/keys/{route}/{key...}", a.auth(a.deleteKey))
	// Go's profiler, behind the same token as the key API.
	mux.Handle("GET /debug/pprof/", a.auth(pprof.Index))
	mux.Handle("GET /debug/pprof/profile", a.auth(pprof.Profile))
	mux.Handle("GET /debug/pprof/trace", a.auth(pprof.Trace))
	mux.Handle("GET /debug/pprof/symbol", a.auth(pprof.Symbol))
	mux.Handle("/admin/", a.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}))
	return mux
}

type api struct{ Options }

// ready answers 200 when the store answers, else 503. The store's error
// text (which names addresses) is shown only to a caller with the admin
// token, or on a listener without one.
func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := a.Store.Ping(ctx); err != nil {
		body := map[string]string{"status": "store unavailable"}
		if a.Token == "" || a.tokenOK(r) {
			body["error"] = err.Error()
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// auth guards /admin/ and the profiler. With a token, the caller must send
// "Authorization: Bearer TOKEN" (the scheme in any case, the token compared
// in constant time). Without one, the listener is on loopback, and only a
// request whose Host names a loopback address is served: a web page that
// rebinds its own domain to 127.0.0.1 (DNS rebinding) cannot reset keys or
// read profiles through a browser.
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
		next(w, r)
	})
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
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// routeKey reads {route} and {key}, answering 404 for an unknown route.
func (a *api) routeKey(w http.ResponseWriter, r *http.Request) (route, key string, ok bool) {
	route, key = r.PathValue("route"), r.PathValue("key")
	for _, rc := range a.Gateway.Config().Routes {
		if rc.Name == route {
			if key == "" || strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid key", "route": route})
				return "", "", false
			}
			return route, key, true
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown route", "route": route})
	return "", "", false
}

func (a *api) getKey(w http.ResponseWriter, r *http.Request) {
	route, key, ok := a.routeKey(w, r)
	if !ok {
		return
	}
	st, err := a.Store.Get(r.Context(), route+":"+key)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
		return
	}
	if n, ok := a.Gateway.WindowAttempts(route + ":" + key); ok && n > st.Attempts {
		st.Attempts = n
	}
	writeJSON(w, http.StatusOK, keyState(route, key, st))
}

func (a *api) deleteKey(w http.ResponseWriter, r *http.Request) {
	route, key, ok := a.routeKey(w, r)
	if !ok {
		return
	}
	st, err := a.Store.Delete(r.Context(), route+":"+key)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error(), "route": route})
		return
	}
	a.Gateway.Forget(route + ":" + key)
	if a.Broadcaster != nil {
		if err := a.Broadcaster.PublishReset(r.Context(), route+":"+key); err != nil {
			a.Logger.Warn("admin: could not tell other instances of a key reset", "route", route, "key", key, "error", err.Error())
		}
	}
	a.Logger.Info("admin: key reset", "route", route, "key", key, "state", st.State.String())
	writeJSON(w, http.StatusOK, keyState(route, key, st))
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
