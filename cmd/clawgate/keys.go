package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/clawgate/clawgate/admin"
)

// keysFlags is the flag set of `clawgate keys VERB` (verb "" for `keys -h`).
func keysFlags(verb string, stdout, stderr io.Writer) (fs *flag.FlagSet, adminURL *string, raw *bool) {
	name := "keys"
	if verb != "" {
		name += " " + verb
	}
	fs = newFlags(name, stdout, stderr)
	adminURL = fs.String("admin", "http://127.0.0.1:9090", "admin listener `URL`")
	raw = fs.Bool("json", false, "reset, history: print the admin API's JSON answer instead of a sentence or a timeline (get always prints JSON)")
	return fs, adminURL, raw
}

// isHelp reports a -h flag in any of its spellings.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// cmdKeys is the operator's tool over the admin key API:
//
//	clawgate keys get|reset|history [-admin URL] [-json] ROUTE KEY
//
// get prints the key's state as the API's JSON; reset prints what was
// forgotten, history the key's timeline (or, with -json, the API's JSON
// answer).
func cmdKeys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "get" && args[0] != "reset" && args[0] != "history") {
		fs, _, _ := keysFlags("", stdout, stderr)
		if len(args) > 0 && isHelp(args[0]) {
			printHelp(fs)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "clawgate keys: unknown verb %q: want get, reset or history\n", args[0])
		}
		fs.Usage()
		return 2
	}
	verb := args[0]
	fs, adminURL, raw := keysFlags(verb, stdout, stderr)
	// Flags may come before or after ROUTE KEY.
	var pos []string
	rest := args[1:]
	for {
		if code := parseFlags(fs, rest, 1<<30); code >= 0 {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(pos) < 2:
		fmt.Fprintf(stderr, "clawgate keys %s: %s; clawgate keys -h shows the flags\n", verb, missingArgs([]string{"ROUTE", "KEY"}, len(pos)))
		return 2
	case len(pos) > 2:
		fmt.Fprintf(stderr, "clawgate keys %s: unexpected argument %q (want ROUTE KEY); clawgate keys -h shows the flags\n", verb, pos[2])
		return 2
	}
	route, key := pos[0], pos[1]
	base, err := url.Parse(*adminURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "clawgate keys: -admin %q is not an http(s) URL\n", *adminURL)
		return 2
	}
	method := http.MethodGet
	if verb == "reset" {
		method = http.MethodDelete
	}
	u := strings.TrimSuffix(base.String(), "/") + "/admin/keys/" + url.PathEscape(route) + "/" + url.PathEscape(key)
	if verb == "history" {
		u += "/history"
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate keys: %v\n", err)
		return 1
	}
	setAdminHeaders(req)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate keys: cannot reach the admin API at %s: %v\n", base.Redacted(), err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusOK:
		if verb == "get" || *raw {
			stdout.Write(body)
			return 0
		}
		if verb == "history" {
			var h admin.History
			if err := json.Unmarshal(body, &h); err != nil || h.Route == "" {
				fmt.Fprintf(stderr, "clawgate keys: the admin API's history is not understood (an older gateway?): %s\n", strings.TrimSpace(string(body)))
				return 1
			}
			printTimeline(stdout, h)
			return 0
		}
		var res admin.ResetResult
		if err := json.Unmarshal(body, &res); err != nil || !res.Reset {
			fmt.Fprintf(stderr, "clawgate keys: the admin API's answer to the reset is not understood (an older gateway?): %s\n", strings.TrimSpace(string(body)))
			return 1
		}
		fmt.Fprintln(stdout, describeReset(route, key, res.Forgot))
		return 0
	case http.StatusUnauthorized:
		fmt.Fprintln(stderr, "clawgate keys: the admin API refused the token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token")
	case http.StatusNotFound:
		if verb == "history" && strings.Contains(string(body), "unknown key") {
			fmt.Fprintf(stderr, "clawgate keys: %s %s has no record and no history\n", route, clean(key))
			return 1
		}
		fmt.Fprintf(stderr, "clawgate keys: unknown route %q (or no admin API at %s)\n", route, base.Redacted())
	default:
		fmt.Fprintf(stderr, "clawgate keys: %s: %s\n", resp.Status, apiError(body))
	}
	return 1
}

// describeReset says in one line that a key was reset and what the store
// forgot, e.g. "reset orders evt_1: forgot finished (status 200, 5
// attempts); the next delivery is forwarded".
//
// On a delivery: queue route (the key has an event ID) the next delivery
// is queued as a new event, and a queued or dead-lettered event is
// dropped with the key.
func describeReset(route, key string, was admin.KeyState) string {
	head := fmt.Sprintf("reset %s %s: ", route, key)
	next := "the next delivery is forwarded"
	if was.ID != "" {
		next = "the next delivery is queued as a new event"
	}
	switch was.State {
	case "queued":
		return head + fmt.Sprintf("forgot queued (event %s, %s); its delivery is cancelled, and %s", was.ID, plural(was.Attempts, "attempt"), next)
	case "dead_lettered":
		return head + fmt.Sprintf("forgot dead_lettered (event %s, %s); it is dropped from the DLQ, and %s", was.ID, plural(was.Attempts, "attempt"), next)
	case "absent":
		return head + "nothing to forget (the key was absent); " + next
	case "in_flight":
		return head + fmt.Sprintf("forgot in_flight (%s); the copy being forwarded cannot record its outcome, and %s",
			plural(was.Attempts, "attempt"), next)
	case "finished":
		return head + fmt.Sprintf("forgot finished (status %d, %s); %s", was.Status, plural(was.Attempts, "attempt"), next)
	}
	return head + fmt.Sprintf("forgot %s (%s); %s", was.State, plural(was.Attempts, "attempt"), next)
}

// plural writes "1 attempt", "0 attempts", "5 attempts".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printTimeline prints a key's history one entry a line, oldest first:
//
//	orders evt_1: finished, 3 events
//	2026-12-05T04:31:02.123Z  arrival  forwarded secret=k1 client=10.0.0.7  copy 1  req 9f2c  on gw-1-4242
//	2026-12-05T04:31:02.140Z  settle   finished  try 1  status 200  17 ms  req 9f2c  on gw-1-4242
//
// Every field from a delivery is printed with its control characters
// escaped: a request id or key cannot move the terminal's cursor.
func printTimeline(w io.Writer, h admin.History) {
	fmt.Fprintf(w, "%s %s: %s, %s\n", clean(h.Route), clean(h.Key), clean(h.State), plural(int64(len(h.Events)), "event"))
	for _, e := range h.Events {
		parts := []string{e.At, fmt.Sprintf("%-8s", clean(e.Kind))}
		if e.Detail != "" {
			parts = append(parts, clean(e.Detail))
		}
		if e.Attempt > 0 {
			n := "try"
			if e.Kind == "arrival" {
				n = "copy"
			}
			parts = append(parts, fmt.Sprintf("%s %d", n, e.Attempt))
		}
		if e.Status != 0 {
			parts = append(parts, fmt.Sprintf("status %d", e.Status))
		}
		if e.MS != 0 {
			parts = append(parts, fmt.Sprintf("%d ms", e.MS))
		}
		if e.RequestID != "" {
			parts = append(parts, "req "+clean(e.RequestID))
		}
		if e.Instance != "" {
			parts = append(parts, "on "+clean(e.Instance))
		}
		fmt.Fprintln(w, strings.Join(parts, "  "))
	}
}

// clean escapes s's control characters (as Go's %q would) so that what a
// delivery carried prints as text.
func clean(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
