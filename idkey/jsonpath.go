package idkey

import (
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON scanner for json: key sources. It walks the body once,
// validating all of it (RFC 8259, as encoding/json.Valid does), and on the
// way records where each wanted path's value lies, without building any
// tree: values are byte ranges of the body, numbers keep their text.
// Duplicate object names behave like encoding/json decoding into a map:
// the last one wins.

// maxJSONDepth matches encoding/json's nesting limit; deeper bodies are
// treated as not JSON.
const maxJSONDepth = 10000

type jsonKind uint8

const (
	jsonAbsent  jsonKind = iota // path not in the body
	jsonString                  // body[start:end] is the text between the quotes
	jsonLiteral                 // a number, true or false: body[start:end]
	jsonOther                   // null, an object or an array
)

// jsonVal is where one value lies in the body.
type jsonVal struct {
	kind jsonKind
	// esc: a string with escapes or non-ASCII bytes, which has to be
	// decoded (invalid UTF-8 becomes U+FFFD, as in encoding/json).
	esc        bool
	start, end int
}

type jsonScanner struct {
	data  []byte
	pos   int
	paths []jsonPath
	res   []jsonVal
}

// scanJSON validates data as one JSON text and sets res[i] to the value at
// paths[i] (jsonAbsent where missing). It reports whether data is JSON;
// when not, res is meaningless. Up to 64 paths take one pass; more take one
// pass per 64.
func scanJSON(data []byte, paths []jsonPath, res []jsonVal) bool {
	for len(paths) > 0 {
		n := min(len(paths), 64)
		s := jsonScanner{data: data, paths: paths[:n], res: res[:n]}
		var active uint64
		for i := range n {
			if len(paths[i].segs) > 0 {
				active |= 1 << i
			}
		}
		if !s.document(active) {
			return false
		}
		paths, res = paths[n:], res[n:]
	}
	return true
}

func (s *jsonScanner) document(active uint64) bool {
	if _, ok := s.value(0, active); !ok {
		return false
	}
	s.skipSpace()
	return s.pos == len(s.data)
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value. active holds the paths whose first depth segments
// matched the enclosing names and indexes.
func (s *jsonScanner) value(depth int, active uint64) (jsonVal, bool) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return jsonVal{}, false
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return jsonVal{kind: jsonOther}, s.object(depth, active)
	case c == '[':
		return jsonVal{kind: jsonOther}, s.array(depth, active)
	case c == '"':
		start, end, esc, ok := s.str()
		return jsonVal{kind: jsonString, esc: esc, start: start, end: end}, ok
	case c == 't':
		return s.literal("true", jsonLiteral)
	case c == 'f':
		return s.literal("false", jsonLiteral)
	case c == 'n':
		return s.literal("null", jsonOther)
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.pos
		ok := s.number()
		return jsonVal{kind: jsonLiteral, start: start, end: s.pos}, ok
	}
	return jsonVal{}, false
}

func (s *jsonScanner) literal(word string, kind jsonKind) (jsonVal, bool) {
	start := s.pos
	if len(s.data)-start < len(word) || string(s.data[start:start+len(word)]) != word {
		return jsonVal{}, false
	}
	s.pos += len(word)
	return jsonVal{kind: kind, start: start, end: s.pos}, true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) number() bool {
	d := s.data
	i := s.pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return false
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return false
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	s.pos = i
	return true
}

// Byte classes inside a JSON string.
const (
	strPlain = iota
	strQuote
	strBackslash
	strControl
	strHigh // non-ASCII: needs UTF-8 checking when decoded
)

var strClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = strControl
	}
	t['"'] = strQuote
	t['\\'] = strBackslash
	for c := 0x80; c < 0x100; c++ {
		t[c] = strHigh
	}
	return t
}()

// str scans a string at s.pos (a '"') and returns the range of its content.
func (s *jsonScanner) str() (start, end int, esc, ok bool) {
	d := s.data
	i := s.pos + 1
	start = i
	for i < len(d) {
		switch strClass[d[i]] {
		case strPlain:
			i++
		case strQuote:
			s.pos = i + 1
			return start, i, esc, true
		case strBackslash:
			esc = true
			if i+1 >= len(d) {
				return 0, 0, false, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) {
					return 0, 0, false, false
				}
				for _, h := range d[i+2 : i+6] {
					if hexVal(h) < 0 {
						return 0, 0, false, false
					}
				}
				i += 6
			default:
				return 0, 0, false, false
			}
		case strHigh:
			esc = true
			i++
		default: // strControl
			return 0, 0, false, false
		}
	}
	return 0, 0, false, false
}

func (s *jsonScanner) object(depth int, active uint64) bool {
	if depth >= maxJSONDepth {
		return false
	}
	s.pos++ // '{'
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return false
		}
		ks, ke, kesc, ok := s.str()
		if !ok {
			return false
		}
		s.skipSpace()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return false
		}
		s.pos++
		var child, term uint64
		if active != 0 {
			child, term = s.matchName(depth, active, s.data[ks:ke], kesc)
		}
		v, ok := s.value(depth+1, child)
		if !ok {
			return false
		}
		s.record(term, v)
		s.skipSpace()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return false
		}
	}
}

func (s *jsonScanner) array(depth int, active uint64) bool {
	if depth >= maxJSONDepth {
		return false
	}
	s.pos++ // '['
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for i := 0; ; i++ {
		var child, term uint64
		for a := active; a != 0; a &= a - 1 {
			t := bits.TrailingZeros64(a)
			if s.paths[t].idx[depth] == i {
				child, term = s.descend(t, depth, child, term)
			}
		}
		v, ok := s.value(depth+1, child)
		if !ok {
			return false
		}
		s.record(term, v)
		s.skipSpace()
		if s.pos >= len(s.data) {
			return false
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// matchName returns which active paths continue into (child) or end at
// (term) the value of the object member with the given raw name.
func (s *jsonScanner) matchName(depth int, active uint64, name []byte, esc bool) (child, term uint64) {
	if esc {
		// Decoded here, not into a buffer kept in s: storing through s
		// would make the scanner's state escape to the heap.
		var buf [64]byte
		name = appendJSONString(buf[:0], name, -1)
	}
	for a := active; a != 0; a &= a - 1 {
		t := bits.TrailingZeros64(a)
		if string(name) == s.paths[t].segs[depth] {
			child, term = s.descend(t, depth, child, term)
		}
	}
	return child, term
}

// descend notes that path t matched at depth: either its value is the
// next one (term) or the search continues inside it (child). Any earlier
// finding for t is dropped, so that a later duplicate name wins.
func (s *jsonScanner) descend(t, depth int, child, term uint64) (uint64, uint64) {
	s.res[t] = jsonVal{}
	if len(s.paths[t].segs) == depth+1 {
		return child, term | 1<<t
	}
	return child | 1<<t, term
}

func (s *jsonScanner) record(term uint64, v jsonVal) {
	for a := term; a != 0; a &= a - 1 {
		s.res[bits.TrailingZeros64(a)] = v
	}
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// appendJSONString appends the decoded content of a JSON string (validated
// by jsonScanner.str) to dst, as encoding/json decodes it: invalid UTF-8
// and unpaired surrogates become U+FFFD. With limit >= 0 it stops once dst
// reaches limit bytes (dst may end a little beyond it).
func appendJSONString(dst, raw []byte, limit int) []byte {
	for i := 0; i < len(raw); {
		if limit >= 0 && len(dst) >= limit {
			return dst
		}
		c := raw[i]
		switch {
		case c == '\\':
			e := raw[i+1]
			i += 2
			switch e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i:])
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = hex4(raw[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | rune(hexVal(c))
	}
	return r
}
