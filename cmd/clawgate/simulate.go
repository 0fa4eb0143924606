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
	fs := newFlags("simulate", stdout, stderr)
	target := fs.String("url", "", "gateway `URL` to deliver to, e.g. http://127.0.0.1:8080/webhook/order (required)")
	routeName := fs.String("route", "", "route `name` whose verify and idempotency blocks to follow (default: the first, or the first of -provider)")
	provider := fs.String("provider", "", "send an event of provider `NAME` (zoom, stripe, ...), signed as it signs, to the route with that provider")
	times := fs.Int("times", 5, "how many `deliveries` of the same event")
	path := configFlag(fs)
	signKey := fs.String("sign-key", "", "jwt, ed25519 and ecdsa-p256: private key `file` to sign with, PEM (ed25519 also the seed in hex); the route must list its public key (default: the route's secret)")
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
	route, err := findRoute(cfg, *routeName, *provider)
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
			if *signKey == "" && (route.Verify.Scheme == verify.SchemeEd25519 || route.Verify.Scheme == verify.SchemeECDSAP256) {
				fmt.Fprintln(stderr, "clawgate simulate: pass -sign-key with a test private key, and list its public key in the route's secrets")
			}
			return 1
		}
	}
	ev := newSimEvent(route)
	client := &http.Client{Timeout: route.Timeout + 5*time.Second}
	kind := route.Verify.Scheme
	if route.Provider != "" {
		kind = "provider " + route.Provider
	}
	fmt.Fprintf(stdout, "event %s on route %s (%s), %d deliveries to %s\n\n", ev.id, route.Name, kind, *times, u.Redacted())
	fmt.Fprintf(stdout, "%-8s %-7s %-10s %s\n", "attempt", "status", "result", "request id")
	counts := map[string]int{}
	for i := 1; i <= *times; i++ {
		h := ev.headers.Clone()
		body := ev.body
		if signer != nil {
			var err error
			if bs, ok := signer.(verify.BodySigner); ok {
				body, err = bs.SignBody(h, body, time.Now())
			} else {
				err = signer.Sign(h, body, time.Now())
			}
			if err != nil {
				fmt.Fprintf(stderr, "clawgate simulate: sign: %v\n", err)
				return 1
			}
		}
		req, err := ev.request(u, h, body)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: %v\n", err)
			return 1
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

// findRoute returns the route named name, or (name empty) the first route
// of provider, or the first route. With both, the route must have that
// provider.
func findRoute(cfg *config.Config, name, provider string) (*config.Route, error) {
	if provider != "" {
		p, ok := verify.LookupPreset(provider)
		if !ok {
			return nil, fmt.Errorf("unknown provider %q (valid: %s)", provider, strings.Join(verify.PresetNames(), ", "))
		}
		provider = p.Name
	}
	var names, providers []string
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		switch {
		case name != "" && r.Name == name && provider != "" && r.Provider != provider:
			return nil, fmt.Errorf("route %q has provider %q, not %q", name, r.Provider, provider)
		case name != "" && r.Name == name:
			return r, nil
		case name == "" && provider != "" && r.Provider == provider:
			return r, nil
		}
		names = append(names, r.Name)
		if r.Provider != "" {
			providers = append(providers, r.Provider)
		}
	}
	switch {
	case name == "" && provider == "":
		return &cfg.Routes[0], nil
	case name == "":
		return nil, fmt.Errorf("no route with provider %q in the config (providers: %s); add one with `provider: %s`", provider, strings.Join(providers, ", "), provider)
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
	if p, ok := verify.LookupPreset(route.Provider); ok {
		// The provider's own kind of event; only header key sources are
		// set beside it (its body already holds the id where the preset's
		// key reads it).
		ev.id = fmt.Sprintf("sim%x", rand.Uint64())
		ev.body, ev.ctype = p.SampleBody(ev.id, time.Now())
		for _, s := range route.Key.Sources {
			if s.Kind == dedupe.KindHeader {
				ev.headers.Set(s.Name, ev.id)
			}
		}
		return ev
	}
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

// request builds one delivery of ev with headers h (ev's own, signed) and
// body (ev's, or the copy its signer filled in).
func (ev *simEvent) request(base *url.URL, h http.Header, body []byte) (*http.Request, error) {
	u := *base
	if len(ev.query) > 0 {
		q := u.Query()
		for k, v := range ev.query {
			q[k] = v
		}
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequest(ev.method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", ev.ctype)
	return req, nil
}
