package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/queue"
)

// dlqDefaultAdmin is -admin's default, as for clawgate keys.
const dlqDefaultAdmin = "http://127.0.0.1:9090"

// dlqPollEvery is how often `dlq replay -all` reads the replay's progress.
var dlqPollEvery = 500 * time.Millisecond

// dlqOptions are the flags of `clawgate dlq VERB`.
type dlqOptions struct {
	admin          string
	limit          int
	cursor         string
	all, raw, keep bool
}

// dlqFlags is the flag set of `clawgate dlq VERB`: each verb has the flags
// it uses (verb "" for `dlq -h`: all of them).
func dlqFlags(verb string, stdout, stderr io.Writer) (*flag.FlagSet, *dlqOptions) {
	name := "dlq"
	if verb != "" {
		name += " " + verb
	}
	fs := newFlags(name, stdout, stderr)
	o := &dlqOptions{}
	fs.StringVar(&o.admin, "admin", dlqDefaultAdmin, "admin listener `URL`")
	switch verb {
	case "list":
		fs.IntVar(&o.limit, "limit", admin.DefaultDLQLimit, fmt.Sprintf("list `N` events per page, at most %d", admin.MaxDLQLimit))
		fs.StringVar(&o.cursor, "cursor", "", "start after cursor `C`, as the hint under a page gives it")
		fs.BoolVar(&o.all, "all", false, "list every page, not only the first")
		fs.BoolVar(&o.raw, "json", false, "print the admin API's JSON instead of a table")
	case "replay":
		fs.BoolVar(&o.all, "all", false, "replay the whole DLQ at queue.replay_rate events per second, instead of one ID")
		fs.BoolVar(&o.keep, "detach", false, "with -all: start the replay and return, instead of following it")
	case "":
		fs.IntVar(&o.limit, "limit", admin.DefaultDLQLimit, fmt.Sprintf("list: `N` events per page, at most %d", admin.MaxDLQLimit))
		fs.StringVar(&o.cursor, "cursor", "", "list: start after cursor `C`, as the hint under a page gives it")
		fs.BoolVar(&o.all, "all", false, "list: every page; replay: the whole DLQ at queue.replay_rate events per second")
		fs.BoolVar(&o.raw, "json", false, "list: print the admin API's JSON instead of a table")
		fs.BoolVar(&o.keep, "detach", false, "replay -all: start the replay and return, instead of following it")
	}
	return fs, o
}

// dlqClient calls the admin API's DLQ endpoints of one route.
type dlqClient struct {
	verb, route string
	base        *url.URL
	http        *http.Client
	stderr      io.Writer
}

// errReported: the failure was already printed.
var errReported = errors.New("reported")

// call sends method to /admin/dlq/ROUTE followed by path (already escaped)
// and returns the answer's status and body. A transport failure is
// printed and answered errReported.
func (c *dlqClient) call(ctx context.Context, method, path string, query url.Values) (int, []byte, error) {
	u := strings.TrimSuffix(c.base.String(), "/") + "/admin/dlq/" + url.PathEscape(c.route) + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		c.fail("%v", err)
		return 0, nil, errReported
	}
	setAdminHeaders(req)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		c.fail("cannot reach the admin API at %s: %v", c.base.Redacted(), err)
		return 0, nil, errReported
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, body, nil
}

func (c *dlqClient) fail(format string, args ...any) {
	fmt.Fprintf(c.stderr, "clawgate dlq %s: %s\n", c.verb, fmt.Sprintf(format, args...))
}

// refused prints why the admin API refused a call: its own error message,
// with a hint for a refused token and for a gateway without this API.
func (c *dlqClient) refused(code int, body []byte) {
	var e struct{ Error string }
	json.Unmarshal(body, &e)
	switch {
	case code == http.StatusUnauthorized:
		c.fail("%s: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token", orDefault(e.Error, "the admin API refused the token"))
	case code == http.StatusNotFound && (e.Error == "" || e.Error == "not found"):
		c.fail("%s: no DLQ API at %s (not a clawgate admin listener, or an older gateway)", http.StatusText(code), c.base.Redacted())
	case e.Error != "":
		c.fail("%s", e.Error)
	default:
		c.fail("%d %s: %s", code, http.StatusText(code), strings.TrimSpace(string(body)))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cmdDLQ is the operator's tool over the admin DLQ API of the routes with
// delivery: queue:
//
//	clawgate dlq list [-admin URL] [-limit N] [-cursor C] [-all] [-json] ROUTE
//	clawgate dlq replay [-admin URL] ROUTE ID
//	clawgate dlq replay [-admin URL] [-detach] -all ROUTE
//	clawgate dlq purge [-admin URL] ROUTE ID
func cmdDLQ(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay" && args[0] != "purge") {
		fs, _ := dlqFlags("", stdout, stderr)
		if len(args) > 0 && isHelp(args[0]) {
			printHelp(fs)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(stderr, "clawgate dlq: unknown verb %q: want list, replay or purge\n", args[0])
		}
		fs.Usage()
		return 2
	}
	verb := args[0]
	fs, o := dlqFlags(verb, stdout, stderr)
	// Flags may come before or after ROUTE [ID].
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
	usageError := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "clawgate dlq %s: %s\n", verb, fmt.Sprintf(format, args...))
		fs.Usage()
		return 2
	}
	// want: the positional arguments this verb takes.
	want := []string{"ROUTE", "ID"}
	if verb == "list" || (verb == "replay" && o.all) {
		want = want[:1]
	}
	switch {
	case verb == "replay" && o.all && len(pos) == 2:
		return usageError("give an event ID or -all, not both")
	case len(pos) < len(want):
		msg := missingArgs(want, len(pos))
		if verb == "replay" && !o.all {
			msg = strings.TrimSuffix(msg, ")") + ", or ROUTE -all)"
		}
		return usageError("%s", msg)
	case len(pos) > len(want):
		return usageError("unexpected argument %q (want %s)", pos[len(want)], strings.Join(want, " "))
	case verb == "list" && o.limit < 1:
		return usageError("-limit must be a positive integer, got %d", o.limit)
	case verb == "replay" && o.keep && !o.all:
		return usageError("-detach goes with -all")
	}
	for _, p := range pos {
		if p == "" {
			return usageError("ROUTE and ID must not be empty")
		}
	}
	base, err := url.Parse(o.admin)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		fmt.Fprintf(stderr, "clawgate dlq: -admin %q is not an http(s) URL\n", o.admin)
		return 2
	}
	c := &dlqClient{verb: verb, route: pos[0], base: base,
		http: &http.Client{Timeout: 10 * time.Second}, stderr: stderr}
	switch {
	case verb == "list":
		return c.list(stdout, o)
	case verb == "replay" && o.all:
		return c.replayAll(stdout, o.keep)
	}
	return c.one(stdout, pos[1])
}

// list prints one page of the DLQ (every page with -all) as a table or
// as the API's JSON.
func (c *dlqClient) list(stdout io.Writer, o *dlqOptions) int {
	page := admin.DLQPage{Route: c.route, Entries: []queue.DeadEntry{}}
	cursor := o.cursor
	for {
		q := url.Values{"limit": {strconv.Itoa(o.limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		code, body, err := c.call(context.Background(), http.MethodGet, "", q)
		if err != nil {
			return 1
		}
		if code != http.StatusOK {
			c.refused(code, body)
			return 1
		}
		var p admin.DLQPage
		if err := json.Unmarshal(body, &p); err != nil {
			c.fail("the admin API's answer is not understood: %s", strings.TrimSpace(string(body)))
			return 1
		}
		page.Entries = append(page.Entries, p.Entries...)
		page.Next = p.Next
		if !o.all || p.Next == "" || p.Next == cursor {
			break
		}
		cursor = p.Next
	}
	if o.raw {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(page)
		return 0
	}
	if len(page.Entries) == 0 {
		fmt.Fprintf(stdout, "no dead-lettered events on route %q\n", c.route)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKEY\tREASON\tSTATUS\tATTEMPTS\tFIRST SEEN\tDIED AT")
		for _, e := range page.Entries {
			status := "-"
			if e.Status != 0 {
				status = strconv.Itoa(e.Status)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", printable(e.ID), printable(e.Key), printable(e.Reason),
				status, e.Attempts, stamp(e.FirstSeen), stamp(e.DiedAt))
		}
		tw.Flush()
	}
	if page.Next != "" {
		fmt.Fprintf(stdout, "more events: clawgate dlq list%s -cursor %s %s (or -all for every page)\n", c.listFlags(o), page.Next, c.route)
	}
	return 0
}

// listFlags are the flags of the hint under a page that differ from
// their defaults, so that the next page is read as this one was.
func (c *dlqClient) listFlags(o *dlqOptions) string {
	var b strings.Builder
	if o.admin != dlqDefaultAdmin {
		b.WriteString(" -admin " + c.base.Redacted())
	}
	if o.limit != admin.DefaultDLQLimit {
		b.WriteString(" -limit " + strconv.Itoa(o.limit))
	}
	return b.String()
}

// printable quotes a value that holds a space or a character a terminal
// would not print as itself, so that a table cell stays one cell.
func printable(s string) string {
	if s == "" {
		return `""`
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// one replays (POST) or purges (DELETE) one event.
func (c *dlqClient) one(stdout io.Writer, id string) int {
	method, path := http.MethodPost, "/"+url.PathEscape(id)+"/replay"
	if c.verb == "purge" {
		method, path = http.MethodDelete, "/"+url.PathEscape(id)
	}
	code, body, err := c.call(context.Background(), method, path, nil)
	if err != nil {
		return 1
	}
	if code != http.StatusOK {
		c.refused(code, body)
		return 1
	}
	var res admin.DLQResult
	if err := json.Unmarshal(body, &res); err != nil || !(res.Replayed || res.Purged) {
		c.fail("the admin API's answer is not understood: %s", strings.TrimSpace(string(body)))
		return 1
	}
	if res.Purged {
		fmt.Fprintf(stdout, "purged %s %s: the event is dropped; its key stays dead-lettered for the route's retention, so the provider's retries are not delivered\n", c.route, id)
	} else {
		fmt.Fprintf(stdout, "replayed %s %s: the event is queued again, with a new round of tries\n", c.route, id)
	}
	return 0
}

// replayAll starts a replay of the whole DLQ and, unless detached,
// follows it until it ends; SIGINT or SIGTERM cancels it (what was
// replayed stays replayed). Exits 0 when the replay is done.
func (c *dlqClient) replayAll(stdout io.Writer, detach bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, body, err := c.call(ctx, http.MethodPost, "/replay", nil)
	if err != nil {
		if ctx.Err() != nil {
			// The replay may have started meanwhile: cancel it.
			stop()
			return c.cancel(stdout)
		}
		return 1
	}
	var st queue.ReplayStatus
	switch code {
	case http.StatusAccepted:
	case http.StatusConflict:
		c.refused(code, body)
		if json.Unmarshal(body, &st) == nil && st.State != "" {
			fmt.Fprintln(stdout, describeReplay(st))
		}
		return 1
	default:
		c.refused(code, body)
		return 1
	}
	if err := json.Unmarshal(body, &st); err != nil || st.State == "" {
		c.fail("the admin API's answer is not understood: %s", strings.TrimSpace(string(body)))
		return 1
	}
	fmt.Fprintf(stdout, "replaying the DLQ of %s: %s at %g per second\n", c.route, plural(st.Total, "event"), st.Rate)
	if detach {
		fmt.Fprintf(stdout, "detached: follow it with GET /admin/dlq/%s/replay on this instance\n", url.PathEscape(c.route))
		return 0
	}
	last := int64(-1)
	t := time.NewTicker(dlqPollEvery)
	defer t.Stop()
	for st.State == "running" {
		select {
		case <-ctx.Done():
			stop() // a second signal ends this command at once
			return c.cancel(stdout)
		case <-t.C:
		}
		code, body, err := c.call(ctx, http.MethodGet, "/replay", nil)
		switch {
		case err != nil && ctx.Err() != nil:
			continue // cancelled while reading the progress
		case err != nil:
			return 1
		case code == http.StatusNotFound:
			c.refused(code, body)
			c.fail("the admin API at %s does not know this replay: each instance runs its own; call the one that started it (not a load balancer)", c.base.Redacted())
			return 1
		case code != http.StatusOK:
			c.refused(code, body)
			return 1
		}
		if err := json.Unmarshal(body, &st); err != nil {
			c.fail("the admin API's answer is not understood: %s", strings.TrimSpace(string(body)))
			return 1
		}
		if st.State == "running" && st.Replayed != last {
			fmt.Fprintf(stdout, "replayed %d/%d\n", st.Replayed, st.Total)
			last = st.Replayed
		}
	}
	fmt.Fprintln(stdout, describeReplay(st))
	if st.State != "done" {
		return 1
	}
	return 0
}

// cancel stops the replay (DELETE) and prints how it ended.
func (c *dlqClient) cancel(stdout io.Writer) int {
	ctx, done := context.WithTimeout(context.Background(), 15*time.Second)
	defer done()
	code, body, err := c.call(ctx, http.MethodDelete, "/replay", nil)
	if err != nil {
		return 1
	}
	if code != http.StatusOK {
		c.refused(code, body)
		return 1
	}
	var st queue.ReplayStatus
	if err := json.Unmarshal(body, &st); err != nil {
		c.fail("the admin API's answer is not understood: %s", strings.TrimSpace(string(body)))
		return 1
	}
	fmt.Fprintln(stdout, describeReplay(st))
	return 1
}

// describeReplay says in one line how a replay of a DLQ stands.
func describeReplay(st queue.ReplayStatus) string {
	head := fmt.Sprintf("replay of the DLQ of %s %s: replayed %d of %s", st.Route, st.State, st.Replayed, plural(st.Total, "event"))
	switch st.State {
	case "cancelled":
		return head + "; the others stay in the DLQ"
	case "failed":
		return head + ": " + st.Error
	case "running":
		return head + " so far"
	}
	return head
}
