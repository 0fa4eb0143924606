package config

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/verify"
)

// The packages a route is compiled with; tests replace them with fakes.
var (
	newVerifier   = verify.New
	parseKey      = dedupe.ParseKey
	signedHeaders = verify.SignedHeaders
	keyHeaders    = (*dedupe.KeySpec).HeaderSources
)

// compileRoute compiles route i's key sources and verifier, and checks how
// they fit the dedupe settings.
func (b *builder) compileRoute(i int) {
	r := &b.cfg.Routes[i]
	label := routeLabel(i, r.Name)

	if len(r.Idempotency.Key) > 0 {
		key, err := parseKey(r.Idempotency.Key)
		if err != nil {
			b.ps.wrapTrim(b.routeLine(i, "idempotency", "key"), label+": idempotency.key", "dedupe: ", err)
		} else {
			r.Key = key
		}
	}

	verifyLine := b.routeLine(i, "verify")
	v, warnings, err := newVerifier(r.Verify, verify.Env{Getenv: b.getenv, Dir: b.cfg.Dir})
	if err != nil {
		b.ps.wrapTrim(verifyLine, label+": verify", "verify: ", err)
	} else {
		r.Verifier = v
	}
	for _, w := range warnings {
		b.warn(verifyLine, r.Name, "verify: "+strings.TrimPrefix(w, "verify: "))
	}

	b.checkReplayWindow(i)
	if err == nil {
		b.checkKeySigned(i)
	}
}

// warn records a warning about the route named name.
func (b *builder) warn(line int, name, msg string) {
	p := Problem{File: b.ps.file, Line: line, Field: fmt.Sprintf("route %q", clip(name)), Msg: msg}
	b.cfg.Warnings = append(b.cfg.Warnings, p.Error())
}

// checkReplayWindow rejects a retention shorter than the time a captured,
// validly signed delivery stays acceptable: once its key is forgotten it
// could be replayed.
func (b *builder) checkReplayWindow(i int) {
	r := &b.cfg.Routes[i]
	retention := b.cfg.Dedupe.Retention
	if retention <= 0 {
		return // reported by checkDedupe
	}
	var (
		window time.Duration
		field  string
		what   string
	)
	switch strings.ToLower(strings.TrimSpace(r.Verify.Scheme)) {
	case "standard-webhooks", "stripe", "slack":
		window = r.Verify.Tolerance
		if window == 0 {
			window = DefaultTolerance
		}
		field, what = "tolerance", "the signature tolerance"
	case "jwt":
		j := r.Verify.JWT
		switch {
		case j.MaxAge > 0:
			window, field, what = j.MaxAge+j.Leeway, "jwt.max_age", "jwt.max_age + jwt.leeway"
		case j.Leeway > 0:
			window, field, what = j.Leeway, "jwt.leeway", "jwt.leeway"
		}
	}
	if window <= 0 || retention >= window {
		return
	}
	path := []any{"verify"}
	for _, p := range strings.Split(field, ".") {
		path = append(path, p)
	}
	b.routeError(i, path, "verify."+field,
		"dedupe.retention (%v) is shorter than %s (%v): a captured delivery could be replayed once its key is forgotten; raise dedupe.retention to at least %v",
		retention, what, window, window)
}

// checkKeySigned warns when the key comes only from headers the signature
// does not cover: a captured delivery replayed with a fresh header value
// verifies and gets a new key.
func (b *builder) checkKeySigned(i int) {
	r := &b.cfg.Routes[i]
	scheme := strings.ToLower(strings.TrimSpace(r.Verify.Scheme))
	if r.Key == nil || scheme == "none" {
		return
	}
	names, only := keyHeaders(r.Key)
	if !only || len(names) == 0 {
		return
	}
	for _, s := range signedHeaders(scheme) {
		for _, n := range names {
			if http.CanonicalHeaderKey(s) == http.CanonicalHeaderKey(n) {
				return
			}
		}
	}
	// Name the headers as the user wrote them, not canonicalised.
	written := map[string]string{}
	for _, src := range r.Idempotency.Key {
		if kind, name, ok := strings.Cut(src, ":"); ok && kind == "header" {
			written[http.CanonicalHeaderKey(name)] = name
		}
	}
	shown := make([]string, len(names))
	for j, n := range names {
		shown[j] = n
		if w, ok := written[http.CanonicalHeaderKey(n)]; ok {
			shown[j] = w
		}
	}
	noun := "header"
	if len(names) > 1 {
		noun = "headers"
	}
	b.warn(b.routeLine(i, "idempotency", "key"), r.Name, fmt.Sprintf(
		"idempotency key comes only from %s %s, which the %s signature does not cover; a captured delivery can be replayed under a fresh id: add \"body:sha256\" to idempotency.key",
		noun, strings.Join(shown, ", "), scheme))
}
