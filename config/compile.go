package config

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/verify"
)

// The packages a route is compiled with; tests replace them with fakes.
var (
	newVerifier   = verify.New
	parseKey      = idkey.ParseKey
	signedHeaders = verify.SignedHeaders
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
	var fieldErr *verify.FieldError
	switch {
	case errors.As(err, &fieldErr):
		// Point at the field itself, such as verify.jwt.jwks_url.
		path := []any{"verify"}
		for _, p := range strings.Split(fieldErr.Field, ".") {
			path = append(path, p)
		}
		b.ps.wrapTrim(b.routeLine(i, path...), label+": verify."+fieldErr.Field, "verify: "+fieldErr.Field+": ", err)
	case err != nil:
		b.ps.wrapTrim(verifyLine, label+": verify", "verify: ", err)
	default:
		r.Verifier = v
	}
	for _, w := range warnings {
		b.warn(verifyLine, r.Name, "verify: "+strings.TrimPrefix(w, "verify: "))
	}

	inherited := r.Retention == 0
	if inherited {
		r.Retention = b.cfg.Dedupe.Retention
	}
	b.checkReplayWindow(i, inherited)
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
// could be replayed. inherited says the route takes dedupe.retention.
func (b *builder) checkReplayWindow(i int, inherited bool) {
	r := &b.cfg.Routes[i]
	retention := r.Retention
	if retention <= 0 {
		return // reported by checkDedupe or checkRouteSettings
	}
	window, field, what := verify.ReplayWindow(r.Verify)
	if window <= 0 || retention >= window {
		return
	}
	path := []any{"verify"}
	for _, p := range strings.Split(field, ".") {
		path = append(path, p)
	}
	setting := "dedupe.retention"
	if !inherited {
		setting = "the route's retention"
	}
	b.routeError(i, path, "verify."+field,
		"%s (%v) is shorter than %s (%v): a captured delivery could be replayed once its key is forgotten; raise %s to at least %v",
		setting, retention, what, window, strings.TrimPrefix(setting, "the route's "), window)
}

// checkKeySigned decides how route i's key is protected against a captured
// delivery sent again with a fresh key. When the first key source is
// covered by the signature, every copy derives the same key. When it is
// not: with idempotency.allow_unsigned_key the route is accepted as it is,
// with a warning; otherwise it gets a ReplayGuard if its verifier can
// digest the signed bytes (sync and queue routes alike), and is refused
// if not. Scheme none signs nothing and
// dedupe mode off forwards every copy anyway: neither is checked.
func (b *builder) checkKeySigned(i int) {
	r := &b.cfg.Routes[i]
	r.ReplayGuard = false
	scheme := strings.ToLower(strings.TrimSpace(r.Verify.Scheme))
	if r.Key == nil || len(r.Key.Sources) == 0 || r.Verifier == nil || !verify.Checks(scheme) || r.Dedupe.Mode == ModeOff {
		return
	}
	first := r.Key.Sources[0]
	written := first.String()
	if len(r.Idempotency.Key) > 0 {
		written = strings.TrimSpace(r.Idempotency.Key[0])
	}
	why := uncovered(first, r.Verify, written)
	if why == "" {
		return
	}
	src := clip(written)
	if r.Idempotency.AllowUnsignedKey {
		b.warn(b.routeLine(i, "idempotency", "key"), r.Name, fmt.Sprintf(
			"idempotency.key: the first key source %q is not covered by the %s signature (%s) and idempotency.allow_unsigned_key is set, so nothing guards the route: a captured delivery sent again with a fresh key is forwarded again",
			src, scheme, why))
		return
	}
	if _, ok := r.Verifier.(verify.SignedDigester); ok {
		r.ReplayGuard = true
		return
	}
	var fix string
	switch {
	case verify.SignsBody(r.Verify):
		fix = `key on a source the signature covers, such as "json:id"`
	case scheme == verify.SchemeJWT:
		fix = `set verify.jwt.body_hash_claim (if the sender signs the body's hash) and key on the body, such as "json:id"`
	default:
		fix = "key on a source the signature covers"
	}
	b.routeError(i, []any{"idempotency", "key"}, "idempotency.key",
		"the first key source %q is not covered by the %s signature (%s), and this route cannot be guarded against a captured delivery sent again with a fresh key; %s, or set idempotency.allow_unsigned_key: true to accept the risk",
		src, scheme, why, fix)
}

// uncovered returns why the signature of c does not cover key source s, or
// "" when it does: a copy of a delivery that verifies always yields the
// same value from s. written is the source as the config spells it, used
// to name headers as written.
func uncovered(s idkey.Source, c verify.Config, written string) string {
	switch s.Kind {
	case idkey.KindJSON, idkey.KindForm, idkey.KindBody:
		if verify.SignsBody(c) {
			return ""
		}
		if strings.EqualFold(strings.TrimSpace(c.Scheme), verify.SchemeJWT) {
			return "without jwt.body_hash_claim no part of the body is signed"
		}
		return "the body is not signed"
	case idkey.KindHeader:
		for _, h := range append(templateHeaders(c), signedHeaders(c.Scheme)...) { // provider.go
			if http.CanonicalHeaderKey(h) == http.CanonicalHeaderKey(s.Name) {
				return ""
			}
		}
		return fmt.Sprintf("header %s is not signed", clip(writtenHeader(written, s.Name)))
	case idkey.KindQuery:
		return "the query string is never signed"
	case idkey.KindLiteral:
		return ""
	case idkey.KindTemplate:
		for _, p := range s.Parts {
			if why := uncovered(p, c, written); why != "" {
				return why
			}
		}
		return ""
	}
	return fmt.Sprintf("%s sources are not signed", clip(s.Kind))
}

// writtenHeader returns header name as spelled in the key source written
// (such as "X-GitHub-Delivery" rather than the canonical
// "X-Github-Delivery"), or name when it is not found there.
func writtenHeader(written, name string) string {
	want := "header:" + name
	for i := 0; i+len(want) <= len(written); i++ {
		if strings.EqualFold(written[i:i+len(want)], want) {
			return written[i+len("header:") : i+len(want)]
		}
	}
	return name
}
