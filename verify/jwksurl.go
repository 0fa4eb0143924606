package verify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// defaultJWKSRefresh is jwt.jwks_refresh when unset.
	defaultJWKSRefresh = time.Hour
	// defaultJWKSMinRefresh is jwt.jwks_min_refresh when unset.
	defaultJWKSMinRefresh = time.Minute
	// minJWKSMinRefresh is the smallest jwt.jwks_min_refresh accepted.
	minJWKSMinRefresh = time.Second
	// jwksFetchTimeout bounds one fetch of a jwks_url, body included. A
	// delivery whose kid triggered the fetch waits at most that long.
	jwksFetchTimeout = 5 * time.Second
	// maxJWKSResponse bounds a jwks_url's answer.
	maxJWKSResponse = 1 << 20
	// maxJWKSRedirects bounds the redirects (to the same host) followed.
	maxJWKSRedirects = 3
)

// jwksRemote keeps the keys of a jwt route's jwks_url.
//
// New builds it without fetching anything. The first Verify, or Start,
// starts a goroutine that fetches the set at once and again after
// jwks_refresh (sooner when the answer's Cache-Control max-age says so, but
// never sooner than jwks_min_refresh); after a failed fetch it tries again
// after jwks_min_refresh, doubling up to jwks_refresh. A token whose kid
// names no key (or a delivery while no key is active at all) fetches at once
// too, unless a fetch started less than jwks_min_refresh ago: a flood of
// made-up kids costs the provider at most one request per jwks_min_refresh.
// Deliveries arriving while a fetch is in flight wait for it (at most
// jwksFetchTimeout) instead of starting another.
//
// A fetch succeeds when the answer is 200, at most 1 MiB, and a JWK Set
// with at least one key that fits the algorithms; it then replaces the
// fetched keys whole (a key the provider removed stops verifying). Anything
// else (an error, a timeout, another status, garbage, a redirect to another
// host) keeps the keys of the last good fetch and is logged. Until a first
// fetch succeeds only the keys of jwt.keys and jwt.jwks_file are tried;
// with none, every delivery fails with ErrNoActiveSecret (fail closed).
//
// Close cancels the goroutine and a fetch in flight, and waits for the
// goroutine to end. Verify keeps working afterwards with the keys it had.
type jwksRemote struct {
	url        *url.URL
	shown      string // scheme://host/path: the URL as logged (no query)
	algs       []string
	static     []*jwtKey // jwt.keys and jwt.jwks_file, tried first
	refreshMax time.Duration
	refreshMin time.Duration
	timeout    time.Duration
	client     *http.Client

	// now is the clock of the rate limit; sleep waits d or until ctx is
	// done, reporting whether d passed. Tests replace both before the first
	// Verify or Start.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool

	set     atomic.Pointer[keySet] // static followed by the last good fetch's keys
	log     atomic.Pointer[slog.Logger]
	running atomic.Bool // the goroutine was started

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine ends

	mu       sync.Mutex
	started  bool
	closed   bool
	inflight *jwksFetch // the fetch in progress, if any
	last     *jwksFetch // the last fetch that finished
	lastGood [32]byte   // SHA-256 of the last good answer, to log changes once
}

// jwksFetch is one fetch of the set; done is closed when it has finished.
type jwksFetch struct {
	start  time.Time
	done   chan struct{}
	err    error
	maxAge time.Duration // from Cache-Control; -1: none given
}

// newJWKSRemote checks the jwks_url settings of jc and returns the remote
// key set, or nil without a jwks_url. hmacOnly: the algorithms are HS*.
// Nothing is fetched.
func newJWKSRemote(jc JWTConfig, algs []string, hmacOnly bool) (*jwksRemote, error) {
	if jc.JWKSURL == "" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"jwt.jwks_refresh", jc.JWKSRefresh != 0}, {"jwt.jwks_min_refresh", jc.JWKSMinRefresh != 0}} {
			if f.set {
				return nil, &FieldError{f.name, errors.New("is set without jwt.jwks_url")}
			}
		}
		return nil, nil
	}
	u, err := parseJWKSURL(jc.JWKSURL)
	if err != nil {
		return nil, &FieldError{"jwt.jwks_url", err}
	}
	if hmacOnly {
		return nil, &FieldError{"jwt.jwks_url", errors.New("serves public keys, but the algorithms are HMAC (HS*); use jwt.keys with secret_env or secret_file")}
	}
	refreshMax, refreshMin := jc.JWKSRefresh, jc.JWKSMinRefresh
	switch {
	case refreshMax < 0:
		return nil, &FieldError{"jwt.jwks_refresh", errors.New("must not be negative")}
	case refreshMin < 0:
		return nil, &FieldError{"jwt.jwks_min_refresh", errors.New("must not be negative")}
	}
	if refreshMax == 0 {
		refreshMax = defaultJWKSRefresh
	}
	if refreshMin == 0 {
		refreshMin = min(defaultJWKSMinRefresh, refreshMax)
	}
	switch {
	case refreshMin < minJWKSMinRefresh:
		return nil, &FieldError{"jwt.jwks_min_refresh", fmt.Errorf("is %v; at least %v, so that the provider is not asked more often", refreshMin, minJWKSMinRefresh)}
	case refreshMin > refreshMax:
		return nil, &FieldError{"jwt.jwks_min_refresh", fmt.Errorf("%v is longer than jwt.jwks_refresh (%v)", refreshMin, refreshMax)}
	}
	r := &jwksRemote{
		url:        u,
		shown:      u.Scheme + "://" + u.Host + u.EscapedPath(),
		algs:       slices.Clone(algs),
		refreshMax: refreshMax,
		refreshMin: refreshMin,
		timeout:    jwksFetchTimeout,
		now:        time.Now,
		sleep:      sleepCtx,
		done:       make(chan struct{}),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		transport = t.Clone()
	}
	r.client = &http.Client{Transport: transport, CheckRedirect: r.checkRedirect}
	return r, nil
}

// parseJWKSURL accepts an absolute https URL, or http to a loopback host,
// without credentials. Its errors name the scheme and host only.
func parseJWKSURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, errors.New("is not a valid URL")
	}
	if u.User != nil {
		return nil, errors.New("must not carry credentials (user:password@)")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("must be an absolute URL with a host, such as https://www.googleapis.com/oauth2/v3/certs")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !loopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("uses plain http to %s: use https (http is accepted only for a loopback host: localhost, 127.0.0.0/8, ::1)", u.Hostname())
		}
	default:
		return nil, fmt.Errorf("must be an https URL, not %s", u.Scheme)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// checkRedirect follows a redirect only to the same host (and port), over
// https when the URL was https, at most maxJWKSRedirects times.
func (r *jwksRemote) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxJWKSRedirects {
		return fmt.Errorf("more than %d redirects", maxJWKSRedirects)
	}
	first := via[0].URL
	if !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("redirect to another host (%s) refused", req.URL.Hostname())
	}
	if req.URL.Scheme != first.Scheme {
		return fmt.Errorf("redirect from %s to %s refused", first.Scheme, req.URL.Scheme)
	}
	return nil
}

// sleepCtx waits d, or until ctx is done; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *jwksRemote) logger() *slog.Logger {
	if l := r.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// start starts the background refresh unless it runs or r is closed; log,
// when not nil, is where it logs from now on.
func (r *jwksRemote) start(log *slog.Logger) {
	if log != nil {
		r.log.Store(log)
	}
	if r.running.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.closed {
		return
	}
	r.started = true
	r.running.Store(true)
	go r.run()
}

// close stops the background refresh and waits for it to end.
func (r *jwksRemote) close() {
	r.mu.Lock()
	r.closed = true
	started := r.started
	r.mu.Unlock()
	r.cancel()
	if started {
		<-r.done
	}
	r.client.CloseIdleConnections()
}

// run fetches the set, then again after each wait, until close.
func (r *jwksRemote) run() {
	defer close(r.done)
	failures := 0
	for {
		f := r.fetch(false)
		if f == nil {
			return // closed
		}
		var wait time.Duration
		if f.err != nil {
			failures++
			wait = retryWait(r.refreshMin, r.refreshMax, failures)
		} else {
			failures = 0
			wait = nextRefresh(f.maxAge, r.refreshMin, r.refreshMax)
		}
		if !r.sleep(r.ctx, wait) {
			return
		}
	}
}

// nextRefresh is the wait after a good fetch: the answer's max-age (-1:
// none) within [lo, hi], else hi.
func nextRefresh(maxAge, lo, hi time.Duration) time.Duration {
	if maxAge < 0 {
		return hi
	}
	return min(max(maxAge, lo), hi)
}

// retryWait is the wait after the n-th failed fetch in a row: lo, doubling
// up to hi.
func retryWait(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// refresh fetches the set for a token whose kid no key has, or for a
// delivery while no key is active: it waits for a fetch in flight, or
// starts one unless one started less than jwks_min_refresh ago. The caller
// then reloads the set, which another fetch may have replaced meanwhile.
func (r *jwksRemote) refresh() {
	r.fetch(true)
}

// fetch returns the fetch in flight once it finished, or runs a new one.
// When the last fetch started less than jwks_min_refresh ago it returns
// that one (limited: nil) instead. nil after close.
func (r *jwksRemote) fetch(limited bool) *jwksFetch {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	if f := r.inflight; f != nil {
		r.mu.Unlock()
		<-f.done
		return f
	}
	at := r.now()
	if r.last != nil && at.Sub(r.last.start) < r.refreshMin {
		f := r.last
		r.mu.Unlock()
		if limited {
			return nil
		}
		return f
	}
	f := &jwksFetch{start: at, done: make(chan struct{}), maxAge: -1}
	r.inflight = f
	r.mu.Unlock()

	body, maxAge, err := r.get()
	var keys []*jwtKey
	var warnings []string
	if err == nil {
		keys, warnings, err = parseJWKS(body, r.algs, "jwks_url "+r.shown, false)
	}
	f.err, f.maxAge = err, maxAge
	changed := false
	if err == nil {
		for i, k := range keys {
			if !k.explicit {
				k.id = "jwks_url-" + strconv.Itoa(i)
			}
		}
		r.set.Store(newKeySet(append(slices.Clip(r.static), keys...)))
		sum := sha256.Sum256(body)
		r.mu.Lock()
		changed = sum != r.lastGood
		r.lastGood = sum
		r.mu.Unlock()
	}

	r.mu.Lock()
	r.inflight = nil
	r.last = f
	r.mu.Unlock()
	close(f.done)

	log := r.logger()
	switch {
	case err == nil && changed:
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.id
		}
		log.Info("jwt: jwks_url: key set loaded", "url", r.shown, "keys", len(keys), "kids", ids)
		for _, w := range warnings {
			log.Warn("jwt: "+w, "url", r.shown)
		}
	case err == nil:
		log.Debug("jwt: jwks_url: key set unchanged", "url", r.shown, "keys", len(keys))
	case r.ctx.Err() != nil:
		// Closed while fetching: nothing to report.
	case r.set.Load().anyActive(r.now()):
		log.Warn("jwt: jwks_url: fetch failed; keeping the keys of the last good fetch", "url", r.shown, "error", err.Error())
	default:
		log.Error("jwt: jwks_url: fetch failed and no key is available: deliveries are refused (401, no_active_secret) until a fetch succeeds", "url", r.shown, "error", err.Error())
	}
	return f
}

// get fetches the set: the body of a 200 answer of at most 1 MiB, and its
// Cache-Control max-age (-1: none). Errors name neither the URL's query
// nor any byte of the answer.
func (r *jwksRemote) get() ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url.String(), nil)
	if err != nil {
		return nil, -1, errors.New("cannot build the request")
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	req.Header.Set("User-Agent", "clawgate")
	resp, err := r.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, -1, fmt.Errorf("no complete answer within %v", r.timeout)
		}
		return nil, -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, -1, fmt.Errorf("answered %d, not 200", resp.StatusCode)
	}
	if resp.ContentLength > maxJWKSResponse {
		return nil, -1, errors.New("answer larger than 1MiB")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSResponse+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, -1, fmt.Errorf("no complete answer within %v", r.timeout)
		}
		return nil, -1, fmt.Errorf("reading the answer: %w", err)
	}
	if len(body) > maxJWKSResponse {
		return nil, -1, errors.New("answer larger than 1MiB")
	}
	return body, cacheMaxAge(resp.Header), nil
}

// cacheMaxAge is how long the answer with header h may be kept: its
// Cache-Control max-age less its Age, 0 for no-store or no-cache, -1 when
// it says nothing.
func cacheMaxAge(h http.Header) time.Duration {
	maxAge := time.Duration(-1)
	for _, line := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store", "no-cache":
				return 0
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
				if err == nil && n >= 0 {
					maxAge = time.Duration(min(n, int64(365*24*3600))) * time.Second
				}
			}
		}
	}
	if maxAge > 0 {
		if age, err := strconv.ParseInt(strings.TrimSpace(h.Get("Age")), 10, 64); err == nil && age > 0 {
			maxAge = max(maxAge-time.Duration(min(age, int64(365*24*3600)))*time.Second, 0)
		}
	}
	return maxAge
}
