package verify

import (
	"strings"
	"time"
)

// Preset is what a route's `provider: NAME` stands for: a provider's verify
// block (secrets aside), the idempotency key it derives, and what the
// documentation says about both. A route may write out any field of these
// itself; the config fills in only the fields a route leaves out.
type Preset struct {
	// Name is the value of a route's provider field.
	Name string
	// Title is the provider's name as it writes it.
	Title string
	// Verify is the verify block the preset fills in; it holds no secret.
	Verify Config
	// Key is the idempotency.key it fills in: a source the signature
	// covers, or the body's hash where the provider signs no id.
	Key []string
	// AllowUnsignedKey fills in idempotency.allow_unsigned_key, for the
	// providers whose signature covers no key source at all.
	AllowUnsignedKey bool
	// Needs lists the fields the route must write itself, each as
	// alternatives separated by "|" ("secrets", "jwt.audience",
	// "jwt.jwks_file|jwt.keys").
	Needs []string
	// Secret says what the route's secrets (or keys) hold and where the
	// provider shows them.
	Secret string
	// KeyNote says why the key source is the one chosen and what makes
	// the route safe against a captured delivery sent again.
	KeyNote string
	// Retries is the provider's documented retry behaviour.
	Retries string
	// Docs is the provider's page on its signature.
	Docs string
	// Vector says where the preset's test vector comes from.
	Vector string
	// Sample is an example body: {id} is an event id, {now}, {now_ms}
	// and {now_rfc3339} the time. SampleType is its content type (zero:
	// application/json).
	Sample     string
	SampleType string
}

// Family names the preset's scheme family, as the provider table shows it.
func (p *Preset) Family() string {
	c := p.Verify
	switch c.Scheme {
	case SchemeHMAC:
		switch {
		case UsesURL(c):
			return "hmac (URL-signed)"
		case c.Signature != "":
			return "hmac (signature in the body)"
		case c.Template != "" || c.Timestamp != "":
			return "hmac (template)"
		}
		return "hmac"
	}
	return c.Scheme
}

const (
	sampleID = "{id}"
	formType = "application/x-www-form-urlencoded"
)

// presets is the one table of providers, sorted by name.
var presets = []Preset{
	{
		Name: "bitbucket", Title: "Bitbucket Cloud",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Hub-Signature", Format: "sha256={signature}"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret (Repository settings > Webhooks)",
		KeyNote: "Bitbucket signs the body only: no timestamp, and X-Request-UUID and X-Hook-UUID are not signed. The key is the body's SHA-256: a copy of a delivery is a duplicate for the retention; Bitbucket signs no time, so nothing refuses a copy once its key is forgotten.",
		Retries: "Bitbucket Cloud may retry a delivery that fails or times out; a retry sends the same body. Its request history lists every attempt.",
		Docs:    "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/",
		Vector:  "built: Bitbucket publishes no example signature; HMAC-SHA256 of the body, hex, after sha256=, as documented",
		Sample:  `{"repository":{"full_name":"team/repo"},"push":{"changes":[{"new":{"target":{"hash":"` + sampleID + `"}}}]}}`,
	},
	{
		Name: "calendly", Title: "Calendly",
		Verify:  Config{Scheme: SchemeHMAC, Header: "Calendly-Webhook-Signature", Format: "t={timestamp},v1={signature}", Template: "{timestamp}.{body}", Tolerance: 3 * time.Minute},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the signing_key given when the webhook subscription was created",
		KeyNote: "Calendly signs \"{t}.{body}\" and its payload has no event id of its own: the key is the body's SHA-256, signed. t= bounds a captured delivery to the tolerance (3 minutes, as Calendly's example checks).",
		Retries: "Calendly retries failed deliveries with backoff.",
		Docs:    "https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures",
		Vector:  "built: Calendly publishes no secret, body and signature together; HMAC-SHA256 of \"{t}.{body}\", hex, as documented",
		Sample:  `{"event":"invitee.created","created_at":"{now_rfc3339}","payload":{"uri":"https://api.calendly.com/scheduled_events/` + sampleID + `"}}`,
	},
	{
		Name: "clerk", Title: "Clerk (Svix)",
		Verify:  Config{Scheme: SchemeStandardWebhooks, Header: "Svix-Signature", Tolerance: 5 * time.Minute},
		Key:     []string{"header:webhook-id", "header:svix-id"},
		Needs:   []string{"secrets"},
		Secret:  "the endpoint's signing secret, whsec_... (Clerk Dashboard > Webhooks)",
		KeyNote: "Clerk sends through Svix, which signs \"{svix-id}.{svix-timestamp}.{body}\": the message id is signed and stays the same on every retry, so it is the key; the timestamp bounds a captured delivery to the tolerance.",
		Retries: "Svix retries with exponential backoff (immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), each attempt signed anew with the same svix-id.",
		Docs:    "https://docs.svix.com/receiving/verifying-payloads/how-manual",
		Vector:  "published: Svix's manual-verification example (secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, msg_p5jXN8AQM9LWM0D4loKWxJek, 1614265330); checked against SDK: @clerk/backend@3.25.0, svix@2.5.0",
		Sample:  `{"type":"user.created","object":"event","data":{"id":"user_` + sampleID + `"}}`,
	},
	{
		Name: "coinbase-commerce", Title: "Coinbase Commerce",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-CC-Webhook-Signature"},
		Key:     []string{"json:event.id"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook shared secret (Settings > Webhook subscriptions)",
		KeyNote: "Coinbase Commerce signs the body, whose event.id stays the same on every attempt (attempt_number does not): the key is that signed id. No timestamp is signed: a copy is a duplicate for the retention, and nothing refuses it after.",
		Retries: "Coinbase Commerce retries failed deliveries with exponential backoff; attempt_number counts them.",
		Docs:    "https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security",
		Vector:  "SDK: coinbase/coinbase-commerce-node test/testWebhook.spec.js (secret 30291a20-..., signature 8be7742c...); checked against SDK: coinbase-commerce-node@1.0.4",
		Sample:  `{"id":1,"scheduled_for":"{now_rfc3339}","attempt_number":1,"event":{"id":"` + sampleID + `","type":"charge:confirmed","api_version":"2018-03-22","data":{"code":"66BEOV2A"}}}`,
	},
	{
		Name: "discord", Title: "Discord",
		Verify: Config{Scheme: SchemeEd25519, Header: "X-Signature-Ed25519", Encoding: "hex",
			Template: "{header:X-Signature-Timestamp}{body}", Timestamp: "header:X-Signature-Timestamp", Tolerance: 5 * time.Minute},
		Key:     []string{"json:id"},
		Needs:   []string{"secrets"},
		Secret:  "the application's PUBLIC KEY, 64 hex digits (Developer Portal > General Information); it is not a secret",
		KeyNote: "Discord signs timestamp + body with Ed25519: the interaction's id, in the body, is signed and is the key; the timestamp bounds a captured delivery to the tolerance.",
		Retries: "Interactions are not retried: Discord waits 3 seconds for the answer, which must come from the upstream (a PING is answered with {\"type\":1}).",
		Docs:    "https://discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers",
		Vector:  "built: Discord publishes no example signature; Ed25519 over timestamp + body with a fixed test key, as documented; checked against SDK: discord-interactions@4.4.0",
		Sample:  `{"id":"` + sampleID + `","type":2,"application_id":"1","token":"t","data":{"name":"ping"}}`,
	},
	{
		Name: "dropbox", Title: "Dropbox",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Dropbox-Signature"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the app secret (App Console)",
		KeyNote: "Dropbox signs the body, a list of accounts with changes and no event id: the key is the body's SHA-256. No timestamp is signed: a copy is a duplicate for the retention. Dropbox's GET verification challenge carries no signature; answer it on a separate route (methods [GET], verify none).",
		Retries: "Dropbox retries a notification that fails, with backoff, and may fold changes into later notifications.",
		Docs:    "https://www.dropbox.com/developers/reference/webhooks",
		Vector:  "built: Dropbox publishes no example signature; HMAC-SHA256 of the body, hex, as documented",
		Sample:  `{"list_folder":{"accounts":["dbid:` + sampleID + `"]},"delta":{"users":[1]}}`,
	},
	{
		Name: "github", Title: "GitHub",
		Verify:  Config{Scheme: SchemeGitHub},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret (Settings > Webhooks)",
		KeyNote: "GitHub signs the body only: no timestamp, and X-GitHub-Delivery is not signed. The key is the body's SHA-256: a redelivery has the same body and is a duplicate, and so is a captured copy for the retention; GitHub signs no time, so nothing refuses a copy once its key is forgotten.",
		Retries: "GitHub does not retry a failed delivery; it can be redelivered by hand or through the API for 3 days, with the same X-GitHub-Delivery and body.",
		Docs:    "https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
		Vector:  "published: GitHub's \"Testing the webhook payload validation\" (secret \"It's a Secret to Everybody\", payload \"Hello, World!\"); checked against SDK: @octokit/webhooks-methods@6.0.0",
		Sample:  `{"zen":"Keep it logically awesome.","hook_id":1,"delivery":"` + sampleID + `"}`,
	},
	{
		Name: "gitlab", Title: "GitLab",
		Verify:           Config{Scheme: SchemeToken, Header: "X-Gitlab-Token"},
		Key:              []string{"body:sha256"},
		AllowUnsignedKey: true,
		Needs:            []string{"secrets"},
		Secret:           "the webhook's secret token (Settings > Webhooks)",
		KeyNote:          "GitLab sends its secret token as it is and signs nothing: whoever sees one delivery can send any. The key is the body's SHA-256, so a retry is a duplicate; allow_unsigned_key is set because no source can be signed, and `clawgate check` warns. Keep the route on TLS and rotate the token if it may have leaked.",
		Retries:          "GitLab does not retry a failed delivery. A hook failing 4 times in a row is disabled: for a minute, growing to 24 hours, after 5xx answers; until re-enabled by hand after 4xx answers. Recent events can be resent by hand.",
		Docs:             "https://docs.gitlab.com/user/project/integrations/webhooks/",
		Vector:           "built: a token has no signature to publish; the header carries the configured token, as documented",
		Sample:           `{"object_kind":"push","checkout_sha":"` + sampleID + `","project":{"path_with_namespace":"group/project"}}`,
	},
	{
		Name: "google-pubsub", Title: "Google Cloud Pub/Sub (push)",
		Verify: Config{Scheme: SchemeJWT, JWT: JWTConfig{Header: "Authorization", Algorithms: []string{"RS256"},
			JWKSURL: "https://www.googleapis.com/oauth2/v3/certs", Issuer: "https://accounts.google.com", MaxAge: time.Hour, Leeway: 30 * time.Second}},
		Key:              []string{"json:message.messageId"},
		AllowUnsignedKey: true,
		Needs:            []string{"jwt.audience"},
		Secret:           "no secret: Google's public keys come from jwks_url; the route writes jwt.audience, the audience set on the push subscription",
		KeyNote:          "Google's OIDC token signs no part of the body: whoever holds a valid token can send any body under any messageId. The key is message.messageId, which Pub/Sub keeps on every redelivery; allow_unsigned_key is set and `clawgate check` warns. The audience and max_age narrow who can replay, and for how long.",
		Retries:          "Pub/Sub redelivers a message until it is acknowledged (a 2xx), following the subscription's retry policy, for as long as it retains the message (7 days by default).",
		Docs:             "https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions",
		Vector:           "built: Google's tokens are signed with Google's keys; an RS256 token with Google's claims, signed with a test key, as documented; checked against SDK: google-auth-library@10.9.1",
		Sample:           `{"message":{"data":"e30=","messageId":"` + sampleID + `","publishTime":"{now_rfc3339}"},"subscription":"projects/p/subscriptions/s"}`,
	},
	{
		Name: "hubspot", Title: "HubSpot (signature v3)",
		Verify: Config{Scheme: SchemeHMAC, Header: "X-HubSpot-Signature-v3", Encoding: "base64",
			Template:  "{method}{url}{body}{header:X-HubSpot-Request-Timestamp}",
			Timestamp: "header:X-HubSpot-Request-Timestamp", TimestampFormat: "unix_ms", Tolerance: 5 * time.Minute},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets", "public_url"},
		Secret:  "the app's client secret",
		KeyNote: "HubSpot v3 signs method + URL + body + timestamp: the body (a batch of events, each with its eventId) is signed and its hash is the key; the timestamp bounds a captured delivery to 5 minutes, as HubSpot asks. public_url must be the target URL with HubSpot's decoding applied (%3A as :, %2F as /, and so on).",
		Retries: "HubSpot retries a failed notification up to 10 times over the next 24 hours.",
		Docs:    "https://developers.hubspot.com/docs/apps/legacy-apps/authentication/validating-requests",
		Vector:  "built: HubSpot publishes example hashes for v1 and v2 only; HMAC-SHA256 of method + URI + body + timestamp, base64, as documented for v3; checked against SDK: @hubspot/api-client@14.0.1",
		Sample:  `[{"eventId":` + "{now}" + `,"subscriptionId":1,"portalId":62515,"occurredAt":{now_ms},"subscriptionType":"contact.creation","attemptNumber":0,"objectId":1,"changeSource":"CRM","note":"` + sampleID + `"}]`,
	},
	{
		Name: "intercom", Title: "Intercom",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Hub-Signature", Algorithm: "sha1", Format: "sha1={signature}"},
		Key:     []string{"json:id"},
		Needs:   []string{"secrets"},
		Secret:  "the app's client secret (Developer Hub > Basic information)",
		KeyNote: "Intercom signs the body (HMAC-SHA1), whose id is the notification's (notif_...): the key is that signed id. No timestamp is signed: a copy is a duplicate for the retention, and nothing refuses it after.",
		Retries: "Intercom pauses a topic for 15 minutes after 1000 failures in a row within 15 minutes, and suspends a private app's subscription after seven days of failures.",
		Docs:    "https://developers.intercom.com/docs/references/webhooks/webhook-models#signed-notifications",
		Vector:  "built: Intercom publishes no example signature; HMAC-SHA1 of the body, hex, after sha1=, as documented",
		Sample:  `{"type":"notification_event","id":"notif_` + sampleID + `","topic":"conversation.user.created","created_at":{now},"data":{"item":{}}}`,
	},
	{
		Name: "lemonsqueezy", Title: "Lemon Squeezy",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Signature"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's signing secret",
		KeyNote: "Lemon Squeezy signs the body, whose data.id names the object rather than the event: the key is the body's SHA-256, signed. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "Lemon Squeezy retries a failed delivery three more times, with exponential backoff (5, 25 and 125 seconds).",
		Docs:    "https://docs.lemonsqueezy.com/help/webhooks/signing-requests",
		Vector:  "built: Lemon Squeezy publishes no example signature; HMAC-SHA256 of the body, hex, as documented",
		Sample:  `{"meta":{"event_name":"order_created","webhook_id":"` + sampleID + `"},"data":{"type":"orders","id":"1"}}`,
	},
	{
		Name: "linear", Title: "Linear",
		Verify: Config{Scheme: SchemeHMAC, Header: "Linear-Signature",
			Timestamp: "json:webhookTimestamp", TimestampFormat: "unix_ms", Tolerance: time.Minute},
		Key:     []string{"template:{json:type}:{json:action}:{json:data.id}:{json:createdAt}"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's signing secret",
		KeyNote: "Linear signs the body, including webhookTimestamp, which the gateway checks within a minute as Linear advises; a retry carries a new webhookTimestamp, so the body's hash would change. The key is the action itself, all signed: type, action, data.id and createdAt.",
		Retries: "Linear retries a failed delivery a few times with backoff, each attempt with a new webhookTimestamp.",
		Docs:    "https://linear.app/developers/webhooks#securing-webhooks",
		Vector:  "built: Linear publishes no example signature; HMAC-SHA256 of the body, hex, as documented; checked against SDK: @linear/sdk@98.0.0",
		Sample:  `{"action":"create","type":"Issue","createdAt":"{now_rfc3339}","data":{"id":"` + sampleID + `","title":"Simulated"},"url":"https://linear.app/x","organizationId":"o","webhookTimestamp":{now_ms},"webhookId":"w"}`,
	},
	{
		Name: "mailgun", Title: "Mailgun",
		Verify: Config{Scheme: SchemeHMAC, Signature: "json:signature.signature",
			Template:  "{json:signature.timestamp}{json:signature.token}",
			Timestamp: "json:signature.timestamp", Tolerance: 9 * time.Hour},
		Key:     []string{"json:event-data.id"},
		Needs:   []string{"secrets"},
		Secret:  "the HTTP webhook signing key (Sending > Webhooks)",
		KeyNote: "Mailgun signs only timestamp + token, not event-data: the key is event-data.id, which stays the same on every retry, and the gateway guards the route: it remembers each signed timestamp + token and refuses it under another id. A captured delivery is bounded by the tolerance, which covers Mailgun's 8 hours of retries. The unsigned event-data of a delivery seen first is trusted as it is.",
		Retries: "Mailgun retries a webhook answered with anything but 200 or 406 for 8 hours (after 5, 10 and 15 minutes, then 1, 2 and 4 hours), except delivered notifications, which are not retried.",
		Docs:    "https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks",
		Vector:  "built: Mailgun publishes no key with its example; HMAC-SHA256 of timestamp + token, hex, as documented",
		Sample:  `{"signature":{"timestamp":"{now}","token":"tok` + sampleID + `","signature":""},"event-data":{"id":"` + sampleID + `","event":"delivered","timestamp":{now}}}`,
	},
	{
		Name: "paddle", Title: "Paddle Billing",
		Verify: Config{Scheme: SchemeHMAC, Header: "Paddle-Signature", Format: "ts={timestamp};h1={signature}",
			Template: "{timestamp}:{body}", Tolerance: time.Minute},
		Key:     []string{"json:event_id"},
		Needs:   []string{"secrets"},
		Secret:  "the notification destination's secret key, pdl_ntfset_... (Developer tools > Notifications)",
		KeyNote: "Paddle signs \"{ts}:{body}\": the body's event_id is signed and is the key; ts bounds a captured delivery to the tolerance. Paddle's SDKs allow 5 seconds; the preset allows a minute of clock skew and transit (write tolerance: 5s to match). Several h1= are accepted while a secret rotates.",
		Retries: "Paddle retries a failed delivery with backoff, many times over about three days for live accounts (fewer in sandbox).",
		Docs:    "https://developer.paddle.com/webhooks/signature-verification",
		Vector:  "built: Paddle publishes an example header without its secret and body; HMAC-SHA256 of \"{ts}:{body}\", hex, as documented; checked against SDK: @paddle/paddle-node-sdk@3.10.0",
		Sample:  `{"event_id":"evt_` + sampleID + `","event_type":"transaction.completed","occurred_at":"{now_rfc3339}","data":{"id":"txn_1"}}`,
	},
	{
		Name: "pagerduty", Title: "PagerDuty (webhooks v3)",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-PagerDuty-Signature", Format: "v1={signature}"},
		Key:     []string{"json:event.id"},
		Needs:   []string{"secrets"},
		Secret:  "the subscription's signing secret",
		KeyNote: "PagerDuty signs the body, whose event.id is the key; several v1= signatures are accepted while a secret rotates. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "PagerDuty retries a failed delivery with backoff; a subscription that keeps failing is disabled.",
		Docs:    "https://developer.pagerduty.com/docs/webhooks/webhook-signatures/",
		Vector:  "SDK: PagerDuty/go-pagerduty webhookv3/webhookv3_test.go (incident.priority_updated, v1=0c0b9495...)",
		Sample:  `{"event":{"id":"` + sampleID + `","event_type":"incident.triggered","resource_type":"incident","occurred_at":"{now_rfc3339}","data":{"id":"P1"}}}`,
	},
	{
		Name: "plaid", Title: "Plaid",
		Verify: Config{Scheme: SchemeJWT, JWT: JWTConfig{Header: "Plaid-Verification", Algorithms: []string{"ES256"},
			MaxAge: 5 * time.Minute, BodyHashClaim: "request_body_sha256"}},
		Key:     []string{"body:sha256"},
		Needs:   []string{"jwt.jwks_file|jwt.keys"},
		Secret:  "no secret: the route writes jwt.jwks_file (or jwt.keys) with the keys Plaid's /webhook_verification_key/get returns",
		KeyNote: "Plaid's ES256 token signs the body's SHA-256 (request_body_sha256) and its iat, checked within 5 minutes as Plaid asks: the body's hash is signed and is the key.",
		Retries: "Plaid retries a webhook that gets no 2xx answer in time, with backoff.",
		Docs:    "https://plaid.com/docs/api/webhooks/webhook-verification/",
		Vector:  "built: Plaid's example token is signed with Plaid's key; an ES256 token with request_body_sha256, signed with a test key, as documented",
		Sample:  `{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE","item_id":"` + sampleID + `"}`,
	},
	{
		Name: "razorpay", Title: "Razorpay",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Razorpay-Signature"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret (Dashboard > Webhooks)",
		KeyNote: "Razorpay signs the body; X-Razorpay-Event-Id is not signed. The key is the body's SHA-256, signed. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "Razorpay retries a failed delivery with exponential backoff for 24 hours, then disables the webhook.",
		Docs:    "https://razorpay.com/docs/webhooks/validate-test/",
		Vector:  "SDK: razorpay/razorpay-node test/utils/razorpay-utils.spec.js (secret 123456, body {\"a\":1,\"b\":2,\"c\":{\"d\":3}}); checked against SDK: razorpay@2.9.8",
		Sample:  `{"entity":"event","account_id":"acc_1","event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_` + sampleID + `"}}},"created_at":{now}}`,
	},
	{
		Name: "resend", Title: "Resend (Svix)",
		Verify:  Config{Scheme: SchemeStandardWebhooks, Header: "Svix-Signature", Tolerance: 5 * time.Minute},
		Key:     []string{"header:webhook-id", "header:svix-id"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's signing secret, whsec_...",
		KeyNote: "Resend sends through Svix, which signs \"{svix-id}.{svix-timestamp}.{body}\": the message id is signed and stays the same on every retry, so it is the key; the timestamp bounds a captured delivery to the tolerance.",
		Retries: "Svix retries with exponential backoff (immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), each attempt signed anew with the same svix-id.",
		Docs:    "https://resend.com/docs/dashboard/webhooks/verify-webhooks-requests",
		Vector:  "published: Svix's manual-verification example (the same scheme and secret format); checked against SDK: resend@6.38.0, svix@2.5.0",
		Sample:  `{"type":"email.delivered","created_at":"{now_rfc3339}","data":{"email_id":"` + sampleID + `"}}`,
	},
	{
		Name: "sendgrid", Title: "Twilio SendGrid (signed Event Webhook)",
		Verify: Config{Scheme: SchemeECDSAP256, Header: "X-Twilio-Email-Event-Webhook-Signature", Encoding: "base64",
			Template:  "{header:X-Twilio-Email-Event-Webhook-Timestamp}{body}",
			Timestamp: "header:X-Twilio-Email-Event-Webhook-Timestamp", Tolerance: 24 * time.Hour},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the verification key, base64 (Mail Settings > Signed Event Webhook); it is a public key, not a secret",
		KeyNote: "SendGrid signs timestamp + body with ECDSA P-256: the body (a batch of events) is signed and its hash is the key. SendGrid does not say whether a retry is signed anew, so the tolerance covers its 24 hours of retries; a copy is a duplicate within them.",
		Retries: "SendGrid retries a batch that gets no 2xx for up to 24 hours.",
		Docs:    "https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features",
		Vector:  "SDK: sendgrid/sendgrid-nodejs packages/eventwebhook/src/eventwebhook.spec.js (timestamp 1588788367); checked against SDK: @sendgrid/eventwebhook@8.0.0",
		Sample:  `[{"email":"a@example.com","event":"delivered","sg_event_id":"` + sampleID + `","timestamp":{now}}]`,
	},
	{
		Name: "sentry", Title: "Sentry (integration platform)",
		Verify:  Config{Scheme: SchemeHMAC, Header: "Sentry-Hook-Signature"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the integration's client secret",
		KeyNote: "Sentry signs the body only; Request-ID and Sentry-Hook-Timestamp are not signed, so the timestamp cannot be trusted. The key is the body's SHA-256, signed: a copy is a duplicate for the retention.",
		Retries: "Sentry's documentation describes no retry of a failed webhook request.",
		Docs:    "https://docs.sentry.io/organization/integrations/integration-platform/webhooks/#verifying-the-signature",
		Vector:  "built: Sentry publishes no example signature; HMAC-SHA256 of the body, hex, as documented",
		Sample:  `{"action":"created","installation":{"uuid":"i"},"data":{"issue":{"id":"` + sampleID + `"}}}`,
	},
	{
		Name: "shopify", Title: "Shopify",
		Verify:  Config{Scheme: SchemeShopify},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the app's client secret",
		KeyNote: "Shopify signs the body only: X-Shopify-Webhook-Id and X-Shopify-Triggered-At are not signed. The key is the body's SHA-256: a retry has the same body and is a duplicate, and so is a captured copy for the retention.",
		Retries: "Shopify retries a failed delivery 8 times over 4 hours, with the same body, then may remove the subscription.",
		Docs:    "https://shopify.dev/docs/apps/build/webhooks/subscribe/https#step-5-verify-the-webhook",
		Vector:  "built: Shopify publishes no example signature; HMAC-SHA256 of the body, base64, as documented; checked against SDK: @shopify/shopify-api@15.0.0",
		Sample:  `{"id":1,"admin_graphql_api_id":"gid://shopify/Order/` + sampleID + `","updated_at":"{now_rfc3339}"}`,
	},
	{
		Name: "slack", Title: "Slack",
		Verify:  Config{Scheme: SchemeSlack, Tolerance: 5 * time.Minute},
		Key:     []string{"json:event_id", "body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the app's signing secret (Basic Information > App Credentials)",
		KeyNote: "Slack signs \"v0:{timestamp}:{body}\": the Events API's event_id is signed and is the key (slash commands and interactions, which have none, fall back to the body's hash); the timestamp bounds a captured delivery to 5 minutes, as Slack asks.",
		Retries: "Slack retries an event 3 times (at once, after 1 minute, after 5 minutes) with X-Slack-Retry-Num, each attempt signed anew.",
		Docs:    "https://docs.slack.dev/authentication/verifying-requests-from-slack/",
		Vector:  "published: Slack's \"Verifying requests from Slack\" walk-through (secret 8f742231b10e8888abcd99yyyzzz85a5, timestamp 1531420618); checked against SDK: @slack/bolt@5.1.0",
		Sample:  `{"type":"event_callback","event_id":"Ev` + sampleID + `","event_time":{now},"event":{"type":"app_mention"}}`,
	},
	{
		Name: "square", Title: "Square",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Square-Hmacsha256-Signature", Encoding: "base64", Template: "{url}{body}"},
		Key:     []string{"json:event_id"},
		Needs:   []string{"secrets", "public_url"},
		Secret:  "the subscription's signature key",
		KeyNote: "Square signs notification URL + body: the body's event_id is signed and is the key. No timestamp is signed: a copy is a duplicate for the retention. public_url must be the notification URL exactly as the subscription lists it.",
		Retries: "Square retries a failed notification with exponential backoff, for up to a day.",
		Docs:    "https://developer.squareup.com/docs/webhooks/step3validate",
		Vector:  "SDK: square/square-go-sdk client/client_test.go (key Ibxx_5AKakO-3qeNVR61Dw, signature GF4YkrJg...); checked against SDK: square@46.0.0",
		Sample:  `{"merchant_id":"M1","type":"payment.updated","event_id":"` + sampleID + `","created_at":"{now_rfc3339}","data":{"type":"payment","id":"p1"}}`,
	},
	{
		Name: "stripe", Title: "Stripe",
		Verify:  Config{Scheme: SchemeStripe, Tolerance: 5 * time.Minute},
		Key:     []string{"json:id"},
		Needs:   []string{"secrets"},
		Secret:  "the endpoint's signing secret, the whole whsec_... string",
		KeyNote: "Stripe signs \"{t}.{body}\": the event's id (evt_...) is in the signed body and is the key; t bounds a captured delivery to 5 minutes, Stripe's own default.",
		Retries: "Stripe retries for up to 3 days in live mode (a few times over hours in test mode) with exponential backoff, each attempt signed anew.",
		Docs:    "https://docs.stripe.com/webhooks#verify-manually",
		Vector:  "built: Stripe publishes no secret, body and signature together; HMAC-SHA256 of \"{t}.{body}\", hex, as documented; checked against SDK: stripe@23.1.0",
		Sample:  `{"id":"evt_` + sampleID + `","object":"event","type":"payment_intent.succeeded","created":{now},"data":{"object":{"id":"pi_1"}}}`,
	},
	{
		Name: "telegram", Title: "Telegram Bot API",
		Verify:           Config{Scheme: SchemeToken, Header: "X-Telegram-Bot-Api-Secret-Token"},
		Key:              []string{"json:update_id"},
		AllowUnsignedKey: true,
		Needs:            []string{"secrets"},
		Secret:           "the secret_token given to setWebhook (1 to 256 of A-Z, a-z, 0-9, _ and -)",
		KeyNote:          "Telegram sends the secret token as it is and signs nothing: whoever sees one delivery can send any. The key is update_id, Telegram's own id, the same on every retry; allow_unsigned_key is set and `clawgate check` warns.",
		Retries:          "Telegram repeats an update until the webhook answers 2xx, and gives up after a reasonable number of attempts.",
		Docs:             "https://core.telegram.org/bots/api#setwebhook",
		Vector:           "built: a token has no signature to publish; the header carries the configured token, as documented",
		Sample:           `{"update_id":` + "{now}" + `,"message":{"message_id":1,"date":{now},"text":"` + sampleID + `","chat":{"id":1,"type":"private"}}}`,
	},
	{
		Name: "twilio", Title: "Twilio",
		Verify: Config{Scheme: SchemeHMAC, Header: "X-Twilio-Signature", Algorithm: "sha1", Encoding: "base64",
			Template: "{url}{sorted_form}", AlgorithmHeader: "X-Twilio-Webhooks-Signature-Settings"},
		Key:        []string{"body:sha256"},
		Needs:      []string{"secrets", "public_url"},
		Secret:     "the account's Auth Token (HMAC-SHA1), and the SharedKey secret where webhooks are signed with a SharedKey (HMAC-SHA256)",
		KeyNote:    "Twilio signs the URL and the form's fields sorted by name, each distinct name=value pair once, not the body's bytes: the same fields in another order, or with a pair repeated, verify too. The key is the body's SHA-256 and the gateway guards the route: it remembers each signed URL + fields and refuses them under another key. No timestamp is signed: a copy is refused for the retention. public_url must be the URL exactly as configured at Twilio, query string included; JSON-bodied webhooks (bodySHA256) are not supported. A SharedKey webhook names HMAC_SHA256 in X-Twilio-Webhooks-Signature-Settings and is verified with it; write algorithm: sha256 to refuse HMAC-SHA1.",
		Retries:    "Twilio does not retry a webhook by default; with connection overrides (#rc=) it retries failed connections, sending I-Twilio-Idempotency-Token.",
		Docs:       "https://www.twilio.com/docs/usage/security#validating-requests",
		Vector:     "published: Twilio's request-validation example (TwilioDevEd/api-snippets security/signature_validation, auth token 12345, https://mycompany.com/myapp.php?foo=1&bar=2); checked against SDK: twilio@6.3.1",
		Sample:     "MessageSid=SM" + sampleID + "&MessageStatus=delivered&AccountSid=AC1&From=%2B15005550006&To=%2B15005550009",
		SampleType: formType,
	},
	{
		Name: "twitch", Title: "Twitch EventSub",
		Verify: Config{Scheme: SchemeHMAC, Header: "Twitch-Eventsub-Message-Signature", Format: "sha256={signature}",
			Template:  "{header:Twitch-Eventsub-Message-Id}{header:Twitch-Eventsub-Message-Timestamp}{body}",
			Timestamp: "header:Twitch-Eventsub-Message-Timestamp", TimestampFormat: "rfc3339", Tolerance: 10 * time.Minute},
		Key:     []string{"header:Twitch-Eventsub-Message-Id"},
		Needs:   []string{"secrets"},
		Secret:  "the secret given when the EventSub subscription was created",
		KeyNote: "Twitch signs message id + timestamp + body: the message id is signed and stays the same when Twitch resends, so it is the key; the timestamp bounds a captured delivery to 10 minutes, as Twitch asks.",
		Retries: "Twitch resends a notification it is not sure was received, with the same message id; a callback that keeps failing has its subscription revoked.",
		Docs:    "https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message",
		Vector:  "built: Twitch publishes no example signature; HMAC-SHA256 of id + timestamp + body, hex, after sha256=, as documented",
		Sample:  `{"subscription":{"id":"s","type":"channel.follow","version":"2"},"event":{"user_id":"` + sampleID + `","followed_at":"{now_rfc3339}"}}`,
	},
	{
		Name: "typeform", Title: "Typeform",
		Verify:  Config{Scheme: SchemeHMAC, Header: "Typeform-Signature", Encoding: "base64", Format: "sha256={signature}"},
		Key:     []string{"json:event_id"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret",
		KeyNote: "Typeform signs the body, whose event_id is the key. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "Typeform retries a failed delivery, and disables a webhook answered 410 Gone.",
		Docs:    "https://www.typeform.com/developers/webhooks/secure-your-webhooks/",
		Vector:  "built: Typeform publishes no example signature; HMAC-SHA256 of the body, base64, after sha256=, as documented",
		Sample:  `{"event_id":"` + sampleID + `","event_type":"form_response","form_response":{"form_id":"f","submitted_at":"{now_rfc3339}"}}`,
	},
	{
		Name: "vercel", Title: "Vercel",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-Vercel-Signature", Algorithm: "sha1"},
		Key:     []string{"json:id"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret (or the integration's client secret)",
		KeyNote: "Vercel signs the body (HMAC-SHA1), whose id is the event's: the key is that signed id. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "Vercel retries a failed delivery with backoff.",
		Docs:    "https://vercel.com/docs/webhooks/webhooks-api#securing-webhooks",
		Vector:  "built: Vercel publishes no example signature; HMAC-SHA1 of the body, hex, as documented",
		Sample:  `{"id":"` + sampleID + `","type":"deployment.succeeded","createdAt":{now_ms},"payload":{}}`,
	},
	{
		Name: "woocommerce", Title: "WooCommerce",
		Verify:  Config{Scheme: SchemeHMAC, Header: "X-WC-Webhook-Signature", Encoding: "base64"},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the webhook's secret (WooCommerce > Settings > Advanced > Webhooks)",
		KeyNote: "WooCommerce signs the body; X-WC-Webhook-Delivery-ID is not signed. The key is the body's SHA-256, signed. No timestamp is signed: a copy is a duplicate for the retention.",
		Retries: "WooCommerce does not retry a failed delivery; a webhook that fails 5 times in a row is disabled.",
		Docs:    "https://woocommerce.com/document/webhooks/",
		Vector:  "built: WooCommerce publishes no example signature; HMAC-SHA256 of the body, base64, as documented",
		Sample:  `{"id":1,"order_key":"wc_order_` + sampleID + `","status":"processing","date_modified_gmt":"{now_rfc3339}"}`,
	},
	{
		Name: "zoom", Title: "Zoom",
		Verify: Config{Scheme: SchemeHMAC, Header: "X-Zm-Signature", Format: "v0={signature}",
			Template: "v0:{header:X-Zm-Request-Timestamp}:{body}", Timestamp: "header:X-Zm-Request-Timestamp", Tolerance: 90 * time.Minute},
		Key:     []string{"body:sha256"},
		Needs:   []string{"secrets"},
		Secret:  "the app's Secret Token (Features > Access)",
		KeyNote: "Zoom signs \"v0:{timestamp}:{body}\": its payload has no event id, so the key is the body's hash, signed: a retry and a captured copy are duplicates. Zoom does not say whether a retry carries a new timestamp, so the tolerance covers its 85 minutes of retries (write tolerance: 5m if yours are re-signed). Zoom's endpoint.url_validation challenge is signed too and reaches the upstream, which answers it.",
		Retries: "Zoom retries a failed event 3 times: 5 minutes after the first attempt, then 20 and 60 minutes after the one before (85 minutes in all); it waits 3 seconds for the answer.",
		Docs:    "https://developers.zoom.us/docs/api/webhooks/#verify-webhook-events",
		Vector:  "built: Zoom publishes no secret, body and signature together; HMAC-SHA256 of \"v0:{timestamp}:{body}\", hex, after v0=, as documented; checked against SDK: @zoom/rivet@0.4.0 (compact JSON only: Rivet signs the body re-serialised, Zoom the raw body)",
		Sample:  `{"event":"meeting.started","event_ts":{now_ms},"payload":{"account_id":"a","object":{"uuid":"` + sampleID + `","id":1}}}`,
	},
}

// Presets returns every preset, sorted by name.
func Presets() []Preset {
	return append([]Preset(nil), presets...)
}

// PresetNames lists the valid values of a route's provider field.
func PresetNames() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	return out
}

// LookupPreset returns the preset named name (case and surrounding spaces
// ignored).
func LookupPreset(name string) (Preset, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, p := range presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// SampleBody returns the preset's sample body for event id at now, and its
// content type.
func (p *Preset) SampleBody(id string, now time.Time) ([]byte, string) {
	r := strings.NewReplacer(
		sampleID, id,
		"{now}", formatTS(now, tsUnix),
		"{now_ms}", formatTS(now, tsUnixMS),
		"{now_rfc3339}", now.UTC().Format(time.RFC3339),
	)
	typ := p.SampleType
	if typ == "" {
		typ = "application/json"
	}
	return []byte(r.Replace(p.Sample)), typ
}
