package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// builder validates a decoded config, resolves what it refers to in the
// environment and compiles its routes, collecting every problem.
type builder struct {
	cfg    *Config
	ps     *problems
	loc    locator
	getenv func(string) string
}

func (b *builder) build() {
	b.checkListen()
	b.checkTLS()
	b.checkTrustedProxies()
	b.checkAdmin()
	b.checkServer()
	b.checkStore()
	b.checkQueue()
	b.checkDedupe()
	b.checkAlerts()
	b.checkTracing()
	b.checkLog()
	b.checkRoutes()
	b.checkQueueRoutes()
}

// line returns the line of a top-level field (0 when it is not written).
func (b *builder) line(path ...any) int { return b.loc.line(path...) }

func (b *builder) checkListen() {
	line := b.line("listen")
	if b.cfg.Listen == "" {
		b.ps.add(line, "listen", `required: the address deliveries are served on, such as ":8080"`)
		return
	}
	if _, _, err := splitHostPort(b.cfg.Listen); err != nil {
		b.ps.add(line, "listen", "%v", err)
	}
}

func (b *builder) checkTLS() {
	t := &b.cfg.TLS
	line := b.line("tls")
	if b.loc.written("tls", "acme") {
		if t.CertFile != "" || t.KeyFile != "" {
			b.ps.add(b.line("tls", "acme"), "tls.acme", "set either cert_file and key_file or acme, not both")
			return
		}
		b.checkACME()
		return
	}
	switch {
	case t.CertFile == "" && t.KeyFile == "":
		return
	case t.KeyFile == "":
		b.ps.add(line, "tls", "cert_file is set but key_file is not; set both or neither")
		return
	case t.CertFile == "":
		b.ps.add(line, "tls", "key_file is set but cert_file is not; set both or neither")
		return
	}
	t.CertFile = b.resolvePath(t.CertFile)
	t.KeyFile = b.resolvePath(t.KeyFile)
	cert, certErr := readRegular(t.CertFile)
	if certErr != nil {
		b.ps.wrap(b.line("tls", "cert_file"), "tls.cert_file", certErr)
	}
	key, keyErr := readRegular(t.KeyFile)
	if keyErr != nil {
		b.ps.wrap(b.line("tls", "key_file"), "tls.key_file", keyErr)
	}
	if certErr != nil || keyErr != nil {
		return
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		b.ps.list = append(b.ps.list, &Problem{File: b.ps.file, Line: line, Field: "tls",
			Msg: fmt.Sprintf("cannot use %s and %s as a key pair: %v", t.CertFile, t.KeyFile, err), Err: err})
	}
}

// checkTrustedProxies parses trusted_proxies into TrustedNets.
func (b *builder) checkTrustedProxies() {
	for i, s := range b.cfg.TrustedProxies {
		line := b.line("trusted_proxies", i)
		field := fmt.Sprintf("trusted_proxies[%d]", i)
		p, err := parseTrustedProxy(s)
		if err != nil {
			b.ps.add(line, field, "%q %v", clip(s), err)
			continue
		}
		if p.Bits() == 0 {
			b.warnAt(line, field, fmt.Sprintf("%q trusts every client: anyone can set X-Forwarded-For; list only the addresses of your proxies", clip(s)))
		}
		b.cfg.TrustedNets = append(b.cfg.TrustedNets, p)
	}
}

// parseTrustedProxy parses a bare IP address or a CIDR prefix. An
// IPv4-mapped IPv6 address or prefix becomes its IPv4 form, and host bits
// are cleared.
func parseTrustedProxy(s string) (netip.Prefix, error) {
	const want = `is not an IP address or CIDR prefix, such as "192.0.2.7" or "10.0.0.0/8"`
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			return netip.Prefix{}, errors.New(want)
		case a.Zone() != "":
			return netip.Prefix{}, errors.New("must not have an IPv6 zone")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New(want)
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// warnAt records a warning about a top-level field.
func (b *builder) warnAt(line int, field, msg string) {
	p := Problem{File: b.ps.file, Line: line, Field: field, Msg: msg}
	b.cfg.Warnings = append(b.cfg.Warnings, p.Error())
}

// resolvePath makes a relative path relative to the config's directory.
func (b *builder) resolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) || b.cfg.Dir == "" {
		return p
	}
	return filepath.Join(b.cfg.Dir, p)
}

// maxFileSize bounds files the config refers to (TLS certificates and keys).
const maxFileSize = 1 << 20

// readRegular reads a regular file of at most maxFileSize bytes; devices
// and pipes are refused so that a config cannot block its loader.
func readRegular(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > maxFileSize {
		return nil, fmt.Errorf("%s is larger than %s", path, ByteSize(maxFileSize))
	}
	return os.ReadFile(path)
}

func (b *builder) checkAdmin() {
	a := &b.cfg.Admin
	if a.TokenEnv != "" {
		a.Token = b.getenv(a.TokenEnv)
	}
	if a.Listen == "" {
		return // admin listener disabled
	}
	line := b.line("admin", "listen")
	host, _, err := splitHostPort(a.Listen)
	if err != nil {
		b.ps.add(line, "admin.listen", "%v", err)
		return
	}
	if a.Token != "" || IsLoopback(host) {
		return
	}
	why := "admin.token_env is empty"
	if a.TokenEnv != "" {
		why = a.TokenEnv + " is unset or empty"
	}
	b.ps.add(line, "admin.listen", "%q is not a loopback address and no admin token is set (%s); set the token or listen on 127.0.0.1", a.Listen, why)
}

func (b *builder) checkServer() {
	switch b.cfg.Server {
	case ServerNetHTTP, ServerFastHTTP:
	default:
		b.ps.add(b.line("server"), "server", "must be net/http or fasthttp, got %q", clip(string(b.cfg.Server)))
	}
}

func (b *builder) checkStore() {
	s := &b.cfg.Store
	switch s.Backend {
	case BackendMemory, BackendRedis:
	default:
		b.ps.add(b.line("store", "backend"), "store.backend", "must be memory or redis, got %q", clip(string(s.Backend)))
	}
	switch s.OnError {
	case OnErrorReject, OnErrorForward:
	default:
		b.ps.add(b.line("store", "on_error"), "store.on_error", "must be reject or forward, got %q", clip(string(s.OnError)))
	}
	if s.Backend == BackendMemory && s.Memory.MaxBytes <= 0 {
		b.ps.add(b.line("store", "memory", "max_bytes"), "store.memory.max_bytes", "must be positive, got %d", int64(s.Memory.MaxBytes))
	}
	if s.Backend != BackendRedis {
		return
	}
	r := &s.Redis
	if len(r.Addrs) == 0 {
		b.ps.add(b.line("store", "redis", "addrs"), "store.redis.addrs", "at least one address is required with store.backend redis")
	}
	for i, addr := range r.Addrs {
		if _, _, err := splitHostPort(addr); err != nil {
			b.ps.add(b.line("store", "redis", "addrs", i), fmt.Sprintf("store.redis.addrs[%d]", i), "%v", err)
		}
	}
	if r.DB < 0 {
		b.ps.add(b.line("store", "redis", "db"), "store.redis.db", "must not be negative, got %d", r.DB)
	}
	if r.WaitReplicas < 0 {
		b.ps.add(b.line("store", "redis", "wait_replicas"), "store.redis.wait_replicas", "must not be negative, got %d", r.WaitReplicas)
	}
	switch {
	case r.WaitTimeout < 0:
		b.ps.add(b.line("store", "redis", "wait_timeout"), "store.redis.wait_timeout", "must not be negative, got %v", r.WaitTimeout)
	case r.WaitTimeout == 0 && r.WaitReplicas > 0:
		b.ps.add(b.line("store", "redis", "wait_timeout"), "store.redis.wait_timeout", "must be positive when wait_replicas is above 0, got %v", r.WaitTimeout)
	}
	if r.PasswordEnv != "" {
		r.Password = b.getenv(r.PasswordEnv)
		if r.Password == "" {
			b.ps.add(b.line("store", "redis", "password_env"), "store.redis.password_env", "%s is unset or empty; set it, or remove password_env for a Redis without a password", clip(r.PasswordEnv))
		}
	}
}

func (b *builder) checkDedupe() {
	d := &b.cfg.Dedupe
	for _, f := range []struct {
		name string
		val  interface{ String() string }
		bad  bool
	}{
		{"window", d.Window, d.Window <= 0},
		{"lock_ttl", d.LockTTL, d.LockTTL <= 0},
		{"retention", d.Retention, d.Retention <= 0},
	} {
		if f.bad {
			b.ps.add(b.line("dedupe", f.name), "dedupe."+f.name, "must be positive, got %v", f.val)
		}
	}
	if d.CacheSize <= 0 {
		b.ps.add(b.line("dedupe", "cache_size"), "dedupe.cache_size", "must be positive, got %d", d.CacheSize)
	}
	if d.History < 0 || d.History > MaxHistory {
		b.ps.add(b.line("dedupe", "history"), "dedupe.history", "must be between 0 and %d, got %d", MaxHistory, d.History)
	}
	if d.ReplayBodyLimit < 0 {
		b.ps.add(b.line("dedupe", "replay_body_limit"), "dedupe.replay_body_limit", "must not be negative, got %d", int64(d.ReplayBodyLimit))
	}
}

func (b *builder) checkAlerts() {
	a := &b.cfg.Alerts
	if a.MaxAttempts < 1 {
		b.ps.add(b.line("alerts", "max_attempts"), "alerts.max_attempts", "must be at least 1, got %d", a.MaxAttempts)
	}
	b.checkRoutingKey()
	if a.WebhookURLEnv == "" {
		return
	}
	line := b.line("alerts", "webhook_url_env")
	a.WebhookURL = b.getenv(a.WebhookURLEnv)
	if a.WebhookURL == "" {
		b.ps.add(line, "alerts.webhook_url_env", "%s is unset or empty; set it, or remove webhook_url_env to alert by log and metric only", clip(a.WebhookURLEnv))
		return
	}
	// The URL often embeds a credential (Slack, PagerDuty): name the
	// variable, never its value.
	if _, err := httpURL(a.WebhookURL); err != nil {
		b.ps.add(line, "alerts.webhook_url_env", "the value of %s %v", clip(a.WebhookURLEnv), err)
		a.WebhookURL = ""
	}
}

// checkRoutingKey resolves alerts.pagerduty_routing_key_env. The key is a
// credential: messages name the variable, never its value.
func (b *builder) checkRoutingKey() {
	a := &b.cfg.Alerts
	if a.PagerDutyRoutingKeyEnv == "" {
		if b.getenv(legacyRoutingKeyEnv) != "" {
			b.warnAt(b.line("alerts"), "alerts", legacyRoutingKeyEnv+" is set but not read; to send it as the PagerDuty routing key, set alerts.pagerduty_routing_key_env: "+legacyRoutingKeyEnv)
		}
		return
	}
	line := b.line("alerts", "pagerduty_routing_key_env")
	a.PagerDutyRoutingKey = b.getenv(a.PagerDutyRoutingKeyEnv)
	switch {
	case a.PagerDutyRoutingKey == "":
		b.ps.add(line, "alerts.pagerduty_routing_key_env", "%s is unset or empty; set it to the PagerDuty integration key, or remove pagerduty_routing_key_env", clip(a.PagerDutyRoutingKeyEnv))
	case a.WebhookURLEnv == "":
		b.ps.add(line, "alerts.pagerduty_routing_key_env", "needs alerts.webhook_url_env, the variable holding the URL alerts are sent to (for PagerDuty https://events.pagerduty.com/v2/enqueue)")
	}
}

// legacyRoutingKeyEnv is the variable the routing key was read from before
// alerts.pagerduty_routing_key_env existed; it is no longer read.
const legacyRoutingKeyEnv = "CLAWGATE_ALERT_ROUTING_KEY"

// splitHostPort checks a listen or dial address.
func splitHostPort(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf(`must be host:port, such as ":8080" or "127.0.0.1:8080", got %q`, clip(addr))
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port == "" || n > 65535 {
		return "", "", fmt.Errorf("port %q of %q is not a number from 0 to 65535", clip(port), clip(addr))
	}
	return host, port, nil
}

// isLoopback reports a host that only this machine can reach: localhost,
// IsLoopback reports a host that only this machine can reach: localhost,
// 127.0.0.0/8 or ::1 (brackets, an IPv6 zone and a trailing dot allowed).
// An empty host (":9090") listens everywhere, so it is not loopback.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	host, _, _ = strings.Cut(host, "%") // IPv6 zone
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// errNotHTTPURL is wrapped by httpURL's errors.
var errNotHTTPURL = errors.New("must be an absolute http or https URL")

// httpURL parses an absolute http(s) URL with a host. Its errors never
// repeat the URL, which may hold a credential.
func httpURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		return nil, fmt.Errorf("%w: it has no scheme, as in http://127.0.0.1:9000", errNotHTTPURL)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %v", errNotHTTPURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: its scheme is %q", errNotHTTPURL, clip(u.Scheme))
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: it has no host", errNotHTTPURL)
	}
	return u, nil
}

// routeError records a problem of route i.
func (b *builder) routeError(i int, path []any, field, format string, args ...any) {
	b.ps.add(b.routeLine(i, path...), where{route: routeLabel(i, b.cfg.Routes[i].Name), field: field}.String(), format, args...)
}

// routeLine returns the line of a field of route i, or of the route.
func (b *builder) routeLine(i int, path ...any) int {
	if l := b.loc.line(append([]any{"routes", i}, path...)...); l > 0 {
		return l
	}
	return b.cfg.Routes[i].Line
}

// matchKey identifies routes that would match the same requests.
type matchKey struct {
	prefix     bool
	path, host string
}

func (b *builder) checkRoutes() {
	routes := b.cfg.Routes
	if len(routes) == 0 {
		b.ps.add(b.line("routes"), "routes", "at least one route is required")
		return
	}
	names := map[string]int{}
	matches := map[matchKey][]int{}
	for i := range routes {
		r := &routes[i]
		b.checkName(i, names)
		b.checkUpstream(i)
		if b.checkMatch(i) {
			k := matchKey{prefix: r.Match.PathPrefix != "", path: r.Match.Path + r.Match.PathPrefix, host: r.Match.Host}
			for _, j := range matches[k] {
				if m := commonMethod(routes[j].Match.Methods, r.Match.Methods); m != "" {
					kind := "path"
					if k.prefix {
						kind = "path_prefix"
					}
					b.routeError(i, []any{"match"}, "match", "same %s %q, host and method %s as %s at line %d; this route would never match",
						kind, clip(k.path), m, routeLabel(j, routes[j].Name), routes[j].Line)
					break
				}
			}
			matches[k] = append(matches[k], i)
		}
		b.expandProvider(i) // provider.go: the route's provider fills in verify and idempotency
		b.checkRouteSettings(i)
		b.checkEdge(i)
		b.checkProtect(i)
		b.checkOrder(i)
		b.compileRoute(i)
	}
}

func (b *builder) checkName(i int, names map[string]int) {
	r := &b.cfg.Routes[i]
	switch {
	case r.Name == "":
		b.routeError(i, []any{"name"}, "name", "required: routes are named in metrics, logs and the admin API")
		return
	case !validName(r.Name):
		b.routeError(i, []any{"name"}, "name", "%q may only contain letters, digits, '-', '_' and '.', and must start with a letter or digit", clip(r.Name))
	}
	if j, dup := names[r.Name]; dup {
		b.routeError(i, []any{"name"}, "name", "duplicate route name %q (first used by routes[%d] at line %d)", clip(r.Name), j, b.cfg.Routes[j].Line)
		return
	}
	names[r.Name] = i
}

// validName reports a route name that is safe in metric labels and in the
// admin API's URL paths.
func validName(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

func (b *builder) checkUpstream(i int) {
	r := &b.cfg.Routes[i]
	if r.Upstream == "" {
		b.routeError(i, []any{"upstream"}, "upstream", "required: the absolute http(s) URL deliveries are forwarded to")
		return
	}
	u, err := httpURL(r.Upstream)
	switch {
	case err != nil:
		b.routeError(i, []any{"upstream"}, "upstream", "%v", err)
		return
	case u.User != nil:
		b.routeError(i, []any{"upstream"}, "upstream", "must not contain credentials")
		return
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(r.Upstream, "#"):
		b.routeError(i, []any{"upstream"}, "upstream", "must not have a query or fragment")
		return
	}
	r.UpstreamURL = u
}

// checkMatch validates and normalises route i's match block; it reports
// whether the block is valid enough to compare with other routes.
func (b *builder) checkMatch(i int) bool {
	m := &b.cfg.Routes[i].Match
	ok := true
	switch {
	case m.Path != "" && m.PathPrefix != "":
		b.routeError(i, []any{"match"}, "match", "path and path_prefix are both set; use one")
		ok = false
	case m.Path == "" && m.PathPrefix == "":
		b.routeError(i, []any{"match"}, "match", "set one of path or path_prefix")
		ok = false
	case m.Path != "" && !strings.HasPrefix(m.Path, "/"):
		b.routeError(i, []any{"match", "path"}, "match.path", "must start with \"/\", got %q", clip(m.Path))
		ok = false
	case m.PathPrefix != "" && !strings.HasPrefix(m.PathPrefix, "/"):
		b.routeError(i, []any{"match", "path_prefix"}, "match.path_prefix", "must start with \"/\", got %q", clip(m.PathPrefix))
		ok = false
	}
	if m.Host != "" {
		host := strings.ToLower(m.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			b.routeError(i, []any{"match", "host"}, "match.host", "must not include a port (the request's port is ignored); use %q", clip(h))
			ok = false
		} else if strings.ContainsAny(host, "/*?# \t") {
			b.routeError(i, []any{"match", "host"}, "match.host", "%q is not a host name (wildcards are not supported)", clip(m.Host))
			ok = false
		}
		m.Host = host
	}
	if len(m.Methods) == 0 {
		b.routeError(i, []any{"match", "methods"}, "match.methods", "must list at least one method, such as POST")
		return false
	}
	methods := make([]string, 0, len(m.Methods))
	seen := map[string]bool{}
	for j, name := range m.Methods {
		if !validToken(name) {
			b.routeError(i, []any{"match", "methods", j}, fmt.Sprintf("match.methods[%d]", j), "%q is not a valid HTTP method", clip(name))
			ok = false
			continue
		}
		if !webhookMethod[strings.ToUpper(name)] {
			b.routeError(i, []any{"match", "methods", j}, fmt.Sprintf("match.methods[%d]", j), "%s", unknownMethod(name))
			ok = false
			continue
		}
		name = strings.ToUpper(name)
		if !seen[name] {
			seen[name] = true
			methods = append(methods, name)
		}
	}
	m.Methods = methods
	return ok
}

// webhookMethods are the methods a route may list: the registered HTTP
// methods that can carry a delivery (CONNECT and TRACE cannot). Any other
// method would make every delivery to the route a 405.
var webhookMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

var webhookMethod = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range webhookMethods {
		m[name] = true
	}
	return m
}()

// unknownMethod explains why a method is refused, with the closest allowed
// method when one is near.
func unknownMethod(name string) string {
	const use = "use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"
	upper := strings.ToUpper(name)
	switch upper {
	case "CONNECT", "TRACE":
		return fmt.Sprintf("%q cannot carry a webhook delivery; %s", clip(name), use)
	}
	best, bestDist := "", 3
	for _, m := range webhookMethods {
		if d := editDistance(upper, m, bestDist); d < bestDist {
			best, bestDist = m, d
		}
	}
	if best != "" {
		return fmt.Sprintf("%q is not a method webhooks are delivered with (did you mean %q?)", clip(name), best)
	}
	return fmt.Sprintf("%q is not a method webhooks are delivered with; %s", clip(name), use)
}

// validToken reports an RFC 9110 token, the syntax of a method name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// commonMethod returns a method in both lists, or "".
func commonMethod(a, b []string) string {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return x
			}
		}
	}
	return ""
}

func (b *builder) checkRouteSettings(i int) {
	r := &b.cfg.Routes[i]
	switch r.Dedupe.Mode {
	case ModeEnforce, ModeShadow, ModeOff:
	default:
		b.routeError(i, []any{"dedupe", "mode"}, "dedupe.mode", "must be enforce, shadow or off, got %q", clip(string(r.Dedupe.Mode)))
	}
	if p := r.StripPrefix; p != "" {
		switch {
		case r.Match.Path != "" && !strings.HasPrefix(r.Match.Path, p):
			b.routeError(i, []any{"strip_prefix"}, "strip_prefix", "%q is not a prefix of match.path %q", clip(p), clip(r.Match.Path))
		case r.Match.PathPrefix != "" && !strings.HasPrefix(r.Match.PathPrefix, p):
			b.routeError(i, []any{"strip_prefix"}, "strip_prefix", "%q is not a prefix of match.path_prefix %q", clip(p), clip(r.Match.PathPrefix))
		}
	}
	lockTTL := b.cfg.Dedupe.LockTTL
	switch {
	case r.Timeout <= 0:
		b.routeError(i, []any{"timeout"}, "timeout", "must be positive, got %v", r.Timeout)
	case lockTTL > 0 && r.Timeout > lockTTL-LockMargin:
		fix := "raise dedupe.lock_ttl"
		if need := r.Timeout + LockMargin; need > r.Timeout { // else it overflows
			fix = fmt.Sprintf("raise dedupe.lock_ttl to at least %v", need)
		}
		if lockTTL > LockMargin {
			fix = fmt.Sprintf("use a timeout of at most %v or %s", lockTTL-LockMargin, fix)
		}
		b.routeError(i, []any{"timeout"}, "timeout",
			"%v leaves less than %v of dedupe.lock_ttl (%v) for claiming and recording the key: the upstream's answer could arrive after the lock expired, and the next copy would be forwarded again; %s",
			r.Timeout, LockMargin, lockTTL, fix)
	}
	if r.Retention < 0 {
		b.routeError(i, []any{"retention"}, "retention", "must not be negative, got %v (0 uses dedupe.retention)", r.Retention)
	}
	if r.MaxBody <= 0 {
		b.routeError(i, []any{"max_body"}, "max_body", "must be positive, got %d", int64(r.MaxBody))
	}
	if len(r.Idempotency.Key) == 0 {
		b.routeError(i, []any{"idempotency", "key"}, "idempotency.key", "must list at least one key source, such as \"header:Idempotency-Key\"")
	}
	b.checkDelivery(i)
}
