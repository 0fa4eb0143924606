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

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/idkey"
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
	adminURL := fs.String("admin", "http://127.0.0.1:9090", "delivery: queue routes: admin listener `URL` to follow the queued event's key on (token from $CLAWGATE_ADMIN_TOKEN)")
	wait := fs.Duration("wait", 30*time.Second, "delivery: queue routes: how long to follow the queued event until it is finished or dead-lettered")
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
	adminBase, err := url.Parse(*adminURL)
	if err != nil || (adminBase.Scheme != "http" && adminBase.Scheme != "https") || adminBase.Host == "" {
		fmt.Fprintf(stderr, "clawgate simulate: -admin %q is not an http(s) URL\n", *adminURL)
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
	if pu, err := url.Parse(route.PublicURL); route.PublicURL != "" && err == nil && verify.UsesURL(route.Verify) {
		// The signature covers public_url, and the gateway refuses a
		// request sent to another path or query: deliver to public_url's,
		// on -url's host, as the provider does through a load balancer.
		u.Path, u.RawPath, u.RawQuery = pu.Path, pu.RawPath, pu.RawQuery
	}
	ev := newSimEvent(route)
	client := &http.Client{Timeout: route.Timeout + 5*time.Second}
	kind := route.Verify.Scheme
	if route.Provider != "" {
		kind = "provider " + route.Provider
	}
	fmt.Fprintf(stdout, "event %s on route %s (%s), %d deliveries to %s\n\n", ev.id, route.Name, kind, *times, u.Redacted())
	fmt.Fprintf(stdout, "%-8s %-7s %-11s %s\n", "attempt", "status", "result", "request id")
	counts := map[string]int{}
	var ack queueAck
	gwError := "" // the first error the gateway answered, e.g. "502 upstream unreachable"
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
		respBody, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		res := simResult(resp, respBody, route.Queued())
		counts[res]++
		if res == "queued" && ack.Key == "" {
			json.Unmarshal(respBody, &ack)
		}
		if res != "replayed" && resp.StatusCode >= 400 && gwError == "" {
			var e struct{ Error string }
			if json.Unmarshal(respBody, &e) == nil && e.Error != "" {
				gwError = fmt.Sprintf("%d %s", resp.StatusCode, e.Error)
			}
		}
		fmt.Fprintf(stdout, "%-8d %-7d %-11s %s\n", i, resp.StatusCode, res, resp.Header.Get("X-Request-Id"))
	}
	accepted := "forwarded"
	if route.Queued() {
		accepted = "queued"
	}
	fmt.Fprintf(stdout, "\n%d %s, %d replayed, %d in flight, %d refused", counts[accepted], accepted, counts["replayed"], counts["in_flight"], counts["refused"])
	if n := counts["unreachable"]; n > 0 {
		fmt.Fprintf(stdout, ", %d upstream unreachable", n)
	}
	if n := counts["timed_out"]; n > 0 {
		fmt.Fprintf(stdout, ", %d upstream timed out", n)
	}
	fmt.Fprintln(stdout)
	if gwError != "" {
		fmt.Fprintf(stdout, "the gateway answered %s\n", gwError)
	}
	if counts["unreachable"] > 0 {
		fmt.Fprintf(stdout, "upstream unreachable: the gateway could not connect to route %s's upstream %s; is it running?\n", route.Name, route.Upstream)
	}
	if counts[accepted] != 1 || counts["refused"]+counts["unreachable"]+counts["timed_out"] != 0 {
		fmt.Fprintf(stdout, "protection NOT confirmed: want exactly 1 %s and no refusals\n", accepted)
		return 1
	}
	if !route.Queued() {
		fmt.Fprintln(stdout, "protection confirmed: the event reached the upstream once")
		return 0
	}
	return followQueued(stdout, stderr, adminBase, route.Name, ack.Key, ack.ID, *wait)
}

// queueAck is a queue route's answer to the delivery it queued.
type queueAck struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// followQueued polls the admin key API for the queued event's key until
// it is finished or dead_lettered, or wait has passed, and says which.
// It returns 0 only when the event was delivered (finished).
func followQueued(stdout, stderr io.Writer, base *url.URL, route, key, id string, wait time.Duration) int {
	if key == "" {
		fmt.Fprintln(stdout, "protection NOT confirmed: the gateway's 202 did not name the event's key, so it cannot be followed (an older gateway?)")
		return 1
	}
	fmt.Fprintf(stdout, "\nfollowing key %s (event %s) on %s for up to %s\n", key, id, base.Redacted(), wait)
	u := strings.TrimSuffix(base.String(), "/") + "/admin/keys/" + url.PathEscape(route) + "/" + url.PathEscape(key)
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(wait)
	var ks admin.KeyState
	for {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: %v\n", err)
			return 1
		}
		setAdminHeaders(req)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(stderr, "clawgate simulate: cannot reach the admin API at %s to follow the event (set -admin): %v\n", base.Redacted(), err)
			fmt.Fprintln(stdout, "protection NOT confirmed: the queued event could not be followed")
			return 1
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			fmt.Fprintln(stderr, "clawgate simulate: the admin API refused the token: set $CLAWGATE_ADMIN_TOKEN to the gateway's admin token")
			fmt.Fprintln(stdout, "protection NOT confirmed: the queued event could not be followed")
			return 1
		case resp.StatusCode != http.StatusOK || json.Unmarshal(body, &ks) != nil:
			fmt.Fprintf(stderr, "clawgate simulate: the admin API answered %s: %s\n", resp.Status, strings.TrimSpace(string(body)))
			fmt.Fprintln(stdout, "protection NOT confirmed: the queued event could not be followed")
			return 1
		}
		switch ks.State {
		case "finished":
			fmt.Fprintf(stdout, "finished: the upstream answered %d after %s\n", ks.Status, plural(ks.Attempts, "attempt"))
			fmt.Fprintln(stdout, "protection confirmed: the event was delivered to the upstream once")
			return 0
		case "dead_lettered":
			fmt.Fprintf(stdout, "dead_lettered: event %s after %s; clawgate dlq list %s shows why\n", ks.ID, plural(ks.Attempts, "attempt"), route)
			fmt.Fprintln(stdout, "protection NOT confirmed: the event was dead-lettered, not delivered")
			return 1
		}
		if !time.Now().Before(deadline) {
			break
		}
		time.Sleep(min(250*time.Millisecond, time.Until(deadline)))
	}
	fmt.Fprintf(stdout, "still %s after %s (%s); clawgate keys get %s %s follows it\n", ks.State, wait, plural(ks.Attempts, "attempt"), route, key)
	fmt.Fprintln(stdout, "protection NOT confirmed yet: the event was neither delivered nor dead-lettered in time")
	return 1
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

// simResult names what one delivery got: forwarded (a sync route's
// upstream answered 2xx), queued (a queue route stored it), replayed,
// in_flight, unreachable (the gateway's 502: it could not connect to
// the upstream), timed_out (the gateway's 504) or refused. An upstream's
// own 502 is passed through as a refusal.
func simResult(resp *http.Response, body []byte, queued bool) string {
	var e struct{ Error string }
	if resp.StatusCode >= 500 {
		json.Unmarshal(body, &e)
	}
	switch {
	case resp.Header.Get("Idempotent-Replayed") == "true":
		return "replayed"
	case resp.StatusCode == http.StatusConflict:
		return "in_flight"
	case resp.StatusCode >= 200 && resp.StatusCode < 300 && queued:
		return "queued"
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return "forwarded"
	case resp.StatusCode == http.StatusBadGateway && e.Error == "upstream unreachable":
		return "unreachable"
	case resp.StatusCode == http.StatusGatewayTimeout && e.Error == "upstream timed out":
		return "timed_out"
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
			if s.Kind == idkey.KindHeader {
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
	var place func(s idkey.Source)
	place = func(s idkey.Source) {
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
