package verify

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the provider table of ../docs/providers.md from the presets")

const (
	docPath    = "../docs/providers.md"
	tableBegin = "<!-- provider table: generated from verify/presets.go by `go test ./verify/ -run TestProvidersDoc -args -update-doc` -->"
	tableEnd   = "<!-- end of provider table -->"
)

// TestProvidersDoc: docs/providers.md lists every preset, as the table
// generated from the presets says.
func TestProvidersDoc(t *testing.T) {
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	begin, end := strings.Index(doc, tableBegin), strings.Index(doc, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the table markers", docPath)
	}
	want := tableBegin + "\n\n" + providerTable() + "\n" + tableEnd
	got := doc[begin : end+len(tableEnd)]
	if got == want {
		return
	}
	if *updateDoc {
		if err := os.WriteFile(docPath, []byte(doc[:begin]+want+doc[end+len(tableEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the provider table of %s is out of date; run go test ./verify/ -run TestProvidersDoc -args -update-doc", docPath)
}

// providerTable is the markdown table of every preset.
func providerTable() string {
	var b strings.Builder
	b.WriteString("| Provider | Scheme family | Signature header | Signed content | Key source, and why it is replay-safe | Tolerance | Provider's retries | Test vector |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range Presets() {
		c := p.Verify
		key := "`" + strings.Join(p.Key, "`, `") + "`"
		if p.AllowUnsignedKey {
			key += " (allow_unsigned_key)"
		}
		fmt.Fprintf(&b, "| `%s` (%s) | %s | %s | %s | %s. %s | %s | %s | %s |\n",
			p.Name, cell(p.Title), cell(p.Family()), cell(signatureCell(c)), cell(signedCell(c)),
			key, cell(p.KeyNote), cell(toleranceCell(c)), cell(p.Retries), cell(p.Vector))
	}
	return b.String()
}

func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}

func signatureCell(c Config) string {
	switch c.Scheme {
	case SchemeGitHub:
		return "`X-Hub-Signature-256: sha256=<hex>`"
	case SchemeShopify:
		return "`X-Shopify-Hmac-Sha256: <base64>`, or `Shopify-Hmac-Sha256` (Shopify Events; read first when present)"
	case SchemeStripe:
		return "`Stripe-Signature: t=<unix>,v1=<hex>`"
	case SchemeSlack:
		return "`X-Slack-Signature: v0=<hex>`"
	case SchemeStandardWebhooks:
		if strings.EqualFold(c.Header, "svix-signature") {
			return "`svix-signature: v1,<base64>` (with `svix-id`, `svix-timestamp`; the `webhook-*` names are accepted too)"
		}
		return "`webhook-signature` / `svix-signature: v1,<base64>`"
	case SchemeJWT:
		return "`" + c.JWT.Header + "`: " + strings.Join(c.JWT.Algorithms, " ") + " JWT"
	case SchemeToken:
		return "`" + c.Header + ": <token>`"
	}
	enc := "hex"
	if c.Encoding == "base64" {
		enc = "base64"
	}
	if c.Signature != "" {
		return "body field `" + strings.TrimPrefix(c.Signature, "json:") + "` (" + enc + ")"
	}
	f := c.Format
	if f == "" {
		f = "{signature}"
	}
	return "`" + c.Header + ": " + strings.ReplaceAll(f, "{signature}", "<"+enc+">") + "`"
}

func signedCell(c Config) string {
	alg := strings.ToUpper(c.Algorithm)
	if alg == "" {
		alg = "SHA256"
	}
	switch c.Scheme {
	case SchemeGitHub, SchemeShopify:
		return "HMAC-SHA256 of `{body}`"
	case SchemeStripe:
		return "HMAC-SHA256 of `{t}.{body}`"
	case SchemeSlack:
		return "HMAC-SHA256 of `v0:{timestamp}:{body}`"
	case SchemeStandardWebhooks:
		return "HMAC-SHA256 of `{id}.{timestamp}.{body}`"
	case SchemeToken:
		return "nothing: the token is sent as it is"
	case SchemeJWT:
		if c.JWT.BodyHashClaim != "" {
			return "the token's claims, with the body's SHA-256 in `" + c.JWT.BodyHashClaim + "`"
		}
		return "the token's claims only, not the body"
	case SchemeEd25519:
		return "Ed25519 of `" + c.Template + "`"
	case SchemeECDSAP256:
		return "ECDSA P-256 (SHA-256) of `" + c.Template + "`"
	}
	tpl := c.Template
	if tpl == "" {
		tpl = "{body}"
	}
	if c.AlgorithmHeader != "" && alg == "SHA1" {
		return "HMAC-SHA1, or HMAC-SHA256 where `" + c.AlgorithmHeader + "` names `algorithm=HMAC_SHA256`, of `" + tpl + "`"
	}
	return "HMAC-" + alg + " of `" + tpl + "`"
}

func toleranceCell(c Config) string {
	if c.Scheme == SchemeJWT {
		return "max_age " + durationCell(c.JWT.MaxAge)
	}
	w, _, _ := ReplayWindow(c)
	if w == 0 {
		return "none (no signed timestamp)"
	}
	where := "in the signature header"
	if c.Timestamp != "" {
		where = "`" + c.Timestamp + "`"
	}
	if c.Scheme == SchemeStripe || c.Scheme == SchemeSlack || c.Scheme == SchemeStandardWebhooks {
		where = "signed timestamp"
	}
	return durationCell(w) + ", both ways (" + where + ")"
}

// durationCell writes d as its non-zero hours, minutes and seconds: 10m,
// 1h30m, 24h, 1h0m30s as 1h30s (time.ParseDuration reads them all).
func durationCell(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		unit time.Duration
		sym  string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.unit; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.sym)
			d -= n * u.unit
		}
	}
	return b.String()
}

func TestDurationCell(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute: "1m", 3 * time.Minute: "3m", 5 * time.Minute: "5m", 10 * time.Minute: "10m",
		90 * time.Minute: "1h30m", time.Hour: "1h", 24 * time.Hour: "24h", 30 * time.Second: "30s",
		time.Hour + 30*time.Second: "1h30s", 20 * time.Minute: "20m", 100 * time.Hour: "100h",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := durationCell(d); got != want {
			t.Errorf("durationCell(%v) = %q, want %q", d, got, want)
		}
		if got, err := time.ParseDuration(durationCell(d)); err != nil || got != d {
			t.Errorf("durationCell(%v) = %q reads back as %v, %v", d, durationCell(d), got, err)
		}
	}
}
