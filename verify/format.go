package verify

import (
	"errors"
	"fmt"
	"strings"
)

// A signature header format says how the signature (and, for some
// providers, the timestamp) sit in the header value. It is parsed once, at
// config load time. Four shapes:
//
//	{signature}                the whole value is one signature (Shopify)
//	KEY={signature}            a list of KEY=value items separated by ',',
//	                           each KEY item one signature: "v1=a,v1=b"
//	                           carries two while a secret rotates (GitHub
//	                           "sha256={signature}", PagerDuty
//	                           "v1={signature}")
//	K1={timestamp}SEP K2={signature}
//	                           a list of items separated by SEP (',', ';'
//	                           or ' '); K2 may repeat, other keys are
//	                           ignored (Stripe "t={timestamp},v1={signature}",
//	                           Paddle "ts={timestamp};h1={signature}")
//	PREFIX{signature}          the value starts with PREFIX, followed by
//	                           one signature ("Bearer {signature}")

// Format kinds.
const (
	fmtPlain = iota
	fmtPrefix
	fmtList
)

// ErrFormat is wrapped by every format parse error.
var ErrFormat = errors.New("invalid signature format")

type sigFormat struct {
	kind   int
	prefix string // fmtPrefix
	sep    byte   // fmtList
	sigKey string // fmtList: the key of signature items
	tsKey  string // fmtList: the key of the timestamp item, "" for none
	src    string
}

const (
	phSignature = "{signature}"
	phTimestamp = "{timestamp}"
)

// parseFormat parses a signature header format; "" is "{signature}".
func parseFormat(s string) (*sigFormat, error) {
	if s == "" || s == phSignature {
		return &sigFormat{kind: fmtPlain, src: phSignature}, nil
	}
	if len(s) > 256 {
		return nil, fmt.Errorf("%w: longer than 256 bytes", ErrFormat)
	}
	if strings.Count(s, phSignature) != 1 {
		return nil, fmt.Errorf("%w: %q must contain {signature} exactly once", ErrFormat, clipText(s))
	}
	if strings.Count(s, phTimestamp) > 1 {
		return nil, fmt.Errorf("%w: %q contains {timestamp} more than once", ErrFormat, clipText(s))
	}
	rest := strings.ReplaceAll(strings.ReplaceAll(s, phSignature, ""), phTimestamp, "")
	if strings.ContainsAny(rest, "{}") {
		return nil, fmt.Errorf("%w: %q has a placeholder other than {signature} and {timestamp}", ErrFormat, clipText(s))
	}
	if f, ok := parseListFormat(s); ok {
		return f, nil
	}
	if strings.Contains(s, phTimestamp) {
		return nil, fmt.Errorf("%w: %q: {timestamp} needs a list of KEY={...} items, such as \"t={timestamp},v1={signature}\"", ErrFormat, clipText(s))
	}
	prefix, after, _ := strings.Cut(s, phSignature)
	if after != "" {
		return nil, fmt.Errorf("%w: %q: nothing may follow {signature} outside a list of KEY={...} items", ErrFormat, clipText(s))
	}
	return &sigFormat{kind: fmtPrefix, prefix: prefix, src: s}, nil
}

// parseListFormat recognises "K1={x}SEP K2={y}..." with a single separator.
func parseListFormat(s string) (*sigFormat, bool) {
	sep := byte(0)
	for _, c := range []byte{',', ';', ' '} {
		if strings.IndexByte(s, c) >= 0 {
			if sep != 0 {
				return nil, false
			}
			sep = c
		}
	}
	f := &sigFormat{kind: fmtList, sep: ',', src: s}
	items := []string{s}
	if sep != 0 {
		f.sep = sep
		items = strings.Split(s, string(sep))
	}
	for _, item := range items {
		k, v, ok := strings.Cut(item, "=")
		if !ok || !validItemKey(k) {
			return nil, false
		}
		switch v {
		case phSignature:
			f.sigKey = k
		case phTimestamp:
			f.tsKey = k
		default:
			return nil, false
		}
	}
	if f.sigKey == "" || f.sigKey == f.tsKey {
		return nil, false
	}
	return f, true
}

func validItemKey(k string) bool {
	if k == "" || len(k) > 32 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// hasTimestamp reports whether the format carries the timestamp.
func (f *sigFormat) hasTimestamp() bool { return f.kind == fmtList && f.tsKey != "" }

// sigParse is what one header value holds, without allocating: the
// signature values are substrings of it.
type sigParse struct {
	n     int
	vals  [maxCandidates]string
	ts    string
	hasTS bool
	other bool // list items with other keys (other versions, unknown schemes)
}

func (p *sigParse) add(v string) bool {
	if p.n == maxCandidates {
		return false
	}
	p.vals[p.n] = v
	p.n++
	return true
}

// parse reads hv (already trimmed of surrounding spaces and tabs) into p.
// Errors wrap ErrMalformed and never contain hv.
func (f *sigFormat) parse(name, hv string, p *sigParse) error {
	switch f.kind {
	case fmtPlain:
		p.add(hv)
		return nil
	case fmtPrefix:
		v, ok := strings.CutPrefix(hv, f.prefix)
		if !ok {
			return fail(name, ErrMalformed, "signature prefix missing")
		}
		p.add(v)
		return nil
	}
	for rest, item, more := hv, "", true; more; {
		item, rest, more = cutByte(rest, f.sep)
		item = strings.Trim(item, " \t")
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return fail(name, ErrMalformed, "signature header item is not key=value")
		}
		switch {
		case k == f.sigKey:
			if !p.add(v) {
				return fail(name, ErrMalformed, "too many signatures")
			}
		case f.tsKey != "" && k == f.tsKey:
			if p.hasTS {
				return fail(name, ErrMalformed, "timestamp given twice")
			}
			p.ts, p.hasTS = v, true
		default:
			p.other = true
		}
	}
	if f.tsKey != "" && !p.hasTS {
		return fail(name, ErrMalformed, "timestamp item ("+f.tsKey+"=) missing")
	}
	return nil
}

// cutByte is strings.Cut with a one-byte separator.
func cutByte(s string, sep byte) (before, after string, found bool) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// format writes sig (and ts) in the format, for signers.
func (f *sigFormat) format(sig, ts string) string {
	switch f.kind {
	case fmtPlain:
		return sig
	case fmtPrefix:
		return f.prefix + sig
	}
	out := strings.Replace(f.src, phSignature, sig, 1)
	return strings.Replace(out, phTimestamp, ts, 1)
}
