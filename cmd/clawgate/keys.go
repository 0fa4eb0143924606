package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	raw = fs.Bool("json", false, "reset: print the admin API's JSON answer instead of a sentence (get always prints JSON)")
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
//	clawgate keys get|reset [-admin URL] [-json] ROUTE KEY
//
// get prints the key's state as the API's JSON; reset prints what was
// forgotten (or, with -json, the API's JSON answer).
func cmdKeys(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "get" && args[0] != "reset") {
		fs, _, _ := keysFlags("", stdout, stderr)
		if len(args) > 0 && isHelp(args[0]) {
			printHelp(fs)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "clawgate keys: unknown verb %q: want get or reset\n", args[0])
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
