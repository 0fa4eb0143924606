package idkey

// A header's value that starts with '"' is read as an RFC 8941 (RFC 9651)
// String Item, as the IETF Idempotency-Key draft defines the header: the
// parser below reads exactly that (an sf-string and its parameters) and
// nothing else of structured fields.

import "strings"

// parseSFStringItem parses v as an RFC 8941 (RFC 9651) Item whose bare item
// is a String, and returns the string unescaped. Parameters after the
// string are checked and ignored.
func parseSFStringItem(v string) (string, bool) {
	s, rest, ok := parseSFString(v)
	if !ok {
		return "", false
	}
	if !skipSFParams(rest) {
		return "", false
	}
	return s, true
}

// parseSFString parses an sf-string at the start of v: DQUOTE, printable
// ASCII with only \" and \\ escapes, DQUOTE. It returns the unescaped value
// and what follows the closing quote. The value is a substring of v unless
// it had escapes.
func parseSFString(v string) (val, rest string, ok bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", "", false
	}
	var b []byte // nil until the first escape
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i+1 >= len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
				return "", "", false
			}
			if b == nil {
				b = make([]byte, 0, len(v))
				b = append(b, v[1:i]...)
			}
			i++
			b = append(b, v[i])
		case c == '"':
			if b == nil {
				return v[1:i], v[i+1:], true
			}
			return string(b), v[i+1:], true
		case c < 0x20 || c > 0x7e:
			return "", "", false
		default:
			if b != nil {
				b = append(b, c)
			}
		}
	}
	return "", "", false // no closing quote
}

// skipSFParams reports whether s is a well-formed RFC 8941 parameter list:
// *( ";" *SP key [ "=" bare-item ] ).
func skipSFParams(s string) bool {
	for len(s) > 0 {
		if s[0] != ';' {
			return false
		}
		s = strings.TrimLeft(s[1:], " ")
		if s == "" || !(isLCAlpha(s[0]) || s[0] == '*') {
			return false
		}
		i := 1
		for i < len(s) && (isLCAlpha(s[i]) || isDigit(s[i]) || strings.IndexByte("_-.*", s[i]) >= 0) {
			i++
		}
		s = s[i:]
		if len(s) > 0 && s[0] == '=' {
			var ok bool
			if s, ok = skipSFBareItem(s[1:]); !ok {
				return false
			}
		}
	}
	return true
}

// skipSFBareItem skips one bare item (integer, decimal, string, token,
// byte sequence, boolean, date or display string) at the start of s.
func skipSFBareItem(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	switch c := s[0]; {
	case c == '-' || isDigit(c):
		return skipSFNumber(s)
	case c == '"':
		_, rest, ok := parseSFString(s)
		return rest, ok
	case c == '*' || isAlpha(c):
		i := 1
		for i < len(s) && (isTokenChar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return s[i:], true
	case c == ':':
		end := strings.IndexByte(s[1:], ':')
		if end < 0 {
			return "", false
		}
		for _, b := range []byte(s[1 : 1+end]) {
			if !(isAlpha(b) || isDigit(b) || b == '+' || b == '/' || b == '=') {
				return "", false
			}
		}
		return s[end+2:], true
	case c == '?':
		if len(s) < 2 || (s[1] != '0' && s[1] != '1') {
			return "", false
		}
		return s[2:], true
	case c == '@':
		if len(s) < 2 || !(s[1] == '-' || isDigit(s[1])) {
			return "", false
		}
		rest, ok := skipSFNumber(s[1:])
		if !ok || strings.Contains(s[1:len(s)-len(rest)], ".") {
			return "", false // a date is an integer
		}
		return rest, true
	case c == '%':
		return skipSFDisplayString(s)
	}
	return "", false
}

// skipSFNumber skips an sf-integer (at most 15 digits) or sf-decimal (at
// most 12 integer and 1 to 3 fraction digits).
func skipSFNumber(s string) (string, bool) {
	i := 0
	if s[0] == '-' {
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intDigits := i - start
	if intDigits == 0 {
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		if intDigits > 12 {
			return "", false
		}
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if n := i - fs; n < 1 || n > 3 {
			return "", false
		}
		return s[i:], true
	}
	if intDigits > 15 {
		return "", false
	}
	return s[i:], true
}

// skipSFDisplayString skips %"..." with lowercase %xx escapes (RFC 9651).
func skipSFDisplayString(s string) (string, bool) {
	if len(s) < 2 || s[1] != '"' {
		return "", false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return s[i+1:], true
		case c == '%':
			if i+2 >= len(s) || !isLowerHex(s[i+1]) || !isLowerHex(s[i+2]) {
				return "", false
			}
			i += 2
		case c < 0x20 || c > 0x7e:
			return "", false
		}
	}
	return "", false
}

func isLCAlpha(c byte) bool  { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool    { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }
func isLowerHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') }
