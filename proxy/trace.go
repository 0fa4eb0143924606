package proxy

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/verify"
)

// Tracing. Each delivery is one server span, named "POST /webhook/order"
// (the method and the route's path; the method alone when no route
// matched), with a child span for each step: verify, claim (the local
// window and the store; the replay guard's "claim signature" inside it),
// forward (a client span: the upstream call) and settle (the key's finish
// or release; "settle signature" for the replay guard's record).
//
// A valid traceparent from the caller is continued: the delivery's span
// has the caller's trace id and the caller's span as its parent. Otherwise
// the delivery's span starts a trace. The traceparent sent upstream names
// the forward span as the parent, so the service's spans join the trace
// under it.
//
// With tracing off (Options.Tracer nil) none of this runs: d.span stays
// nil, every helper returns at its nil check, no span, context or
// attribute is made, and the caller's traceparent (or the one ids
// generates) is sent upstream as it is.

// Attribute keys: OpenTelemetry's HTTP semantic conventions, and the
// gateway's own under clawgate.*.
const (
	attrMethod         = attribute.Key("http.request.method")
	attrStatus         = attribute.Key("http.response.status_code")
	attrRoute          = attribute.Key("http.route")
	attrURLPath        = attribute.Key("url.path")
	attrURLScheme      = attribute.Key("url.scheme")
	attrURLFull        = attribute.Key("url.full")
	attrClient         = attribute.Key("client.address")
	attrUserAgent      = attribute.Key("user_agent.original")
	attrServerAddr     = attribute.Key("server.address")
	attrServerPort     = attribute.Key("server.port")
	attrRequestSize    = attribute.Key("http.request.body.size")
	attrResponseSize   = attribute.Key("http.response.body.size")
	attrErrorType      = attribute.Key("error.type")
	attrGWRoute        = attribute.Key("clawgate.route")
	attrOutcome        = attribute.Key("clawgate.outcome")
	attrKey            = attribute.Key("clawgate.idempotency_key")
	attrAttempt        = attribute.Key("clawgate.attempt")
	attrRequestID      = attribute.Key("clawgate.request_id")
	attrSecretID       = attribute.Key("clawgate.secret_id")
	attrScheme         = attribute.Key("clawgate.verify.scheme")
	attrReason         = attribute.Key("clawgate.verify.reason")
	attrLayer          = attribute.Key("clawgate.claim.layer")
	attrVerdict        = attribute.Key("clawgate.claim.verdict")
	attrSettle         = attribute.Key("clawgate.settle")
	attrReleaseReason  = attribute.Key("clawgate.release.reason")
	spanVerify         = "verify"
	spanClaim          = "claim"
	spanClaimSignature = "claim signature"
	spanForward        = "forward"
	spanSettle         = "settle"
	spanSettleSig      = "settle signature"
)

// routeTrace is what a route's spans carry that never changes: built with
// the route table, so a delivery looks nothing up.
type routeTrace struct {
	// names are the delivery span's names, one per Match.Methods entry.
	names []string
	// httpRoute is the route's path template: match.path, or
	// match.path_prefix followed by "*".
	httpRoute string
	// origin is the upstream's scheme://host, for url.full.
	origin string
	// server holds server.address and server.port of the upstream.
	server []attribute.KeyValue
}

func newRouteTrace(rc *config.Route) routeTrace {
	rt := routeTrace{httpRoute: rc.Match.Path}
	if rt.httpRoute == "" {
		rt.httpRoute = rc.Match.PathPrefix + "*"
	}
	for _, m := range rc.Match.Methods {
		rt.names = append(rt.names, m+" "+rt.httpRoute)
	}
	if u := rc.UpstreamURL; u != nil {
		rt.origin = u.Scheme + "://" + u.Host
		port := u.Port()
		if port == "" {
			port = "80"
			if u.Scheme == "https" {
				port = "443"
			}
		}
		p, _ := strconv.Atoi(port)
		rt.server = []attribute.KeyValue{attrServerAddr.String(u.Hostname()), attrServerPort.Int(p)}
	}
	return rt
}

// spanName is the delivery span's name on route rt for method.
func (rt *route) spanName(method string) string {
	for i, m := range rt.Match.Methods {
		if m == method && i < len(rt.trace.names) {
			return rt.trace.names[i]
		}
	}
	return spanMethod(method) + " " + rt.trace.httpRoute
}

// spanMethod is method when it is a standard one, else "HTTP": span names
// must not take any value a caller writes.
func spanMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "HTTP"
}

// startTrace starts d's server span, as a child of the caller's span when
// tp is a valid traceparent, and returns the delivery's traceparent: tp
// when valid, else one naming the new span (its trace id is then the
// delivery's trace_id and, without a caller's X-Request-Id, its request
// id).
func (g *Gateway) startTrace(d *delivery, tp string) string {
	ctx := context.Background()
	valid := validTraceparent(tp)
	if valid {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parseTraceparent(tp))
	}
	d.sctx, d.span = g.tracer.Start(ctx, spanMethod(d.in.method), serverKind, trace.WithTimestamp(d.start))
	if valid {
		return tp
	}
	return formatTraceparent(d.span.SpanContext())
}

// The start options of the spans, made once: an option made per call
// costs an allocation per span.
var (
	serverKind   = trace.WithSpanKind(trace.SpanKindServer)
	internalKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	clientKind   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// step starts the span of one step of d as a child of parent: a client
// span for the upstream call, else an internal one. Nil when tracing is
// off.
func (g *Gateway) step(d *delivery, parent context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if d.span == nil {
		return nil, nil
	}
	opts := internalKind
	if kind == trace.SpanKindClient {
		opts = clientKind
	}
	return g.tracer.Start(parent, name, opts...)
}

// recordedOrEnd reports whether sp is recorded (sampled). A span that is
// not is ended here, its attributes never built. False for nil (tracing
// off).
func recordedOrEnd(sp trace.Span) bool {
	if sp == nil {
		return false
	}
	if !sp.IsRecording() {
		sp.End()
		return false
	}
	return true
}

// endStep ends a step's span, marking it failed with err's text when err
// is not nil.
func endStep(sp trace.Span, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// endVerify ends the verify span: the scheme, and the secret that matched
// or the reason it failed.
func endVerify(sp trace.Span, scheme, secretID string, err error) {
	if !recordedOrEnd(sp) {
		return
	}
	if err != nil {
		reason := verify.Reason(err)
		sp.SetAttributes(attrScheme.String(scheme), attrReason.String(reason))
		sp.SetStatus(codes.Error, "signature: "+reason)
	} else {
		sp.SetAttributes(attrScheme.String(scheme), attrSecretID.String(secretID))
	}
	sp.End()
}

// endClaim ends a claim span with the guard's answer: which layer gave it
// (cache: the local window; store), what it was, and the key's attempt.
func endClaim(sp trace.Span, adm dedupe.Admission) {
	if !recordedOrEnd(sp) {
		return
	}
	sp.SetAttributes(attrLayer.String(adm.Layer), attrVerdict.String(verdictName(adm.Verdict)),
		attrAttempt.Int64(adm.Attempts))
	if adm.Verdict == dedupe.Unavailable && adm.Err != nil {
		sp.SetStatus(codes.Error, adm.Err.Error())
	}
	sp.End()
}

func verdictName(v dedupe.Verdict) string {
	switch v {
	case dedupe.Proceed:
		return "proceed"
	case dedupe.Replay:
		return "replay"
	case dedupe.Conflict:
		return "conflict"
	case dedupe.Busy:
		return "busy"
	case dedupe.Unavailable:
		return "unavailable"
	}
	return "unknown"
}

// endSettle ends a settle span: finish, or release and why.
func endSettle(sp trace.Span, finished bool, reason string) {
	if !recordedOrEnd(sp) {
		return
	}
	if finished {
		sp.SetAttributes(attrSettle.String("finish"))
	} else {
		sp.SetAttributes(attrSettle.String("release"), attrReleaseReason.String(reason))
	}
	sp.End()
}

// endForward ends the forward span with the upstream call's attributes:
// its URL without the query, the upstream's status, or the failure.
func endForward(sp trace.Span, d *delivery, req *Request, status int, err error) {
	if !recordedOrEnd(sp) {
		return
	}
	uri, _, _ := strings.Cut(req.URI, "?")
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attrMethod.String(req.Method), attrURLFull.String(d.rt.trace.origin+uri),
		attrAttempt.Int64(d.attempt))
	attrs = append(attrs, d.rt.trace.server...)
	switch {
	case err != nil:
		reason := releaseReason(err)
		attrs = append(attrs, attrErrorType.String(reason))
		sp.SetStatus(codes.Error, reason)
	default:
		attrs = append(attrs, attrStatus.Int(status))
		if status >= 400 {
			attrs = append(attrs, attrErrorType.String(strconv.Itoa(status)))
			sp.SetStatus(codes.Error, "")
		}
	}
	sp.SetAttributes(attrs...)
	sp.End()
}

// endTrace ends d's server span with what the access line says: route,
// outcome, status, sizes, client; failed when the answer is a 5xx.
func endTrace(d *delivery, name, client, ua string, se *statusError) {
	sp := d.span
	if !sp.IsRecording() {
		sp.End()
		return
	}
	if d.rt != nil {
		sp.SetName(d.rt.spanName(d.in.method))
	}
	scheme := "http"
	if d.in.tls {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 16)
	method := spanMethod(d.in.method)
	if method == "HTTP" {
		method = "_OTHER" // the semantic conventions' name for any other method
	}
	attrs = append(attrs,
		attrMethod.String(method),
		attrURLPath.String(clipPath(d.in.path)),
		attrURLScheme.String(scheme),
		attrClient.String(client),
		attrUserAgent.String(ua),
		attrStatus.Int(d.status),
		attrRequestSize.Int64(d.bytesIn),
		attrResponseSize.Int64(d.bytesOut),
		attrGWRoute.String(name),
		attrOutcome.String(d.outcome),
		attrRequestID.String(d.reqID))
	if d.rt != nil {
		attrs = append(attrs, attrRoute.String(d.rt.trace.httpRoute))
	}
	if d.key != "" {
		attrs = append(attrs, attrKey.String(d.key), attrAttempt.Int64(d.attempt))
	}
	if d.secretID != "" {
		attrs = append(attrs, attrSecretID.String(d.secretID))
	}
	if d.status >= 500 {
		attrs = append(attrs, attrErrorType.String(strconv.Itoa(d.status)))
		msg := ""
		if se != nil {
			msg = se.Error()
		}
		sp.SetStatus(codes.Error, msg)
	}
	sp.SetAttributes(attrs...)
	sp.End()
}

// parseTraceparent returns the span context a valid traceparent names, as
// a remote parent.
func parseTraceparent(tp string) trace.SpanContext {
	var c trace.SpanContextConfig
	hex.Decode(c.TraceID[:], []byte(tp[3:35]))
	hex.Decode(c.SpanID[:], []byte(tp[36:52]))
	var f [1]byte
	hex.Decode(f[:], []byte(tp[53:55]))
	c.TraceFlags = trace.TraceFlags(f[0]) & trace.FlagsSampled
	c.Remote = true
	return trace.NewSpanContext(c)
}

// formatTraceparent is the version 00 traceparent naming sc as the parent.
func formatTraceparent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// traceID is the trace id of a valid traceparent.
func traceID(tp string) string { return tp[3:35] }

// clientOf is the client's address for the access line and the span: the
// peer's, or, when the peer is a trusted proxy, the address clientAddr
// finds in X-Forwarded-For (the one allow_ips is checked against;
// "unknown" when that entry is not an IP address). Only the second case
// allocates.
func clientOf(t *table, in *inbound) string {
	if t.trusted(in.remoteAddr) {
		a := t.clientAddr(in)
		if !a.IsValid() {
			return "unknown"
		}
		return a.String()
	}
	host, _, err := net.SplitHostPort(in.remoteAddr)
	if err != nil {
		return in.remoteAddr
	}
	return host
}

// maxLoggedUserAgent bounds the user agent in an access line and a span.
const maxLoggedUserAgent = 256

// clipUserAgent cuts ua to at most maxLoggedUserAgent bytes, at a
// character boundary.
func clipUserAgent(ua string) string {
	if len(ua) <= maxLoggedUserAgent {
		return ua
	}
	n := maxLoggedUserAgent
	for n > 0 && !utf8.RuneStart(ua[n]) {
		n--
	}
	return ua[:n]
}
