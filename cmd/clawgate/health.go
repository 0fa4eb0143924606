package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
)

// healthAdmin is the admin listener `clawgate health` probes without -url:
// admin.listen's default. A variable for the tests.
var healthAdmin = "http://127.0.0.1:9090"

// cmdHealth probes the admin listener for images without curl or a shell
// (distroless): a Docker HEALTHCHECK or a Kubernetes exec probe.
//
//	clawgate health [-live] [-url URL] [-timeout 2s]
//
// It GETs /readyz (or /healthz with -live) once, without proxies or
// redirects, and prints one line: exit 0 on 200, 1 on any other answer or
// none, 2 on a usage error.
func cmdHealth(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("health", stdout, stderr)
	rawURL := fs.String("url", "", "admin endpoint `URL` to GET (default "+healthAdmin+"/readyz, or /healthz with -live)")
	live := fs.Bool("live", false, "probe liveness (/healthz: the process answers) instead of readiness (/readyz)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after this `duration`")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	target := *rawURL
	switch {
	case target != "" && *live:
		fmt.Fprintln(stderr, "clawgate health: -live picks the default URL; with -url, name the endpoint in the URL")
		return 2
	case target == "" && *live:
		target = healthAdmin + "/healthz"
	case target == "":
		target = healthAdmin + "/readyz"
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "clawgate health: -url %q is not an http(s) URL\n", target)
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "clawgate health: -timeout must be positive")
		return 2
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate health: %v\n", err)
		return 2
	}
	// With the token, /readyz says why it is not ready (the store's error).
	setAdminHeaders(req)
	client := &http.Client{
		Timeout: *timeout,
		// Straight to the listener: no HTTP_PROXY, no connection kept.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		// A redirect is not a healthy answer.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: GET %s: %v\n", u.Redacted(), unwrapURLError(err))
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	took := time.Since(start).Round(time.Millisecond)
	if resp.StatusCode == http.StatusOK {
		fmt.Fprintf(stdout, "ok: GET %s: %s in %s\n", u.Redacted(), resp.Status, took)
		return 0
	}
	line := fmt.Sprintf("unhealthy: GET %s: %s in %s", u.Redacted(), resp.Status, took)
	if b := oneLine(string(body), 200); b != "" {
		line += ": " + b
	}
	fmt.Fprintln(stderr, line)
	return 1
}

// unwrapURLError drops *url.Error's "Get \"URL\": " prefix, which the line
// already carries.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// oneLine squeezes s onto one line of at most max runes, for the probe's
// output (Kubernetes shows it in the pod's events).
func oneLine(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "..."
	}
	return s
}
