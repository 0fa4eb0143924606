package proxy

import (
	"net"
	"net/http"
	"sort"
	"strings"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/metrics"
)

// route is a config.Route ready for the request path.
type route struct {
	*config.Route
	upstream Upstream
	basePath string // upstream URL path without its trailing slash
	m        *metrics.RouteMetrics
	allow    string // Allow header for 405
}

// table is one loaded config's routes, swapped whole on reload.
type table struct {
	cfg    *config.Config
	exact  map[string][]*route // by match.path
	prefix []*route            // by match.path_prefix, longest first
}

func newTable(cfg *config.Config, m *metrics.Metrics) *table {
	t := &table{cfg: cfg, exact: map[string][]*route{}}
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		rt := &route{
			Route:    rc,
			upstream: NewFastUpstream(rc.UpstreamURL),
			basePath: strings.TrimSuffix(rc.UpstreamURL.EscapedPath(), "/"),
			m:        m.Route(rc.Name),
			allow:    strings.Join(rc.Match.Methods, ", "),
		}
		if rc.Match.Path != "" {
			t.exact[rc.Match.Path] = append(t.exact[rc.Match.Path], rt)
		} else {
			t.prefix = append(t.prefix, rt)
		}
	}
	sort.SliceStable(t.prefix, func(i, j int) bool {
		return len(t.prefix[i].Match.PathPrefix) > len(t.prefix[j].Match.PathPrefix)
	})
	return t
}

// match picks the route like Nginx picks a location: an exact path first,
// then the longest path prefix; among routes on the same path, the first
// whose host matches. A path that matches but whose methods do not gives
// 405; no path gives 404.
func (t *table) match(r *http.Request) (*route, error) {
	var wrongMethod *route
	try := func(rt *route) bool {
		if rt.Match.Host != "" && !strings.EqualFold(rt.Match.Host, hostOnly(r.Host)) {
			return false
		}
		for _, m := range rt.Match.Methods {
			if m == r.Method {
				return true
			}
		}
		if wrongMethod == nil {
			wrongMethod = rt
		}
		return false
	}
	path := r.URL.Path
	for _, rt := range t.exact[path] {
		if try(rt) {
			return rt, nil
		}
	}
	for _, rt := range t.prefix {
		if strings.HasPrefix(path, rt.Match.PathPrefix) && try(rt) {
			return rt, nil
		}
	}
	if wrongMethod != nil {
		se := fail(http.StatusMethodNotAllowed, metrics.OutcomeRejected, "method not allowed", nil)
		return wrongMethod, se
	}
	return nil, fail(http.StatusNotFound, metrics.OutcomeRejected, "no route", nil)
}

// hostOnly strips the port from a Host header value ("[::1]:8080" -> "::1").
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// upstreamURI is the request URI sent upstream: the route's base path, then
// the inbound path with strip_prefix removed, then the query.
func (rt *route) upstreamURI(r *http.Request) string {
	p := r.URL.EscapedPath()
	if rt.StripPrefix != "" {
		p = strings.TrimPrefix(p, rt.StripPrefix)
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
	}
	p = rt.basePath + p
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	return p
}
