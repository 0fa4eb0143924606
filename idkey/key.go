package idkey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Errors from KeySpec.Derive.
var (
	// ErrNoKey: no source yielded a key.
	ErrNoKey = errors.New("dedupe: no idempotency key")
	// ErrBadKey: the key is longer than 255 bytes, is not UTF-8, or has
	// control, separator or bidirectional formatting characters.
	ErrBadKey = errors.New("dedupe: invalid idempotency key")
)

// MaxKeyLen is the longest idempotency key Derive accepts, in bytes.
const MaxKeyLen = 255

// Source kinds, the values of Source.Kind.
const (
	KindHeader   = "header"
	KindJSON     = "json"
	KindForm     = "form"
	KindQuery    = "query"
	KindTemplate = "template"
	KindBody     = "body"    // body:sha256
	KindLiteral  = "literal" // fixed text between a template's placeholders
)

// MaxJSONSources is the most distinct json: paths one KeySpec may name
// (top-level and inside templates together); ParseKey rejects more.
const MaxJSONSources = 64

// Errors wrapping ErrBadKey, so callers can tell the reason apart and
// errors.Is(err, ErrBadKey) still holds.
var (
	errTooLong = fmt.Errorf("%w: longer than %d bytes", ErrBadKey, MaxKeyLen)
	errControl = fmt.Errorf("%w: contains control, separator or bidirectional formatting characters", ErrBadKey)
	errNotUTF8 = fmt.Errorf("%w: not valid UTF-8", ErrBadKey)
)

// badQuotedError is the error for a header value that starts with '"' but
// is not an RFC 8941 string.
func badQuotedError(name string) error {
	return fmt.Errorf("%w: header %s starts with '\"' but is not a valid RFC 8941 string", ErrBadKey, name)
}

// Source is one compiled key source.
type Source struct {
	// Kind is header, json, form, query, template, body (body:sha256) or
	// literal (a fixed text part of a template).
	Kind string
	// Name is the header name (canonical), dotted JSON path, form or query
	// field, or the literal text; for a template, its text after
	// "template:" with header names canonical.
	Name string
	// Parts of a template.
	Parts []Source
}

// String returns the source as written in gateway.yaml, such as
// "header:Idempotency-Key" or "template:{json:type}:{json:id}".
func (s Source) String() string {
	switch s.Kind {
	case KindBody:
		return "body:sha256"
	case KindLiteral:
		return s.Name
	case KindTemplate:
		var b strings.Builder
		b.WriteString("template:")
		for _, p := range s.Parts {
			if p.Kind == KindLiteral {
				b.WriteString(p.Name)
				continue
			}
			b.WriteByte('{')
			b.WriteString(p.String())
			b.WriteByte('}')
		}
		return b.String()
	}
	return s.Kind + ":" + s.Name
}

// KeySpec is a route's compiled idempotency key sources.
type KeySpec struct {
	Sources []Source

	// plan is what ParseKey precomputed for Derive. A KeySpec built by
	// hand (plan nil) gets one computed per Derive call.
	plan *keyPlan
}

// keyPlan holds the distinct json: paths of a KeySpec, split into
// segments, so that one scan of the body answers all of them.
type keyPlan struct {
	paths []jsonPath
}

type jsonPath struct {
	name string   // as written: "data.items.0.id"
	segs []string // "data", "items", "0", "id"
	idx  []int    // array index of each segment, -1 when not canonical decimal
}

const sourceKinds = "header:, json:, form:, query:, template: or body:sha256"

// ParseKey compiles key sources such as "header:Idempotency-Key",
// "json:data.object.id" or "template:{json:type}:{json:id}".
//
// Sources:
//
//	header:NAME      a request header (NAME canonicalised)
//	json:a.b.0.c     a value in a JSON body; a numeric segment indexes an array
//	form:FIELD       a field of an application/x-www-form-urlencoded body
//	query:PARAM      a query parameter
//	body:sha256      hex SHA-256 of the raw body (always present)
//	template:T       T is literal text with {source} placeholders, each one of
//	                 the kinds above (templates do not nest)
func ParseKey(sources []string) (*KeySpec, error) {
	if len(sources) == 0 {
		return nil, errors.New("dedupe: no key sources (want at least one of " + sourceKinds + ")")
	}
	k := &KeySpec{Sources: make([]Source, 0, len(sources))}
	for _, raw := range sources {
		s, err := parseSource(raw)
		if err != nil {
			return nil, err
		}
		k.Sources = append(k.Sources, s)
	}
	k.plan = buildPlan(k.Sources)
	if n := len(k.plan.paths); n > MaxJSONSources {
		return nil, fmt.Errorf("dedupe: %d distinct json: key sources, at most %d allowed", n, MaxJSONSources)
	}
	return k, nil
}

func parseSource(raw string) (Source, error) {
	kind, arg, found := strings.Cut(raw, ":")
	if !found {
		return Source{}, fmt.Errorf("dedupe: unknown key source %q (want %s)", raw, sourceKinds)
	}
	if kind == KindTemplate {
		return parseTemplate(raw, arg)
	}
	s, msg := parseSimple(kind, arg)
	if msg == "unknown" {
		return Source{}, fmt.Errorf("dedupe: unknown key source %q (want %s)", raw, sourceKinds)
	}
	if msg != "" {
		return Source{}, fmt.Errorf("dedupe: key source %q: %s", raw, msg)
	}
	return s, nil
}

// parseSimple parses every kind but template, given the text before and
// after the first colon. msg is "" on success,
// "unknown" for an unknown kind, else the reason the source is invalid.
func parseSimple(kind, arg string) (Source, string) {
	switch kind {
	case KindHeader:
		if arg == "" {
			return Source{}, "empty header name"
		}
		for i := 0; i < len(arg); i++ {
			if !isTokenChar(arg[i]) {
				return Source{}, fmt.Sprintf("invalid character %q in header name", arg[i])
			}
		}
		return Source{Kind: KindHeader, Name: textproto.CanonicalMIMEHeaderKey(arg)}, ""
	case KindJSON:
		if arg == "" {
			return Source{}, "empty JSON path"
		}
		for i, seg := range strings.Split(arg, ".") {
			if seg == "" {
				return Source{}, fmt.Sprintf("empty segment %d in JSON path %q", i+1, arg)
			}
		}
		return Source{Kind: KindJSON, Name: arg}, ""
	case KindForm:
		if arg == "" {
			return Source{}, "empty form field name"
		}
		return Source{Kind: KindForm, Name: arg}, ""
	case KindQuery:
		if arg == "" {
			return Source{}, "empty query parameter name"
		}
		return Source{Kind: KindQuery, Name: arg}, ""
	case KindBody:
		if arg != "sha256" {
			return Source{}, fmt.Sprintf("unknown body digest %q (want body:sha256)", arg)
		}
		return Source{Kind: KindBody, Name: "sha256"}, ""
	}
	return Source{}, "unknown"
}

func parseTemplate(raw, text string) (Source, error) {
	fail := func(format string, args ...any) (Source, error) {
		return Source{}, fmt.Errorf("dedupe: key source %q: "+format, append([]any{raw}, args...)...)
	}
	if text == "" {
		return fail("empty template")
	}
	t := Source{Kind: KindTemplate, Name: text}
	placeholders := 0
	for i := 0; i < len(text); {
		switch c := text[i]; c {
		case '}':
			return fail("unbalanced '}' at offset %d of the template", i)
		case '{':
			end := strings.IndexAny(text[i+1:], "{}")
			if end < 0 || text[i+1+end] == '{' {
				return fail("unbalanced '{' at offset %d of the template", i)
			}
			inner := text[i+1 : i+1+end]
			if inner == "" {
				return fail("empty placeholder {} at offset %d of the template", i)
			}
			kind, arg, found := strings.Cut(inner, ":")
			if found && kind == KindTemplate {
				return fail("nested templates are not allowed (placeholder {%s})", inner)
			}
			p, msg := parseSimple(kind, arg)
			if !found || msg == "unknown" {
				return fail("unknown placeholder source %q (want header:, json:, form:, query: or body:sha256)", inner)
			}
			if msg != "" {
				return fail("placeholder {%s}: %s", inner, msg)
			}
			t.Parts = append(t.Parts, p)
			placeholders++
			i += end + 2
		default:
			j := strings.IndexAny(text[i:], "{}")
			if j < 0 {
				j = len(text) - i
			}
			lit := text[i : i+j]
			for k := 0; k < len(lit); k++ {
				if isControl(lit[k]) {
					return fail("control character %q in template text", lit[k])
				}
			}
			t.Parts = append(t.Parts, Source{Kind: KindLiteral, Name: lit})
			i += j
		}
	}
	if placeholders == 0 {
		return fail("template has no {source} placeholder")
	}
	// Name is the template as compiled: header names canonical.
	t.Name = strings.TrimPrefix(t.String(), "template:")
	return t, nil
}

// buildPlan collects the distinct json: paths of sources, in order.
func buildPlan(sources []Source) *keyPlan {
	p := &keyPlan{}
	var add func(s *Source)
	add = func(s *Source) {
		switch s.Kind {
		case KindJSON:
			for i := range p.paths {
				if p.paths[i].name == s.Name {
					return
				}
			}
			segs := strings.Split(s.Name, ".")
			idx := make([]int, len(segs))
			for i, seg := range segs {
				idx[i] = arrayIndex(seg)
			}
			p.paths = append(p.paths, jsonPath{name: s.Name, segs: segs, idx: idx})
		case KindTemplate:
			for i := range s.Parts {
				if s.Parts[i].Kind != KindTemplate { // templates do not nest
					add(&s.Parts[i])
				}
			}
		}
	}
	for i := range sources {
		add(&sources[i])
	}
	return p
}

// arrayIndex returns seg as an array index when it is a canonical decimal
// (no sign, no leading zero) below one billion, else -1.
func arrayIndex(seg string) int {
	if seg == "" || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0') {
		return -1
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// Derive returns the first present source's key. Missing: ErrNoKey; invalid:
// ErrBadKey. r is read for headers and query only; body is the raw body.
//
// A source is absent when its value is empty. A header whose value starts
// with '"' is read as an RFC 8941 string (the IETF Idempotency-Key draft's
// form, parameters ignored); a malformed one is ErrBadKey. A json: source
// is absent when the body is not JSON, lacks the path or holds null, an
// object or an array there; a number or boolean is its JSON text as
// written. The body is scanned at most once per call. A template is absent
// when any of its placeholders is. The first present source decides: when
// its key is longer than MaxKeyLen bytes or has control characters (below
// 0x20, or 0x7f), the result is an error wrapping ErrBadKey.
func (k *KeySpec) Derive(h http.Header, rawQuery string, body []byte) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	// Header sources first need no per-call state.
	for i := range k.Sources {
		s := &k.Sources[i]
		if s.Kind != KindHeader {
			return k.deriveFrom(i, h, rawQuery, body)
		}
		key, ok, err := headerValue(h, s.Name)
		if err != nil {
			return "", err
		}
		if ok {
			if err := validateKey(key); err != nil {
				return "", err
			}
			return key, nil
		}
	}
	return "", ErrNoKey
}

// deriveFrom is Derive from the i-th source on.
func (k *KeySpec) deriveFrom(i int, h http.Header, rawQuery string, body []byte) (string, error) {
	d := deriver{k: k, h: h, rawQuery: rawQuery, body: body}
	for ; i < len(k.Sources); i++ {
		key, ok, err := d.value(&k.Sources[i])
		if err != nil {
			return "", err
		}
		if ok {
			if err := validateKey(key); err != nil {
				return "", err
			}
			return key, nil
		}
	}
	return "", ErrNoKey
}

// validateKey applies the length and character rules: no C0 or C1 control
// characters, no line or paragraph separators, no bidirectional formatting
// characters (which make two different keys look alike in a log or the
// admin API), and valid UTF-8.
func validateKey(key string) error {
	if len(key) > MaxKeyLen {
		return errTooLong
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if isControl(c) {
			return errControl
		}
		if c >= utf8.RuneSelf {
			return validateNonASCII(key[i:])
		}
	}
	return nil
}

// validateNonASCII checks the rest of a key from its first non-ASCII byte.
func validateNonASCII(s string) error {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch {
		case r == utf8.RuneError && n == 1:
			return errNotUTF8
		case r < 0x20 || r >= 0x7f && r <= 0x9f, // C0, DEL, C1 (U+0085 among them)
			r == 0x061c, r == 0x200e, r == 0x200f, // Arabic letter mark, LRM, RLM
			r >= 0x2028 && r <= 0x202e, // line/paragraph separators, bidi embeddings and overrides
			r >= 0x2066 && r <= 0x2069: // bidi isolates
			return errControl
		}
	}
	return nil
}

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// deriver holds the per-call state of Derive: the body is parsed lazily,
// at most once per format, and values are assembled in buf.
type deriver struct {
	k        *KeySpec
	h        http.Header // the request's headers (nil: none)
	rawQuery string      // the request URI's query, without the "?"
	body     []byte

	plan     *keyPlan
	jsonDone bool
	jsonOK   bool
	jresBuf  [8]jsonVal
	jresBig  []jsonVal

	formDone  bool
	form      url.Values
	queryDone bool
	query     url.Values

	// buf has room for one byte more than a valid key: appends are capped
	// there, so an over-long value is detected without growing it.
	buf [MaxKeyLen + 1]byte
}

// value returns the key a top-level source yields, and whether it is present.
func (d *deriver) value(s *Source) (string, bool, error) {
	switch s.Kind {
	case KindHeader:
		return headerValue(d.h, s.Name)
	case KindForm:
		v := d.formValue(s.Name)
		return v, v != "", nil
	case KindQuery:
		v := d.queryValue(s.Name)
		return v, v != "", nil
	case KindJSON:
		v, ok := d.jsonValue(s.Name)
		if !ok {
			return "", false, nil
		}
		if v.kind == jsonLiteral || !v.esc {
			raw := d.body[v.start:v.end]
			if len(raw) > MaxKeyLen {
				return "", true, errTooLong
			}
			return string(raw), true, nil
		}
		b := appendJSONString(d.buf[:0], d.body[v.start:v.end], len(d.buf))
		if len(b) == 0 {
			return "", false, nil
		}
		return string(b), true, nil
	case KindBody:
		return string(d.bodyHash(d.buf[:0])), true, nil
	case KindTemplate:
		b, ok, err := d.template(s, d.buf[:0])
		if !ok || err != nil {
			return "", false, err
		}
		return string(b), true, nil
	}
	return "", false, nil
}

// template appends the template's text to dst (capped at len(d.buf)).
func (d *deriver) template(t *Source, dst []byte) ([]byte, bool, error) {
	limit := len(d.buf)
	for i := range t.Parts {
		p := &t.Parts[i]
		switch p.Kind {
		case KindLiteral:
			dst = appendCapped(dst, p.Name, limit)
			continue
		case KindHeader:
			v, ok, err := headerValue(d.h, p.Name)
			if err != nil || !ok {
				return dst, false, err
			}
			dst = appendCapped(dst, v, limit)
		case KindForm, KindQuery:
			var v string
			if p.Kind == KindForm {
				v = d.formValue(p.Name)
			} else {
				v = d.queryValue(p.Name)
			}
			if v == "" {
				return dst, false, nil
			}
			dst = appendCapped(dst, v, limit)
		case KindJSON:
			v, ok := d.jsonValue(p.Name)
			if !ok {
				return dst, false, nil
			}
			raw := d.body[v.start:v.end]
			if v.kind == jsonString && v.esc {
				n := len(dst)
				dst = appendJSONString(dst, raw, limit)
				if len(dst) == n {
					return dst, false, nil // decodes to ""
				}
			} else {
				dst = appendCappedBytes(dst, raw, limit)
			}
		case KindBody:
			if len(dst)+2*sha256.Size <= limit {
				dst = d.bodyHash(dst)
			} else {
				var h [2 * sha256.Size]byte
				dst = appendCappedBytes(dst, d.bodyHash(h[:0]), limit)
			}
		default: // not from ParseKey: nothing this version knows
			return dst, false, nil
		}
	}
	return dst, true, nil
}

func appendCapped(dst []byte, s string, limit int) []byte {
	if room := limit - len(dst); len(s) > room {
		s = s[:max(room, 0)]
	}
	return append(dst, s...)
}

func appendCappedBytes(dst, s []byte, limit int) []byte {
	if room := limit - len(dst); len(s) > room {
		s = s[:max(room, 0)]
	}
	return append(dst, s...)
}

// bodyHash appends the hex SHA-256 of the body to dst.
func (d *deriver) bodyHash(dst []byte) []byte {
	sum := sha256.Sum256(d.body)
	return hex.AppendEncode(dst, sum[:])
}

// headerValue returns the named header's value: the first line, trimmed
// of spaces and tabs, with an RFC 8941 string unquoted. Empty is absent.
func headerValue(h http.Header, name string) (string, bool, error) {
	// ParseKey canonicalised name, so a map lookup usually does; a name
	// set by hand may need canonicalising.
	vals, found := h[name]
	if !found {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			vals = h[c]
		}
	}
	if len(vals) == 0 {
		return "", false, nil
	}
	v := strings.Trim(vals[0], " \t")
	if v == "" {
		return "", false, nil
	}
	if v[0] == '"' {
		u, ok := parseSFStringItem(v)
		if !ok {
			return "", true, badQuotedError(name)
		}
		v = u
	}
	return v, v != "", nil
}

// formValue returns the first value of a form field; "" when absent or the
// body is not application/x-www-form-urlencoded. The body is parsed once.
func (d *deriver) formValue(name string) string {
	if !d.formDone {
		d.formDone = true
		if isFormContentType(d.h.Get("Content-Type")) {
			// A malformed pair is skipped; the others still count.
			d.form, _ = url.ParseQuery(string(d.body))
		}
	}
	return d.form.Get(name)
}

func isFormContentType(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.Trim(ct, " \t"), "application/x-www-form-urlencoded")
}

// queryValue returns the first value of a query parameter, "" when absent.
func (d *deriver) queryValue(name string) string {
	if !d.queryDone {
		d.queryDone = true
		if d.rawQuery != "" {
			d.query, _ = url.ParseQuery(d.rawQuery)
		}
	}
	return d.query.Get(name)
}

// jsonValue returns what the body holds at path, scanning the body on the
// first call. ok is false when the body is not JSON, the path is missing or
// holds null, an object, an array or an empty string.
func (d *deriver) jsonValue(path string) (jsonVal, bool) {
	if d.plan == nil {
		d.plan = d.k.plan
	}
	t := d.plan.find(path)
	if t < 0 {
		// A KeySpec not built by ParseKey, or changed since.
		d.plan = buildPlan(d.k.Sources)
		d.jsonDone = false
		t = d.plan.find(path)
		if t < 0 {
			return jsonVal{}, false
		}
	}
	n := len(d.plan.paths)
	if !d.jsonDone {
		d.jsonDone = true
		var res []jsonVal
		if n <= len(d.jresBuf) {
			res = d.jresBuf[:n]
			clear(res)
		} else {
			d.jresBig = make([]jsonVal, n)
			res = d.jresBig
		}
		d.jsonOK = scanJSON(d.body, d.plan.paths, res)
	}
	if !d.jsonOK {
		return jsonVal{}, false
	}
	// Results live in jresBuf, or jresBig when there are more paths (a
	// slice of jresBuf kept in d would make d escape to the heap).
	var v jsonVal
	if n <= len(d.jresBuf) {
		v = d.jresBuf[t]
	} else {
		v = d.jresBig[t]
	}
	switch v.kind {
	case jsonString:
		return v, v.end > v.start
	case jsonLiteral:
		return v, true
	}
	return jsonVal{}, false
}

func (p *keyPlan) find(path string) int {
	if p == nil {
		return -1
	}
	for i := range p.paths {
		if p.paths[i].name == path {
			return i
		}
	}
	return -1
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
