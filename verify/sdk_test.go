package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The providers' own SDKs, run against the presets by
// TestPresetsAgainstProviderSDKs. testdata/sdk/package.json pins each
// package to an exact version and package-lock.json fixes the whole tree;
// testdata/sdk/sdk.mjs drives them; testdata/sdk/README.md lists what is
// checked. Each check names the preset, the npm package and the functions
// run: sign, the SDK function that makes the provider's headers (the preset
// must accept them), and verify, the one that checks a delivery (it must
// accept what the route's Signer makes, as `clawgate simulate -provider`
// sends it). Either may be empty where the SDK has no such function.
type sdkCheck struct {
	preset, pkg, sign, verify string
	// sigHeader carries the signature, whose one changed character must fail.
	sigHeader string
	// compactOnly: the SDK verifies JSON.stringify of the parsed body, not
	// the raw body, so only a compact body is compared.
	compactOnly bool
	// algorithm is what the SDK signs with (Twilio: HMAC_SHA1 when empty).
	// The SDK's verify reads it from the delivery's
	// X-Twilio-Webhooks-Signature-Settings, as twilio.webhook() does.
	algorithm string
}

var sdkChecks = []sdkCheck{
	{preset: "clerk", pkg: "@clerk/backend", sign: "svix Webhook.sign (Clerk sends through Svix)", verify: "verifyWebhook (@clerk/backend/webhooks)", sigHeader: "Svix-Signature"},
	{preset: "coinbase-commerce", pkg: "coinbase-commerce-node", sign: "Webhook.computeSignature", verify: "Webhook.verifySigHeader", sigHeader: "X-CC-Webhook-Signature"},
	{preset: "discord", pkg: "discord-interactions", verify: "verifyKey", sigHeader: "X-Signature-Ed25519"},
	{preset: "github", pkg: "@octokit/webhooks-methods", sign: "sign", verify: "verify", sigHeader: "X-Hub-Signature-256"},
	{preset: "google-pubsub", pkg: "google-auth-library", verify: "OAuth2Client.verifySignedJwtWithCertsAsync (what verifyIdToken runs with Google's certificates)", sigHeader: "Authorization"},
	{preset: "hubspot", pkg: "@hubspot/api-client", sign: "Signature.getSignature (v3)", verify: "Signature.isValid (v3)", sigHeader: "X-HubSpot-Signature-v3"},
	{preset: "linear", pkg: "@linear/sdk", verify: "LinearWebhookClient.verify (@linear/sdk/webhooks)", sigHeader: "Linear-Signature"},
	{preset: "paddle", pkg: "@paddle/paddle-node-sdk", verify: "Webhooks.isSignatureValid (what Webhooks.unmarshal checks)", sigHeader: "Paddle-Signature"},
	{preset: "razorpay", pkg: "razorpay", verify: "Razorpay.validateWebhookSignature", sigHeader: "X-Razorpay-Signature"},
	{preset: "resend", pkg: "resend", sign: "svix Webhook.sign (Resend sends through Svix)", verify: "Resend webhooks.verify", sigHeader: "Svix-Signature"},
	{preset: "sendgrid", pkg: "@sendgrid/eventwebhook", verify: "EventWebhook.verifySignature", sigHeader: "X-Twilio-Email-Event-Webhook-Signature"},
	{preset: "shopify", pkg: "@shopify/shopify-api", verify: "shopifyApi().webhooks.validate", sigHeader: "X-Shopify-Hmac-Sha256"},
	{preset: "slack", pkg: "@slack/bolt", verify: "verifySlackRequest", sigHeader: "X-Slack-Signature"},
	{preset: "square", pkg: "square", verify: "WebhooksHelper.verifySignature", sigHeader: "X-Square-Hmacsha256-Signature"},
	{preset: "stripe", pkg: "stripe", sign: "webhooks.generateTestHeaderString", verify: "webhooks.constructEvent", sigHeader: "Stripe-Signature"},
	{preset: "twilio", pkg: "twilio", sign: "getExpectedTwilioSignature", verify: "validateRequest", sigHeader: "X-Twilio-Signature"},
	{preset: "zoom", pkg: "@zoom/rivet", verify: "AwsLambdaReceiver (@zoom/rivet/meetings), which runs CommonHttpRequest.isEventVerified", sigHeader: "X-Zm-Signature", compactOnly: true},
}

// sdkHelpers are the packages a check runs beside its provider's own: Clerk
// and Resend publish no signing code, so Svix's signs what Svix sends.
var sdkHelpers = map[string]string{"clerk": "svix", "resend": "svix"}

// noOfficialSDK says, for each preset no SDK checks, why: the npm registry
// was searched for the provider's official package and its source read.
var noOfficialSDK = map[string]string{
	"bitbucket":    "Atlassian publishes no Bitbucket Cloud webhook SDK for Node.js",
	"calendly":     "Calendly publishes no SDK on npm",
	"dropbox":      "dropbox (the official SDK) has no webhook signature code",
	"gitlab":       "a token, no signature; GitLab publishes no Node.js SDK (gitbeaker is community-maintained)",
	"intercom":     "intercom-client (the official SDK) has no webhook signature code",
	"lemonsqueezy": "@lemonsqueezy/lemonsqueezy.js (the official SDK) has no webhook signature code",
	"mailgun":      "mailgun.js (the official SDK) has no webhook signature code",
	"pagerduty":    "@pagerduty/pdjs has no webhook signature code; the vector is from the official go-pagerduty's test",
	"plaid":        "plaid (the official SDK) has no webhook verification code; Plaid's docs verify with a JWT library",
	"sentry":       "Sentry publishes no integration-platform webhook code on npm",
	"telegram":     "a token, no signature; Telegram publishes no Node.js SDK",
	"twitch":       "Twitch publishes no Node.js SDK (@twurple/eventsub-http is community-maintained)",
	"typeform":     "@typeform/api-client (the official SDK) has no webhook signature code",
	"vercel":       "@vercel/sdk (the official SDK) has no webhook signature code",
	"woocommerce":  "@woocommerce/woocommerce-rest-api (the official client) has no webhook signature code",
}

// sdkPublicURL is the route's public_url in the checks: the URL the
// provider calls, which the URL-signed providers sign.
const sdkPublicURL = "https://gateway.example.com/hooks/provider?tenant=7&x=1"

// TestPresetSDKCoverage: every preset has an SDK check or says why it has
// none, and the checks are recorded in testdata/sdk/README.md and the
// vectors' sources with the exact package versions pinned.
func TestPresetSDKCoverage(t *testing.T) {
	pinned := sdkPinned(t)
	readme, err := os.ReadFile("testdata/sdk/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, v := range loadVectors(t) {
		sources[v.Provider] = v.Source
	}
	checked := map[string]bool{}
	for _, c := range sdkChecks {
		checked[c.preset] = true
		if _, ok := LookupPreset(c.preset); !ok {
			t.Errorf("SDK check for %q, which is no preset", c.preset)
		}
		if _, ok := noOfficialSDK[c.preset]; ok {
			t.Errorf("%s: has an SDK check and is listed without one", c.preset)
		}
		if c.verify == "" && c.sign == "" {
			t.Errorf("%s: the check runs no SDK function", c.preset)
		}
		pkgs := []string{c.pkg}
		if h := sdkHelpers[c.preset]; h != "" {
			pkgs = append(pkgs, h)
		}
		for _, pkg := range pkgs {
			ver, ok := pinned[pkg]
			if !ok {
				t.Errorf("%s: %s is not in testdata/sdk/package.json", c.preset, pkg)
				continue
			}
			at := pkg + "@" + ver
			if !bytes.Contains(readme, []byte("`"+at+"`")) {
				t.Errorf("%s: testdata/sdk/README.md does not name `%s`", c.preset, at)
			}
			if !strings.Contains(sources[c.preset], at) {
				t.Errorf("%s: the vector's source in testdata/provider_vectors.json does not name %s", c.preset, at)
			}
		}
		if p, ok := LookupPreset(c.preset); ok {
			var ats []string
			for _, pkg := range pkgs {
				ats = append(ats, pkg+"@"+pinned[pkg])
			}
			if want := "SDK: " + strings.Join(ats, ", "); !strings.Contains(p.Vector, want) {
				t.Errorf("%s: the preset's Vector does not say %q", c.preset, want)
			}
		}
		if !bytes.Contains(readme, []byte("| `"+c.preset+"` |")) {
			t.Errorf("testdata/sdk/README.md has no row for %s", c.preset)
		}
	}
	for _, name := range PresetNames() {
		if !checked[name] && noOfficialSDK[name] == "" {
			t.Errorf("preset %s has no SDK check and no reason in noOfficialSDK", name)
		}
	}
	for name := range noOfficialSDK {
		if _, ok := LookupPreset(name); !ok {
			t.Errorf("noOfficialSDK lists %q, which is no preset", name)
		}
	}
}

// TestPresetsAgainstProviderSDKs runs the providers' own SDK code against
// each preset it covers, in both directions where the SDK allows:
//   - the SDK signs a delivery: the preset's verifier accepts it, and
//     refuses it (mismatch) once a byte of the body or a character of the
//     signature changes;
//   - the route's Signer signs a delivery, as `clawgate simulate -provider`
//     does: the SDK accepts it, and refuses it once a byte of the body (where
//     the scheme signs the body) or a character of the signature changes.
//
// Each delivery is tried with the preset's sample body and with one that has
// non-ASCII text, escapes and whitespace. The SDKs are installed with npm ci
// from testdata/sdk/package-lock.json into the user's cache directory; the
// test skips only when node or npm is missing or the install fails.
func TestPresetsAgainstProviderSDKs(t *testing.T) {
	node := sdkStart(t)
	for _, c := range sdkChecks {
		t.Run(c.preset, func(t *testing.T) {
			p, ok := LookupPreset(c.preset)
			if !ok {
				t.Fatalf("no preset %q", c.preset)
			}
			route := sdkRouteFor(t, p)
			for _, b := range sdkBodies(p, c) {
				if c.sign != "" {
					t.Run(b.name+"/sdk-signs", func(t *testing.T) { sdkSignedByProvider(t, node, c, p, route, b) })
				}
				if c.verify != "" {
					t.Run(b.name+"/sdk-verifies", func(t *testing.T) { sdkVerifiesRoute(t, node, c, p, route, b) })
				}
			}
		})
	}

	// Twilio's SharedKey webhooks are signed with HMAC-SHA256 (the SDK's
	// algorithm HMAC_SHA256) and announced by
	// X-Twilio-Webhooks-Signature-Settings, which the preset reads: the SDK
	// signs them, the preset verifies them. A route that writes algorithm:
	// sha256 (refusing HMAC-SHA1) verifies them too, and its Signer
	// announces the algorithm as Twilio does: both ways.
	t.Run("twilio-sharedkey-sha256", func(t *testing.T) {
		p, _ := LookupPreset("twilio")
		c := sdkCheck{preset: "twilio", pkg: "twilio", sign: "getExpectedTwilioSignature HMAC_SHA256",
			verify: "validateRequest HMAC_SHA256", sigHeader: "X-Twilio-Signature", algorithm: "HMAC_SHA256"}
		route := sdkRouteFor(t, p)
		for _, b := range sdkBodies(p, c) {
			t.Run(b.name+"/sdk-signs", func(t *testing.T) { sdkSignedByProvider(t, node, c, p, route, b) })
		}
		t.Run("settings-header", func(t *testing.T) { sdkTwilioSettings(t, node, p, route) })
		route.cfg.Algorithm = "sha256"
		for _, b := range sdkBodies(p, c) {
			t.Run("algorithm-sha256/"+b.name+"/sdk-signs", func(t *testing.T) { sdkSignedByProvider(t, node, c, p, route, b) })
			t.Run("algorithm-sha256/"+b.name+"/sdk-verifies", func(t *testing.T) { sdkVerifiesRoute(t, node, c, p, route, b) })
		}
	})

	// A form that repeats a name: Twilio signs each distinct value once,
	// sorted. The SDK signs such forms and the preset verifies them; the
	// route's Signer signs them and the SDK verifies them.
	t.Run("twilio-repeated-fields", func(t *testing.T) {
		p, _ := LookupPreset("twilio")
		var c sdkCheck
		for _, c = range sdkChecks {
			if c.preset == "twilio" {
				break
			}
		}
		route := sdkRouteFor(t, p)
		for _, form := range []string{
			"A=1&A=1&MessageSid=SMSdk7QpX2",
			"A=2&A=1&A=2&A=1&MessageSid=SMSdk7QpX2",
			"%41=1&A=%31&MessageSid=SMSdk7QpX2",
			"To=%2B15005550009&To=%2B15005550009&To=%2B15005550001&MessageSid=SMSdk7QpX2",
			"Body=a+b&Body=a%20b&Body=a&MessageSid=SMSdk7QpX2&Empty=&Empty=&Empty",
			"MediaUrl=https%3A%2F%2Fx%2F1&MediaUrl=https%3A%2F%2Fx%2F1&Body=%C3%A9&Body=e&MessageSid=SMSdk7QpX2",
		} {
			b := sdkFormBody(form)
			t.Run(form+"/sdk-signs", func(t *testing.T) { sdkSignedByProvider(t, node, c, p, route, b) })
			t.Run(form+"/sdk-verifies", func(t *testing.T) { sdkVerifiesRoute(t, node, c, p, route, b) })
		}
	})

	// Shopify Events deliveries carry the HMAC in Shopify-Hmac-Sha256 (no
	// X- prefix), which @shopify/shopify-api's webhooks.validate reads
	// before X-Shopify-Hmac-Sha256; so does the preset.
	t.Run("shopify-events-header", func(t *testing.T) { sdkShopifyEvents(t, node) })

	// Where the SDK and the preset are known to differ. Each case skips
	// with what differs while it still does, and fails once they agree, so
	// that the case moves to the checks above.
	for _, k := range sdkKnownDisagreements {
		t.Run("known-disagreement/"+k.name, func(t *testing.T) {
			agree, detail := k.run(t, node)
			if agree {
				t.Errorf("the preset and the SDK now agree (%s): make this case a regular check", detail)
				return
			}
			t.Skipf("KNOWN DISAGREEMENT: %s\n%s", k.what, detail)
		})
	}
}

// sdkKnownDisagreements are the cases where a provider's SDK and the
// preset still disagree, each kept on purpose: what the provider's servers
// send is what the preset follows.
var sdkKnownDisagreements = []struct {
	name, what string
	run        func(t *testing.T, node *sdkNode) (agree bool, detail string)
}{
	{
		name: "twilio-astral-field-order",
		what: "twilio: field names (and values) outside the Basic Multilingual Plane. Twilio's docs sort the fields in " +
			"\"Unix-style case-sensitive sorting order\", byte order, which on UTF-8 is code-point order; {sorted_form} sorts so, " +
			"as twilio-python (sorted()) and twilio-go (sort.Strings) do. twilio (JavaScript) sorts UTF-16 code units " +
			"(Array.prototype.sort), as twilio-java (String.compareTo) and twilio-csharp (StringComparer.Ordinal) do. The official " +
			"SDKs disagree among themselves, so the preset keeps the documented order. The two orders differ only between names " +
			"from U+E000 to U+FFFF and names at U+10000 and above, which Twilio's own parameter names never use",
		run: func(t *testing.T, node *sdkNode) (bool, string) {
			return sdkPresetAcceptsSDK(t, node, "twilio", "%F0%9F%9A%80=5&%EF%BD%81=6&MessageSid=SMSdk7QpX2", "")
		},
	},
	{
		name: "zoom-non-compact-json",
		what: "zoom: @zoom/rivet, Zoom's Node.js library, verifies HMAC(\"v0:{ts}:\" + JSON.stringify(JSON.parse(body))), " +
			"re-serialising the body, as Zoom's own sample does. Zoom's servers sign the raw body they send (its docs: " +
			"\"v0:{timestamp}:{raw request body}\"), and the preset verifies exactly that, keeping it: re-serialising would make the " +
			"signature cover bytes other than those forwarded. The two agree on compact JSON in JavaScript's serialisation, which " +
			"is what Zoom sends, and differ on spaces, \\u escapes or numbers such as 1.0",
		run: func(t *testing.T, node *sdkNode) (bool, string) {
			p, _ := LookupPreset("zoom")
			r := sdkRouteFor(t, p)
			body := []byte(`{"event": "meeting.started", "payload": {"topic": "caf\u00e9"}}`)
			s, err := NewSigner(r.cfg, r.env, r.signKey)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"Content-Type": {"application/json"}}
			if err := s.Sign(h, body, time.Now()); err != nil {
				t.Fatal(err)
			}
			resp := node.call(t, sdkRequest{Provider: "zoom", Op: "verify", Secret: r.sdkSecret, Body: string(body), Headers: sdkFlat(h)})
			return resp.Valid, fmt.Sprintf("body %s: SDK valid %v (%s)", body, resp.Valid, resp.Detail)
		},
	},
}

// sdkFormBody is a form body holding the event id Sdk7QpX2, for the
// checks.
func sdkFormBody(form string) sdkBody {
	b := sdkBody{name: form, typ: formType, body: []byte(form)}
	j := bytes.Index(b.body, []byte("Sdk7QpX2"))
	b.changed = append([]byte(nil), b.body...)
	b.changed[j] = 'X'
	return b
}

// sdkTwilioSettings: for each X-Twilio-Webhooks-Signature-Settings a
// delivery may carry, the SDK (reading the algorithm from it, as
// twilio.webhook() does) and the preset accept or refuse the same
// deliveries.
func sdkTwilioSettings(t *testing.T, node *sdkNode, p Preset, r sdkRoute) {
	const absent = "(absent)"
	body := "MessageSid=SMSdk7QpX2&To=%2B15005550009&Body=caf%C3%A9"
	for _, tt := range []struct {
		signedWith, settings string
		valid                bool
	}{
		{"HMAC_SHA1", absent, true},
		{"HMAC_SHA1", "key=webhooks_sharedkey_1,algorithm=HMAC_SHA1", true},
		{"HMAC_SHA256", "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256", true},
		{"HMAC_SHA256", "algorithm=hmac_sha256", true},
		{"HMAC_SHA256", " key = k , algorithm = HMAC_SHA256 ", true},
		{"HMAC_SHA256", "algorithm=,algorithm=HMAC_SHA256", true},
		{"HMAC_SHA1", "key=webhooks_sharedkey_1", true},
		{"HMAC_SHA1", "", true},
		{"HMAC_SHA256", absent, false},
		{"HMAC_SHA256", "key=webhooks_sharedkey_1", false},
		{"HMAC_SHA256", "algorithm=HMAC_SHA1", false},
		{"HMAC_SHA1", "algorithm=HMAC_SHA256", false},
		{"HMAC_SHA256", "algorithm=HMAC_SHA512", false},
		{"HMAC_SHA1", "algorithm=MD5", false},
		{"HMAC_SHA256", "Algorithm=HMAC_SHA256", false},
	} {
		t.Run(tt.signedWith+"/"+tt.settings, func(t *testing.T) {
			resp := node.call(t, sdkRequest{Provider: "twilio", Op: "sign", Secret: r.sdkSecret, Body: body,
				URL: sdkPublicURL, Algorithm: tt.signedWith})
			h := http.Header{"Content-Type": {formType}}
			h.Set("X-Twilio-Signature", resp.Headers["X-Twilio-Signature"])
			if tt.settings != absent {
				h.Set("X-Twilio-Webhooks-Signature-Settings", tt.settings)
			}
			sdk := node.call(t, sdkRequest{Provider: "twilio", Op: "verify", Secret: r.sdkSecret, Body: body,
				Headers: sdkFlat(h), URL: sdkPublicURL})
			_, err := mustNew(t, r.cfg, r.env).Verify(h, []byte(body), time.Now())
			if sdk.Valid != tt.valid || (err == nil) != tt.valid {
				t.Errorf("signed with %s, settings %q: SDK valid %v (%s), preset %v; want valid %v",
					tt.signedWith, tt.settings, sdk.Valid, sdk.Detail, err, tt.valid)
			}
		})
	}
}

// sdkShopifyEvents: a delivery with its HMAC in Shopify-Hmac-Sha256 (and
// Shopify Events' other headers), alone or beside X-Shopify-Hmac-Sha256,
// valid or not: webhooks.validate and the preset agree on each.
func sdkShopifyEvents(t *testing.T, node *sdkNode) {
	p, _ := LookupPreset("shopify")
	r := sdkRouteFor(t, p)
	body, _ := p.SampleBody("Sdk7QpX2", time.Now())
	s, err := NewSigner(r.cfg, r.env, r.signKey)
	if err != nil {
		t.Fatal(err)
	}
	signed := http.Header{}
	if err := s.Sign(signed, body, time.Now()); err != nil {
		t.Fatal(err)
	}
	good := signed.Get("X-Shopify-Hmac-Sha256")
	bad := sdkFlipSignature(good)
	const absent = ""
	for _, tt := range []struct {
		name, events, webhooks string
		valid                  bool
	}{
		{"events", good, absent, true},
		{"events-changed", bad, absent, false},
		{"both", good, good, true},
		{"events-read-first", good, bad, true},
		{"events-read-first-changed", bad, good, false},
		{"webhooks", absent, good, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tt.events != absent {
				h.Set("Shopify-Hmac-Sha256", tt.events)
				for k, v := range map[string]string{"Topic": "orders/updated", "Shop-Domain": "example.myshopify.com",
					"Api-Version": "2025-10", "Webhook-Id": "w-1", "Event-Id": "e-1", "Handle": "orders-updated",
					"Action": "update", "Resource-Id": "gid://shopify/Order/1", "Triggered-At": "2026-01-01T00:00:00Z"} {
					h.Set("Shopify-"+k, v)
				}
			}
			if tt.webhooks != absent {
				h.Set("X-Shopify-Hmac-Sha256", tt.webhooks)
			}
			resp := node.call(t, sdkRequest{Provider: "shopify", Op: "verify", Secret: r.sdkSecret, Body: string(body), Headers: sdkFlat(h)})
			id, err := mustNew(t, r.cfg, r.env).Verify(h, body, time.Now())
			if resp.Valid != tt.valid || (err == nil) != tt.valid {
				t.Errorf("SDK valid %v (%s), preset %v; want valid %v", resp.Valid, resp.Detail, err, tt.valid)
			}
			if err == nil && id != "sdk" {
				t.Errorf("secret id %q, want sdk", id)
			}
			if tt.valid {
				changed := bytes.Replace(body, []byte("Sdk7QpX2"), []byte("Xdk7QpX2"), 1)
				if resp := node.call(t, sdkRequest{Provider: "shopify", Op: "verify", Secret: r.sdkSecret, Body: string(changed),
					Headers: sdkFlat(h)}); resp.Valid {
					t.Error("the SDK accepts a changed body")
				}
				if _, err := mustNew(t, r.cfg, r.env).Verify(h, changed, time.Now()); Reason(err) != "mismatch" || err == nil {
					t.Errorf("a changed body: %v, want mismatch", err)
				}
			}
		})
	}
}

// sdkPresetAcceptsSDK has the SDK sign body (a form for Twilio) with
// algorithm and reports whether the preset accepts the delivery.
func sdkPresetAcceptsSDK(t *testing.T, node *sdkNode, preset, body, algorithm string) (bool, string) {
	t.Helper()
	p, _ := LookupPreset(preset)
	r := sdkRouteFor(t, p)
	resp := node.call(t, sdkRequest{Provider: preset, Op: "sign", Secret: r.sdkSecret, Body: body,
		URL: sdkPublicURL, Algorithm: algorithm, Timestamp: strconv.FormatInt(time.Now().Unix(), 10)})
	h := http.Header{"Content-Type": {formType}}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	_, err := mustNew(t, r.cfg, r.env).Verify(h, []byte(body), time.Now())
	return err == nil, fmt.Sprintf("body %q, SDK headers %v: preset: %v", body, resp.Headers, err)
}

// sdkSignedByProvider: the SDK signs body; the preset's verifier must accept
// the delivery and refuse it changed.
func sdkSignedByProvider(t *testing.T, node *sdkNode, c sdkCheck, p Preset, r sdkRoute, b sdkBody) {
	at := time.Now().Truncate(time.Second)
	ts := strconv.FormatInt(at.Unix(), 10)
	if p.Verify.TimestampFormat == "unix_ms" {
		at = time.Now().Truncate(time.Millisecond)
		ts = strconv.FormatInt(at.UnixMilli(), 10)
	}
	sum := sha256.Sum256(b.body)
	resp := node.call(t, sdkRequest{
		Provider: p.Name, Op: "sign", Secret: r.sdkSecret, Body: string(b.body),
		Timestamp: ts, URL: sdkPublicURL, MsgID: "msg_" + hex.EncodeToString(sum[:12]), Algorithm: c.algorithm,
	})
	if len(resp.Headers) == 0 {
		t.Fatalf("%s %s returned no headers", c.pkg, c.sign)
	}
	h := http.Header{"Content-Type": {b.typ}}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	v := mustNew(t, r.cfg, r.env)
	id, err := v.Verify(h, b.body, at)
	if err != nil {
		t.Fatalf("%s %s signed a delivery the preset refuses: %v\nheaders: %v\nbody: %q", c.pkg, c.sign, err, h, b.body)
	}
	if id != "sdk" {
		t.Errorf("secret id %q, want sdk", id)
	}
	if _, err := v.Verify(h, b.changed, at); Reason(err) != "mismatch" || err == nil {
		t.Errorf("a changed body: %v, want mismatch", err)
	}
	h2 := h.Clone()
	h2.Set(c.sigHeader, sdkFlipSignature(h.Get(c.sigHeader)))
	if _, err := v.Verify(h2, b.body, at); Reason(err) != "mismatch" || err == nil {
		t.Errorf("a changed signature %q: %v, want mismatch", h2.Get(c.sigHeader), err)
	}
}

// sdkVerifiesRoute: the route's Signer signs body; the SDK must accept the
// delivery and refuse it changed.
func sdkVerifiesRoute(t *testing.T, node *sdkNode, c sdkCheck, p Preset, r sdkRoute, b sdkBody) {
	s, err := NewSigner(r.cfg, r.env, r.signKey)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	h := http.Header{"Content-Type": {b.typ}}
	if err := s.Sign(h, b.body, at); err != nil {
		t.Fatal(err)
	}
	if r.cfg.Scheme == SchemeStandardWebhooks && strings.EqualFold(r.cfg.Header, "svix-signature") {
		// Svix sends svix-* headers, and so does the route's Signer.
		for _, n := range []string{"Id", "Timestamp", "Signature"} {
			if h.Get("Svix-"+n) == "" || h.Get("Webhook-"+n) != "" {
				t.Errorf("the Signer sent %v, want svix-* headers only, as Svix sends", h)
				break
			}
		}
	}
	v := mustNew(t, r.cfg, r.env)
	if _, err := v.Verify(h, b.body, at); err != nil {
		t.Fatalf("the route refuses its own Signer's delivery: %v", err)
	}
	req := sdkRequest{Provider: p.Name, Op: "verify", Secret: r.sdkSecret, Body: string(b.body),
		Headers: sdkFlat(h), URL: sdkPublicURL, KeyID: r.keyID, Audience: r.cfg.JWT.Audience}
	if resp := node.call(t, req); !resp.Valid {
		t.Fatalf("%s %s refuses the route's delivery: %s\nheaders: %v\nbody: %q", c.pkg, c.verify, resp.Detail, h, b.body)
	}
	if SignsBody(r.cfg) {
		changed := req
		changed.Body = string(b.changed)
		if resp := node.call(t, changed); resp.Valid {
			t.Errorf("%s %s accepts a changed body", c.pkg, c.verify)
		}
	}
	flipped := req
	h2 := h.Clone()
	h2.Set(c.sigHeader, sdkFlipSignature(h.Get(c.sigHeader)))
	flipped.Headers = sdkFlat(h2)
	if resp := node.call(t, flipped); resp.Valid {
		t.Errorf("%s %s accepts a changed signature %q", c.pkg, c.verify, h2.Get(c.sigHeader))
	}
}

// sdkBody is one delivery body; changed differs from it in one byte of
// the event id.
type sdkBody struct {
	name, typ     string
	body, changed []byte
}

// sdkBodies returns the preset's sample body (its time fields at now) and
// one with non-ASCII text, JSON escapes and whitespace (for Twilio: a form
// with percent-encoded UTF-8, '+' for spaces, a repeated name and an empty
// value).
func sdkBodies(p Preset, c sdkCheck) []sdkBody {
	const id = "Sdk7QpX2"
	sample, typ := p.SampleBody(id, time.Now())
	bodies := []sdkBody{{name: "sample", typ: typ, body: sample}}
	if !c.compactOnly {
		var odd []byte
		if typ == formType {
			odd = []byte("Body=Caf%C3%A9+%E2%9C%93+%26+more&MessageSid=SM" + id +
				"&To=%2B15005550009&To=%2B15005550001&From=%2B15005550006&Empty=&NumMedia=0")
		} else {
			i := bytes.IndexByte(sample, '{') + 1
			odd = append(append(append([]byte(nil), sample[:i]...),
				"\n  \"note\": \"café ✓ 🚀 \\u00e9 \\\"q\\\" <&>\\n\",\n  "...), sample[i:]...)
		}
		bodies = append(bodies, sdkBody{name: "unicode", typ: typ, body: odd})
	}
	for i := range bodies {
		b := &bodies[i]
		j := bytes.Index(b.body, []byte(id))
		b.changed = append([]byte(nil), b.body...)
		b.changed[j] = 'X'
	}
	return bodies
}

// sdkRoute is a preset completed as a route would write it.
type sdkRoute struct {
	cfg       Config
	env       Env
	signKey   []byte // the route's Signer's key, where it is not the secret
	sdkSecret string // what the SDK is given: the secret, or the public key
	keyID     string
}

func sdkRouteFor(t *testing.T, p Preset) sdkRoute {
	t.Helper()
	r := sdkRoute{cfg: p.Verify, env: Env{Dir: t.TempDir(), Getenv: func(string) string { return "" }, Now: time.Now()}}
	r.cfg.PublicURL = sdkPublicURL
	switch r.cfg.Scheme {
	case SchemeStandardWebhooks:
		r.sdkSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("clawgate-sdk-check-secret-0123456"))
	case SchemeStripe:
		r.sdkSecret = "whsec_clawgateSdkCheck0123456789abcdefABCDEF"
	case SchemeEd25519:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		r.sdkSecret = hex.EncodeToString(pub)
		r.signKey = []byte(hex.EncodeToString(priv.Seed()))
	case SchemeECDSAP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		r.sdkSecret = base64.StdEncoding.EncodeToString(der)
		r.signKey = sdkPEM(t, "PRIVATE KEY", k)
	case SchemeJWT:
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		if err := os.WriteFile(filepath.Join(r.env.Dir, "google.pem"), pub, 0o600); err != nil {
			t.Fatal(err)
		}
		r.keyID = "clawgate-sdk-key-1"
		r.sdkSecret = string(pub)
		r.signKey = sdkPEM(t, "PRIVATE KEY", k)
		r.cfg.JWT.JWKSURL = "" // Google's keys are not fetched: the test key stands for them
		r.cfg.JWT.Keys = []JWTKeyConfig{{ID: r.keyID, PEMFile: "google.pem"}}
		r.cfg.JWT.Audience = "https://gateway.example.com/hooks/pubsub"
		return r
	default:
		r.sdkSecret = "clawgate-sdk-check-secret-0123456789"
		if p.Name == "paddle" {
			r.sdkSecret = "pdl_ntfset_01jsdkcheck0000000000000000_clawgateSdkCheck0123456789"
		}
	}
	r.cfg.Secrets = []SecretConfig{{ID: "sdk", Secret: r.sdkSecret}}
	return r
}

func sdkPEM(t *testing.T, typ string, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// sdkFlipSignature changes one character of the signature in a header
// value, ten from its end (inside the signature in every format checked),
// to another that hex and base64 both allow.
func sdkFlipSignature(v string) string {
	b := []byte(v)
	i := len(b) - 10
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

func sdkFlat(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = v[0]
	}
	return out
}

// sdkPinned returns the exact versions testdata/sdk/package.json pins.
func sdkPinned(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("testdata/sdk/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	for name, ver := range pkg.Dependencies {
		if strings.ContainsAny(ver, "^~<>=*| xX") || strings.Count(ver, ".") != 2 {
			t.Errorf("testdata/sdk/package.json: %s %q is not an exact version", name, ver)
		}
	}
	return pkg.Dependencies
}

// sdkRequest and sdkResponse are one exchange with testdata/sdk/sdk.mjs.
type sdkRequest struct {
	ID        int               `json:"id"`
	Provider  string            `json:"provider"`
	Op        string            `json:"op"`
	Secret    string            `json:"secret"`
	Body      string            `json:"body"`
	Headers   map[string]string `json:"headers,omitempty"`
	Timestamp string            `json:"timestamp,omitempty"`
	URL       string            `json:"url,omitempty"`
	MsgID     string            `json:"msg_id,omitempty"`
	KeyID     string            `json:"key_id,omitempty"`
	Audience  string            `json:"audience,omitempty"`
	Algorithm string            `json:"algorithm,omitempty"`
}

type sdkResponse struct {
	ID      int               `json:"id"`
	Headers map[string]string `json:"headers"`
	Valid   bool              `json:"valid"`
	Detail  string            `json:"detail"`
	Error   string            `json:"error"`
}

// sdkNode is the running sdk.mjs.
type sdkNode struct {
	mu     sync.Mutex
	in     io.Writer
	out    *bufio.Scanner
	stderr *sdkLog
	next   int
}

func (n *sdkNode) call(t *testing.T, req sdkRequest) sdkResponse {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	req.ID = n.next
	line, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.in.Write(append(line, '\n')); err != nil {
		t.Fatalf("sdk.mjs: %v\n%s", err, n.stderr)
	}
	if !n.out.Scan() {
		t.Fatalf("sdk.mjs stopped: %v\n%s", n.out.Err(), n.stderr)
	}
	var resp sdkResponse
	if err := json.Unmarshal(n.out.Bytes(), &resp); err != nil {
		t.Fatalf("sdk.mjs answered %q: %v", n.out.Bytes(), err)
	}
	if resp.ID != req.ID {
		t.Fatalf("sdk.mjs answered request %d, want %d", resp.ID, req.ID)
	}
	if resp.Error != "" {
		t.Fatalf("sdk.mjs: %s %s: %s", req.Provider, req.Op, resp.Error)
	}
	return resp
}

// sdkLog collects node's stderr for failure messages.
type sdkLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *sdkLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *sdkLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sdkStart installs the SDKs (once per package-lock.json) and starts
// sdk.mjs, which it stops when the test ends. It skips the test when node
// or npm is missing or the install fails.
func sdkStart(t *testing.T) *sdkNode {
	t.Helper()
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIP: node is not on PATH: the providers' SDK checks need Node.js 20 or later and npm")
	}
	npmBin, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("SKIP: npm is not on PATH: the providers' SDK checks need Node.js 20 or later and npm")
	}
	out, err := exec.Command(nodeBin, "--version").Output()
	if err != nil {
		t.Skipf("SKIP: %s --version: %v", nodeBin, err)
	}
	if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0]); major < 20 {
		t.Skipf("SKIP: node %s is older than 20, which the providers' SDKs need", strings.TrimSpace(string(out)))
	}
	dir := sdkInstall(t, npmBin)

	script, err := os.ReadFile("testdata/sdk/sdk.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// The script runs from the install directory, where its imports resolve.
	f, err := os.CreateTemp(dir, "sdk-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := f.Name()
	t.Cleanup(func() { os.Remove(scriptPath) })
	if _, err := f.Write(script); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, nodeBin, scriptPath)
	cmd.Dir = dir
	stderr := &sdkLog{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		cancel()
	})
	n := &sdkNode{in: stdin, out: bufio.NewScanner(stdout), stderr: stderr}
	n.out.Buffer(make([]byte, 64<<10), 4<<20)
	if !n.out.Scan() {
		t.Fatalf("sdk.mjs did not start: %v\n%s", n.out.Err(), stderr)
	}
	var ready struct {
		Ready      bool              `json:"ready"`
		Versions   map[string]string `json:"versions"`
		LoadErrors map[string]string `json:"load_errors"`
	}
	if err := json.Unmarshal(n.out.Bytes(), &ready); err != nil || !ready.Ready {
		t.Fatalf("sdk.mjs: %q (%v)\n%s", n.out.Bytes(), err, stderr)
	}
	for name, e := range ready.LoadErrors {
		t.Errorf("sdk.mjs could not load %s: %s", name, e)
	}
	for pkg, ver := range sdkPinned(t) {
		if got := ready.Versions[pkg]; got != ver {
			t.Errorf("installed %s@%s, package.json pins %s", pkg, got, ver)
		}
	}
	t.Logf("provider SDKs from %s (node %s)", dir, strings.TrimSpace(string(out)))
	return n
}

// sdkInstall runs npm ci for testdata/sdk into a cache directory keyed by
// package.json and package-lock.json, unless a completed install is there,
// and returns it.
func sdkInstall(t *testing.T, npmBin string) string {
	t.Helper()
	pkg, err := os.ReadFile("testdata/sdk/package.json")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile("testdata/sdk/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(append(pkg, 0), lock...))
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	root := filepath.Join(base, "clawgate-sdk-test")
	dir := filepath.Join(root, hex.EncodeToString(sum[:8]))
	const marker = ".installed"
	if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
		return dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Skipf("SKIP: cannot create the SDK cache %s: %v", root, err)
	}
	tmp, err := os.MkdirTemp(root, filepath.Base(dir)+".tmp-")
	if err != nil {
		t.Skipf("SKIP: cannot create the SDK cache: %v", err)
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "npm_config_update_notifier=false", "npm_config_engine_strict=false")
	var log bytes.Buffer
	// Without a registry, npm ci would retry each package for a minute.
	ping, cancelPing := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelPing()
	cmd := exec.CommandContext(ping, npmBin, "ping", "--fetch-retries=0", "--fetch-timeout=15000")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = tmp, env, &log, &log
	if err := cmd.Run(); err != nil {
		t.Skipf("SKIP: the npm registry does not answer, so the providers' SDKs cannot be installed: npm ping: %v\n%s", err, sdkTail(log.String(), 1000))
	}
	log.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd = exec.CommandContext(ctx, npmBin, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = tmp, env, &log, &log
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v", time.Since(start).Round(time.Second))
		}
		t.Skipf("SKIP: npm ci of the providers' SDKs failed (no network or registry?): %v\n%s", err, sdkTail(log.String(), 2000))
	}
	t.Logf("npm ci of the providers' SDKs took %v", time.Since(start).Round(time.Second))
	if err := os.WriteFile(filepath.Join(tmp, marker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another run installed it first, or an unfinished install is in
		// the way.
		if _, err2 := os.Stat(filepath.Join(dir, marker)); err2 == nil {
			return dir
		}
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sdkTail returns the last lines of s, at most about n bytes.
func sdkTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "...\n" + s
}
