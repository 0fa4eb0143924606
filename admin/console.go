package admin

import (
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// The console's static files: plain HTML, CSS and JavaScript modules,
// embedded in the binary (nothing is fetched from another host).
//
//go:embed ui
var uiFiles embed.FS

// uiTypes are the file extensions the console serves, with their
// Content-Type. A /ui/ path ending in another extension answers 404.
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".png":  "image/png",
	".svg":  "image/svg+xml",
}

// consoleCSP lets a console page load its own scripts, styles and images
// and call its own listener, and nothing else: no inline script, no
// other host, no framing, no form posting anywhere.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiPagePrefixes are the console's client-side pages whose last segment
// is data (a route name, a key) and may hold a dot: they are always
// answered with index.html.
var uiPagePrefixes = []string{"/ui/routes/", "/ui/keys/"}

// console serves the web console under /ui/ (GET and HEAD only): a file
// of admin/ui when the path names one, index.html for any other page path
// (the pages route on the client, so a deep link works on reload), 404
// for a path with a dot-segment or an empty segment, or ending in an
// unknown file extension. The files need no admin token (the API calls
// the pages make do), but without a token only a loopback Host is served,
// as on /admin/. Every answer carries a strict Content-Security-Policy,
// nosniff, no referrer and no caching.
func (a *api) console() http.Handler {
	root, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree always has ui/
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		if a.Token == "" && !loopbackHost(r.Host) {
			http.Error(w, "without an admin token only a loopback Host (localhost, 127.0.0.1, [::1]) is served", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "/ui" {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			return
		}
		rest := strings.TrimPrefix(p, "/ui/")
		if !validUIPath(strings.TrimPrefix(r.URL.EscapedPath(), "/ui/")) {
			http.NotFound(w, r)
			return
		}
		name := "index.html"
		page := false
		for _, pre := range uiPagePrefixes {
			page = page || strings.HasPrefix(p, pre)
		}
		if ext := path.Ext(rest); !page && ext != "" {
			if _, ok := uiTypes[ext]; !ok {
				http.NotFound(w, r)
				return
			}
			name = rest
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", uiTypes[path.Ext(name)])
		w.WriteHeader(http.StatusOK)
		w.Write(b)
	})
}

// validUIPath reports an escaped path below /ui/ without a "." or ".."
// segment (escaped or not) and without an empty segment (but for a
// trailing slash). A segment may hold an escaped slash: a key can.
func validUIPath(escaped string) bool {
	if escaped == "" {
		return true
	}
	for _, seg := range strings.Split(strings.TrimSuffix(escaped, "/"), "/") {
		s, err := url.PathUnescape(seg)
		if err != nil || s == "" || s == "." || s == ".." {
			return false
		}
	}
	return true
}
