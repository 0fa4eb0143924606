package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/dedupe"
	"github.com/clawgate/clawgate/verify"
)

// cmdSimulate sends one event, signed exactly as the route's verify block
// expects, N times to a running gateway and prints what each delivery got.
// It exits 0 when exactly one delivery was forwarded and the others were
// replayed or refused as in flight: the protection works.
func cmdSimulate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("simulate", stderr)
	target := fs.String("url", "", "gateway `URL` to deliver to, e.g. http://127.0.0.1:8080/webhook/order (required)")
	routeName := fs.String("route", "", "route `name` whose verify and idempotency blocks to follow (default: the first)")
	times := fs.Int("times", 5, "how many `deliveries` of the same event")
	path := configFlag(fs)
	signKey := fs.String("sign-key", "", "jwt only: PEM private key `file` to sign with (default: the route's HMAC secret)")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	u, err := url.Parse(*target)
	if *target == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintln(stderr, "clawgate simulate: -url must be the gateway's http(s) URL, e.g. -url http://127.0.0.1:8080/webhook/order")
		return 2
	}
	if *times < 1 || *times > 10000 {
		fmt.Fprintln(stderr, "clawgate simulate: -times must be between 1 and 10000")
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	route, err := findRoute(cfg, *routeName)
	if err != nil {
		fmt.Fprintf(stderr, "clawgate simulate: %v\n", err)
		return 2
	}
	var key []byte
	if *signKey != "" {
		if key, err = os.ReadFile(*signKey); err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: -sign-key: %v\n", err)
			return 1
		}
	}
	var signer verify.Signer
	if verify.Checks(route.Verify.Scheme) {
		signer, err = verify.NewSigner(route.Verify, verify.Env{Dir: cfg.Dir}, key)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: route %q: %v\n", route.Name, err)
			return 1
		}
	}
	ev := newSimEvent(route)
	client := &http.Client{Timeout: route.Timeout + 5*time.Second}
	fmt.Fprintf(stdout, "event %s on route %s (%s), %d deliveries to %s\n\n", ev.id, route.Name, route.Verify.Scheme, *times, u.Redacted())
	fmt.Fprintf(stdout, "%-8s %-7s %-10s %s\n", "attempt", "status", "result", "request id")
	counts := map[string]int{}
	for i := 1; i <= *times; i++ {
		req, err := ev.request(u)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: %v\n", err)
			return 1
		}
		if signer != nil {
			if err := signer.Sign(req.Header, ev.body, time.Now()); err != nil {
				fmt.Fprintf(stderr, "clawgate simulate: sign: %v\n", err)
				return 1
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: delivery %d: %v\n", i, err)
			return 1
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		res := simResult(resp)
		counts[res]++
		fmt.Fprintf(stdout, "%-8d %-7d %-10s %s\n", i, resp.StatusCode, res, resp.Header.Get("X-Request-Id"))
	}
	fmt.Fprintf(stdout, "\n%d forwarded, %d replayed, %d in flight, %d refused\n",
		counts["forwarded"], counts["replayed"], counts["in_flight"], counts["refused"])
	if counts["forwarded"] != 1 || counts["refused"] != 0 {
		fmt.Fprintln(stdout, "protection NOT confirmed: want exactly 1 forwarded and no refusals")
		return 1
	}
	fmt.Fprintln(stdout, "protection confirmed: the event reached the upstream once")
	return 0
}

func findRoute(cfg *config.Config, name string) (*config.Route, error) {
	if name == "" {
		return &cfg.Routes[0], nil
	}
	var names []string
	for i := range cfg.Routes {
		if cfg.Routes[i].Name == name {
			return &cfg.Routes[i], nil
		}
		names = append(names, cfg.Routes[i].Name)
	}
	return nil, fmt.Errorf("no route %q in the config (routes: %s)", name, strings.Join(names, ", "))
}

func simResult(resp *http.Response) string {
	switch {
	case resp.Header.Get("Idempotent-Replayed") == "true":
		return "replayed"
	case resp.StatusCode == http.StatusConflict:
		return "in_flight"
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return "forwarded"
	}
	return "refused"
}

// simEvent is one event, laid out so that every key source of the route
// finds its id: headers are set, JSON paths exist in the body, form and
// query fields are sent.
type simEvent struct {
	id      string
	method  string
	body    []byte
	ctype   string
	headers http.Header
	query   url.Values
}

func newSimEvent(route *config.Route) *simEvent {
	id := fmt.Sprintf("evt_sim_%x", rand.Uint64())
	ev := &simEvent{id: id, method: route.Match.Methods[0], headers: http.Header{}, query: url.Values{}}
	doc := map[string]any{
		"id": id, "event_id": id, "type": "order.paid", "created_at": time.Now().Unix(),
		"data": map[string]any{"order_id": "ord_sim", "object": map[string]any{"id": id}},
	}
	form := url.Values{}
	var place func(s dedupe.Source)
	place = func(s dedupe.Source) {
		switch s.Kind {
		case "header":
			ev.headers.Set(s.Name, id)
		case "json":
			setPath(doc, strings.Split(s.Name, "."), id)
		case "form":
			form.Set(s.Name, id)
		case "query":
			ev.query.Set(s.Name, id)
		case "template":
			for _, p := range s.Parts {
				place(p)
			}
		}
	}
	for _, s := range route.Key.Sources {
		place(s)
	}
	if len(form) > 0 {
		for k, v := range doc {
			if s, ok := v.(string); ok && form.Get(k) == "" {
				form.Set(k, s)
			}
		}
		ev.body, ev.ctype = []byte(form.Encode()), "application/x-www-form-urlencoded"
	} else {
		ev.body, _ = json.Marshal(doc)
		ev.ctype = "application/json"
	}
	return ev
}

// setPath puts v at a dotted path unless something is there already.
func setPath(doc map[string]any, path []string, v string) {
	for i, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			return // array indexes: keep the default layout
		}
		if i == len(path)-1 {
			if _, ok := doc[p]; !ok {
				doc[p] = v
			}
			return
		}
		next, ok := doc[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[p] = next
		}
		doc = next
	}
}

func (ev *simEvent) request(base *url.URL) (*http.Request, error) {
	u := *base
	if len(ev.query) > 0 {
		q := u.Query()
		for k, v := range ev.query {
			q[k] = v
		}
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequest(ev.method, u.String(), bytes.NewReader(ev.body))
	if err != nil {
		return nil, err
	}
	for k, v := range ev.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ev.ctype)
	return req, nil
}
