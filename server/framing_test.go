package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
	"github.com/clawgate/clawgate/proxy"
)

// Framing probes: raw HTTP/1.x byte streams sent on a fresh loopback
// connection to a front door (net/http and fasthttp, each started by
// Start: TestFraming), with what the front door must answer and what may
// reach the upstream. Every front door must answer each probe the same
// safe way: reject it, or answer and close the connection after; never
// forward a request whose framing is ambiguous, and never read a request
// pipelined behind one.
//
// The table is front-door agnostic: runFramingProbes takes a dialer and
// the upstream's recorder, so each front door runs the same probes
// against the same route (framingRoute). Where the doors differ but are
// both safe (a 400 for net/http's 501, a reject where net/http forwards
// a request with one reading), the probe lists the other outcome (also)
// and its comment says why it is safe. No probe is skipped on either
// door: an unsafe outcome is a bug of the door, fixed in the door.

// framingMaxBody is the probes' route max_body.
const framingMaxBody = 1024

// framingWait bounds a probe that does not trickle: its answers and the
// connection's end (or the sentinel's answer) must come within it.
const framingWait = 5 * time.Second

// framingTrickleEvery paces a slowloris probe's writes.
const framingTrickleEvery = 200 * time.Millisecond

// framingSlowEnv, set to 1, runs the probes whose bound is the 60 s read
// timeout (the body slowloris): too long for the default run.
const framingSlowEnv = "CLAWGATE_FRAMING_SLOW"

// framingSentinelID marks the sentinel's answer (every answer carries the
// request's X-Request-Id).
const framingSentinelID = "framing-sentinel"

// framingSentinel follows every probe's bytes (unless it trickles): a
// well-formed request no route matches. Its answer proves the front door
// read past the probe and is in step with the client; a front door that
// closed after the probe never answers it, and a front door that took it
// for part of the probe's body never answers it either (the probe then
// fails on its bound).
var framingSentinel = "GET /framing-sentinel HTTP/1.1\r\nHost: gw\r\nX-Request-Id: " + framingSentinelID + "\r\n\r\n"

// framingRoute is the route the probes are sent to: a sync route on
// path_prefix /framing/, max_body framingMaxBody, keyed on the body's id.
func framingRoute(upstream string) string {
	return fmt.Sprintf(`
  - name: framing
    match: { path_prefix: /framing/ }
    upstream: %s
    timeout: 5s
    max_body: %d
    idempotency: { key: ["json:id"] }
    verify: { scheme: none }
`, upstream, framingMaxBody)
}

// framingUnkeyedRoute is a route like framingRoute that needs no key: a
// request without a body is forwarded there, where framingRoute refuses
// it for its missing key. Probes named "unkeyed-..." go to it.
func framingUnkeyedRoute(upstream string) string {
	return fmt.Sprintf(`
  - name: framing-unkeyed
    match: { path_prefix: /framing/unkeyed- }
    upstream: %s
    timeout: 5s
    max_body: %d
    idempotency: { required: false }
    verify: { scheme: none }
`, upstream, framingMaxBody)
}

// framingSmallBody is the max_body of framingSmallRoute: less than any
// probe's body.
const framingSmallBody = 16

// framingSmallRoute is a route no probe matches, with a max_body below
// every probe's body. Beside it, the fasthttp front door reads at most
// framingSmallBody bytes of a body before the handler runs (its pre-read
// limit is the smallest max_body of the routes) and the handler streams
// the rest; without it, the door pre-reads whole bodies up to
// framingMaxBody. The probes run both ways (TestFraming's "preread" and
// "streamed"); net/http always streams.
func framingSmallRoute(upstream string) string {
	return fmt.Sprintf(`
  - name: framing-small
    match: { path_prefix: /framing-small/ }
    upstream: %s
    max_body: %d
    verify: { scheme: none }
`, upstream, framingSmallBody)
}

// framingProbe is one raw byte stream and the one safe answer to it.
type framingProbe struct {
	name string
	raw  []byte
	// trickle, when set, is written every framingTrickleEvery after raw
	// until the connection ends (a slowloris); no sentinel follows. wait
	// then bounds the probe.
	trickle string
	wait    time.Duration
	// slow probes run only without -short; slowEnv ones only with
	// CLAWGATE_FRAMING_SLOW=1 (their bound is over a minute).
	slow, slowEnv bool

	// answers are the statuses of the answers before the connection ends
	// or the sentinel is answered, in order (1xx excluded); none when the
	// front door closes without an answer.
	answers []int
	// closed: the connection ends after the answers, the sentinel is
	// never answered (nothing behind the probe is read). Otherwise the
	// sentinel must be answered next.
	closed bool
	// forwarded are the bodies the upstream receives, one request each, in
	// order; none: nothing reaches the upstream.
	forwarded []string

	// noInterim: no 1xx answer may come before the answers (a 100
	// Continue would make the client send the body of a request already
	// refused).
	noInterim bool

	// also are other answers as safe as the one above, which a front
	// door may give instead: a stricter reject (400 where net/http
	// answers 501, a parse error where net/http's handler answers 404,
	// a rejection where net/http forwards a request with one reading),
	// or a close where net/http stays in step. The probe's comment says
	// why each is safe. Never an ambiguous request forwarded, never a
	// request behind the probe read when the one above closes.
	also []framingOutcome
}

// framingOutcome is one way a front door may answer a probe (the
// fields are framingProbe's).
type framingOutcome struct {
	answers   []int
	closed    bool
	forwarded []string
}

// outcomes are the probe's accepted outcomes, the first net/http's.
func (p framingProbe) outcomes() []framingOutcome {
	return append([]framingOutcome{{answers: p.answers, closed: p.closed, forwarded: p.forwarded}}, p.also...)
}

// path is the probe's request target; requests smuggled behind it use
// path + "/smuggled", so everything it provokes upstream is under path.
func (p framingProbe) path() string { return "/framing/" + p.name }

// Helpers that build the probes' bytes.

// fid is the JSON body whose key is id.
func fid(id string) string { return `{"id":"` + id + `"}` }

// freq is a POST of the probe named name with the head lines given (each
// ending in CRLF) and body appended as is.
func freq(name, lines, body string) string {
	return "POST /framing/" + name + " HTTP/1.1\r\nHost: gw\r\n" + lines + "\r\n" + body
}

// fcl is a well-framed Content-Length POST of body.
func fcl(name, body string) string {
	return freq(name, "Content-Length: "+strconv.Itoa(len(body))+"\r\n", body)
}

// fsmuggled is a well-formed request a front door must never read: it
// targets the probe's path + "/smuggled" with a body of its own key.
func fsmuggled(name string) string {
	b := fid(name + "-smuggled")
	return "POST /framing/" + name + "/smuggled HTTP/1.1\r\nHost: gw\r\nContent-Length: " + strconv.Itoa(len(b)) + "\r\n\r\n" + b
}

// fchunks encodes parts as one chunk each, then the last chunk.
func fchunks(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// fmanyHeaders is n header lines of about 40 bytes each.
func fmanyHeaders(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "X-Probe-%05d: %s\r\n", i, strings.Repeat("v", 24))
	}
	return b.String()
}

// foversizedChunks is a chunked body of max_body + 1 + extra bytes in 4 KiB
// chunks, without its last chunk: a front door that answers it has not
// waited for the rest.
func foversizedChunks(extra int) string {
	var b strings.Builder
	total := framingMaxBody + 1 + extra
	for total > 0 {
		n := min(total, 4096)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, strings.Repeat("a", n))
		total -= n
	}
	return b.String()
}

// framingProbes is the table. Each probe's comment says what is probed;
// the fields say what net/http, the first front door, does, which is the
// safe answer every front door must give, or one of its also outcomes.
var framingProbes = []framingProbe{
	// Controls: well-framed requests go through, once, unchanged.
	{
		name: "cl-control", raw: []byte(fcl("cl-control", fid("cl-control"))),
		answers: []int{200}, forwarded: []string{fid("cl-control")},
	},
	{
		// A chunked request is answered with Connection: close (see
		// proxy.Gateway.ServeHTTP), so the request behind it is not read.
		name: "chunked-control",
		raw: []byte(freq("chunked-control", "Transfer-Encoding: chunked\r\n", fchunks(`{"id":`, `"chunked-control"}`)) +
			fsmuggled("chunked-control")),
		answers: []int{200}, closed: true, forwarded: []string{fid("chunked-control")},
	},
	{
		name:    "pipelined-control",
		raw:     []byte(fcl("pipelined-control", fid("pipelined-control")) + fcl("pipelined-control", fid("pipelined-control-2"))),
		answers: []int{200, 200}, forwarded: []string{fid("pipelined-control"), fid("pipelined-control-2")},
	},

	// Two framings in one request.
	{
		// CL.TE: Content-Length covers the chunked body and the smuggled
		// request behind it; a Transfer-Encoding reader stops at the last
		// chunk and would read the smuggled request next. Transfer-Encoding
		// wins (RFC 9112 section 6.3), the Content-Length is dropped, the
		// answer closes the connection and what follows is never read.
		name: "cl-and-te",
		raw: []byte(freq("cl-and-te", fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n", len(fchunks(fid("cl-and-te")))+len(fsmuggled("cl-and-te"))),
			fchunks(fid("cl-and-te"))) + fsmuggled("cl-and-te")),
		answers: []int{200}, closed: true, forwarded: []string{fid("cl-and-te")},
	},
	{
		// TE.CL: the one chunk is the smuggled request; Content-Length
		// covers only the chunk-size line, so a Content-Length reader
		// would serve the smuggled request next. Read as chunked, the body
		// is that request's text, which has no JSON key: 400, closed.
		name: "te-and-cl",
		raw: []byte(freq("te-and-cl", fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n", len(fmt.Sprintf("%x\r\n", len(fsmuggled("te-and-cl"))))),
			fchunks(fsmuggled("te-and-cl")))),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-different",
		raw:     []byte(freq("cl-different", "Content-Length: 20\r\nContent-Length: 21\r\n", fid("cl-different")+"xx") + fsmuggled("cl-different")),
		answers: []int{400}, closed: true,
	},
	{
		// Identical duplicates are merged (RFC 9110 section 8.6 allows it):
		// one length, no ambiguity. fasthttp refuses any second
		// Content-Length field (400, closed): stricter, as safe.
		name: "cl-duplicate-equal",
		raw: []byte(freq("cl-duplicate-equal", fmt.Sprintf("Content-Length: %d\r\nContent-Length: %[1]d\r\n", len(fid("cl-duplicate-equal"))),
			fid("cl-duplicate-equal"))),
		answers: []int{200}, forwarded: []string{fid("cl-duplicate-equal")},
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		name: "cl-list",
		raw: []byte(freq("cl-list", fmt.Sprintf("Content-Length: %d, %[1]d\r\n", len(fid("cl-list"))),
			fid("cl-list")) + fsmuggled("cl-list")),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-plus-sign",
		raw:     []byte(freq("cl-plus-sign", fmt.Sprintf("Content-Length: +%d\r\n", len(fid("cl-plus-sign"))), fid("cl-plus-sign"))),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-negative",
		raw:     []byte(freq("cl-negative", "Content-Length: -1\r\n", fid("cl-negative"))),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-hex",
		raw:     []byte(freq("cl-hex", "Content-Length: 0x14\r\n", fid("cl-hex"))),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-overflow",
		raw:     []byte(freq("cl-overflow", "Content-Length: 18446744073709551637\r\n", fid("cl-overflow"))),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-empty",
		raw:     []byte(freq("cl-empty", "Content-Length: \r\n", fid("cl-empty")) + fsmuggled("cl-empty")),
		answers: []int{400}, closed: true,
	},
	{
		// A field name with a blank inside: no token has one (RFC 9110
		// section 5.1), so the line cannot be read as a field; refused,
		// nothing behind it read. (fasthttp takes it; its door refuses.)
		name: "field-name-with-blank",
		raw: []byte(freq("field-name-with-blank", fmt.Sprintf("Transfer Encoding: chunked\r\nContent-Length: %d\r\n", len(fid("field-name-with-blank"))),
			fid("field-name-with-blank")) + fsmuggled("field-name-with-blank")),
		answers: []int{400}, closed: true,
	},
	{
		// HTTP/1.1 without a Host field (RFC 9112 section 3.2: 400).
		name: "host-missing",
		raw: []byte(fmt.Sprintf("POST /framing/host-missing HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s", len(fid("host-missing")), fid("host-missing")) +
			fsmuggled("host-missing")),
		answers: []int{400}, closed: true,
	},
	{
		// Two Host fields (RFC 9112 section 3.2: 400).
		name:    "host-twice",
		raw:     []byte(freq("host-twice", fmt.Sprintf("Host: other\r\nContent-Length: %d\r\n", len(fid("host-twice"))), fid("host-twice")) + fsmuggled("host-twice")),
		answers: []int{400}, closed: true,
	},
	{
		// A method with a byte no token has.
		name: "method-not-a-token",
		raw: []byte(fmt.Sprintf("PO(ST /framing/method-not-a-token HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", len(fid("method-not-a-token")), fid("method-not-a-token")) +
			fsmuggled("method-not-a-token")),
		answers: []int{400}, closed: true,
	},
	{
		name:    "cl-space-before-colon",
		raw:     []byte(freq("cl-space-before-colon", fmt.Sprintf("Content-Length : %d\r\n", len(fid("cl-space-before-colon"))), fid("cl-space-before-colon"))),
		answers: []int{400}, closed: true,
	},

	// Line endings and folding.
	{
		// RFC 9112 section 2.2 lets a recipient take a bare LF for the end
		// of a start or field line: one reading, accepted.
		name: "bare-lf-head",
		raw: []byte(strings.ReplaceAll(fmt.Sprintf("POST /framing/bare-lf-head HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n",
			len(fid("bare-lf-head"))), "\r\n", "\n") + fid("bare-lf-head")),
		answers: []int{200}, forwarded: []string{fid("bare-lf-head")},
	},
	{
		// A bare CR ends no line: "X-A: a\rContent-Length: 0".
		name: "bare-cr-head",
		raw: []byte(freq("bare-cr-head", "X-A: a\rContent-Length: 0\r\n"+fmt.Sprintf("Content-Length: %d\r\n", len(fid("bare-cr-head"))),
			fid("bare-cr-head"))),
		answers: []int{400}, closed: true,
	},
	{
		// obs-fold of an ordinary field: replaced by a space (RFC 9112
		// section 5.2); framing is untouched.
		name: "obs-fold",
		raw: []byte(freq("obs-fold", fmt.Sprintf("X-Folded: a\r\n b\r\nContent-Length: %d\r\n", len(fid("obs-fold"))),
			fid("obs-fold"))),
		answers: []int{200}, forwarded: []string{fid("obs-fold")},
	},
	{
		// obs-fold of Content-Length itself: a recipient that does not
		// unfold sees an empty Content-Length and a stray line, one that
		// does sees a length. Two readings of the framing.
		name: "obs-fold-content-length",
		raw: []byte(freq("obs-fold-content-length", fmt.Sprintf("Content-Length:\r\n %d\r\n", len(fid("obs-fold-content-length"))),
			fid("obs-fold-content-length")) + fcl("obs-fold-content-length", fid("obs-fold-content-length-2"))),
		// RFC 9112 section 5.2 lets a recipient replace obs-fold with
		// spaces before reading the value: net/http does, so the framing
		// has one reading (the length), and the request behind it is an
		// ordinary pipelined one. A front proxy must do the same or reject.
		answers: []int{200, 200}, forwarded: []string{fid("obs-fold-content-length"), fid("obs-fold-content-length-2")},
	},
	{
		// obs-fold of Transfer-Encoding: "Transfer-Encoding:\r\n chunked".
		name: "obs-fold-transfer-encoding",
		raw: []byte(freq("obs-fold-transfer-encoding", fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding:\r\n chunked\r\n", len(fid("obs-fold-transfer-encoding"))),
			fchunks(fid("obs-fold-transfer-encoding"))) + fsmuggled("obs-fold-transfer-encoding")),
		// Unfolded, it is chunked beside a Content-Length: answered and
		// closed like cl-and-te, so neither reading desynchronises.
		answers: []int{200}, closed: true, forwarded: []string{fid("obs-fold-transfer-encoding")},
	},
	{
		// A field line that starts with whitespace right after the
		// request line folds onto nothing.
		name: "leading-space-first-field",
		raw: []byte("POST /framing/leading-space-first-field HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: gw\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(fid("leading-space-first-field"))) + fid("leading-space-first-field")),
		answers: []int{400}, closed: true,
	},
	{
		name:    "nul-in-field",
		raw:     []byte(freq("nul-in-field", "X-A: a\x00b\r\n"+fmt.Sprintf("Content-Length: %d\r\n", len(fid("nul-in-field"))), fid("nul-in-field"))),
		answers: []int{400}, closed: true,
	},

	// Transfer codings other than a lone "chunked".
	{
		name: "te-xchunked",
		raw: []byte(freq("te-xchunked", fmt.Sprintf("Transfer-Encoding: xchunked\r\nContent-Length: %d\r\n", len(fid("te-xchunked"))),
			fid("te-xchunked")) + fsmuggled("te-xchunked")),
		answers: []int{501}, closed: true,
		// fasthttp refuses a coding other than a lone chunked as a
		// malformed request: 400 rather than 501, closed all the same.
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		name:    "te-chunked-identity",
		raw:     []byte(freq("te-chunked-identity", "Transfer-Encoding: chunked, identity\r\n", fchunks(fid("te-chunked-identity"))) + fsmuggled("te-chunked-identity")),
		answers: []int{501}, closed: true,
		// fasthttp refuses a coding other than a lone chunked as a
		// malformed request: 400 rather than 501, closed all the same.
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		// identity beside a Content-Length: a Transfer-Encoding whose
		// final coding is not chunked leaves the body length undetermined
		// (RFC 9112 section 6.3): refused, never forwarded.
		name: "te-identity",
		raw: []byte(freq("te-identity", fmt.Sprintf("Transfer-Encoding: identity\r\nContent-Length: %d\r\n", len(fid("te-identity"))),
			fid("te-identity")) + fsmuggled("te-identity")),
		answers: []int{501}, closed: true,
	},
	{
		// identity without a Content-Length: no coding a reader can frame
		// the body by (RFC 9112 section 6.3 asks for 400 and a close); a
		// reader that takes it for "no body" reads the bytes behind the
		// head as the next request, one that reads to the end of the
		// connection (RFC 2616's identity) takes them for the body.
		name:    "te-identity-no-cl",
		raw:     []byte(freq("te-identity-no-cl", "Transfer-Encoding: identity\r\n", "") + fsmuggled("te-identity-no-cl")),
		answers: []int{501}, closed: true,
	},
	{
		name:    "te-gzip-chunked",
		raw:     []byte(freq("te-gzip-chunked", "Transfer-Encoding: gzip, chunked\r\n", fchunks(fid("te-gzip-chunked"))) + fsmuggled("te-gzip-chunked")),
		answers: []int{501}, closed: true,
		// fasthttp refuses a coding other than a lone chunked as a
		// malformed request: 400 rather than 501, closed all the same.
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		name:    "te-two-fields",
		raw:     []byte(freq("te-two-fields", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", fchunks(fid("te-two-fields"))) + fsmuggled("te-two-fields")),
		answers: []int{501}, closed: true,
		// fasthttp refuses a coding other than a lone chunked as a
		// malformed request: 400 rather than 501, closed all the same.
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		name:    "te-vertical-tab",
		raw:     []byte(freq("te-vertical-tab", "Transfer-Encoding: \x0bchunked\r\n", fchunks(fid("te-vertical-tab"))) + fsmuggled("te-vertical-tab")),
		answers: []int{400}, closed: true,
	},
	{
		// Coding names are case-insensitive: one reading.
		name:    "te-uppercase",
		raw:     []byte(freq("te-uppercase", "Transfer-Encoding: CHUNKED\r\n", fchunks(fid("te-uppercase"))) + fsmuggled("te-uppercase")),
		answers: []int{200}, closed: true, forwarded: []string{fid("te-uppercase")},
	},
	{
		// An HTTP/1.0 request with Transfer-Encoding must be treated as
		// faulty framing and the connection closed after it (RFC 9112
		// section 6.1), even with keep-alive: a front proxy that honours the
		// chunked coding and one that honours Content-Length disagree on
		// where the smuggled request starts.
		name: "http10-te-and-cl-keepalive",
		raw: []byte("POST /framing/http10-te-and-cl-keepalive HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(fid("http10-te-and-cl-keepalive"))) + fid("http10-te-and-cl-keepalive") +
			fsmuggled("http10-te-and-cl-keepalive")),
		// net/http ignores Transfer-Encoding on HTTP/1.0 (its issue
		// 12785) and the handler never sees it: the gateway closes after
		// every HTTP/1.0 answer. (Regression: it served the smuggled
		// request.) fasthttp refuses Transfer-Encoding on HTTP/1.0
		// outright (400, closed): stricter, as safe.
		answers: []int{200}, closed: true, forwarded: []string{fid("http10-te-and-cl-keepalive")},
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},

	{
		// Without Content-Length: net/http reads no body at all and takes
		// the chunked bytes for the next request.
		name: "http10-te-keepalive",
		raw: []byte("POST /framing/http10-te-keepalive HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fchunks(fid("http10-te-keepalive"))),
		answers: []int{400}, closed: true,
	},
	{
		// "Connection: keep-alive, close" on HTTP/1.0: close wins, no
		// further request may be processed (RFC 9112 section 9.6).
		name: "http10-keepalive-and-close",
		raw: []byte("POST /framing/http10-keepalive-and-close HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive, close\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(fid("http10-keepalive-and-close"))) + fid("http10-keepalive-and-close") +
			fsmuggled("http10-keepalive-and-close")),
		answers: []int{200}, closed: true, forwarded: []string{fid("http10-keepalive-and-close")},
	},
	{
		// HTTP/2 with prior knowledge on the HTTP/1 listener: net/http
		// hands "PRI *" to the handler (no route: 404) and closes;
		// fasthttp does not parse it (400) and closes: refused either way.
		name:    "h2-preface",
		raw:     []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
		answers: []int{404}, closed: true,
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		// The same without keep-alive: processed, then closed, as RFC 9112
		// section 6.1 asks; or refused, as fasthttp does (400, closed).
		name: "http10-te-and-cl",
		raw: []byte("POST /framing/http10-te-and-cl HTTP/1.0\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n" +
			fmt.Sprintf("Content-Length: %d\r\n\r\n", len(fid("http10-te-and-cl"))) + fid("http10-te-and-cl") +
			fsmuggled("http10-te-and-cl")),
		answers: []int{200}, closed: true, forwarded: []string{fid("http10-te-and-cl")},
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},

	// Chunked bodies that are malformed.
	{
		// A bare LF inside a chunk extension: "5;a\nX\r\n".
		name: "chunk-ext-bare-lf",
		raw: []byte(freq("chunk-ext-bare-lf", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x;ext\nx\r\n%s\r\n0\r\n\r\n", len(fid("chunk-ext-bare-lf")), fid("chunk-ext-bare-lf"))) + fsmuggled("chunk-ext-bare-lf")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-line-bare-lf",
		raw: []byte(freq("chunk-line-bare-lf", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x\n%s\r\n0\r\n\r\n", len(fid("chunk-line-bare-lf")), fid("chunk-line-bare-lf"))) + fsmuggled("chunk-line-bare-lf")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-data-bare-lf",
		raw: []byte(freq("chunk-data-bare-lf", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x\r\n%s\n0\r\n\r\n", len(fid("chunk-data-bare-lf")), fid("chunk-data-bare-lf"))) + fsmuggled("chunk-data-bare-lf")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-ext-bare-cr",
		raw: []byte(freq("chunk-ext-bare-cr", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x;a\rb\r\n%s\r\n0\r\n\r\n", len(fid("chunk-ext-bare-cr")), fid("chunk-ext-bare-cr"))) + fsmuggled("chunk-ext-bare-cr")),
		answers: []int{400}, closed: true,
	},
	{
		// 20 hex digits: over 64 bits.
		name: "chunk-size-oversized",
		raw: []byte(freq("chunk-size-oversized", "Transfer-Encoding: chunked\r\n",
			"00000000000000000014\r\n"+fid("chunk-size-oversized")+"\r\n0\r\n\r\n") + fsmuggled("chunk-size-oversized")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-size-huge",
		raw: []byte(freq("chunk-size-huge", "Transfer-Encoding: chunked\r\n",
			"ffffffffffffffffffff\r\n"+fid("chunk-size-huge")+"\r\n0\r\n\r\n") + fsmuggled("chunk-size-huge")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-size-negative",
		raw: []byte(freq("chunk-size-negative", "Transfer-Encoding: chunked\r\n",
			"-14\r\n"+fid("chunk-size-negative")+"\r\n0\r\n\r\n") + fsmuggled("chunk-size-negative")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-size-non-hex",
		raw: []byte(freq("chunk-size-non-hex", "Transfer-Encoding: chunked\r\n",
			"1g\r\n"+fid("chunk-size-non-hex")+"\r\n0\r\n\r\n") + fsmuggled("chunk-size-non-hex")),
		answers: []int{400}, closed: true,
	},
	{
		name: "chunk-size-0x",
		raw: []byte(freq("chunk-size-0x", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("0x%x\r\n%s\r\n0\r\n\r\n", len(fid("chunk-size-0x")), fid("chunk-size-0x"))) + fsmuggled("chunk-size-0x")),
		answers: []int{400}, closed: true,
	},
	{
		// The chunk's data runs past its size.
		name: "chunk-data-overrun",
		raw: []byte(freq("chunk-data-overrun", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x\r\n%sxx\r\n0\r\n\r\n", len(fid("chunk-data-overrun")), fid("chunk-data-overrun"))) + fsmuggled("chunk-data-overrun")),
		answers: []int{400}, closed: true,
	},
	{
		// A chunk line longer than the front door buffers (net/http: 4 KiB,
		// 400). fasthttp bounds no chunk extension: it skips its bytes to
		// the CRLF (a CR or LF inside is refused, see chunk-ext-bare-*),
		// so the chunk has one reading, the reference's; the request is
		// forwarded and, chunked, closed after. The time such a line may
		// take is bounded by the body's read timeout.
		name: "chunk-ext-long",
		raw: []byte(freq("chunk-ext-long", "Transfer-Encoding: chunked\r\n",
			fmt.Sprintf("%x;%s\r\n%s\r\n0\r\n\r\n", len(fid("chunk-ext-long")), strings.Repeat("e", 8192), fid("chunk-ext-long"))) + fsmuggled("chunk-ext-long")),
		answers: []int{400}, closed: true,
		also: []framingOutcome{{answers: []int{200}, closed: true, forwarded: []string{fid("chunk-ext-long")}}},
	},
	{
		// Trailer fields after the last chunk: the body is unchanged.
		name: "chunked-trailer",
		raw: []byte(freq("chunked-trailer", "Transfer-Encoding: chunked\r\n",
			strings.TrimSuffix(fchunks(fid("chunked-trailer")), "\r\n")+"X-Trailer: t\r\n\r\n") + fsmuggled("chunked-trailer")),
		answers: []int{200}, closed: true, forwarded: []string{fid("chunked-trailer")},
	},

	// Bodies over max_body. Nothing is forwarded, and the answer comes
	// without the rest of the body: the front door read at most a bounded
	// amount past max_body (net/http discards up to 256 KiB to keep the
	// connection, then gives up and closes).
	{
		// A declared 1 GiB, of which max_body + 1 bytes are sent.
		name:    "over-max-body-cl",
		raw:     []byte(freq("over-max-body-cl", "Content-Length: 1073741824\r\n", strings.Repeat("a", framingMaxBody+1))),
		answers: []int{413}, closed: true,
	},
	{
		// A complete body one byte over: answered 413; the rest is read and
		// the connection stays in step (the sentinel is answered).
		name:    "over-max-body-cl-complete",
		raw:     []byte(freq("over-max-body-cl-complete", fmt.Sprintf("Content-Length: %d\r\n", framingMaxBody+1), strings.Repeat("a", framingMaxBody+1))),
		answers: []int{413},
	},
	{
		// A chunked body with no end: max_body + 1 + 320 KiB sent, no last
		// chunk. More than net/http's 256 KiB discard, so the answer comes
		// at once; with less, net/http would wait for the rest (or the read
		// timeout) before writing the 413.
		name:    "over-max-body-chunked",
		raw:     []byte(freq("over-max-body-chunked", "Transfer-Encoding: chunked\r\n", foversizedChunks(320<<10))),
		answers: []int{413}, closed: true,
	},
	{
		// A complete chunked body one byte over.
		name:    "over-max-body-chunked-complete",
		raw:     []byte(freq("over-max-body-chunked-complete", "Transfer-Encoding: chunked\r\n", foversizedChunks(0)+"0\r\n\r\n")),
		answers: []int{413}, closed: true,
	},

	// Heads over the limit (MaxHeaderBytes, 64 KiB).
	{
		name: "too-many-fields",
		raw: []byte(freq("too-many-fields", fmanyHeaders(2000)+fmt.Sprintf("Content-Length: %d\r\n", len(fid("too-many-fields"))),
			fid("too-many-fields"))),
		answers: []int{431}, closed: true,
	},
	{
		name: "field-line-too-long",
		raw: []byte(freq("field-line-too-long", "X-Long: "+strings.Repeat("l", 80<<10)+"\r\n"+fmt.Sprintf("Content-Length: %d\r\n", len(fid("field-line-too-long"))),
			fid("field-line-too-long"))),
		answers: []int{431}, closed: true,
	},

	// Requests pipelined behind a rejected one are never read.
	{
		name:    "pipelined-behind-rejected",
		raw:     []byte(freq("pipelined-behind-rejected", "Content-Length: 1\r\nContent-Length: 2\r\n", "xx") + fsmuggled("pipelined-behind-rejected")),
		answers: []int{400}, closed: true,
	},
	{
		name:    "pipelined-behind-bad-chunk",
		raw:     []byte(freq("pipelined-behind-bad-chunk", "Transfer-Encoding: chunked\r\n", "zz\r\nxx\r\n0\r\n\r\n") + fsmuggled("pipelined-behind-bad-chunk")),
		answers: []int{400}, closed: true,
	},
	{
		// 100-continue with the body sent at once: one interim answer,
		// then the answer; the connection stays in step.
		name: "expect-100-continue",
		raw: []byte(freq("expect-100-continue", fmt.Sprintf("Expect: 100-continue\r\nContent-Length: %d\r\n", len(fid("expect-100-continue"))),
			fid("expect-100-continue"))),
		answers: []int{200}, forwarded: []string{fid("expect-100-continue")},
	},
	{
		// An expectation the front door cannot meet: 417, the body unread,
		// so the connection must close.
		name: "expect-unknown",
		raw: []byte(freq("expect-unknown", fmt.Sprintf("Expect: teapot\r\nContent-Length: %d\r\n", len(fid("expect-unknown"))), fid("expect-unknown")) +
			fsmuggled("expect-unknown")),
		answers: []int{417}, closed: true,
	},

	// Both front doors read these the same way (regressions: fasthttp and
	// net/http answered each differently).
	{
		// A declared length over max_body with Expect: 100-continue: 413
		// at once, without a 100 Continue first (which would have the
		// client send the body), the connection closed (the body may
		// follow). fasthttp sent 100 Continue, then 413.
		name:    "expect-over-max-body",
		raw:     []byte(freq("expect-over-max-body", fmt.Sprintf("Expect: 100-continue\r\nContent-Length: %d\r\n", framingMaxBody+1), "")),
		answers: []int{413}, closed: true, noInterim: true,
	},
	{
		// A request has no fragment: "#" is part of the path, here
		// "/framing/fragment-dots#/../../secret", which resolves to
		// "/secret": no route, 404. fasthttp cut it off as a fragment and
		// forwarded the request to /framing/fragment-dots.
		name: "fragment-dots",
		raw: []byte(fmt.Sprintf("POST /framing/fragment-dots#/../../secret HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s",
			len(fid("fragment-dots")), fid("fragment-dots"))),
		answers: []int{404},
	},
	{
		// HTTP/2.0 in an HTTP/1 request line: 505, closed. fasthttp served
		// it as HTTP/1.0.
		name: "http2-version",
		raw: []byte(fmt.Sprintf("POST /framing/http2-version HTTP/2.0\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s",
			len(fid("http2-version")), fid("http2-version")) + fsmuggled("http2-version")),
		answers: []int{505}, closed: true,
	},
	{
		// HTTP/1.0 with Transfer-Encoding and no Content-Length, on a route
		// that needs no key: net/http drops the field unseen and forwarded
		// the request with an empty body; fasthttp refuses it (400).
		name: "unkeyed-http10-te",
		raw: []byte("POST /framing/unkeyed-http10-te HTTP/1.0\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fchunks(fid("unkeyed-http10-te"))),
		answers: []int{400}, closed: true,
	},
	{
		// HTTP/1.0 POST without Content-Length: no framing for a body.
		name:    "unkeyed-http10-no-length",
		raw:     []byte("POST /framing/unkeyed-http10-no-length HTTP/1.0\r\nHost: gw\r\n\r\n"),
		answers: []int{400}, closed: true,
	},
	{
		// "OPTIONS *": the gateway's JSON 404 (no route), not net/http's
		// own empty 200.
		name:    "options-star",
		raw:     []byte("OPTIONS * HTTP/1.1\r\nHost: gw\r\n\r\n"),
		answers: []int{404},
	},

	// Slowloris: a head that never ends is cut by ReadHeaderTimeout
	// without an answer; a body that never ends by ReadTimeout, with 408.
	{
		name:    "slow-head",
		raw:     []byte("POST /framing/slow-head HTTP/1.1\r\nHost: gw\r\n"),
		trickle: "X-Slow: 1\r\n",
		wait:    proxy.DefaultLimits.ReadHeaderTimeout + 10*time.Second, slow: true,
		closed: true,
		// fasthttp answers its header read timeout with 400 before it
		// closes: the same cut, with an answer.
		also: []framingOutcome{{answers: []int{400}, closed: true}},
	},
	{
		name:    "slow-body",
		raw:     []byte(freq("slow-body", "Content-Length: 1000\r\n", `{"id":"slow-body","pad":"`)),
		trickle: "a",
		wait:    proxy.DefaultLimits.ReadTimeout + 10*time.Second, slow: true, slowEnv: true,
		answers: []int{408}, closed: true,
	},
}

// framingUpstream is an upstream that records every request it receives
// and answers 200.
type framingUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []upstreamRequest
}

// upstreamRequest is one request as the upstream read it.
type upstreamRequest struct {
	Method, Path     string
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Body             []byte
	BodyErr          error
}

// recordRequest reads r whole into what the upstream received.
func recordRequest(r *http.Request) upstreamRequest {
	body, err := io.ReadAll(r.Body)
	return upstreamRequest{
		Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), ContentLength: r.ContentLength,
		TransferEncoding: r.TransferEncoding, Body: body, BodyErr: err,
	}
}

func newFramingUpstream(tb testing.TB) *framingUpstream {
	tb.Helper()
	u := &framingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := recordRequest(r)
		u.mu.Lock()
		u.reqs = append(u.reqs, got)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	tb.Cleanup(u.srv.Close)
	return u
}

// under returns the requests received on path or below it, in order.
func (u *framingUpstream) under(path string) []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamRequest
	for _, r := range u.reqs {
		if r.Path == path || strings.HasPrefix(r.Path, path+"/") {
			out = append(out, r)
		}
	}
	return out
}

// take returns every request received and forgets them.
func (u *framingUpstream) take() []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.reqs
	u.reqs = nil
	return out
}

// wellFramed says what is wrong with how r reached the upstream, or "".
func (r upstreamRequest) wellFramed() string {
	switch {
	case r.BodyErr != nil:
		return fmt.Sprintf("its body did not read whole: %v", r.BodyErr)
	case len(r.TransferEncoding) > 0:
		return fmt.Sprintf("it came with Transfer-Encoding %q", r.TransferEncoding)
	case r.ContentLength != int64(len(r.Body)):
		return fmt.Sprintf("Content-Length %d for %d bytes", r.ContentLength, len(r.Body))
	case len(r.Header["Content-Length"]) > 1:
		return fmt.Sprintf("Content-Length %q", r.Header["Content-Length"])
	}
	return ""
}

// panicLog is the gateway's log destination: it keeps the lines that
// report a panic (net/http recovers a handler's panic and logs it).
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (l *panicLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("panic")) {
		l.mu.Lock()
		l.panics = append(l.panics, string(p))
		l.mu.Unlock()
	}
	return len(p), nil
}

func (l *panicLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.panics
	l.panics = nil
	return out
}

// startFramingGateway starts a gateway (memory store) with framingRoute in
// front of upstream, and framingSmallRoute when streamed; extra is more
// top-level YAML, the front door's server key among it (withDoor;
// net/http without one).
func startFramingGateway(tb testing.TB, upstream string, log io.Writer, extra string, streamed bool) *Server {
	tb.Helper()
	// admin.listen defaults to a fixed port: a free one, so that
	// instances (fuzz workers) do not collide.
	y := "listen: \"127.0.0.1:0\"\nadmin: { listen: \"127.0.0.1:0\" }\n" + extra + "routes:" + framingRoute(upstream) +
		strings.TrimPrefix(framingUnkeyedRoute(upstream), "\n")
	if streamed {
		y += strings.TrimPrefix(framingSmallRoute(upstream), "\n")
	}
	cfg, err := config.Parse([]byte(y), "gateway.yaml", tb.TempDir(), func(string) string { return "" })
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Start(cfg, Options{
		Logger:   slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Registry: prometheus.NewRegistry(), Version: "framing-test",
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(time.Second) })
	return s
}

// framingAnswer is one answer a probe got.
type framingAnswer struct {
	status int
	close  bool // Connection: close
}

// framingResult is what a front door did with a probe's bytes.
type framingResult struct {
	interims []int // 1xx statuses, before or between the answers
	answers  []framingAnswer
	sentinel bool  // the sentinel was answered after the answers
	closed   bool  // the connection ended after the answers
	end      error // how reading ended (nil when the sentinel was answered)
}

func (r framingResult) statuses() []int {
	out := []int{}
	for _, a := range r.answers {
		out = append(out, a.status)
	}
	return out
}

func (r framingResult) String() string {
	var b strings.Builder
	b.WriteString("answers [")
	for i, a := range r.answers {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d", a.status)
		if a.close {
			b.WriteString("+close")
		}
	}
	b.WriteString("]")
	switch {
	case r.sentinel:
		b.WriteString(", then the sentinel answered")
	case r.closed:
		fmt.Fprintf(&b, ", then closed (%v)", r.end)
	default:
		fmt.Fprintf(&b, ", then neither closed nor answered the sentinel (%v)", r.end)
	}
	return b.String()
}

// sendProbe writes p's bytes (and the sentinel, or the trickle) on a
// fresh connection and reads what comes back, for at most p's bound.
func sendProbe(conn net.Conn, p framingProbe) framingResult {
	wait := p.wait
	if wait == 0 {
		wait = framingWait
	}
	conn.SetDeadline(time.Now().Add(wait))
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		out := p.raw
		if p.trickle == "" {
			out = append(append([]byte(nil), p.raw...), framingSentinel...)
		}
		// The front door may close before it read everything: a write
		// error ends the writing, not the probe.
		if _, err := conn.Write(out); err != nil || p.trickle == "" {
			return
		}
		tick := time.NewTicker(framingTrickleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, p.trickle); err != nil {
					return
				}
			}
		}
	}()
	defer func() {
		close(stop)
		conn.Close()
		<-wrote
	}()

	var res framingResult
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			res.end = err
			res.closed = connEnded(err)
			return res
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 == 1 {
			res.interims = append(res.interims, resp.StatusCode)
			continue // 100 Continue
		}
		if resp.Header.Get("X-Request-Id") == framingSentinelID {
			res.sentinel = true
			return res
		}
		res.answers = append(res.answers, framingAnswer{status: resp.StatusCode, close: resp.Close})
		if err != nil {
			res.end = err
			res.closed = connEnded(err)
			return res
		}
	}
}

// connEnded reports whether a read error is the peer ending the
// connection (rather than the probe's bound).
func connEnded(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true // EOF, unexpected EOF, connection reset
}

// runFramingProbes sends every probe through dial (a fresh connection to
// the front door each) and checks its answers against the table and what
// reached upstream; at the end, that nothing reached upstream outside the
// probes' paths.
func runFramingProbes(t *testing.T, dial func() net.Conn, upstream *framingUpstream) {
	known := map[string]bool{}
	t.Run("probes", func(t *testing.T) {
		for _, p := range framingProbes {
			known[p.path()] = true
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				switch {
				case p.slow && testing.Short():
					t.Skip("slowloris: skipped with -short")
				case p.slowEnv && os.Getenv(framingSlowEnv) != "1":
					t.Skipf("slowloris bound by the %v read timeout: set %s=1 to run it", proxy.DefaultLimits.ReadTimeout, framingSlowEnv)
				}
				conn := dial()
				if conn == nil {
					t.Fatal("could not connect to the front door")
				}
				got := sendProbe(conn, p)
				checkProbe(t, p, got, upstream.under(p.path()))
			})
		}
	})
	upstream.mu.Lock()
	defer upstream.mu.Unlock()
	for _, r := range upstream.reqs {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.Path, "/framing/"), "/")
		if !known["/framing/"+name] {
			t.Errorf("the upstream received %s %s, which no probe sent", r.Method, r.Path)
		}
	}
}

func checkProbe(t *testing.T, p framingProbe, got framingResult, reqs []upstreamRequest) {
	t.Helper()
	var bodies []string
	for _, r := range reqs {
		bodies = append(bodies, string(r.Body))
	}
	t.Logf("observed: %v; upstream received %d request(s) %q", got, len(reqs), bodies)
	for _, pr := range probeProblems(p, got, reqs) {
		t.Error(pr)
	}
}

// probeProblems lists how got and reqs differ from what p says: nothing
// when they match one of its outcomes, else how they differ from the
// first (net/http's).
func probeProblems(p framingProbe, got framingResult, reqs []upstreamRequest) []string {
	if p.noInterim && len(got.interims) > 0 {
		return []string{fmt.Sprintf("interim answers %v came before the answers; want none", got.interims)}
	}
	var first []string
	for i, o := range p.outcomes() {
		problems := outcomeProblems(p.path(), o, got, reqs)
		if len(problems) == 0 {
			return nil
		}
		if i == 0 {
			first = problems
		}
	}
	if len(p.also) > 0 {
		first = append(first, fmt.Sprintf("nor does it match any other safe outcome of the probe: %+v", p.also))
	}
	return first
}

// outcomeProblems lists how got and reqs differ from o, for a probe on
// path.
func outcomeProblems(path string, o framingOutcome, got framingResult, reqs []upstreamRequest) []string {
	var out []string
	want := o.answers
	if want == nil {
		want = []int{}
	}
	if s := got.statuses(); fmt.Sprint(s) != fmt.Sprint(want) {
		out = append(out, fmt.Sprintf("answers %v, want %v", s, want))
	}
	switch {
	case !got.sentinel && !got.closed:
		out = append(out, fmt.Sprintf("the connection neither ended nor answered the sentinel within the bound: %v", got.end))
	case o.closed && got.sentinel:
		out = append(out, fmt.Sprintf("the connection was kept and the request behind the probe was read and answered; want it closed after %v", want))
	case !o.closed && got.closed:
		out = append(out, fmt.Sprintf("the connection ended (%v); want the sentinel behind the probe answered", got.end))
	}
	if len(reqs) != len(o.forwarded) {
		var bodies []string
		for _, r := range reqs {
			bodies = append(bodies, string(r.Body))
		}
		return append(out, fmt.Sprintf("the upstream received %d request(s) %q, want %d %q", len(reqs), bodies, len(o.forwarded), o.forwarded))
	}
	for i, r := range reqs {
		if string(r.Body) != o.forwarded[i] {
			out = append(out, fmt.Sprintf("upstream request %d: body %q, want %q", i+1, r.Body, o.forwarded[i]))
		}
		if r.Path != path {
			out = append(out, fmt.Sprintf("upstream request %d: path %q, want %q", i+1, r.Path, path))
		}
		if bad := r.wellFramed(); bad != "" {
			out = append(out, fmt.Sprintf("upstream request %d was not well framed: %s", i+1, bad))
		}
	}
	return out
}

// TestFraming runs the framing probes against each front door, each on
// two gateways of its own: bodies pre-read whole by the fasthttp door
// ("preread") and streamed past a small pre-read ("streamed",
// framingSmallRoute).
func TestFraming(t *testing.T) {
	doortest.ForEach(t, func(t *testing.T) {
		t.Parallel()
		for _, streamed := range []bool{false, true} {
			name := "preread"
			if streamed {
				name = "streamed"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				up := newFramingUpstream(t)
				log := &panicLog{}
				s := startFramingGateway(t, up.srv.URL, log, doorYAML(t, ""), streamed)
				checkDoor(t, s)
				addr := s.Addr().String()
				runFramingProbes(t, func() net.Conn {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Errorf("dial %s: %v", addr, err)
						return nil
					}
					return c
				}, up)
				for _, l := range log.take() {
					t.Errorf("the gateway panicked: %s", l)
				}
			})
		}
	})
}

// The fuzz target's reference: a strict reader of an HTTP/1.x byte
// stream (RFC 9112), written apart from net/http, that says which
// requests a safe front door may forward and with which body.

// refRequest is one request of a stream as the reference frames it.
type refRequest struct {
	method string
	body   []byte
}

// refDialect is what a front door tolerates beyond the strict reader
// while still framing every request one way; the reference then accepts
// it too. The zero dialect is the strict reader (net/http's tolerances
// only).
type refDialect struct {
	// emptyLines: any number of empty lines (CRLF or a bare LF) before a
	// request line are skipped, at the start of the connection as between
	// requests. RFC 9112 section 2.2: a server SHOULD ignore at least one
	// empty line received before the request line. They belong to no
	// message, so the framing keeps one reading.
	emptyLines bool
	// anyVersion: the request line's version may be any HTTP/d.d; all but
	// HTTP/1.1 are read like HTTP/1.0 (RFC 9112 section 2.3 lets a server
	// answer a version it does not support as the highest it does): a
	// body by Content-Length only, and nothing behind the request is
	// read.
	anyVersion bool
}

// refDialects are the front doors' dialects: fasthttp's reader skips
// empty lines before a request line and takes any HTTP/d.d version
// (then, not HTTP/1.1, it refuses Transfer-Encoding and the door closes
// after the answer).
var refDialects = map[config.ServerKind]refDialect{
	config.ServerFastHTTP: {emptyLines: true, anyVersion: true},
}

// refFrameAs reads stream request by request and returns those a safe front
// door may forward, in order. It stops before the first request that is
// ambiguous, malformed or incomplete (neither it nor anything behind it
// may be forwarded), and after one behind which nothing may be read:
// Connection: close, HTTP/1.0 without keep-alive, Transfer-Encoding beside
// Content-Length or on HTTP/1.0, a folded framing field. d adds a front
// door's tolerances (refDialects; the zero dialect for net/http).
func refFrameAs(stream []byte, d refDialect) []refRequest {
	var out []refRequest
	lastPOST := false
	for len(stream) > 0 {
		if lastPOST {
			// net/http skips up to 4 CR or LF bytes after a POST (RFC 9112
			// section 2.2's tolerance of a stray CRLF after a body).
			n := 0
			for n < min(4, len(stream)) && (stream[n] == '\r' || stream[n] == '\n') {
				n++
			}
			stream = stream[n:]
		}
		for d.emptyLines {
			if rest, ok := bytes.CutPrefix(stream, []byte("\r\n")); ok {
				stream = rest
			} else if rest, ok := bytes.CutPrefix(stream, []byte("\n")); ok {
				stream = rest
			} else {
				break
			}
		}
		req, rest, last, ok := refOne(stream, d)
		if !ok {
			return out
		}
		out = append(out, req)
		if last {
			return out
		}
		stream, lastPOST = rest, req.method == "POST"
	}
	return out
}

// refLine cuts the line at the start of s: it ends in CRLF or a bare LF
// (RFC 9112 section 2.2); a CR anywhere else makes it malformed, and no LF
// incomplete.
func refLine(s []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(s, '\n')
	if i < 0 {
		return nil, nil, false
	}
	line, rest = s[:i], s[i+1:]
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, nil, false
	}
	return line, rest, true
}

func refIsTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func refIsToken(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if !refIsTchar(c) {
			return false
		}
	}
	return true
}

// refValidFieldValue: no control character but HTAB (RFC 9110 section 5.5).
func refValidFieldValue(v []byte) bool {
	for _, c := range v {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func refTrimOWS(b []byte) []byte { return bytes.Trim(b, " \t") }

// refOne frames the request at the start of s.
func refOne(s []byte, d refDialect) (req refRequest, rest []byte, last, ok bool) {
	line, s, ok := refLine(s)
	if !ok {
		return req, nil, false, false
	}
	parts := bytes.Split(line, []byte(" "))
	if len(parts) != 3 || !refIsToken(parts[0]) || len(parts[1]) == 0 || !refValidFieldValue(parts[1]) {
		return req, nil, false, false
	}
	v := parts[2]
	http10 := false
	switch {
	case len(v) == 8 && bytes.HasPrefix(v, []byte("HTTP/1.")) && '0' <= v[7] && v[7] <= '9':
		http10 = v[7] == '0'
		if d.anyVersion && v[7] != '1' {
			http10 = true
		}
	case d.anyVersion && len(v) == 8 && bytes.HasPrefix(v, []byte("HTTP/")) && v[6] == '.' &&
		'0' <= v[5] && v[5] <= '9' && '0' <= v[7] && v[7] <= '9':
		http10 = true
	default:
		return req, nil, false, false
	}
	req.method = string(parts[0])

	// Field lines, unfolded (RFC 9112 section 5.2: obs-fold is replaced
	// by a space).
	fields := map[string][][]byte{}
	folded := map[string]bool{}
	var prev string
	for first := true; ; first = false {
		if line, s, ok = refLine(s); !ok {
			return req, nil, false, false
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if first {
				return req, nil, false, false // folds onto the request line
			}
			vs := fields[prev]
			vs[len(vs)-1] = refTrimOWS(append(append(vs[len(vs)-1], ' '), refTrimOWS(line)...))
			folded[prev] = true
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !refIsToken(name) {
			return req, nil, false, false
		}
		prev = strings.ToLower(string(name))
		fields[prev] = append(fields[prev], append([]byte(nil), refTrimOWS(value)...))
	}
	for _, vs := range fields {
		for _, v := range vs {
			if !refValidFieldValue(v) {
				return req, nil, false, false
			}
		}
	}

	// Whether anything behind this request may be read.
	var conn []string
	for _, v := range fields["connection"] {
		for _, t := range strings.Split(string(v), ",") {
			conn = append(conn, strings.ToLower(strings.TrimSpace(t)))
		}
	}
	has := func(tok string) bool {
		for _, t := range conn {
			if t == tok {
				return true
			}
		}
		return false
	}
	// The gateway closes after every HTTP/1.0 request, keep-alive or not.
	last = has("close") || http10
	if folded["transfer-encoding"] {
		// Unfolded, it is a Transfer-Encoding: closed after.
		last = true
	}
	// A folded Content-Length is unfolded (RFC 9112 section 5.2: a
	// recipient either rejects obs-fold or replaces it with spaces before
	// reading the value), so it is one reading of the framing.

	te, cl := fields["transfer-encoding"], fields["content-length"]
	switch {
	case len(te) > 0 && !http10:
		// Only a lone "chunked" is understood (a front door may do more,
		// but then this reference does not know the body).
		if len(te) != 1 || !strings.EqualFold(string(te[0]), "chunked") {
			return req, nil, false, false
		}
		if len(cl) > 0 {
			last = true // RFC 9112 section 6.1: close after
		}
		body, rest, trailer, ok := refChunked(s)
		if !ok {
			return req, nil, false, false
		}
		// Where trailer lines end is for the reader to decide: nothing
		// behind them may be read.
		req.body = body
		return req, rest, last || trailer, true
	case len(te) > 0:
		// HTTP/1.0 with Transfer-Encoding: faulty framing, close after
		// (RFC 9112 section 6.1); the body by Content-Length.
		last = true
	}
	if len(cl) == 0 {
		return req, s, last, true
	}
	for _, v := range cl[1:] {
		if !bytes.Equal(v, cl[0]) {
			return req, nil, false, false
		}
	}
	if len(cl[0]) == 0 {
		return req, nil, false, false
	}
	for _, c := range cl[0] {
		if c < '0' || c > '9' {
			return req, nil, false, false
		}
	}
	n, err := strconv.ParseInt(string(cl[0]), 10, 64)
	if err != nil || n > int64(len(s)) {
		return req, nil, false, false // too large, or incomplete
	}
	req.body = s[:n]
	return req, s[n:], last, true
}

// refChunked decodes the chunked body at the start of s; trailer reports
// a trailer section (not a bare CRLF) after the last chunk.
func refChunked(s []byte) (body, rest []byte, trailer, ok bool) {
	body = []byte{}
	for {
		i := bytes.IndexByte(s, '\n')
		if i < 1 || s[i-1] != '\r' {
			return nil, nil, false, false // no line, or a bare LF
		}
		line := s[:i-1]
		s = s[i+1:]
		if bytes.IndexByte(line, '\r') >= 0 {
			return nil, nil, false, false
		}
		line = bytes.TrimRight(line, " \t")
		size, _, _ := bytes.Cut(line, []byte(";"))
		if len(size) == 0 || len(size) > 16 {
			return nil, nil, false, false
		}
		var n uint64
		for _, c := range size {
			switch {
			case '0' <= c && c <= '9':
				n = n<<4 | uint64(c-'0')
			case 'a' <= c && c <= 'f':
				n = n<<4 | uint64(c-'a'+10)
			case 'A' <= c && c <= 'F':
				n = n<<4 | uint64(c-'A'+10)
			default:
				return nil, nil, false, false
			}
		}
		if n == 0 {
			if bytes.HasPrefix(s, []byte("\r\n")) {
				return body, s[2:], false, true
			}
			return body, nil, true, true
		}
		if n > uint64(len(s)) || len(s)-int(n) < 2 || s[n] != '\r' || s[n+1] != '\n' {
			return nil, nil, false, false
		}
		body = append(body, s[:n]...)
		s = s[n+2:]
	}
}

// FuzzFramingNetHTTP and FuzzFramingFastHTTP send arbitrary bytes to a
// front door (then half-close) and check that every request that
// reached the upstream was well framed and is one the reference frames
// in those bytes, in order, with the same method and body; and that the
// gateway neither panicked nor kept the connection past the bound. The
// seeds are the probes' bytes and testdata/fuzz/<target>.
func FuzzFramingNetHTTP(f *testing.F) { fuzzFraming(f, config.ServerNetHTTP) }

// FuzzFramingFastHTTP is FuzzFramingNetHTTP on the fasthttp front door.
func FuzzFramingFastHTTP(f *testing.F) { fuzzFraming(f, config.ServerFastHTTP) }

func fuzzFraming(f *testing.F, door config.ServerKind) {
	for _, p := range framingProbes {
		if len(p.raw) <= 16<<10 {
			f.Add(p.raw)
		}
	}
	up := newFramingUpstream(f)
	log := &panicLog{}
	// A key seen in an earlier input is forwarded again rather than
	// replayed (or refused for another payload), so that every input can
	// reach the upstream. On fasthttp every input goes to two gateways:
	// bodies pre-read whole, and streamed past a small pre-read
	// (framingSmallRoute); net/http reads both the same way.
	modes := []bool{false}
	if door == config.ServerFastHTTP {
		modes = append(modes, true)
	}
	var addrs []string
	for _, streamed := range modes {
		s := startFramingGateway(f, up.srv.URL, log, withDoor(door, "dedupe: { window: 1ms, retention: 1ms }\n"), streamed)
		if s.cfg.Server != door {
			f.Fatalf("the gateway runs with server: %q, want %q", s.cfg.Server, door)
		}
		addrs = append(addrs, s.Addr().String())
	}
	d := refDialects[door]
	f.Fuzz(func(t *testing.T, raw []byte) {
		for i, addr := range addrs {
			if len(addrs) > 1 {
				t.Logf("gateway %d of %d (streamed: %v)", i+1, len(addrs), modes[i])
			}
			sendFuzzInput(t, addr, raw, up, log)
			reqs := up.take()
			problems := forwardedProblems(raw, reqs, d)
			t.Logf("the reference frames %d request(s) a front door may forward; %d reached the upstream", len(refFrameAs(raw, d)), len(reqs))
			for _, p := range problems {
				t.Error(p)
			}
		}
	})
}

// sendFuzzInput writes raw on a fresh connection to addr, half-closes
// and reads until the gateway closes (within framingFuzzWait); then
// checks that the gateway did not panic. up is emptied first.
func sendFuzzInput(t *testing.T, addr string, raw []byte, up *framingUpstream, log *panicLog) {
	t.Helper()
	up.take()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(framingFuzzWait))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := conn.Write(raw); err == nil {
			conn.(*net.TCPConn).CloseWrite()
		}
	}()
	_, err = io.Copy(io.Discard, conn)
	conn.Close()
	<-wrote
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection was not closed within %v of the input's end", framingFuzzWait)
	}
	for _, l := range log.take() {
		t.Errorf("the gateway panicked: %s", l)
	}
}

// framingFuzzWait bounds one fuzz input: the gateway reads it to its end
// and must close the connection within it.
const framingFuzzWait = 10 * time.Second

// forwardedProblems checks the requests that reached the upstream
// against the reference framing of raw in the front door's dialect d; it
// stops at the first one the
// reference does not frame.
func forwardedProblems(raw []byte, reqs []upstreamRequest, d refDialect) []string {
	var out []string
	ref := refFrameAs(raw, d)
	i := 0
	for k, r := range reqs {
		if bad := r.wellFramed(); bad != "" {
			out = append(out, fmt.Sprintf("upstream request %d (%s %s) was not well framed: %s", k+1, r.Method, r.Path, bad))
		}
		if !strings.HasPrefix(r.Path, "/framing/") {
			out = append(out, fmt.Sprintf("upstream request %d went to %q, outside the route", k+1, r.Path))
		}
		for i < len(ref) && (ref[i].method != r.Method || !bytes.Equal(ref[i].body, r.Body)) {
			i++
		}
		if i == len(ref) {
			var framed []string
			for _, q := range ref {
				framed = append(framed, fmt.Sprintf("%s %q", q.method, q.body))
			}
			return append(out, fmt.Sprintf("upstream request %d of %d, %s %s with body %q, is not one of the requests the reference frames in the input, in order: %v",
				k+1, len(reqs), r.Method, r.Path, r.Body, framed))
		}
		i++
	}
	return out
}
