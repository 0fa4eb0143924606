package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds what the template schemes share (hmac with a template,
// ed25519, ecdsa-p256): where the signature and the signed timestamp are
// read, and the expansion of the signed-content template for one delivery.

// Timestamp sources and formats.
const (
	tsNone = iota
	tsFormat
	tsHeader
	tsJSON
)

const (
	tsUnix = iota
	tsUnixMS
	tsRFC3339
)

var timestampFormats = map[string]int{"": tsUnix, "unix": tsUnix, "unix_ms": tsUnixMS, "rfc3339": tsRFC3339}

// signedContent is a compiled template scheme, less its keys.
type signedContent struct {
	name      string
	tpl       *template
	sigHeader string   // canonical; "" when the signature is in the body
	sigJSON   []string // the signature's JSON path
	format    *sigFormat
	base64    bool
	tsKind    int
	tsHeader  string   // canonical
	tsJSON    []string // path
	tsFmt     int
	tol       time.Duration
	method    string
	url       string
}

// compileContent compiles the fields the template schemes share. tplDefault
// is the template when none is written ("" makes it required).
func compileContent(name string, c Config, tplDefault string, jsonSignature bool) (*signedContent, error) {
	sc := &signedContent{name: name, method: c.Method, url: c.PublicURL}
	errf := func(format string, args ...any) error {
		return fmt.Errorf("verify: "+name+": "+format, args...)
	}

	// Where the signature is.
	switch hdr := strings.TrimSpace(c.Header); {
	case c.Signature != "" && hdr != "":
		return nil, errf("set header or signature, not both")
	case c.Signature != "":
		kind, path, _ := strings.Cut(c.Signature, ":")
		if kind != "json" || !jsonSignature {
			return nil, errf(`signature must be "json:PATH" (the body field carrying the signature), got %q`, clipText(c.Signature))
		}
		segs, err := parseJSONPath(path)
		if err != nil {
			return nil, errf("signature: %w", err)
		}
		sc.sigJSON = segs
	case hdr == "":
		return nil, errf("header is required (the request header carrying the signature)")
	case !validHeaderName(hdr):
		return nil, errf("header %q is not a header name", clipText(hdr))
	default:
		sc.sigHeader = textproto.CanonicalMIMEHeaderKey(hdr)
	}

	// The signed content.
	src := c.Template
	if src == "" {
		src = tplDefault
	}
	if src == "" {
		return nil, errf("template is required (the signed content, such as \"{timestamp}{body}\")")
	}
	tpl, err := parseTemplate(src)
	if err != nil {
		return nil, errf("template: %w", err)
	}
	sc.tpl = tpl

	// The header format.
	switch {
	case c.Prefix != "" && c.Format != "":
		return nil, errf("set prefix or format, not both (prefix P is format \"P{signature}\")")
	case c.Prefix != "":
		sc.format = &sigFormat{kind: fmtPrefix, prefix: c.Prefix, src: c.Prefix + phSignature}
	default:
		f, err := parseFormat(c.Format)
		if err != nil {
			return nil, errf("format: %w", err)
		}
		sc.format = f
	}
	if sc.sigJSON != nil && sc.format.kind != fmtPlain {
		return nil, errf("a signature read from the body has no format; remove format and prefix")
	}
	if sc.sigJSON != nil && tpl.hasKind(partBody) {
		return nil, errf("the signature is read from the body, so {body} cannot be part of what it signs")
	}

	// The encoding.
	switch c.Encoding {
	case "", "hex":
	case "base64":
		sc.base64 = true
	default:
		return nil, errf("unknown encoding %q (valid: hex, base64)", clipText(c.Encoding))
	}

	// The timestamp.
	f, ok := timestampFormats[c.TimestampFormat]
	if !ok {
		return nil, errf("unknown timestamp_format %q (valid: unix, unix_ms, rfc3339)", clipText(c.TimestampFormat))
	}
	sc.tsFmt = f
	switch {
	case sc.format.hasTimestamp() && c.Timestamp != "":
		return nil, errf("the format carries the timestamp ({timestamp}), so timestamp must not be set")
	case sc.format.hasTimestamp():
		sc.tsKind = tsFormat
	case c.Timestamp != "":
		kind, arg, _ := strings.Cut(c.Timestamp, ":")
		switch kind {
		case "header":
			if !validHeaderName(arg) {
				return nil, errf("timestamp: %q is not a header name", clipText(arg))
			}
			sc.tsKind, sc.tsHeader = tsHeader, textproto.CanonicalMIMEHeaderKey(arg)
		case "json":
			segs, err := parseJSONPath(arg)
			if err != nil {
				return nil, errf("timestamp: %w", err)
			}
			sc.tsKind, sc.tsJSON = tsJSON, segs
		default:
			return nil, errf(`timestamp must be "header:NAME" or "json:PATH", got %q`, clipText(c.Timestamp))
		}
	}
	if tpl.hasKind(partTimestamp) && sc.tsKind == tsNone {
		return nil, errf("the template signs {timestamp}, but no timestamp is read: add {timestamp} to the format or set timestamp")
	}
	if sc.tsKind != tsNone && !sc.timestampSigned() {
		return nil, errf("the timestamp is not part of the signed content, so anyone could change it: add it to the template")
	}
	if sc.tsKind != tsNone {
		if sc.tol, err = tolerance(c); err != nil {
			return nil, err
		}
	}

	// The request's own URL and method.
	if tpl.hasKind(partURL) && sc.url == "" {
		return nil, errf("the template signs {url}, the URL the provider calls: set the route's public_url to it")
	}
	if tpl.hasKind(partMethod) {
		if sc.method == "" {
			sc.method = http.MethodPost
		}
		if !validHeaderName(sc.method) {
			return nil, errf("the template signs {method}, so the route must accept exactly one method (match.methods)")
		}
	}
	return sc, nil
}

// timestampSigned reports whether the template covers the timestamp.
func (sc *signedContent) timestampSigned() bool {
	t := sc.tpl
	switch {
	case t.hasKind(partTimestamp):
		return true
	case sc.tsKind == tsHeader:
		return t.hasHeader(sc.tsHeader)
	case sc.tsKind == tsJSON:
		return t.hasKind(partBody) || t.hasJSON(strings.Join(sc.tsJSON, "."))
	}
	return false
}

// hasTimestamp reports whether the scheme reads and bounds a timestamp.
func (sc *signedContent) hasTimestamp() bool { return sc.tsKind != tsNone }

// tplInput is one delivery's values for the template's placeholders.
type tplInput struct {
	h      http.Header
	body   []byte
	ts     string // {timestamp} from the format or a header
	tsb    []byte // {timestamp} from the body
	method string
	url    string
	sig    []byte                   // the signature, when read from the body
	svals  [maxTemplateParts]string // header values, by part
	bvals  [maxTemplateParts][]byte // JSON values, by part
}

// read parses the signature into p and fills in: it reads the signature,
// checks the timestamp against now, and resolves every placeholder, so that
// writeTo cannot fail. Errors wrap one of the Err* reasons.
func (sc *signedContent) read(h http.Header, body []byte, now time.Time, p *sigParse, in *tplInput) error {
	in.h, in.body, in.method, in.url = h, body, sc.method, sc.url
	if sc.sigJSON != nil {
		v, st := jsonLookup(body, sc.sigJSON)
		switch st {
		case fieldAbsent:
			return fail(sc.name, ErrMissing, "signature field missing from the body")
		case fieldMalformed:
			return fail(sc.name, ErrMalformed, "body is not JSON with a plain signature field")
		}
		in.sig = v
	} else {
		hv := header(h, sc.sigHeader)
		if hv == "" {
			return fail(sc.name, ErrMissing, "signature header missing")
		}
		if err := sc.format.parse(sc.name, hv, p); err != nil {
			return err
		}
	}
	if err := sc.readTimestamp(h, body, now, p, in); err != nil {
		return err
	}
	return sc.resolve(in)
}

// readTimestamp finds the timestamp, checks it against now and keeps it for
// {timestamp}.
func (sc *signedContent) readTimestamp(h http.Header, body []byte, now time.Time, p *sigParse, in *tplInput) error {
	var t time.Time
	var ok bool
	switch sc.tsKind {
	case tsNone:
		return nil
	case tsFormat:
		in.ts = p.ts
		if in.ts == "" {
			return fail(sc.name, ErrMalformed, "timestamp is empty")
		}
		t, ok = parseTS(in.ts, sc.tsFmt)
	case tsHeader:
		in.ts = header(h, sc.tsHeader)
		if in.ts == "" {
			return fail(sc.name, ErrMissing, "timestamp header missing")
		}
		t, ok = parseTS(in.ts, sc.tsFmt)
	case tsJSON:
		v, st := jsonLookup(body, sc.tsJSON)
		switch st {
		case fieldAbsent:
			return fail(sc.name, ErrMissing, "timestamp field missing from the body")
		case fieldMalformed:
			return fail(sc.name, ErrMalformed, "body is not JSON with a plain timestamp field")
		}
		in.tsb = v
		t, ok = parseTS(v, sc.tsFmt)
	}
	if !ok {
		return fail(sc.name, ErrMalformed, "timestamp is not a valid time")
	}
	d := now.Sub(t)
	switch {
	case d > sc.tol:
		return fail(sc.name, ErrExpired, "timestamp older than the tolerance")
	case d < -sc.tol:
		return fail(sc.name, ErrFuture, "timestamp further in the future than the tolerance")
	}
	return nil
}

// parseTS parses a timestamp written as decimal Unix seconds or
// milliseconds (digits only, at most 18), or RFC 3339.
func parseTS[T string | []byte](v T, format int) (time.Time, bool) {
	if format == tsRFC3339 {
		if len(v) == 0 || len(v) > 64 {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, string(v))
		return t, err == nil
	}
	if len(v) == 0 || len(v) > 18 {
		return time.Time{}, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return time.Time{}, false
		}
		n = n*10 + int64(v[i]-'0')
	}
	if format == tsUnixMS {
		return time.UnixMilli(n), true
	}
	return time.Unix(n, 0), true
}

// formatTS writes t as a timestamp of the given format (signers).
func formatTS(t time.Time, format int) string {
	switch format {
	case tsUnixMS:
		return strconv.FormatInt(t.UnixMilli(), 10)
	case tsRFC3339:
		return t.UTC().Format(time.RFC3339Nano)
	}
	return strconv.FormatInt(t.Unix(), 10)
}

// resolve reads every header and JSON field the template names.
func (sc *signedContent) resolve(in *tplInput) error {
	for i, part := range sc.tpl.parts {
		switch part.kind {
		case partHeader:
			v := header(in.h, part.text)
			if v == "" {
				return fail(sc.name, ErrMissing, "signed header "+part.text+" missing")
			}
			in.svals[i] = v
		case partJSON:
			v, st := jsonLookup(in.body, part.segs)
			switch st {
			case fieldAbsent:
				return fail(sc.name, ErrMissing, "signed body field missing")
			case fieldMalformed:
				return fail(sc.name, ErrMalformed, "body is not JSON with a plain signed field")
			}
			in.bvals[i] = v
		case partSortedForm:
			if !formOK(in.body) {
				return fail(sc.name, ErrMalformed, "body is not a form (application/x-www-form-urlencoded) of at most 128 fields")
			}
		}
	}
	return nil
}

// formOK reports whether appendSortedForm accepts body.
func formOK(body []byte) bool {
	n := 0
	for i := 0; i < len(body); {
		end := i
		for end < len(body) && body[end] != '&' {
			end++
		}
		if end > i {
			n++
			if n > maxFormFields || !validEscapes(body[i:end]) {
				return false
			}
		}
		i = end + 1
	}
	return true
}

// writeTo writes the signed content of in to w. The parts before and
// between bodies are assembled in buf, which it returns for reuse; the body
// is written as it is, never copied. in must have been resolved.
func (t *template) writeTo(w io.Writer, buf []byte, in *tplInput) []byte {
	b := buf[:0]
	for i, p := range t.parts {
		switch p.kind {
		case partLiteral:
			b = append(b, p.text...)
		case partBody:
			if len(b) > 0 {
				w.Write(b)
				b = b[:0]
			}
			w.Write(in.body)
		case partHeader:
			b = append(b, in.svals[i]...)
		case partJSON:
			b = append(b, in.bvals[i]...)
		case partTimestamp:
			b = append(b, in.ts...)
			b = append(b, in.tsb...)
		case partMethod:
			b = append(b, in.method...)
		case partURL:
			b = append(b, in.url...)
		case partSortedForm:
			b, _ = appendSortedForm(b, in.body)
		}
	}
	if len(b) > 0 {
		w.Write(b)
	}
	return b
}

// keepBuf returns b for a pool, or nil when it grew too large to keep.
func keepBuf(b []byte) []byte {
	if cap(b) > maxPooledPrefix {
		return nil
	}
	return b[:0]
}

// appendWriter collects written bytes, for the schemes that sign the whole
// message (Ed25519).
type appendWriter struct {
	b   []byte
	buf []byte
}

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

var contentWriters = sync.Pool{New: func() any { return new(appendWriter) }}

// content returns the whole signed content of in in a pooled writer; the
// caller must put it back with releaseContent.
func (sc *signedContent) content(in *tplInput) *appendWriter {
	w := contentWriters.Get().(*appendWriter)
	w.b = w.b[:0]
	w.buf = keepBuf(sc.tpl.writeTo(w, w.buf, in))
	return w
}

func releaseContent(w *appendWriter) {
	w.b = keepBuf(w.b)
	contentWriters.Put(w)
}

// signedDigest is SignedDigest for the template schemes: the SHA-256 of the
// signed content. ok is false when h or body lacks what it covers.
func (sc *signedContent) signedDigest(h http.Header, body []byte) ([32]byte, bool) {
	var p sigParse
	var in tplInput
	in.h, in.body, in.method, in.url = h, body, sc.method, sc.url
	switch sc.tsKind {
	case tsFormat:
		hv := header(h, sc.sigHeader)
		if hv == "" || sc.format.parse(sc.name, hv, &p) != nil || p.ts == "" {
			return [32]byte{}, false
		}
		in.ts = p.ts
	case tsHeader:
		if in.ts = header(h, sc.tsHeader); in.ts == "" {
			return [32]byte{}, false
		}
	case tsJSON:
		v, st := jsonLookup(body, sc.tsJSON)
		if st != fieldFound {
			return [32]byte{}, false
		}
		in.tsb = v
	}
	if sc.resolve(&in) != nil {
		return [32]byte{}, false
	}
	st := digestStates.Get().(*digestState)
	st.h.Reset()
	st.buf = keepBuf(sc.tpl.writeTo(st.h, st.buf, &in))
	st.h.Sum(st.sum[:0])
	d := st.sum
	digestStates.Put(st)
	return d, true
}

// decodeSignatures decodes p's values as hex or base64 into c. bad reports
// a value that did not decode.
func (sc *signedContent) decodeSignatures(p *sigParse, in *tplInput, c *candidates) (bad bool) {
	if sc.sigJSON != nil {
		// Read from the body: one value, in in.sig.
		if sc.base64 {
			return !addBase64To(c, in.sig)
		}
		return !addHexTo(c, in.sig)
	}
	for i := 0; i < p.n; i++ {
		var ok bool
		if sc.base64 {
			ok = c.addBase64(p.vals[i])
		} else {
			ok = c.addHex(p.vals[i])
		}
		if !ok {
			bad = true
		}
	}
	return bad
}

// noCandidates is the error when no signature value decoded: a header
// carrying only other versions is a mismatch (nothing can be downgraded),
// anything else malformed.
func (sc *signedContent) noCandidates(p *sigParse, bad bool) error {
	if p.other && !bad {
		return fail(sc.name, ErrMismatch, "no signature of the expected version (other versions do not count)")
	}
	return fail(sc.name, ErrMalformed, "signature is not valid "+sc.encoding())
}

func (sc *signedContent) encoding() string {
	if sc.base64 {
		return "base64"
	}
	return "hex"
}

func (sc *signedContent) encode(sig []byte) string {
	if sc.base64 {
		return base64.StdEncoding.EncodeToString(sig)
	}
	return hex.EncodeToString(sig)
}

// prepareSign fills h with what a signer adds before the signature: every
// signed header the template names that h lacks (the timestamp header as
// now; any other, such as a message id, as "msg_" and 24 hex digits of the
// body's SHA-256, so that signing the same body twice gives the same id),
// and returns the resolved input and the timestamp for the format.
func (sc *signedContent) prepareSign(h http.Header, body []byte, now time.Time) (*tplInput, string, error) {
	ts := formatTS(now, sc.tsFmt)
	if sc.tsKind == tsHeader {
		h.Set(sc.tsHeader, ts)
	}
	for _, name := range sc.tpl.headers() {
		if header(h, name) == "" {
			sum := sha256.Sum256(body)
			h.Set(name, "msg_"+hex.EncodeToString(sum[:12]))
		}
	}
	in := &tplInput{h: h, body: body, method: sc.method, url: sc.url}
	switch sc.tsKind {
	case tsFormat:
		in.ts = ts
	case tsHeader:
		in.ts = header(h, sc.tsHeader)
	case tsJSON:
		v, st := jsonLookup(body, sc.tsJSON)
		if st != fieldFound {
			return nil, "", fail(sc.name, ErrMissing, "the body to sign has no timestamp field")
		}
		in.tsb = v
	}
	if err := sc.resolve(in); err != nil {
		return nil, "", err
	}
	return in, ts, nil
}

// setSignature puts the encoded signature where the scheme reads it: the
// header, in its format, or (signature read from the body) the body's
// signature field, returning the new body.
func (sc *signedContent) setSignature(h http.Header, body []byte, sig []byte, ts string) ([]byte, error) {
	enc := sc.encode(sig)
	if sc.sigJSON == nil {
		h.Set(sc.sigHeader, sc.format.format(enc, ts))
		return body, nil
	}
	out, ok := jsonReplaceString(body, sc.sigJSON, enc)
	if !ok {
		return nil, fail(sc.name, ErrMissing, "the body to sign has no string signature field to fill in")
	}
	return out, nil
}

// jsonReplaceString returns a copy of body with the string at segs
// replaced by s (which needs no escaping).
func jsonReplaceString(body []byte, segs []string, s string) ([]byte, bool) {
	i := 0
	var start, end, st int
	for d, seg := range segs {
		i = jsonSkipWS(body, i)
		if i >= len(body) || body[i] != '{' {
			return nil, false
		}
		start, end, st = jsonMember(body, i, seg)
		if st != fieldFound {
			return nil, false
		}
		if d < len(segs)-1 {
			i = start
		}
	}
	if end-start < 2 || body[start] != '"' {
		return nil, false
	}
	out := make([]byte, 0, len(body)+len(s))
	out = append(out, body[:start+1]...)
	out = append(out, s...)
	return append(out, body[end-1:]...), true
}

// BodySigner is implemented by the Signers of schemes that carry the
// signature inside the body (hmac with signature json:PATH, Mailgun):
// SignBody returns body with its signature field filled in. Their Sign
// returns an error.
type BodySigner interface {
	SignBody(h http.Header, body []byte, now time.Time) ([]byte, error)
}
