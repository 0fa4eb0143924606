// Command vectorgen prints the "built" vectors of provider_vectors.json:
// the providers that publish no example signature. Each is computed here,
// independently of package verify, from the provider's documented
// algorithm with the standard library alone. The published and SDK vectors
// in provider_vectors.json are copied from their sources, which each entry
// names. The test keys of plaid, google-pubsub and discord are made afresh
// (discord's from a fixed seed), so a new run prints other tokens.
//
//	go run ./verify/testdata/vectorgen
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash"
	"os"
	"strconv"
)

type vec struct {
	Provider  string            `json:"provider"`
	Source    string            `json:"source"`
	Origin    string            `json:"origin"`
	Note      string            `json:"note,omitempty"`
	Secret    string            `json:"secret,omitempty"`
	KeyPEM    string            `json:"key_pem,omitempty"`
	KeyID     string            `json:"key_id,omitempty"`
	PublicURL string            `json:"public_url,omitempty"`
	Now       int64             `json:"now"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
}

func mac(h func() hash.Hash, key string, parts ...string) []byte {
	m := hmac.New(h, []byte(key))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}
func hx(b []byte) string  { return hex.EncodeToString(b) }
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

const t0 = 1767225600 // 2026-01-01T00:00:00Z

func main() {
	ts := strconv.FormatInt(t0, 10)
	tsMS := strconv.FormatInt(t0*1000, 10)
	built := func(p, how string) string {
		return "built: no published vector; " + how
	}
	var out []vec
	add := func(v vec) { out = append(out, v) }

	// HMAC over the body.
	bodyMAC := []struct {
		p, hdr, prefix, secret, body string
		h                            func() hash.Hash
		b64                          bool
		origin                       string
	}{
		{"bitbucket", "X-Hub-Signature", "sha256=", "bitbucket-secret-0123456789", `{"repository":{"full_name":"team/repo"},"push":{"changes":[]}}`, sha256.New, false, "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/"},
		{"dropbox", "X-Dropbox-Signature", "", "dropbox-app-secret-0123456789", `{"list_folder":{"accounts":["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]},"delta":{"users":[12345678]}}`, sha256.New, false, "https://www.dropbox.com/developers/reference/webhooks"},
		{"intercom", "X-Hub-Signature", "sha1=", "intercom-client-secret-0123", `{"type":"notification_event","id":"notif_ccd8a4d2-3ef5-4c28-9b64-2f5e5a1c1f0e","topic":"conversation.user.created","created_at":1767225600}`, sha1.New, false, "https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications"},
		{"lemonsqueezy", "X-Signature", "", "lemonsqueezy-secret-0123456789", `{"meta":{"event_name":"order_created"},"data":{"type":"orders","id":"1"}}`, sha256.New, false, "https://docs.lemonsqueezy.com/help/webhooks/signing-requests"},
		{"sentry", "Sentry-Hook-Signature", "", "sentry-client-secret-0123456789", `{"action":"created","installation":{"uuid":"7a485448-a9e2-4c85-8a3c-4f44175783c9"},"data":{"issue":{"id":"1117540176"}}}`, sha256.New, false, "https://docs.sentry.io/organization/integrations/integration-platform/webhooks/#verifying-the-signature"},
		{"shopify", "X-Shopify-Hmac-Sha256", "", "shopify-client-secret-0123456789", `{"id":820982911946154508,"email":"jon@example.com","updated_at":"2026-01-01T00:00:00Z"}`, sha256.New, true, "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook"},
		{"typeform", "Typeform-Signature", "sha256=", "typeform-secret-0123456789", `{"event_id":"01HQ0000000000000000000000","event_type":"form_response","form_response":{"form_id":"lT4Z3j"}}`, sha256.New, true, "https://www.typeform.com/developers/webhooks/secure-your-webhooks/"},
		{"vercel", "X-Vercel-Signature", "", "vercel-webhook-secret-0123456789", `{"id":"uev_0123456789","type":"deployment.succeeded","createdAt":1767225600000,"payload":{}}`, sha1.New, false, "https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks"},
		{"woocommerce", "X-WC-Webhook-Signature", "", "woocommerce-secret-0123456789", `{"id":727,"order_key":"wc_order_58d2d042d1d","status":"processing"}`, sha256.New, true, "https://woocommerce.com/document/webhooks/"},
	}
	for _, b := range bodyMAC {
		m := mac(b.h, b.secret, b.body)
		sig := hx(m)
		enc := "hex"
		if b.b64 {
			sig, enc = b64(m), "base64"
		}
		add(vec{Provider: b.p, Source: built(b.p, "HMAC of the raw body, "+enc+", as the provider documents it; computed by an independent generator"),
			Origin: b.origin, Secret: b.secret, Now: t0, Headers: map[string]string{b.hdr: b.prefix + sig}, Body: b.body})
	}

	// Stripe and Calendly: t=..,v1=HMAC("{t}.{body}").
	for _, x := range []struct{ p, hdr, secret, body, origin string }{
		{"stripe", "Stripe-Signature", "whsec_stripe-test-secret-0123456789", `{"id":"evt_1Qx0000000000000000000","object":"event","type":"payment_intent.succeeded"}`, "https://docs.stripe.com/webhooks#verify-manually"},
		{"calendly", "Calendly-Webhook-Signature", "calendly-signing-key-0123456789", `{"event":"invitee.created","created_at":"2026-01-01T00:00:00.000000Z","payload":{"uri":"https://api.calendly.com/scheduled_events/AAAA/invitees/BBBB"}}`, "https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures"},
	} {
		add(vec{Provider: x.p, Source: built(x.p, `HMAC-SHA256 of "{t}.{body}", hex, in "t=...,v1=..."; independent generator`), Origin: x.origin,
			Secret: x.secret, Now: t0, Headers: map[string]string{x.hdr: "t=" + ts + ",v1=" + hx(mac(sha256.New, x.secret, ts, ".", x.body))}, Body: x.body})
	}
	// Paddle: ts=..;h1=HMAC("{ts}:{body}").
	{
		secret := "pdl_ntfset_01hv8wptq8987qeep44fyrhrrm_4ub7i4IAXi8tz6MsMUhnBG3Cce0c1vD"
		body := `{"event_id":"evt_01hv8x2acma2gz8he59z7ys1yx","event_type":"transaction.completed","occurred_at":"2026-01-01T00:00:00.000000Z","data":{"id":"txn_1"}}`
		add(vec{Provider: "paddle", Source: built("paddle", `HMAC-SHA256 of "{ts}:{body}", hex, in "ts=...;h1=..."; independent generator`), Origin: "https://developer.paddle.com/webhooks/signature-verification",
			Secret: secret, Now: t0, Headers: map[string]string{"Paddle-Signature": "ts=" + ts + ";h1=" + hx(mac(sha256.New, secret, ts, ":", body))}, Body: body})
	}
	// Zoom: v0=HMAC("v0:{ts}:{body}").
	{
		secret := "zoom-secret-token-0123456789"
		body := `{"event":"meeting.started","event_ts":1767225600000,"payload":{"account_id":"AAAAAA","object":{"uuid":"4444AAAiAAAAAiAiAiiAii==","id":6962400003}}}`
		add(vec{Provider: "zoom", Source: built("zoom", `HMAC-SHA256 of "v0:{x-zm-request-timestamp}:{body}", hex, after v0=; independent generator`), Origin: "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
			Secret: secret, Now: t0, Headers: map[string]string{"X-Zm-Request-Timestamp": ts, "X-Zm-Signature": "v0=" + hx(mac(sha256.New, secret, "v0:", ts, ":", body))}, Body: body})
	}
	// Twitch: sha256=HMAC(id + timestamp + body), RFC 3339 timestamp.
	{
		secret := "twitch-eventsub-secret-0123456789"
		id, tsr := "e76c6bd4-55c9-4987-8304-da1588d8988b", "2026-01-01T00:00:00.123456789Z"
		body := `{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","type":"channel.follow","version":"2"},"event":{"user_id":"1337","broadcaster_user_id":"12826"}}`
		add(vec{Provider: "twitch", Source: built("twitch", "HMAC-SHA256 of message id + timestamp + body, hex, after sha256=; independent generator"), Origin: "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
			Secret: secret, Now: t0, Headers: map[string]string{"Twitch-Eventsub-Message-Id": id, "Twitch-Eventsub-Message-Timestamp": tsr,
				"Twitch-Eventsub-Message-Signature": "sha256=" + hx(mac(sha256.New, secret, id, tsr, body))}, Body: body})
	}
	// HubSpot v3: base64 HMAC(method + uri + body + timestamp).
	{
		secret, uri := "hubspot-client-secret-0123456789", "https://www.example.com/webhook_uri"
		body := `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`
		add(vec{Provider: "hubspot", Source: built("hubspot", "v3: HMAC-SHA256 of method + URI + body + timestamp, base64 (HubSpot publishes examples for v1 and v2 only); independent generator"), Origin: "https://developers.hubspot.com/docs/apps/legacy-apps/authentication/validating-requests",
			Secret: secret, PublicURL: uri, Now: t0, Headers: map[string]string{"X-Hubspot-Request-Timestamp": tsMS,
				"X-Hubspot-Signature-V3": b64(mac(sha256.New, secret, "POST", uri, body, tsMS))}, Body: body})
	}
	// Linear: hex HMAC(body), webhookTimestamp (ms) in the body.
	{
		secret := "lin_wh_linear-secret-0123456789"
		body := `{"action":"create","type":"Issue","createdAt":"2026-01-01T00:00:00.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Test"},"url":"https://linear.app/x","organizationId":"o","webhookTimestamp":` + tsMS + `,"webhookId":"w"}`
		add(vec{Provider: "linear", Source: built("linear", "HMAC-SHA256 of the body, hex; webhookTimestamp (ms) inside the signed body; independent generator"), Origin: "https://linear.app/developers/webhooks#securing-webhooks",
			Secret: secret, Now: t0, Headers: map[string]string{"Linear-Signature": hx(mac(sha256.New, secret, body))}, Body: body})
	}
	// Mailgun: hex HMAC(timestamp + token), in the body.
	{
		key := "key-mailgun-signing-0123456789abcdef"
		token := "8b1f3a7c5e9d2b4f6a8c0e2d4f6b8a0c2e4d6f8b0a2c4e6d8f"
		sig := hx(mac(sha256.New, key, ts, token))
		body := `{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"},"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1767225600.0}}`
		add(vec{Provider: "mailgun", Source: built("mailgun", "HMAC-SHA256 of timestamp + token, hex, in the body's signature object (Mailgun's example omits its key); independent generator"), Origin: "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks",
			Secret: key, Now: t0, Headers: map[string]string{}, Body: body})
	}
	// Tokens.
	add(vec{Provider: "gitlab", Source: built("gitlab", "a token has no signature; the header carries the configured token"), Origin: "https://docs.gitlab.com/user/project/integrations/webhooks/",
		Secret: "gitlab-webhook-token-0123456789", Now: t0, Headers: map[string]string{"X-Gitlab-Token": "gitlab-webhook-token-0123456789"}, Body: `{"object_kind":"push","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}`})
	add(vec{Provider: "telegram", Source: built("telegram", "a token has no signature; the header carries the configured secret_token"), Origin: "https://core.telegram.org/bots/api#setwebhook",
		Secret: "telegram_secret-token_0123456789", Now: t0, Headers: map[string]string{"X-Telegram-Bot-Api-Secret-Token": "telegram_secret-token_0123456789"}, Body: `{"update_id":10000,"message":{"message_id":1,"date":1767225600,"text":"hi","chat":{"id":1,"type":"private"}}}`})

	// Discord: Ed25519 over timestamp + body, hex.
	{
		seed := sha256.Sum256([]byte("clawgate test vector: discord"))
		priv := ed25519.NewKeyFromSeed(seed[:])
		body := `{"id":"1234567890123456789","type":1,"application_id":"1","token":"t"}`
		add(vec{Provider: "discord", Source: built("discord", "Ed25519 over X-Signature-Timestamp + body, hex, with a test key made from a fixed seed; independent generator"), Origin: "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers",
			Secret: hx(priv.Public().(ed25519.PublicKey)), Now: t0, Headers: map[string]string{"X-Signature-Timestamp": ts, "X-Signature-Ed25519": hx(ed25519.Sign(priv, []byte(ts+body)))}, Body: body})
	}
	// Plaid: ES256 JWT with request_body_sha256 and iat.
	{
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		body := `{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE","item_id":"wz666MBjYWTp2PDzzggYhM6oWWmBb"}`
		sum := sha256.Sum256([]byte(body))
		hdr := b64u(`{"alg":"ES256","kid":"6c5516e1-92dc-479e-a8ff-5a51992e0001","typ":"JWT"}`)
		pl := b64u(`{"iat":` + ts + `,"request_body_sha256":"` + hx(sum[:]) + `"}`)
		d := sha256.Sum256([]byte(hdr + "." + pl))
		r, s, _ := ecdsa.Sign(rand.Reader, k, d[:])
		sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		add(vec{Provider: "plaid", Source: built("plaid", "an ES256 token with iat and request_body_sha256, signed with a test key (Plaid's example token is signed with Plaid's key); independent generator"), Origin: "https://plaid.com/docs/api/webhooks/webhook-verification/",
			KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), Now: t0,
			Headers: map[string]string{"Plaid-Verification": hdr + "." + pl + "." + base64.RawURLEncoding.EncodeToString(sig)}, Body: body})
	}
	// Google Pub/Sub: RS256 OIDC token from accounts.google.com.
	{
		k, _ := rsa.GenerateKey(rand.Reader, 2048)
		body := `{"message":{"data":"SGVsbG8=","messageId":"2070443601311540","publishTime":"2026-01-01T00:00:00Z"},"subscription":"projects/p/subscriptions/s"}`
		hdr := b64u(`{"alg":"RS256","kid":"test-google-key","typ":"JWT"}`)
		pl := b64u(`{"aud":"https://gateway.example.com/pubsub","email":"push@p.iam.gserviceaccount.com","email_verified":true,"exp":` + strconv.FormatInt(t0+3600, 10) + `,"iat":` + ts + `,"iss":"https://accounts.google.com","sub":"1"}`)
		d := sha256.Sum256([]byte(hdr + "." + pl))
		sig, _ := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		add(vec{Provider: "google-pubsub", Source: built("google-pubsub", "an RS256 OIDC token with Google's issuer, signed with a test key (Google's tokens are signed with Google's keys); independent generator"), Origin: "https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions",
			KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), Now: t0,
			Headers: map[string]string{"Authorization": "Bearer " + hdr + "." + pl + "." + base64.RawURLEncoding.EncodeToString(sig)}, Body: body})
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	if _, err := os.Stdout.Write(append(b, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func b64u(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
