package proxy

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzCleanPath: whatever the request target, cleanPath either refuses it
// or returns an absolute path with no "." or ".." segment, none that is
// "." or ".." before a ";" (which Tomcat, Jetty and Spring read as one),
// no backslash or NUL, that cleans to itself; a path without dot segments
// is kept as it is.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{
		"/webhook/order", "/h/pfx/../admin", "/h/pfx/%2e%2e/admin", "/a/./b/../c", "/../x", "/a/..%2fb",
		"/.well-known/x", "/a//b", "/a/b/", "/a/..", "/.", "/..", "/%2E%2e/", "/a%5cb", "/a\\b", "/%00",
		"/p/..;/secret", "/p/x/..;/..;/secret", "/p/%2e%2e;/secret", "/p/..%3bx/y", "/p/.;a=b", "/p/x;a=1/y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return // "*" (OPTIONS) and the like match no route: 404
		}
		// The fasthttp front door decodes an origin-form path itself: as
		// net/url does.
		rawTarget, _, _ := strings.Cut(target, "?")
		if sp, sraw, err := splitPath(rawTarget); strings.HasPrefix(target, "/") &&
			(err != nil || sp != u.Path || sraw != u.RawPath) {
			t.Fatalf("%q: splitPath gives %q, %q, %v; net/url %q, %q", target, sp, sraw, err, u.Path, u.RawPath)
		}
		p, err := cleanPath(u.Path, u.RawPath)
		if err != nil {
			return
		}
		switch {
		case !strings.HasPrefix(p, "/"):
			t.Fatalf("%q -> %q: not absolute", target, p)
		case hasDotSegment(p):
			t.Fatalf("%q -> %q: dot segment left", target, p)
		case dotBeforeParams(p):
			t.Fatalf("%q -> %q: a dot segment with parameters left", target, p)
		case strings.ContainsAny(p, "\\\x00"):
			t.Fatalf("%q -> %q: backslash or NUL", target, p)
		case !hasDotSegment(u.Path) && p != u.Path:
			t.Fatalf("%q -> %q: changed a path without dot segments", target, p)
		}
		again, err := cleanPath(p, "")
		if err != nil || again != p {
			t.Fatalf("%q -> %q -> %q, %v: not stable", target, p, again, err)
		}
	})
}

// dotBeforeParams is the oracle's own reading of a "." or ".." segment
// with parameters: some segment, cut at its first ";", is "." or "..",
// and had a ";".
func dotBeforeParams(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		name, _, params := strings.Cut(seg, ";")
		if params && (name == "." || name == "..") {
			return true
		}
	}
	return false
}
