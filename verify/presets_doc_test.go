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
		return "`X-Shopify-Hmac-Sha256: <base64>`"
	case SchemeStripe:
		return "`Stripe-Signature: t=<unix>,v1=<hex>`"
	case SchemeSlack:
		return "`X-Slack-Signature: v0=<hex>`"
	case SchemeStandardWebhooks:
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

func durationCell(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	return s
}
