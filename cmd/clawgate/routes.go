package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/clawgate/clawgate/admin"
)

// cmdRoutes lists the running gateway's routes, or pauses or resumes a
// queue route, over the admin API:
//
//	clawgate routes [list] [-admin URL] [-json]
//	clawgate routes pause|resume [-admin URL] ROUTE
//
// Exit 0 on success, 1 when the admin API refused or could not be
// reached, 2 on a usage error.
func cmdRoutes(args []string, stdout, stderr io.Writer) int {
	verb := "list"
	if len(args) > 0 && (args[0] == "list" || args[0] == "pause" || args[0] == "resume") {
		verb, args = args[0], args[1:]
	} else if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		fmt.Fprintf(stderr, "clawgate routes: unknown verb %q: want list, pause or resume\n", args[0])
		return 2
	}
	fs := newFlags("routes "+verb, stdout, stderr)
	adminURL := fs.String("admin", "http://127.0.0.1:9090", "admin listener `URL`")
	raw := false
	if verb == "list" {
		fs.BoolVar(&raw, "json", false, "print the admin API's JSON instead of a table")
	}
	nargs := 0
	if verb != "list" {
		nargs = 1
	}
	if code := parseFlags(fs, args, nargs); code >= 0 {
		return code
	}
	if verb != "list" && fs.NArg() != 1 {
		fmt.Fprintf(stderr, "clawgate routes %s: want one ROUTE\n", verb)
		fs.Usage()
		return 2
	}
	base, err := url.Parse(*adminURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "clawgate routes: -admin %q is not an http(s) URL\n", *adminURL)
		return 2
	}
	method, path := http.MethodGet, "/admin/routes"
	if verb != "list" {
		method, path = http.MethodPost, "/admin/routes/"+url.PathEscape(fs.Arg(0))+"/"+verb
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base.String(), "/")+path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate routes: %v\n", err)
		return 1
	}
	setAdminHeaders(req)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate routes: cannot reach the admin API at %s: %v\n", base.Redacted(), err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		fmt.Fprintln(stderr, "clawgate routes: the admin API refused the token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token")
		return 1
	case resp.StatusCode != http.StatusOK:
		fmt.Fprintf(stderr, "clawgate routes %s: %s: %s\n", verb, resp.Status, apiError(body))
		return 1
	}
	if verb != "list" {
		var res admin.PauseResult
		if err := json.Unmarshal(body, &res); err != nil {
			fmt.Fprintf(stderr, "clawgate routes %s: unreadable answer: %v\n", verb, err)
			return 1
		}
		state := "running"
		if res.Paused {
			state = "paused since " + res.PausedSince.Format(time.RFC3339)
		}
		already := ""
		if !res.Changed {
			already = " (it already was)"
		}
		fmt.Fprintf(stdout, "route %s: %s%s\n", res.Route, state, already)
		return 0
	}
	if raw {
		stdout.Write(body)
		return 0
	}
	var page admin.RoutesPage
	if err := json.Unmarshal(body, &page); err != nil {
		fmt.Fprintf(stderr, "clawgate routes: unreadable answer: %v\n", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tDELIVERY\tDEPTH\tDLQ\tPAUSED\tBREAKER")
	for _, r := range page.Routes {
		depth, dlq, paused, breaker := "-", "-", "-", "-"
		if r.Depth != nil {
			depth = strconv.FormatInt(*r.Depth, 10)
		}
		if r.DLQ != nil {
			dlq = strconv.FormatInt(*r.DLQ, 10)
		}
		if r.Delivery == "queue" {
			paused = "no"
			if r.Paused {
				paused = "since " + r.PausedSince.Format(time.RFC3339)
			}
		}
		if r.Breaker != "" {
			breaker = r.Breaker
			if r.BreakerOpenUntil != nil {
				breaker += " until " + r.BreakerOpenUntil.Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Delivery, depth, dlq, paused, breaker)
		if r.Error != "" {
			fmt.Fprintf(tw, "  error: %s\t\t\t\t\t\n", r.Error)
		}
	}
	tw.Flush()
	return 0
}
