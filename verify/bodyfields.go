package verify

import "bytes"

// Reading signed fields out of the body without allocating: a JSON value
// at a dotted path ({json:PATH}, verify.timestamp json:, verify.signature
// json:), and the sorted form fields Twilio signs ({sorted_form}).

// Lookup results.
const (
	fieldFound = iota
	fieldAbsent
	fieldMalformed
)

// jsonLookupDepth bounds the nesting skipped while looking a path up.
const jsonLookupDepth = 512

// jsonLookup returns the value at segs in body: a string's bytes between
// its quotes, or a number, true or false as written. Absent: the path is
// not there, or holds null. Malformed: body is not a JSON object along the
// path, a name along the path appears twice in its object or is escaped
// (so that what is read is never ambiguous), or the value is an object, an
// array, or a string with escapes.
func jsonLookup(body []byte, segs []string) (val []byte, status int) {
	i := 0
	for d, seg := range segs {
		i = jsonSkipWS(body, i)
		if i >= len(body) || body[i] != '{' {
			if d == 0 {
				return nil, fieldMalformed
			}
			return nil, fieldAbsent
		}
		start, end, st := jsonMember(body, i, seg)
		if st != fieldFound {
			return nil, st
		}
		if d < len(segs)-1 {
			i = start
			continue
		}
		v := body[start:end]
		switch {
		case len(v) >= 2 && v[0] == '"':
			v = v[1 : len(v)-1]
			if bytes.IndexByte(v, '\\') >= 0 {
				return nil, fieldMalformed
			}
			return v, fieldFound
		case bytes.Equal(v, []byte("null")):
			return nil, fieldAbsent
		case v[0] == '{' || v[0] == '[':
			return nil, fieldMalformed
		}
		return v, fieldFound
	}
	return nil, fieldAbsent
}

// jsonMember scans the object at body[i] ('{') for the member named name
// and returns its value's range. The whole object is scanned, so that a
// repeated name is seen.
func jsonMember(body []byte, i int, name string) (start, end, status int) {
	i++ // '{'
	found := false
	for {
		i = jsonSkipWS(body, i)
		if i >= len(body) {
			return 0, 0, fieldMalformed
		}
		if body[i] == '}' {
			break
		}
		if body[i] != '"' {
			return 0, 0, fieldMalformed
		}
		kEnd, ok := jsonSkipString(body, i)
		if !ok {
			return 0, 0, fieldMalformed
		}
		key := body[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return 0, 0, fieldMalformed
		}
		i = jsonSkipWS(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return 0, 0, fieldMalformed
		}
		i = jsonSkipWS(body, i+1)
		vEnd, ok := jsonSkipValue(body, i)
		if !ok {
			return 0, 0, fieldMalformed
		}
		if string(key) == name {
			if found {
				return 0, 0, fieldMalformed
			}
			found, start, end = true, i, vEnd
		}
		i = jsonSkipWS(body, vEnd)
		if i < len(body) && body[i] == ',' {
			i++
			continue
		}
		if i < len(body) && body[i] == '}' {
			break
		}
		return 0, 0, fieldMalformed
	}
	if !found {
		return 0, 0, fieldAbsent
	}
	return start, end, fieldFound
}

func jsonSkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonSkipString returns the index after the string starting at b[i] ('"').
func jsonSkipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

// jsonSkipValue returns the index after the value starting at b[i]. It
// checks brackets and strings, not the grammar of scalars.
func jsonSkipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return jsonSkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := jsonSkipString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
				if depth > jsonLookupDepth {
					return 0, false
				}
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) {
		c := b[i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		i++
	}
	return i, i > start
}

// maxFormFields bounds the fields {sorted_form} sorts.
const maxFormFields = 128

// formField is one name=value pair of a form body, as raw (encoded)
// ranges of it.
type formField struct{ k0, k1, v0, v1 int }

// appendSortedForm appends the fields of the form-encoded body sorted by
// decoded name, then decoded value, each name followed by its value,
// percent-decoded ('+' is a space), nothing between them. A name=value
// pair that repeats one already appended (decoded) is left out: Twilio
// signs each distinct value of a name once, as its SDKs compute it
// (twilio-node's Array.from(new Set(values)).sort(), twilio-python's
// sorted(set(values))), so "A=1&A=1" signs "A1" and "A=2&A=1&A=2" signs
// "A1A2". Names and values compare by their decoded bytes: for UTF-8, the
// code-point order of Twilio's documented "Unix-style case-sensitive"
// sort, and of twilio-python and twilio-go (twilio-node sorts UTF-16 code
// units, which differs only between U+E000-U+FFFF and U+10000 and above).
// ok is false for a body with more than maxFormFields fields or a bad
// percent escape.
func appendSortedForm(dst, body []byte) ([]byte, bool) {
	var fields [maxFormFields]formField
	n := 0
	for i := 0; i < len(body); {
		end := bytes.IndexByte(body[i:], '&')
		if end < 0 {
			end = len(body)
		} else {
			end += i
		}
		if end > i {
			if n == maxFormFields {
				return dst, false
			}
			f := formField{k0: i, k1: end, v0: end, v1: end}
			if eq := bytes.IndexByte(body[i:end], '='); eq >= 0 {
				f.k1, f.v0 = i+eq, i+eq+1
			}
			if !validEscapes(body[f.k0:f.k1]) || !validEscapes(body[f.v0:f.v1]) {
				return dst, false
			}
			fields[n] = f
			n++
		}
		i = end + 1
	}
	// Insertion sort: n is small, and this allocates nothing.
	for a := 1; a < n; a++ {
		for b := a; b > 0 && formLess(body, &fields[b], &fields[b-1]); b-- {
			fields[b], fields[b-1] = fields[b-1], fields[b]
		}
	}
	for i := range fields[:n] {
		f := &fields[i]
		if i > 0 && formEqual(body, f, &fields[i-1]) {
			// Sorted, so a repeated pair follows its first copy.
			continue
		}
		dst = appendUnescaped(dst, body[f.k0:f.k1])
		dst = appendUnescaped(dst, body[f.v0:f.v1])
	}
	return dst, true
}

func validEscapes(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) {
			return false
		}
		_, ok1 := unhex(s[i+1])
		_, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return false
		}
		i += 2
	}
	return true
}

// unescapedAt decodes the byte of s starting at i and returns it with the
// index after it (escapes were checked by validEscapes).
func unescapedAt(s []byte, i int) (byte, int) {
	switch s[i] {
	case '+':
		return ' ', i + 1
	case '%':
		hi, _ := unhex(s[i+1])
		lo, _ := unhex(s[i+2])
		return hi<<4 | lo, i + 3
	}
	return s[i], i + 1
}

func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		var c byte
		c, i = unescapedAt(s, i)
		dst = append(dst, c)
	}
	return dst
}

// compareUnescaped compares two encoded strings by their decoded bytes.
func compareUnescaped(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var x, y byte
		x, i = unescapedAt(a, i)
		y, j = unescapedAt(b, j)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return 0
}

func formLess(body []byte, x, y *formField) bool {
	if c := compareUnescaped(body[x.k0:x.k1], body[y.k0:y.k1]); c != 0 {
		return c < 0
	}
	return compareUnescaped(body[x.v0:x.v1], body[y.v0:y.v1]) < 0
}

// formEqual reports whether two fields have the same decoded name and
// value.
func formEqual(body []byte, x, y *formField) bool {
	return compareUnescaped(body[x.k0:x.k1], body[y.k0:y.k1]) == 0 &&
		compareUnescaped(body[x.v0:x.v1], body[y.v0:y.v1]) == 0
}
