package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/idkey"
	"github.com/clawgate/clawgate/verify"
)

// explainRoute prints route r as the gateway runs it, a provider's preset
// expanded: what is verified, where the key comes from and whether the
// signature covers it, and how long a captured delivery stays acceptable.
// It prints the names of secret variables and files, never their values.
func explainRoute(w io.Writer, cfg *config.Config, r *config.Route) {
	title := ""
	p, hasPreset := verify.LookupPreset(r.Provider)
	if r.Provider != "" && hasPreset {
		title = fmt.Sprintf(" (provider %s: %s)", p.Name, p.Title)
	}
	fmt.Fprintf(w, "route %s%s\n", r.Name, title)
	row := func(indent int, k, format string, args ...any) {
		// Values line up whatever the indent.
		fmt.Fprintf(w, "%s%-*s %s\n", strings.Repeat("  ", indent), 17-2*indent, k+":", fmt.Sprintf(format, args...))
	}
	m := r.Match
	match := "path " + m.Path
	if m.PathPrefix != "" {
		match = "path_prefix " + m.PathPrefix
	}
	if m.Host != "" {
		match += ", host " + m.Host
	}
	row(1, "match", "%s, methods %s", match, strings.Join(m.Methods, " "))
	row(1, "upstream", "%s", r.Upstream)
	if r.PublicURL != "" {
		row(1, "public_url", "%s", r.PublicURL)
	}

	c := r.Verify
	fmt.Fprintln(w, "  verify:")
	row(2, "scheme", "%s", schemeFamily(c))
	if c.Scheme == verify.SchemeJWT {
		explainJWT(row, c.JWT)
	} else if verify.Checks(c.Scheme) {
		for _, f := range [][2]string{{"header", c.Header}, {"signature", c.Signature}, {"prefix", c.Prefix}, {"format", c.Format}, {"template", c.Template}} {
			if f[1] != "" {
				row(2, f[0], "%s", f[1])
			}
		}
		if usesMAC(c) {
			row(2, "algorithm", "%s, %s", def(c.Algorithm, "sha256"), def(c.Encoding, "hex"))
			if c.AlgorithmHeader != "" {
				row(2, "algorithm by", "%s (its algorithm= item chooses sha1 or sha256; never weaker than %s)", c.AlgorithmHeader, def(c.Algorithm, "sha256"))
			}
		}
	}
	if win, field, _ := verify.ReplayWindow(c); win > 0 && field == "tolerance" {
		ts := c.Timestamp
		if ts == "" {
			ts = "in the signature header"
		}
		row(2, "timestamp", "%s (%s), tolerance %v both ways", ts, def(c.TimestampFormat, "unix"), win)
	} else if verify.Checks(c.Scheme) && c.Scheme != verify.SchemeJWT {
		row(2, "timestamp", "none signed: nothing bounds how long a captured delivery is accepted")
	}
	for _, s := range c.Secrets {
		row(2, "secret", "%s", secretSource(s, c.Scheme))
	}

	fmt.Fprintln(w, "  idempotency:")
	row(2, "key", "%s", strings.Join(r.Idempotency.Key, ", "))
	row(2, "first source", "%s", keyCoverage(r))
	row(2, "required", "%v", r.Idempotency.Required)
	row(1, "replay guard", "%s", onOff(r.ReplayGuard, "on: the signed content of every accepted delivery is remembered for the retention and refused under another key", "off"))
	row(1, "retention", "%v", r.Retention)
	if hasPreset {
		row(1, "provider", "%s", p.KeyNote)
		row(1, "retries", "%s", p.Retries)
		row(1, "docs", "%s", p.Docs)
	}
	fmt.Fprintln(w)
}

func explainJWT(row func(int, string, string, ...any), j verify.JWTConfig) {
	row(2, "header", "%s", def(j.Header, "Authorization"))
	row(2, "algorithms", "%s", strings.Join(j.Algorithms, " "))
	for _, f := range [][2]string{{"issuer", j.Issuer}, {"audience", j.Audience}, {"jwks_url", j.JWKSURL}, {"jwks_file", j.JWKSFile}, {"body_hash_claim", j.BodyHashClaim}} {
		if f[1] != "" {
			row(2, f[0], "%s", f[1])
		}
	}
	if j.MaxAge > 0 {
		row(2, "max_age", "%v (leeway %v)", j.MaxAge, j.Leeway)
	}
	for _, k := range j.Keys {
		switch {
		case k.PEMFile != "":
			row(2, "key", "%s (pem_file %s)", k.ID, k.PEMFile)
		case k.SecretEnv != "":
			row(2, "key", "%s (secret_env %s)", k.ID, k.SecretEnv)
		case k.SecretFile != "":
			row(2, "key", "%s (secret_file %s)", k.ID, k.SecretFile)
		default:
			row(2, "key", "%s (inline)", k.ID)
		}
	}
}

// schemeFamily names c's scheme, with the family of a template.
func schemeFamily(c verify.Config) string {
	p := verify.Preset{Verify: c}
	return p.Family()
}

func usesMAC(c verify.Config) bool {
	return c.Scheme == verify.SchemeHMAC
}

func secretSource(s verify.SecretConfig, scheme string) string {
	id := s.ID
	if id == "" {
		id = "(position)"
	}
	var from string
	switch {
	case s.SecretEnv != "":
		from = "secret_env " + s.SecretEnv
	case s.SecretFile != "":
		from = "secret_file " + s.SecretFile
	case scheme == verify.SchemeEd25519 || scheme == verify.SchemeECDSAP256:
		from = "inline public key"
	default:
		from = "inline"
	}
	window := ""
	if !s.NotBefore.IsZero() {
		window += ", not_before " + s.NotBefore.UTC().Format(time.RFC3339)
	}
	if !s.NotAfter.IsZero() {
		window += ", not_after " + s.NotAfter.UTC().Format(time.RFC3339)
	}
	return id + " (" + from + window + ")"
}

// keyCoverage says whether the signature covers the route's first key
// source.
func keyCoverage(r *config.Route) string {
	if r.Key == nil || len(r.Key.Sources) == 0 {
		return "none"
	}
	s := r.Key.Sources[0]
	c := r.Verify
	switch {
	case !verify.Checks(c.Scheme):
		return "not signed: verification is off"
	case s.Kind == idkey.KindHeader:
		for _, h := range verify.SignedHeadersOf(c) {
			if http.CanonicalHeaderKey(h) == http.CanonicalHeaderKey(s.Name) {
				return "signed: the signature covers header " + s.Name
			}
		}
		return "NOT signed: header " + s.Name + " is not covered by the signature"
	case s.Kind == idkey.KindJSON || s.Kind == idkey.KindBody || s.Kind == idkey.KindForm || s.Kind == idkey.KindTemplate:
		if verify.SignsBody(c) && !hasUnsignedPart(s, c) {
			return "signed: the signature covers the body"
		}
		return "NOT signed: the signature does not cover the body's bytes"
	}
	return "NOT signed"
}

// hasUnsignedPart reports a template key part the signature does not
// cover (a header it does not sign, a query parameter).
func hasUnsignedPart(s idkey.Source, c verify.Config) bool {
	for _, p := range s.Parts {
		switch p.Kind {
		case idkey.KindQuery:
			return true
		case idkey.KindHeader:
			found := false
			for _, h := range verify.SignedHeadersOf(c) {
				found = found || http.CanonicalHeaderKey(h) == http.CanonicalHeaderKey(p.Name)
			}
			if !found {
				return true
			}
		}
	}
	return false
}

// bodyHashNote says, for a provider route keyed on the body's hash whose
// provider signs no timestamp, that this is all that protects it; "" for
// any other route.
func bodyHashNote(r *config.Route) string {
	if r.Provider == "" || len(r.Idempotency.Key) == 0 || r.Idempotency.Key[0] != "body:sha256" || !verify.Checks(r.Verify.Scheme) {
		return ""
	}
	if w, _, _ := verify.ReplayWindow(r.Verify); w > 0 {
		return ""
	}
	return fmt.Sprintf("route %q (provider %s): the provider signs no timestamp and no event id, so the key is the body's SHA-256: a copy of a delivery is refused as a duplicate for the retention (%v), and nothing refuses it after",
		r.Name, r.Provider, r.Retention)
}

func def(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func onOff(b bool, on, off string) string {
	if b {
		return on
	}
	return off
}
