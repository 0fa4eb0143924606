package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/verify"
)

// route is a config.Route ready for the request path.
type route struct {
	*config.Route
	upstream Upstream
	// upstreamAddr is the upstream's host:port, for the access line.
	upstreamAddr string
	basePath     string // upstream URL path without its trailing slash
	m            *metrics.RouteMetrics
	allow        string // Allow header for 405
	// digester is set on routes with a replay guard (guard.go).
	digester verify.SignedDigester
	// limiter is the route's rate_limit, a bucket per client; nil when
	// the route has none (edge.go).
	limiter *limiter
	// trace is what the route's spans carry (trace.go).
	trace routeTrace
	// signed is the request target the route's signature covers, on a
	// route whose signature covers the URL (public_url); nil otherwise.
	signed *signedTarget
}

// signedTarget is the path and query of a route's public_url, which a
// URL-signed provider's signature covers: a delivery must come with the
// same, or the signature does not cover what the upstream would receive.
type signedTarget struct {
	path, query string
	// decode applies the provider's own decoding to a query before the
	// comparison (HubSpot's), or is nil: the query must be the same bytes.
	decode func(string) string
}

// newSignedTarget returns the signed target of a route whose signature
// covers public_url, or nil.
func newSignedTarget(rc *config.Route) *signedTarget {
	if rc.PublicURL == "" || !verify.UsesURL(rc.Verify) {
		return nil
	}
	u, err := url.Parse(rc.PublicURL)
	if err != nil {
		return nil // config checked it
	}
	st := &signedTarget{path: u.Path, query: u.RawQuery}
	if st.path == "" {
		st.path = "/"
	}
	if rc.Provider == "hubspot" {
		st.decode = hubspotDecode
		st.query = hubspotDecode(st.query)
	}
	return st
}

var errTargetNotSigned = fmt.Errorf("%w: the request's path or query is not public_url's, which the signature covers", verify.ErrMismatch)

// check returns errTargetNotSigned unless path (dot segments resolved)
// and rawQuery are public_url's.
func (st *signedTarget) check(path, rawQuery string) error {
	if st.decode != nil {
		rawQuery = st.decode(rawQuery)
	}
	if path != st.path || rawQuery != st.query {
		return errTargetNotSigned
	}
	return nil
}

// hubspotDecoder is the decoding HubSpot applies to the URL it signs
// (signature v3): these escapes, in either case, read as the character.
var hubspotDecoder = strings.NewReplacer(
	"%3A", ":", "%3a", ":", "%2F", "/", "%2f", "/", "%3F", "?", "%3f", "?", "%40", "@", "%21", "!",
	"%24", "$", "%27", "'", "%28", "(", "%29", ")", "%2A", "*", "%2a", "*", "%2C", ",", "%2c", ",",
	"%3B", ";", "%3b", ";")

func hubspotDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	return hubspotDecoder.Replace(s)
}

// table is one loaded config's routes, swapped whole on reload.
type table struct {
	cfg *config.Config
	// trustedNets are the peers whose forwarding headers are believed.
	trustedNets []netip.Prefix
	exact       map[string][]*route // by match.path
	prefix      []*route            // by match.path_prefix, longest first
	byName      map[string]*route
	// minBody is the smallest max_body of the routes: what the fasthttp
	// front door may read of a body before the steps run.
	minBody int
}

func newTable(cfg *config.Config, m *metrics.Metrics) *table {
	t := &table{cfg: cfg, exact: map[string][]*route{}, trustedNets: cfg.TrustedNets, byName: map[string]*route{}}
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		rt := &route{
			Route:        rc,
			upstream:     NewFastUpstream(rc.UpstreamURL),
			upstreamAddr: hostPort(rc.UpstreamURL),
			basePath:     strings.TrimSuffix(rc.UpstreamURL.EscapedPath(), "/"),
			m:            m.Route(rc.Name),
			allow:        strings.Join(rc.Match.Methods, ", "),
			trace:        newRouteTrace(rc),
		}
		if rc.ReplayGuard {
			rt.digester, _ = rc.Verifier.(verify.SignedDigester)
		}
		rt.limiter = newLimiter(rc.RateLimit)
		rt.signed = newSignedTarget(rc)
		if t.minBody == 0 || int(rc.MaxBody) < t.minBody {
			t.minBody = max(1, int(rc.MaxBody))
		}
		t.byName[rc.Name] = rt
		if rc.Match.Path != "" {
			t.exact[rc.Match.Path] = append(t.exact[rc.Match.Path], rt)
		} else {
			t.prefix = append(t.prefix, rt)
		}
	}
	if t.minBody == 0 {
		t.minBody = 1 // no routes: every request is a 404
	}
	sort.SliceStable(t.prefix, func(i, j int) bool {
		return len(t.prefix[i].Match.PathPrefix) > len(t.prefix[j].Match.PathPrefix)
	})
	return t
}

// close stops the background work of the table's verifiers.
func (t *table) close() {
	for i := range t.cfg.Routes {
		if c, ok := t.cfg.Routes[i].Verifier.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// match picks the route like Nginx picks a location: an exact path first,
// then the longest path prefix; among routes on the same path, the first
// whose host matches. A path that matches but whose methods do not gives
// 405; no path gives 404.
func (t *table) match(in *inbound, path string) (*route, error) {
	var wrongMethod *route
	try := func(rt *route) bool {
		if rt.Match.Host != "" && !strings.EqualFold(rt.Match.Host, hostOnly(in.host)) {
			return false
		}
		for _, m := range rt.Match.Methods {
			if m == in.method {
				return true
			}
		}
		if wrongMethod == nil {
			wrongMethod = rt
		}
		return false
	}
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

// trusted reports whether the peer at remoteAddr (ip:port) is a trusted
// proxy, whose X-Forwarded-For, X-Real-IP and Forwarded headers are kept.
func (t *table) trusted(remoteAddr string) bool {
	if len(t.trustedNets) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, n := range t.trustedNets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// hostOnly strips the port from a Host header value ("[::1]:8080" -> "::1").
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// upstreamURI is the request URI sent upstream: the route's base path, then
// the delivery's path (dot segments resolved) with strip_prefix removed,
// then the query. The path is sent as the caller encoded it unless
// resolving dot segments changed it.
func (rt *route) upstreamURI(in *inbound, path string) string {
	return rt.basePath + rt.routeURI(in, path)
}

// routeURI is upstreamURI without the upstream's base path: what a queue
// route stores, so that a reload that moves the route's upstream sends
// the events already queued to the new upstream under its own base path.
func (rt *route) routeURI(in *inbound, path string) string {
	var p string
	if path == in.path {
		p = in.escapedPath()
	} else {
		p = (&url.URL{Path: path}).EscapedPath()
	}
	if rt.StripPrefix != "" {
		p = strings.TrimPrefix(p, rt.StripPrefix)
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
	}
	if in.rawQuery != "" {
		p += "?" + in.rawQuery
	}
	return p
}

var (
	errPathEscapes   = fail(http.StatusBadRequest, metrics.OutcomeRejected, "path climbs above the root", nil)
	errPathEncoded   = fail(http.StatusBadRequest, metrics.OutcomeRejected, "path has an encoded slash, backslash or NUL", nil)
	errPathDotParams = fail(http.StatusBadRequest, metrics.OutcomeRejected, "path has a dot segment with parameters", nil)
)

// cleanPath returns the request's path with "." and ".." segments resolved
// (RFC 3986 section 5.2.4) and repeated slashes kept as they are. Routes
// are matched on it and it is what is forwarded, so "/hooks/a/../admin"
// and "/hooks/a/%2e%2e/admin" are "/admin", never a path below
// "/hooks/a/" sent on to that route's upstream. A path that climbs above
// the root, or that hides a separator in an escape (%2F, %5C, a backslash
// or NUL), is refused with 400: upstreams disagree on what those mean.
// So is a segment that is "." or ".." before a ";" ("/h/..;/admin",
// "/h/%2e%2e;/admin", "/h/..%3bx/admin"): the gateway reads it as an
// ordinary name, Tomcat, Jetty and Spring drop the parameters and read
// "..", which would climb out of the route's path on the upstream.
func cleanPath(p, raw string) (string, error) {
	if strings.ContainsAny(p, "\\\x00") {
		return "", errPathEncoded
	}
	if hasDotParams(p) {
		return "", errPathDotParams
	}
	if raw != "" {
		for i := strings.IndexByte(raw, '%'); i >= 0 && i+2 < len(raw); {
			if h := raw[i+1 : i+3]; strings.EqualFold(h, "2f") || strings.EqualFold(h, "5c") {
				return "", errPathEncoded
			}
			j := strings.IndexByte(raw[i+1:], '%')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	if !hasDotSegment(p) {
		return p, nil
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			// out[0] is the empty segment before the leading slash.
			if len(out) <= 1 {
				return "", errPathEscapes
			}
			out = out[:len(out)-1]
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	clean := strings.Join(out, "/")
	if !strings.HasPrefix(clean, "/") {
		clean = "/" + clean
	}
	return clean, nil
}

// hasDotParams reports a segment of p that is "." or ".." followed by a
// ";" and anything (path parameters).
func hasDotParams(p string) bool {
	for i := strings.IndexByte(p, ';'); i >= 0; {
		seg := p[:i]
		if j := strings.LastIndexByte(seg, '/'); j >= 0 {
			seg = seg[j+1:]
		}
		if seg == "." || seg == ".." {
			return true
		}
		j := strings.IndexByte(p[i+1:], ';')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// hasDotSegment reports a "." or ".." segment in p.
func hasDotSegment(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '.' || i > 0 && p[i-1] != '/' {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '.' {
			j++
		}
		if j == len(p) || p[j] == '/' {
			return true
		}
	}
	return false
}
