package verify

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// waitLimit bounds every wait of these tests for the code under test.
const waitLimit = 10 * time.Second

// jwksServer is a JWKS provider on loopback whose keys the test rotates and
// whose answers it can break; it counts the requests it gets.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64

	mu       sync.Mutex
	keys     []map[string]string
	status   int               // 0: 200
	body     []byte            // not nil: sent instead of the set
	header   http.Header       // added to every answer
	redirect map[string]string // path -> Location (302)
	block    bool              // hold the answer until the client gives up
}

func newJWKSServer(t testing.TB, keys ...map[string]string) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: keys, header: http.Header{}, redirect: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve)) // 127.0.0.1
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	loc, redirect := s.redirect[r.URL.Path]
	status, body, block := s.status, s.body, s.block
	for k, v := range s.header {
		w.Header()[k] = v
	}
	if body == nil {
		body, _ = json.Marshal(map[string]any{"keys": s.keys})
	}
	s.mu.Unlock()
	switch {
	case redirect:
		http.Redirect(w, r, loc, http.StatusFound)
	case block:
		<-r.Context().Done()
	case r.URL.Path != "/jwks.json":
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
		}
		w.Write(body)
	}
}

func (s *jwksServer) url() string { return s.URL + "/jwks.json" }

// rotate replaces the served keys and repairs the answers.
func (s *jwksServer) rotate(keys ...map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.status, s.body, s.block = keys, 0, nil, false
}

// breakWith makes the server answer status and body (body nil: the set).
func (s *jwksServer) breakWith(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func (s *jwksServer) setHeader(k, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header.Set(k, v)
}

// syncBuffer collects log lines written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// jwksHarness is a jwt verifier with a jwks_url, whose rate-limit clock and
// background timer the test drives: the refresher announces each wait on
// waits (after the fetch before it has finished) and waits for fire, which
// advances the clock by that wait.
type jwksHarness struct {
	v     *jwtVerifier
	r     *jwksRemote
	logs  *syncBuffer
	waits chan time.Duration
	fire  chan struct{}

	mu    sync.Mutex
	clock time.Time
}

// newJWKSHarness builds cfg and installs the test clock and timer; it does
// not start the verifier.
func newJWKSHarness(t testing.TB, cfg Config, env Env) *jwksHarness {
	t.Helper()
	vv, _, err := New(cfg, env)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := &jwksHarness{v: asJWT(t, vv), logs: &syncBuffer{}, waits: make(chan time.Duration, 64), fire: make(chan struct{}), clock: now}
	h.r = h.v.remote
	if h.r == nil {
		t.Fatal("no jwks_url remote")
	}
	h.r.now = h.now
	h.r.sleep = func(ctx context.Context, d time.Duration) bool {
		h.waits <- d
		select {
		case <-h.fire:
			h.advance(d)
			return true
		case <-ctx.Done():
			return false
		}
	}
	h.r.log.Store(slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { h.v.Close() })
	return h
}

// started is newJWKSHarness followed by Start and the first fetch.
func startedJWKSHarness(t testing.TB, cfg Config, env Env) *jwksHarness {
	t.Helper()
	h := newJWKSHarness(t, cfg, env)
	h.v.Start(nil)
	h.nextWait(t)
	return h
}

func asJWT(t testing.TB, v Verifier) *jwtVerifier {
	t.Helper()
	switch v := v.(type) {
	case *jwtVerifier:
		return v
	case jwtBodyBound:
		return v.jwtVerifier
	}
	t.Fatalf("not a jwt verifier: %T", v)
	return nil
}

func (h *jwksHarness) now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clock
}

func (h *jwksHarness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clock = h.clock.Add(d)
}

// nextWait returns the wait the refresher asks for next.
func (h *jwksHarness) nextWait(t testing.TB) time.Duration {
	t.Helper()
	select {
	case d := <-h.waits:
		return d
	case <-time.After(waitLimit):
		t.Fatal("the refresher did not finish a fetch")
		return 0
	}
}

// tick ends the refresher's wait and returns its next one (after the fetch
// the tick caused).
func (h *jwksHarness) tick(t testing.TB) time.Duration {
	t.Helper()
	select {
	case h.fire <- struct{}{}:
	case <-time.After(waitLimit):
		t.Fatal("the refresher is not waiting")
	}
	return h.nextWait(t)
}

// wantHits checks how many requests srv has had.
func wantHits(t testing.TB, srv *jwksServer, want int64) {
	t.Helper()
	if got := srv.hits.Load(); got != want {
		t.Fatalf("the JWKS server got %d requests, want %d", got, want)
	}
}

// signer pairs a private key with its algorithm.
type signer struct {
	method jwt.SigningMethod
	key    crypto.Signer
}

func (s signer) token(t testing.TB, kid string, claims jwt.MapClaims) string {
	return token(t, s.method, s.key, kid, claims)
}

func (s signer) jwk(t testing.TB, kid string) map[string]string {
	return jwkOf(t, kid, s.key.Public())
}

// rotationSigners are an old and a new key of each family the providers
// use: RS256 (Google) and ES256 (Plaid).
func rotationSigners(t testing.TB) map[string][2]signer {
	k := getKeys(t)
	ec2, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][2]signer{
		"RS256": {{jwt.SigningMethodRS256, k.rsa}, {jwt.SigningMethodRS256, k.rsa2}},
		"ES256": {{jwt.SigningMethodES256, k.ec256}, {jwt.SigningMethodES256, ec2}},
	}
}

func TestJWKSURLRotation(t *testing.T) {
	for alg, pair := range rotationSigners(t) {
		t.Run(alg, func(t *testing.T) {
			old, next := pair[0], pair[1]
			srv := newJWKSServer(t, old.jwk(t, "old"))
			h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{alg}, JWKSURL: srv.url()}}, testEnv(t, nil))
			wantHits(t, srv, 1)
			check := func(s signer, kid, want, wantID string) {
				t.Helper()
				id, err := h.v.Verify(bearer(s.token(t, kid, claimsAt(now, nil))), nil, now)
				wantReason(t, id, err, want, wantID)
			}
			check(old, "old", "", "old")

			srv.rotate(next.jwk(t, "new")) // the provider adds "new" and removes "old"
			check(next, "new", "mismatch", "")
			wantHits(t, srv, 1) // a fetch started less than jwks_min_refresh ago

			h.advance(time.Minute)
			check(next, "new", "", "new") // the unknown kid fetches the set at once
			wantHits(t, srv, 2)
			check(next, "new", "", "new")
			check(old, "old", "mismatch", "") // removed by the provider
			wantHits(t, srv, 2)

			h.advance(time.Minute)
			check(old, "old", "mismatch", "") // fetched again: still absent
			wantHits(t, srv, 3)
			check(next, "old", "mismatch", "")
			check(old, "new", "mismatch", "")
			check(next, "", "", "new") // no kid: every key is tried
		})
	}
}

func TestJWKSURLBackgroundRefresh(t *testing.T) {
	s := rotationSigners(t)["ES256"]
	srv := newJWKSServer(t, s[0].jwk(t, "a"))
	h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"ES256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
	srv.rotate(s[1].jwk(t, "b"))
	h.tick(t) // jwks_refresh has passed
	wantHits(t, srv, 2)
	id, err := h.v.Verify(bearer(s[1].token(t, "b", claimsAt(now, nil))), nil, now)
	wantReason(t, id, err, "", "b")
	wantHits(t, srv, 2) // known from the background fetch, not fetched for its kid
	id, err = h.v.Verify(bearer(s[0].token(t, "a", claimsAt(now, nil))), nil, now)
	wantReason(t, id, err, "mismatch", "")
	if logs := h.logs.String(); strings.Count(logs, "key set loaded") != 2 {
		t.Errorf("want one log line per new key set:\n%s", logs)
	}
}

func TestJWKSURLRateLimit(t *testing.T) {
	s := rotationSigners(t)["RS256"][0]
	srv := newJWKSServer(t, s.jwk(t, "a"))
	h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
	bogus := func(i int) {
		id, err := h.v.Verify(bearer(s.token(t, fmt.Sprintf("bogus-%d", i), claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "mismatch", "")
	}
	for i := range 50 {
		bogus(i)
	}
	wantHits(t, srv, 1)

	h.advance(time.Minute)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() { bogus(i) })
	}
	wg.Wait()
	wantHits(t, srv, 2) // one fetch for 200 unknown kids at once

	h.advance(59 * time.Second)
	bogus(0)
	wantHits(t, srv, 2)
	h.advance(time.Second)
	bogus(1)
	bogus(2)
	wantHits(t, srv, 3)
	id, err := h.v.Verify(bearer(s.token(t, "a", claimsAt(now, nil))), nil, now)
	wantReason(t, id, err, "", "a")
}

func TestJWKSURLFailuresKeepKeys(t *testing.T) {
	s := rotationSigners(t)["RS256"]
	good, other := s[0], s[1]
	srv := newJWKSServer(t, good.jwk(t, "a"))
	h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
	// The fetch's own limit stays (a 1 MiB answer takes a while on a busy
	// machine); only the server that never answers gets a short one.
	limit := h.r.timeout
	huge := append([]byte(`{"keys":[],"pad":"`), bytes.Repeat([]byte("x"), maxJWKSResponse)...)
	huge = append(huge, `"}`...)
	ecOnly, _ := json.Marshal(map[string]any{"keys": []map[string]string{jwkOf(t, "ec", &getKeys(t).ec256.PublicKey)}})
	hits := int64(1)
	for _, tc := range []struct {
		name   string
		break_ func()
		logged string
	}{
		{"500", func() { srv.breakWith(500, []byte("oops")) }, "answered 500"},
		{"404", func() { srv.breakWith(404, nil) }, "answered 404"},
		{"garbage", func() { srv.breakWith(0, []byte("<html>maintenance</html>")) }, "not a JSON Web Key Set"},
		{"oversized", func() { srv.breakWith(0, huge) }, "larger than 1MiB"},
		{"empty set", func() { srv.breakWith(0, []byte(`{"keys":[]}`)) }, "no key fits"},
		{"no fitting key", func() { srv.breakWith(0, ecOnly) }, "no key fits"},
		{"never answers", func() { h.r.timeout = 200 * time.Millisecond; srv.mu.Lock(); srv.block = true; srv.mu.Unlock() }, "no complete answer within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.break_()
			defer func() { h.r.timeout = limit }()
			defer srv.rotate(good.jwk(t, "a"))
			h.advance(time.Minute)
			id, err := h.v.Verify(bearer(other.token(t, "b", claimsAt(now, nil))), nil, now)
			wantReason(t, id, err, "mismatch", "")
			hits++
			wantHits(t, srv, hits)
			id, err = h.v.Verify(bearer(good.token(t, "a", claimsAt(now, nil))), nil, now)
			wantReason(t, id, err, "", "a")
			logs := h.logs.String()
			if !strings.Contains(logs, "keeping the keys of the last good fetch") || !strings.Contains(logs, tc.logged) {
				t.Errorf("logs do not report %q:\n%s", tc.logged, logs)
			}
			if strings.Contains(logs, "maintenance") || strings.Contains(logs, "oops") || strings.Contains(logs, "xxxx") {
				t.Errorf("logs repeat the answer:\n%s", logs)
			}
		})
	}
	t.Run("oversized without Content-Length", func(t *testing.T) {
		srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range 3 {
				w.Write(bytes.Repeat([]byte(" "), maxJWKSResponse/2))
				w.(http.Flusher).Flush()
			}
		}))
		defer srv2.Close()
		r, err := newJWKSRemote(JWTConfig{JWKSURL: srv2.URL}, []string{"RS256"}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer r.close()
		if _, _, err := r.get(); err == nil || !strings.Contains(err.Error(), "larger than 1MiB") {
			t.Fatalf("get = %v, want too large", err)
		}
	})
	t.Run("a malformed key is skipped", func(t *testing.T) {
		srv.rotate(good.jwk(t, "a"), map[string]string{"kty": "EC", "kid": "bad", "crv": "P-256", "x": "AAAA", "y": "AAAA"}, other.jwk(t, "b"))
		h.advance(time.Minute)
		id, err := h.v.Verify(bearer(other.token(t, "b", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "b")
		if logs := h.logs.String(); !strings.Contains(logs, `key \"bad\" skipped`) {
			t.Errorf("the skipped key is not logged:\n%s", logs)
		}
	})
}

func TestJWKSURLRedirects(t *testing.T) {
	s := rotationSigners(t)["ES256"][0]
	elsewhere := newJWKSServer(t, s.jwk(t, "a"))
	srv := newJWKSServer(t, s.jwk(t, "a"))
	port := srv.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndexByte(port, ':'):]
	srv.redirect["/moved"] = "/jwks.json"                                  // same host: followed
	srv.redirect["/other-port"] = elsewhere.url()                          // 127.0.0.1, another port
	srv.redirect["/other-name"] = "http://localhost" + port + "/jwks.json" // same port, another name
	srv.redirect["/loop"] = "/loop"
	cfg := func(path string) Config {
		return Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"ES256"}, JWKSURL: srv.URL + path}}
	}
	tok := bearer(s.token(t, "a", claimsAt(now, nil)))

	h := startedJWKSHarness(t, cfg("/moved"), testEnv(t, nil))
	id, err := h.v.Verify(tok, nil, now)
	wantReason(t, id, err, "", "a")
	wantHits(t, srv, 2)

	for _, tc := range []struct{ path, logged string }{
		{"/other-port", "redirect to another host (127.0.0.1) refused"},
		{"/other-name", "redirect to another host (localhost) refused"},
		{"/loop", "more than 3 redirects"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h := startedJWKSHarness(t, cfg(tc.path), testEnv(t, nil))
			id, err := h.v.Verify(tok, nil, now)
			wantReason(t, id, err, "no_active_secret", "")
			wantHits(t, elsewhere, 0)
			if logs := h.logs.String(); !strings.Contains(logs, tc.logged) || !strings.Contains(logs, "deliveries are refused") {
				t.Errorf("logs do not say %q:\n%s", tc.logged, logs)
			}
		})
	}
}

func TestJWKSURLCacheControl(t *testing.T) {
	t.Run("cacheMaxAge", func(t *testing.T) {
		for _, tc := range []struct {
			cc, age string
			want    time.Duration
		}{
			{"", "", -1},
			{"public, max-age=19204, must-revalidate, no-transform", "", 19204 * time.Second},
			{"max-age=300", "100", 200 * time.Second},
			{"max-age=300", "400", 0},
			{`max-age="60"`, "", time.Minute},
			{"MAX-AGE=60", "", time.Minute},
			{"max-age=abc", "", -1},
			{"max-age=-5", "", -1},
			{"no-store", "", 0},
			{"max-age=600, no-cache", "", 0},
			{"s-maxage=60", "", -1},
		} {
			h := http.Header{}
			if tc.cc != "" {
				h.Set("Cache-Control", tc.cc)
			}
			if tc.age != "" {
				h.Set("Age", tc.age)
			}
			if got := cacheMaxAge(h); got != tc.want {
				t.Errorf("Cache-Control %q, Age %q: %v, want %v", tc.cc, tc.age, got, tc.want)
			}
		}
	})
	t.Run("the refresher's waits", func(t *testing.T) {
		s := rotationSigners(t)["RS256"][0]
		srv := newJWKSServer(t, s.jwk(t, "a"))
		srv.setHeader("Cache-Control", "public, max-age=300")
		h := newJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSURL: srv.url(), JWKSRefresh: 10 * time.Minute}}, testEnv(t, nil))
		h.v.Start(nil)
		want := func(got, want time.Duration) {
			t.Helper()
			if got != want {
				t.Fatalf("next refresh in %v, want %v", got, want)
			}
		}
		want(h.nextWait(t), 5*time.Minute) // max-age within bounds
		srv.setHeader("Cache-Control", "max-age=5")
		want(h.tick(t), time.Minute) // raised to jwks_min_refresh
		srv.setHeader("Cache-Control", "max-age=86400")
		want(h.tick(t), 10*time.Minute) // lowered to jwks_refresh
		srv.setHeader("Cache-Control", "no-store")
		want(h.tick(t), time.Minute)
		srv.mu.Lock()
		srv.header.Del("Cache-Control")
		srv.mu.Unlock()
		want(h.tick(t), 10*time.Minute) // none: jwks_refresh
		srv.breakWith(503, nil)
		for _, w := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
			want(h.tick(t), w) // failures back off, up to jwks_refresh
		}
		srv.rotate(s.jwk(t, "a"))
		want(h.tick(t), 10*time.Minute)
		wantHits(t, srv, 12)
	})
}

func TestJWKSURLFirstFetch(t *testing.T) {
	pair := rotationSigners(t)["RS256"]
	remoteKey, staticKey := pair[0], pair[1]
	t.Run("fails closed without other keys", func(t *testing.T) {
		srv := newJWKSServer(t, remoteKey.jwk(t, "r"))
		srv.breakWith(500, nil)
		h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
		tok := bearer(remoteKey.token(t, "r", claimsAt(now, nil)))
		id, err := h.v.Verify(tok, nil, now)
		wantReason(t, id, err, "no_active_secret", "")
		wantHits(t, srv, 1)
		if logs := h.logs.String(); !strings.Contains(logs, "deliveries are refused (401, no_active_secret) until a fetch succeeds") {
			t.Errorf("the closed state is not logged:\n%s", logs)
		}
		srv.rotate(remoteKey.jwk(t, "r"))
		h.advance(time.Minute)
		id, err = h.v.Verify(tok, nil, now) // no key at all: fetches at once
		wantReason(t, id, err, "", "r")
		wantHits(t, srv, 2)
	})
	t.Run("keys and jwks_file keys are used meanwhile", func(t *testing.T) {
		srv := newJWKSServer(t, remoteKey.jwk(t, "r"))
		srv.breakWith(500, nil)
		env := testEnv(t, nil)
		writeFile(t, env.Dir, "static.pub", pemPublic(t, staticKey.key.Public()))
		h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{
			Algorithms: []string{"RS256"}, JWKSURL: srv.url(), Keys: []JWTKeyConfig{{ID: "static", PEMFile: "static.pub"}},
		}}, env)
		id, err := h.v.Verify(bearer(staticKey.token(t, "static", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "static")
		id, err = h.v.Verify(bearer(remoteKey.token(t, "r", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "mismatch", "")
		srv.rotate(remoteKey.jwk(t, "r"))
		h.advance(time.Minute)
		id, err = h.v.Verify(bearer(remoteKey.token(t, "r", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "r")
		id, err = h.v.Verify(bearer(staticKey.token(t, "static", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "static")
		id, err = h.v.Verify(bearer(staticKey.token(t, "", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "static")
	})
	t.Run("the first delivery starts it", func(t *testing.T) {
		srv := newJWKSServer(t, remoteKey.jwk(t, "r"))
		h := newJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
		wantHits(t, srv, 0)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				id, err := h.v.Verify(bearer(remoteKey.token(t, "r", claimsAt(now, nil))), nil, now)
				wantReason(t, id, err, "", "r")
			})
		}
		wg.Wait()
		h.nextWait(t) // the refresher runs
		wantHits(t, srv, 1)
	})
}

func TestJWKSURLClose(t *testing.T) {
	s := rotationSigners(t)["ES256"][0]
	cfg := func(srv *jwksServer) Config {
		return Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"ES256"}, JWKSURL: srv.url()}}
	}
	tok := bearer(s.token(t, "a", claimsAt(now, nil)))
	t.Run("after start", func(t *testing.T) {
		srv := newJWKSServer(t, s.jwk(t, "a"))
		h := startedJWKSHarness(t, cfg(srv), testEnv(t, nil))
		var c io.Closer = h.v
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.r.done:
		default:
			t.Fatal("Close returned before the refresher ended")
		}
		h.v.Close() // twice is fine
		h.advance(time.Hour)
		id, err := h.v.Verify(tok, nil, now) // the keys it had
		wantReason(t, id, err, "", "a")
		id, err = h.v.Verify(bearer(s.token(t, "unknown", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "mismatch", "")
		h.v.Start(nil)
		wantHits(t, srv, 1) // nothing fetched after Close
	})
	t.Run("before start", func(t *testing.T) {
		srv := newJWKSServer(t, s.jwk(t, "a"))
		h := newJWKSHarness(t, cfg(srv), testEnv(t, nil))
		h.v.Close()
		h.v.Start(nil)
		id, err := h.v.Verify(tok, nil, now)
		wantReason(t, id, err, "no_active_secret", "")
		wantHits(t, srv, 0)
	})
	t.Run("cancels a fetch in flight", func(t *testing.T) {
		srv := newJWKSServer(t, s.jwk(t, "a"))
		srv.mu.Lock()
		srv.block = true
		srv.mu.Unlock()
		h := newJWKSHarness(t, cfg(srv), testEnv(t, nil))
		h.r.timeout = time.Hour
		done := make(chan error, 1)
		go func() {
			_, err := h.v.Verify(tok, nil, now)
			done <- err
		}()
		for srv.hits.Load() == 0 {
			select {
			case <-done:
				t.Fatal("Verify returned before fetching")
			case <-time.After(time.Millisecond):
			}
		}
		h.v.Close()
		select {
		case err := <-done:
			wantReason(t, "", err, "no_active_secret", "")
		case <-time.After(waitLimit):
			t.Fatal("Close did not cancel the fetch")
		}
		if logs := h.logs.String(); strings.Contains(logs, "fetch failed") {
			t.Errorf("a cancelled fetch is logged as failed:\n%s", logs)
		}
	})
	t.Run("every jwt verifier is a Starter and an io.Closer", func(t *testing.T) {
		env := testEnv(t, nil)
		v := mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{Secret: "jwt-hmac-secret-0123456789abcdef"}}, BodyHashClaim: "h"}}, env)
		if _, ok := v.(Starter); !ok {
			t.Error("not a Starter")
		}
		c, ok := v.(io.Closer)
		if !ok {
			t.Fatal("not an io.Closer")
		}
		v.(Starter).Start(nil)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestJWKSURLGoogleLike(t *testing.T) {
	pair := rotationSigners(t)["RS256"]
	srv := newJWKSServer(t, pair[0].jwk(t, "f5f4bf46e52b31d9b6249f7309ad0338400680cd"))
	srv.setHeader("Cache-Control", "public, max-age=21600, must-revalidate, no-transform")
	const (
		iss = "https://accounts.google.com"
		aud = "https://gateway.example/webhook/pubsub"
	)
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"RS256"},
		JWKSURL:    srv.url(),
		Issuer:     iss,
		Audience:   aud,
		MaxAge:     time.Hour,
		Leeway:     30 * time.Second,
	}}
	h := newJWKSHarness(t, cfg, testEnv(t, nil))
	h.v.Start(nil)
	if w := h.nextWait(t); w != time.Hour {
		t.Errorf("next refresh in %v, want jwks_refresh (1h): Google's max-age is longer", w)
	}
	google := func(s signer, kid string, extra jwt.MapClaims) http.Header {
		c := claimsAt(now, jwt.MapClaims{"iss": iss, "aud": aud, "email": "pubsub@example.iam.gserviceaccount.com", "email_verified": true})
		for k, v := range extra {
			c[k] = v
		}
		return bearer(s.token(t, kid, c))
	}
	body := []byte(`{"message":{"data":"e30=","messageId":"1"},"subscription":"projects/p/subscriptions/s"}`)
	for _, tc := range []struct {
		name string
		h    http.Header
		want string
	}{
		{"valid", google(pair[0], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", nil), ""},
		{"wrong aud", google(pair[0], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", jwt.MapClaims{"aud": "https://other.example"}), "mismatch"},
		{"wrong iss", google(pair[0], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", jwt.MapClaims{"iss": "https://evil.example"}), "mismatch"},
		{"too old", google(pair[0], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", jwt.MapClaims{"iat": now.Add(-2 * time.Hour).Unix()}), "expired"},
		{"other key, known kid", google(pair[1], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", nil), "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := h.v.Verify(tc.h, body, now)
			wantID := ""
			if tc.want == "" {
				wantID = "f5f4bf46e52b31d9b6249f7309ad0338400680cd"
			}
			wantReason(t, id, err, tc.want, wantID)
		})
	}
	// Google publishes the next key beside the current one, then retires the old.
	srv.rotate(pair[0].jwk(t, "f5f4bf46e52b31d9b6249f7309ad0338400680cd"), pair[1].jwk(t, "0c2f7b6a5e2c1b9f4c8a3d7e6f5a4b3c2d1e0f9a"))
	h.advance(time.Minute)
	id, err := h.v.Verify(google(pair[1], "0c2f7b6a5e2c1b9f4c8a3d7e6f5a4b3c2d1e0f9a", nil), body, now)
	wantReason(t, id, err, "", "0c2f7b6a5e2c1b9f4c8a3d7e6f5a4b3c2d1e0f9a")
	id, err = h.v.Verify(google(pair[0], "f5f4bf46e52b31d9b6249f7309ad0338400680cd", nil), body, now)
	wantReason(t, id, err, "", "f5f4bf46e52b31d9b6249f7309ad0338400680cd")
	wantHits(t, srv, 2)
	if _, ok := Verifier(h.v).(SignedDigester); ok {
		t.Error("a jwt route without body_hash_claim digests the body")
	}
}

func TestJWKSURLPlaidLike(t *testing.T) {
	pair := rotationSigners(t)["ES256"]
	const kid1, kid2 = "6c5516e1-92dc-479e-a8ff-5a51992e0001", "bfbd5111-8e33-4643-8ced-b2e642a72f3c"
	srv := newJWKSServer(t, pair[0].jwk(t, kid1))
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{
		Header:        "Plaid-Verification",
		Algorithms:    []string{"ES256"},
		JWKSURL:       srv.url(),
		MaxAge:        5 * time.Minute,
		BodyHashClaim: "request_body_sha256",
	}}
	v, _, err := New(cfg, testEnv(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := v.(SignedDigester)
	if !ok {
		t.Fatal("body_hash_claim with jwks_url is not a SignedDigester")
	}
	h := newJWKSHarness(t, cfg, testEnv(t, nil))
	v.(io.Closer).Close()
	h.v.Start(nil)
	h.nextWait(t)
	body := []byte("{\n  \"environment\": \"sandbox\",\n  \"webhook_code\": \"DEFAULT_UPDATE\"\n}")
	plaid := func(s signer, kid string, at time.Time, b []byte) http.Header {
		return setHeader("Plaid-Verification", s.token(t, kid, jwt.MapClaims{"iat": at.Unix(), "request_body_sha256": bodyHash(b)}))
	}
	for _, tc := range []struct {
		name   string
		h      http.Header
		body   []byte
		want   string
		wantID string
	}{
		{"valid", plaid(pair[0], kid1, now, body), body, "", kid1},
		{"iat too old", plaid(pair[0], kid1, now.Add(-6*time.Minute), body), body, "expired", ""},
		{"body changed", plaid(pair[0], kid1, now, body), flipByte(body, 5), "mismatch", ""},
		{"re-serialised body", plaid(pair[0], kid1, now, body), []byte(`{"environment":"sandbox","webhook_code":"DEFAULT_UPDATE"}`), "mismatch", ""},
		{"unknown kid within min refresh", plaid(pair[1], kid2, now, body), body, "mismatch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := h.v.Verify(tc.h, tc.body, now)
			wantReason(t, id, err, tc.want, tc.wantID)
		})
	}
	srv.rotate(pair[1].jwk(t, kid2)) // Plaid rotated its key
	h.advance(time.Minute)
	id, err := h.v.Verify(plaid(pair[1], kid2, now, body), body, now)
	wantReason(t, id, err, "", kid2)
	id, err = h.v.Verify(plaid(pair[0], kid1, now, body), body, now)
	wantReason(t, id, err, "mismatch", "")
	if got, ok := d.SignedDigest(nil, body); !ok || got != signedDigest(body) {
		t.Error("SignedDigest is not the body's")
	}
}

func TestJWKSURLAlgorithms(t *testing.T) {
	k := getKeys(t)
	rsaJWK := jwkOf(t, "rsa", &k.rsa.PublicKey)
	pinned := jwkOf(t, "pinned", &k.rsa2.PublicKey)
	pinned["alg"] = "RS256"
	srv := newJWKSServer(t, rsaJWK, pinned, jwkOf(t, "ec", &k.ec256.PublicKey))
	h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256", "PS256", "ES256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
	claims := mustJSON(claimsAt(now, nil))
	h.advance(time.Hour) // an unknown kid may fetch: count them
	for _, tc := range []struct {
		name, tok, want, id string
		fetches             int64
	}{
		{"RS256", token(t, jwt.SigningMethodRS256, k.rsa, "rsa", claimsAt(now, nil)), "", "rsa", 0},
		{"PS256 with an unpinned key", token(t, jwt.SigningMethodPS256, k.rsa, "rsa", claimsAt(now, nil)), "", "rsa", 0},
		{"PS256 with a key pinned to RS256", token(t, jwt.SigningMethodPS256, k.rsa2, "pinned", claimsAt(now, nil)), "mismatch", "", 0},
		{"RS256 with the pinned key", token(t, jwt.SigningMethodRS256, k.rsa2, "pinned", claimsAt(now, nil)), "", "pinned", 0},
		{"ES256 naming the RSA key", token(t, jwt.SigningMethodES256, k.ec256, "rsa", claimsAt(now, nil)), "mismatch", "", 0},
		{"alg none", rawToken(`{"alg":"none","kid":"rsa"}`, claims, func(string) []byte { return nil }), "mismatch", "", 0},
		{"HS256 keyed with the JWK's modulus", rawToken(`{"alg":"HS256","kid":"rsa"}`, claims, hmacSign(rsaJWK["n"])), "mismatch", "", 0},
		{"alg none, unknown kid", rawToken(`{"alg":"none","kid":"x"}`, claims, func(string) []byte { return nil }), "mismatch", "", 0},
		{"unknown kid", token(t, jwt.SigningMethodRS256, k.rsa, "x", claimsAt(now, nil)), "mismatch", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.hits.Load()
			id, err := h.v.Verify(bearer(tc.tok), nil, now)
			wantReason(t, id, err, tc.want, tc.id)
			wantHits(t, srv, before+tc.fetches)
		})
	}
	if logs := h.logs.String(); strings.Contains(logs, rsaJWK["n"][:40]) {
		t.Errorf("logs contain key material:\n%s", logs)
	}
}

func TestJWKSURLSigner(t *testing.T) {
	s := rotationSigners(t)["ES256"][0]
	srv := newJWKSServer(t, s.jwk(t, "a"))
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"ES256"}, JWKSURL: srv.url()}}
	env := testEnv(t, nil)
	sg, err := NewSigner(cfg, env, pemPKCS8(t, s.key))
	if err != nil {
		t.Fatal(err)
	}
	hd := http.Header{}
	if err := sg.Sign(hd, nil, now); err != nil {
		t.Fatal(err)
	}
	wantHits(t, srv, 0) // the signer fetches nothing
	h := startedJWKSHarness(t, cfg, env)
	id, err := h.v.Verify(hd, nil, now) // no kid: every key is tried
	wantReason(t, id, err, "", "a")
}

func TestJWKSURLConfig(t *testing.T) {
	srv := newJWKSServer(t)
	env := testEnv(t, nil)
	for _, tc := range []struct {
		name, field, want string
		jc                JWTConfig
	}{
		{"plain http", "jwt.jwks_url", "plain http to keys.example.com", JWTConfig{JWKSURL: "http://keys.example.com/jwks.json"}},
		{"http to a private address", "jwt.jwks_url", "plain http to 10.1.2.3", JWTConfig{JWKSURL: "http://10.1.2.3/jwks.json"}},
		{"ftp", "jwt.jwks_url", "https URL, not ftp", JWTConfig{JWKSURL: "ftp://keys.example.com/jwks.json"}},
		{"relative", "jwt.jwks_url", "absolute URL", JWTConfig{JWKSURL: "keys/jwks.json"}},
		{"no host", "jwt.jwks_url", "absolute URL", JWTConfig{JWKSURL: "https:///jwks.json"}},
		{"opaque", "jwt.jwks_url", "absolute URL", JWTConfig{JWKSURL: "https:keys.example.com"}},
		{"not a URL", "jwt.jwks_url", "not a valid URL", JWTConfig{JWKSURL: "https://keys.example.com:port%/x"}},
		{"credentials", "jwt.jwks_url", "credentials", JWTConfig{JWKSURL: "https://u:hunter2-password@keys.example.com/jwks.json"}},
		{"HMAC algorithms", "jwt.jwks_url", "HMAC", JWTConfig{Algorithms: []string{"HS256"}, JWKSURL: srv.url()}},
		{"refresh without url", "jwt.jwks_refresh", "without jwt.jwks_url", JWTConfig{Keys: []JWTKeyConfig{{PEMFile: "x.pub"}}, JWKSRefresh: time.Hour}},
		{"min refresh without url", "jwt.jwks_min_refresh", "without jwt.jwks_url", JWTConfig{Keys: []JWTKeyConfig{{PEMFile: "x.pub"}}, JWKSMinRefresh: time.Hour}},
		{"negative refresh", "jwt.jwks_refresh", "negative", JWTConfig{JWKSURL: srv.url(), JWKSRefresh: -time.Second}},
		{"negative min refresh", "jwt.jwks_min_refresh", "negative", JWTConfig{JWKSURL: srv.url(), JWKSMinRefresh: -time.Second}},
		{"min refresh too small", "jwt.jwks_min_refresh", "at least 1s", JWTConfig{JWKSURL: srv.url(), JWKSMinRefresh: time.Millisecond}},
		{"min above refresh", "jwt.jwks_min_refresh", "longer than jwt.jwks_refresh", JWTConfig{JWKSURL: srv.url(), JWKSRefresh: time.Minute, JWKSMinRefresh: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := New(Config{Scheme: "jwt", JWT: tc.jc}, env)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a FieldError on %s mentioning %q", err, tc.field, tc.want)
			}
			noLeak(t, err, "hunter2-password", "/jwks.json")
		})
	}
	for _, ok := range []string{
		"https://www.googleapis.com/oauth2/v3/certs",
		"https://keys.example.com:8443/jwks.json?tenant=a",
		"http://localhost:8081/jwks.json",
		"http://127.0.0.2/jwks.json",
		"http://[::1]:9/jwks.json",
		"HTTPS://KEYS.EXAMPLE.COM/jwks.json",
	} {
		v, _, err := New(Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: ok}}, env)
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		v.(io.Closer).Close()
	}
	t.Run("defaults", func(t *testing.T) {
		v := asJWT(t, mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: srv.url()}}, env))
		if v.remote.refreshMax != time.Hour || v.remote.refreshMin != time.Minute || v.remote.timeout != 5*time.Second {
			t.Errorf("refresh %v, min %v, timeout %v", v.remote.refreshMax, v.remote.refreshMin, v.remote.timeout)
		}
		v = asJWT(t, mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: srv.url(), JWKSRefresh: 30 * time.Second}}, env))
		if v.remote.refreshMin != 30*time.Second {
			t.Errorf("min refresh %v, want jwks_refresh when shorter than 1m", v.remote.refreshMin)
		}
	})
	t.Run("New fetches nothing", func(t *testing.T) {
		for range 3 {
			v, warnings, err := New(Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: srv.url() + "?token=query-credential"}}, env)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range warnings {
				noLeak(t, errors.New(w), "query-credential")
			}
			if err := v.(io.Closer).Close(); err != nil {
				t.Fatal(err)
			}
		}
		wantHits(t, srv, 0)
	})
	t.Run("the URL's query is not logged", func(t *testing.T) {
		h := newJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: srv.url() + "?token=query-credential"}}, env)
		h.v.Start(nil)
		h.nextWait(t)
		logs := h.logs.String()
		if !strings.Contains(logs, "/jwks.json") || strings.Contains(logs, "query-credential") {
			t.Errorf("logs:\n%s", logs)
		}
	})
	t.Run("an expired static key with a jwks_url is a warning", func(t *testing.T) {
		k := getKeys(t)
		writeFile(t, env.Dir, "old.pub", pemPublic(t, &k.rsa.PublicKey))
		v, warnings, err := New(Config{Scheme: "jwt", JWT: JWTConfig{JWKSURL: srv.url(), Keys: []JWTKeyConfig{{ID: "old", PEMFile: "old.pub", NotAfter: now.Add(-time.Hour)}}}}, env)
		if err != nil {
			t.Fatal(err)
		}
		v.(io.Closer).Close()
		if !strings.Contains(strings.Join(warnings, "\n"), "only the jwks_url keys are tried") {
			t.Errorf("warnings %q", warnings)
		}
	})
}

// TestJWKSURLConcurrent rotates keys and refreshes while deliveries verify,
// for the race detector.
func TestJWKSURLConcurrent(t *testing.T) {
	pair := rotationSigners(t)["ES256"]
	srv := newJWKSServer(t, pair[0].jwk(t, "k0"))
	h := startedJWKSHarness(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"ES256"}, JWKSURL: srv.url()}}, testEnv(t, nil))
	toks := []http.Header{
		bearer(pair[0].token(t, "k0", claimsAt(now, nil))),
		bearer(pair[1].token(t, "k1", claimsAt(now, nil))),
		bearer(pair[0].token(t, "nope", claimsAt(now, nil))),
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := h.v.Verify(toks[(i+n)%len(toks)], nil, now)
				if err != nil && Reason(err) != "mismatch" {
					t.Errorf("Verify: %v", err)
					return
				}
			}
		})
	}
	for i := range 20 {
		srv.rotate(pair[i%2].jwk(t, fmt.Sprintf("k%d", i%2)))
		if i%2 == 0 {
			h.tick(t)
		} else {
			h.advance(time.Minute)
		}
	}
	close(stop)
	wg.Wait()
	h.v.Close()
}

// The URL a JWKS fetch error names is never the one with its query.
func TestJWKSURLErrorsNameNoQuery(t *testing.T) {
	r, err := newJWKSRemote(JWTConfig{JWKSURL: "http://127.0.0.1:1/jwks.json?key=query-credential"}, []string{"RS256"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	_, _, err = r.get()
	if err == nil {
		t.Fatal("a fetch from a closed port succeeded")
	}
	var ue *url.Error
	if errors.As(err, &ue) || strings.Contains(err.Error(), "query-credential") {
		t.Fatalf("error names the URL: %v", err)
	}
}
