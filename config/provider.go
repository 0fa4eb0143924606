package config

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/clawgate/clawgate/verify"
)

// A route's `provider: NAME` names a verify.Preset: the provider's verify
// block (scheme, header, format, template, timestamp, tolerance, ...) and
// idempotency key. The preset fills in each of those fields the route does
// not write itself, so any field written out wins; secrets are the route's
// own. public_url gives the URL the provider calls, for the signatures
// that cover it.

// expandProvider fills in route i from its provider's preset, checks its
// public_url and signed method, and hands them to its verify block. It
// runs before the route's other checks, so that they see the route as it
// will run. A route it refuses gets scheme none: the route is refused
// already, and its compile must not repeat the problem as errors about the
// fields the preset was to fill in.
func (b *builder) expandProvider(i int) {
	if b.applyProvider(i) && b.checkPublicURL(i) {
		return
	}
	b.cfg.Routes[i].Verify = verify.Config{Scheme: verify.SchemeNone}
}

// applyProvider fills route i from its preset and checks the fields the
// preset needs the route to write. It reports whether the route can be
// compiled.
func (b *builder) applyProvider(i int) bool {
	r := &b.cfg.Routes[i]
	if strings.TrimSpace(r.Provider) == "" {
		return true
	}
	p, ok := verify.LookupPreset(r.Provider)
	if !ok {
		b.routeError(i, []any{"provider"}, "provider", "unknown provider %q%s; valid: %s",
			clip(r.Provider), suggestProvider(r.Provider), strings.Join(verify.PresetNames(), ", "))
		return false
	}
	r.Provider = p.Name
	route := b.routeNode(i)
	fillUnwritten(reflect.ValueOf(&r.Verify).Elem(), reflect.ValueOf(p.Verify), lookup(route, "verify"))
	idem := lookup(route, "idempotency")
	if !written(idem, "key") {
		r.Idempotency.Key = append([]string(nil), p.Key...)
	}
	if !written(idem, "allow_unsigned_key") {
		r.Idempotency.AllowUnsignedKey = p.AllowUnsignedKey
	}
	ok = true
	for _, need := range p.Needs {
		if need == "public_url" || b.hasAny(r, need) {
			continue
		}
		field := strings.Split(need, "|")[0]
		path := []any{"verify"}
		for _, s := range strings.Split(field, ".") {
			path = append(path, s)
		}
		b.routeError(i, path, "verify."+field, "provider %s needs it: %s", p.Name, p.Secret)
		ok = false
	}
	return ok
}

// hasAny reports whether one of the "|"-separated verify fields of need is
// set on r.
func (b *builder) hasAny(r *Route, need string) bool {
	for _, f := range strings.Split(need, "|") {
		switch f {
		case "secrets":
			if len(r.Verify.Secrets) > 0 {
				return true
			}
		case "jwt.audience":
			if r.Verify.JWT.Audience != "" {
				return true
			}
		case "jwt.jwks_file":
			if r.Verify.JWT.JWKSFile != "" {
				return true
			}
		case "jwt.keys":
			if len(r.Verify.JWT.Keys) > 0 {
				return true
			}
		case "jwt.jwks_url":
			if r.Verify.JWT.JWKSURL != "" {
				return true
			}
		}
	}
	return false
}

// fillUnwritten copies each field of preset into dst that node (the
// route's mapping for dst, possibly nil) does not write, recursing into
// nested blocks; a zero preset value leaves dst's default. Fields without a
// YAML name (yaml:"-") are left alone.
func fillUnwritten(dst, preset reflect.Value, node *yaml.Node) {
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		pv := preset.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type.NumField() > 0 && f.Type.PkgPath() == t.PkgPath() {
			fillUnwritten(dst.Field(i), pv, lookup(node, name))
			continue
		}
		if pv.IsZero() || written(node, name) {
			continue
		}
		dst.Field(i).Set(pv)
	}
}

// written reports whether mapping n (nil: not written at all) writes key.
func written(n *yaml.Node, key string) bool {
	if n == nil {
		return false
	}
	k, _ := lookupKey(n, key)
	return k != nil
}

// routeNode returns the mapping of route i in the document, or nil.
func (b *builder) routeNode(i int) *yaml.Node {
	routes := deref(lookup(b.loc.root, "routes"))
	if routes == nil || routes.Kind != yaml.SequenceNode || i >= len(routes.Content) {
		return nil
	}
	return deref(routes.Content[i])
}

// suggestProvider returns ` (did you mean "x"?)` for the preset nearest to
// name, or "".
func suggestProvider(name string) string {
	best, bestDist := "", 3
	lname := strings.ToLower(strings.TrimSpace(name))
	for _, p := range verify.PresetNames() {
		if d := editDistance(lname, p, bestDist); d < bestDist {
			best, bestDist = p, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// checkPublicURL checks route i's public_url, hands it and the route's
// method to the verify block, and requires it when the signature covers
// the URL. It reports whether the route can be compiled.
func (b *builder) checkPublicURL(i int) bool {
	r := &b.cfg.Routes[i]
	if r.PublicURL != "" {
		u, err := httpURL(r.PublicURL)
		switch {
		case err != nil:
			b.routeError(i, []any{"public_url"}, "public_url", "%v", err)
			return false
		case u.Fragment != "" || strings.Contains(r.PublicURL, "#"):
			b.routeError(i, []any{"public_url"}, "public_url", "must not have a fragment: providers sign the URL they call, which has none")
			return false
		}
		r.Verify.PublicURL = r.PublicURL
	}
	who := "the route's verify.template"
	if r.Provider != "" {
		who = "provider " + r.Provider
	}
	usesURL := verify.UsesURL(r.Verify)
	switch {
	case usesURL && r.PublicURL == "":
		example := "https://hooks.example.com" + r.Match.Path + r.Match.PathPrefix
		b.routeError(i, []any{"public_url"}, "public_url",
			"required: %s signs the URL it calls ({url}), which the gateway cannot see behind a load balancer; set public_url to that URL exactly as configured at the provider, such as %q",
			who, example)
		return false
	case !usesURL && r.PublicURL != "":
		b.warn(b.routeLine(i, "public_url"), r.Name, "public_url is set, but the route's signature does not cover the URL: it is not used")
	}
	if verify.UsesMethod(r.Verify) {
		if len(r.Match.Methods) != 1 {
			b.routeError(i, []any{"match", "methods"}, "match.methods",
				"%s signs the request method ({method}), so the route must accept exactly one method, such as [POST]", who)
			return false
		}
		r.Verify.Method = r.Match.Methods[0]
	}
	return true
}

// templateHeaders lists the headers c's template signs ({header:NAME}),
// which the key check counts as signed beside those its scheme always
// signs (Twitch's message id).
func templateHeaders(c verify.Config) []string {
	fixed := verify.SignedHeaders(c.Scheme)
	var out []string
	for _, h := range verify.SignedHeadersOf(c) {
		if !containsFold(fixed, h) {
			out = append(out, h)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
