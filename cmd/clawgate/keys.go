package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// cmdKeys is the operator's tool over the admin key API:
//
//	clawgate keys get|reset [-admin URL] ROUTE KEY
func cmdKeys(args []string, stdout, stderr io.Writer) int {
	const keysUsage = "usage: clawgate keys get|reset [-admin URL] ROUTE KEY (token from $CLAWGATE_ADMIN_TOKEN)"
	if len(args) == 0 || (args[0] != "get" && args[0] != "reset") {
		fmt.Fprintln(stderr, keysUsage)
		return 2
	}
	verb := args[0]
	fs := newFlags("keys "+verb, stderr)
	adminURL := fs.String("admin", "http://127.0.0.1:9090", "admin listener `URL`")
	// Flags may come before or after ROUTE KEY.
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 2 {
		fmt.Fprintln(stderr, keysUsage)
		return 2
	}
	base, err := url.Parse(*adminURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "clawgate keys: -admin %q is not an http(s) URL\n", *adminURL)
		return 2
	}
	method := http.MethodGet
	if verb == "reset" {
		method = http.MethodDelete
	}
	u := strings.TrimSuffix(base.String(), "/") + "/admin/keys/" + url.PathEscape(pos[0]) + "/" + url.PathEscape(pos[1])
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate keys: %v\n", err)
		return 1
	}
	if tok := os.Getenv("CLAWGATE_ADMIN_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate keys: cannot reach the admin API at %s: %v\n", base.Redacted(), err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		stdout.Write(body)
		if verb == "reset" {
			fmt.Fprintf(stdout, "reset: the next delivery of %s on route %s will be forwarded\n", pos[1], pos[0])
		}
		return 0
	case http.StatusUnauthorized:
		fmt.Fprintln(stderr, "clawgate keys: the admin API refused the token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token")
	case http.StatusNotFound:
		fmt.Fprintf(stderr, "clawgate keys: unknown route %q (or no admin API at %s)\n", pos[0], base.Redacted())
	default:
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		fmt.Fprintf(stderr, "clawgate keys: %s: %s\n", resp.Status, e.Error)
	}
	return 1
}
