package verify

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"
)

// A signed-content template says which bytes a provider signs, in order:
// literal text and placeholders. It is parsed once, at config load time.
//
//	{body}              the raw request body
//	{header:NAME}       the value of request header NAME (spaces and tabs
//	                    around it trimmed); absent or empty: the delivery
//	                    fails as missing
//	{json:PATH}         the value at a dotted PATH of the JSON body (a
//	                    string's text without its quotes, a number as
//	                    written); absent: missing
//	{timestamp}         the signed timestamp, as read from the signature
//	                    header's t=/ts= item or from verify.timestamp
//	{method}            the HTTP method the provider calls with
//	{url}               the URL the provider calls (the route's public_url)
//	{sorted_form}       the form-encoded body's fields sorted by name (then
//	                    value), each name followed by its value,
//	                    percent-decoded, with nothing between them; a
//	                    repeated name=value pair counts once (Twilio)
//	{{ and }}           a literal { and }
//
// Examples: "v0:{timestamp}:{body}" (Slack, Zoom), "{timestamp}.{body}"
// (Stripe, Calendly), "{url}{body}" (Square), "{url}{sorted_form}"
// (Twilio), "{json:signature.timestamp}{json:signature.token}" (Mailgun).

// Template placeholder kinds.
const (
	partLiteral = iota
	partBody
	partHeader
	partJSON
	partTimestamp
	partMethod
	partURL
	partSortedForm
)

const (
	// maxTemplateLen bounds a template's text.
	maxTemplateLen = 1024
	// maxTemplateParts bounds its literals and placeholders.
	maxTemplateParts = 32
	// maxJSONPathSegs bounds a {json:PATH}'s dotted segments.
	maxJSONPathSegs = 16
)

// ErrTemplate is wrapped by every template parse error.
var ErrTemplate = errors.New("invalid template")

type tplPart struct {
	kind int
	// text is the literal, the canonical header name, or the JSON path.
	text string
	// segs is the JSON path split at dots.
	segs []string
}

// template is a parsed signed-content template.
type template struct {
	parts []tplPart
	src   string
}

// parseTemplate parses s. It refuses an empty template, one of literals
// only, an unknown or unclosed placeholder, a lone '}' and a header name
// or JSON path that cannot be one.
func parseTemplate(s string) (*template, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrTemplate)
	}
	if len(s) > maxTemplateLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrTemplate, maxTemplateLen)
	}
	t := &template{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tplPart{kind: partLiteral, text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i += 2
		case c == '}':
			return nil, fmt.Errorf("%w: '}' at byte %d closes no placeholder (write }} for a literal })", ErrTemplate, i)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%w: placeholder at byte %d is not closed", ErrTemplate, i)
			}
			p, err := parsePlaceholder(s[i+1 : i+end])
			if err != nil {
				return nil, err
			}
			flush()
			t.parts = append(t.parts, p)
			i += end + 1
		default:
			lit.WriteByte(c)
			i++
		}
		if len(t.parts) > maxTemplateParts {
			return nil, fmt.Errorf("%w: more than %d parts", ErrTemplate, maxTemplateParts)
		}
	}
	flush()
	if len(t.parts) > maxTemplateParts {
		return nil, fmt.Errorf("%w: more than %d parts", ErrTemplate, maxTemplateParts)
	}
	if !t.has(func(p tplPart) bool { return p.kind != partLiteral }) {
		return nil, fmt.Errorf("%w: it has no placeholder, so it signs only fixed text", ErrTemplate)
	}
	return t, nil
}

func parsePlaceholder(in string) (tplPart, error) {
	kind, arg, hasArg := strings.Cut(in, ":")
	simple := map[string]int{
		"body": partBody, "timestamp": partTimestamp, "method": partMethod,
		"url": partURL, "sorted_form": partSortedForm,
	}
	if k, ok := simple[kind]; ok {
		if hasArg {
			return tplPart{}, fmt.Errorf("%w: {%s} takes no argument", ErrTemplate, kind)
		}
		return tplPart{kind: k}, nil
	}
	switch kind {
	case "header":
		if !validHeaderName(arg) {
			return tplPart{}, fmt.Errorf("%w: {header:%s} needs a header name (letters, digits and -)", ErrTemplate, clipText(arg))
		}
		return tplPart{kind: partHeader, text: textproto.CanonicalMIMEHeaderKey(arg)}, nil
	case "json":
		segs, err := parseJSONPath(arg)
		if err != nil {
			return tplPart{}, err
		}
		return tplPart{kind: partJSON, text: arg, segs: segs}, nil
	}
	return tplPart{}, fmt.Errorf("%w: unknown placeholder {%s} (valid: {body}, {header:NAME}, {json:PATH}, {timestamp}, {method}, {url}, {sorted_form})", ErrTemplate, clipText(in))
}

// parseJSONPath splits a dotted path; every segment must be non-empty.
func parseJSONPath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("%w: {json:} needs a dotted path, such as {json:signature.token}", ErrTemplate)
	}
	segs := strings.Split(p, ".")
	if len(segs) > maxJSONPathSegs {
		return nil, fmt.Errorf("%w: {json:%s} has more than %d segments", ErrTemplate, clipText(p), maxJSONPathSegs)
	}
	for _, s := range segs {
		if s == "" || strings.ContainsAny(s, "{}\"\\") {
			return nil, fmt.Errorf("%w: {json:%s} is not a dotted path of names", ErrTemplate, clipText(p))
		}
	}
	return segs, nil
}

// validHeaderName reports an RFC 9110 token made of letters, digits and
// '-' and '_', the names providers use.
func validHeaderName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// clipText shortens user text quoted in an error.
func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (t *template) has(f func(tplPart) bool) bool {
	for _, p := range t.parts {
		if f(p) {
			return true
		}
	}
	return false
}

func (t *template) hasKind(k int) bool {
	return t.has(func(p tplPart) bool { return p.kind == k })
}

func (t *template) hasHeader(canon string) bool {
	return t.has(func(p tplPart) bool { return p.kind == partHeader && p.text == canon })
}

func (t *template) hasJSON(path string) bool {
	return t.has(func(p tplPart) bool { return p.kind == partJSON && p.text == path })
}

// headers lists the headers the template signs, in order, without repeats.
func (t *template) headers() []string {
	var out []string
	for _, p := range t.parts {
		if p.kind == partHeader && !containsString(out, p.text) {
			out = append(out, p.text)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// String returns the template as it was written.
func (t *template) String() string { return t.src }

// canonical writes the parsed template back in its canonical form (header
// names canonicalised, braces escaped): parsing it again yields the same
// parts.
func (t *template) canonical() string {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case partLiteral:
			b.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(p.text))
		case partBody:
			b.WriteString("{body}")
		case partHeader:
			b.WriteString("{header:" + p.text + "}")
		case partJSON:
			b.WriteString("{json:" + p.text + "}")
		case partTimestamp:
			b.WriteString("{timestamp}")
		case partMethod:
			b.WriteString("{method}")
		case partURL:
			b.WriteString("{url}")
		case partSortedForm:
			b.WriteString("{sorted_form}")
		}
	}
	return b.String()
}
