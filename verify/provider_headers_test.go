package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"sort"
	"strings"
	"testing"
)

// The headers a provider chooses among: Twilio's signature settings,
// Shopify's two HMAC headers and Svix's header names. Independent of the
// providers' SDKs, which sdk_test.go runs against the same presets.

const (
	twilioSettings = "X-Twilio-Webhooks-Signature-Settings"
	twilioForm     = "MessageSid=SM1&To=%2B15005550009&Body=caf%C3%A9+ok&To=%2B15005550001"
	twilioSecret   = "twilio-auth-token-0123456789"
)

// twilioSig computes Twilio's signature independently: the URL, then the
// distinct name=value pairs sorted, decoded.
func twilioSig(newHash func() hash.Hash, url string, pairs ...string) string {
	sort.Strings(pairs)
	var b strings.Builder
	b.WriteString(url)
	for i, p := range pairs {
		if i > 0 && p == pairs[i-1] {
			continue
		}
		b.WriteString(strings.Replace(p, "=", "", 1))
	}
	return base64.StdEncoding.EncodeToString(mac(newHash, []byte(twilioSecret), b.String()))
}

func twilioConfig(algorithm string) Config {
	p, _ := LookupPreset("twilio")
	c := p.Verify
	if algorithm != "" {
		c.Algorithm = algorithm
	}
	c.PublicURL = testPublicURL
	c.Secrets = []SecretConfig{{ID: "s1", Secret: twilioSecret}}
	return c
}

// TestTwilioSignatureSettings: the preset verifies HMAC-SHA1 and, where
// X-Twilio-Webhooks-Signature-Settings names it, HMAC-SHA256; a route with
// algorithm: sha256 refuses HMAC-SHA1 whatever the header says; anything
// but the two names is refused.
func TestTwilioSignatureSettings(t *testing.T) {
	pairs := []string{"MessageSid=SM1", "To=+15005550009", "Body=café ok", "To=+15005550001"}
	sha1Sig := twilioSig(sha1.New, testPublicURL, pairs...)
	sha256Sig := twilioSig(sha256.New, testPublicURL, pairs...)
	const absent = "(absent)"
	tests := []struct {
		route, sig, settings, want string
	}{
		{"", sha1Sig, absent, ""},
		{"", sha1Sig, "", ""},
		{"", sha1Sig, "key=webhooks_sharedkey_1", ""},
		{"", sha1Sig, "key=k,algorithm=HMAC_SHA1", ""},
		{"", sha256Sig, "key=k,algorithm=HMAC_SHA256", ""},
		{"", sha256Sig, "algorithm=hmac_sha256", ""},
		{"", sha256Sig, " key = k , algorithm = HMAC_SHA256 ", ""},
		{"", sha256Sig, "algorithm=,algorithm=HMAC_SHA256", ""},
		{"", sha256Sig, "algorithm=HMAC_SHA256,algorithm=HMAC_SHA1", ""},
		{"", sha256Sig, absent, "mismatch"},
		{"", sha256Sig, "key=k", "mismatch"},
		{"", sha256Sig, "Algorithm=HMAC_SHA256", "mismatch"}, // the item's name is case-sensitive, as in the SDK
		{"", sha1Sig, "algorithm=HMAC_SHA256", "mismatch"},
		{"", sha256Sig, "algorithm=HMAC_SHA1", "mismatch"},
		{"", sha256Sig, "algorithm=HMAC_SHA512", "malformed"},
		{"", sha1Sig, "algorithm=SHA1", "malformed"},
		{"", sha1Sig, "algorithm=MD5", "malformed"},
		// algorithm: sha256 is the floor: the header cannot lower it.
		{"sha256", sha256Sig, absent, ""},
		{"sha256", sha256Sig, "key=k,algorithm=HMAC_SHA256", ""},
		{"sha256", sha256Sig, "key=k", ""},
		{"sha256", sha1Sig, absent, "mismatch"},
		{"sha256", sha1Sig, "key=k,algorithm=HMAC_SHA1", "mismatch"},
		{"sha256", sha256Sig, "key=k,algorithm=HMAC_SHA1", "mismatch"},
		{"sha256", sha256Sig, "algorithm=HMAC_SHA512", "malformed"},
	}
	env := testEnv(t, nil)
	for _, tt := range tests {
		t.Run(tt.route+"/"+tt.settings, func(t *testing.T) {
			v := mustNew(t, twilioConfig(tt.route), env)
			h := http.Header{}
			h.Set("X-Twilio-Signature", tt.sig)
			if tt.settings != absent {
				h.Set(twilioSettings, tt.settings)
			}
			id, err := v.Verify(h, []byte(twilioForm), now)
			wantReason(t, id, err, tt.want, "s1")
			noLeak(t, err, twilioSecret, tt.sig)
		})
	}

	// The signed content, hence the replay guard's digest, does not depend
	// on the algorithm.
	d := mustNew(t, twilioConfig(""), env).(SignedDigester)
	h1 := http.Header{"X-Twilio-Signature": {sha1Sig}}
	h2 := http.Header{"X-Twilio-Signature": {sha256Sig}, twilioSettings: {"algorithm=HMAC_SHA256"}}
	d1, ok1 := d.SignedDigest(h1, []byte(twilioForm))
	d2, ok2 := d.SignedDigest(h2, []byte(twilioForm))
	if !ok1 || !ok2 || d1 != d2 {
		t.Errorf("digests %x %v, %x %v: want the same", d1, ok1, d2, ok2)
	}
}

// TestTwilioSignerAnnouncesAlgorithm: the Signer signs with the route's
// algorithm and, for HMAC-SHA256, says so in the settings header, as
// Twilio does for a SharedKey; HMAC-SHA1 goes without it.
func TestTwilioSignerAnnouncesAlgorithm(t *testing.T) {
	env := testEnv(t, nil)
	for alg, settings := range map[string]string{"sha1": "", "sha256": "algorithm=HMAC_SHA256"} {
		t.Run(alg, func(t *testing.T) {
			c := twilioConfig(alg)
			s, err := NewSigner(c, env, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			h.Set(twilioSettings, "algorithm=HMAC_SHA512") // replaced or removed
			if err := s.Sign(h, []byte(twilioForm), now); err != nil {
				t.Fatal(err)
			}
			if got := h.Get(twilioSettings); got != settings {
				t.Errorf("settings header %q, want %q", got, settings)
			}
			newHash := sha1.New
			if alg == "sha256" {
				newHash = sha256.New
			}
			want := twilioSig(newHash, testPublicURL, "MessageSid=SM1", "To=+15005550009", "Body=café ok", "To=+15005550001")
			if got := h.Get("X-Twilio-Signature"); got != want {
				t.Errorf("signature %q, want %q", got, want)
			}
			id, err := mustNew(t, c, env).Verify(h, []byte(twilioForm), now)
			wantReason(t, id, err, "", "s1")
		})
	}
}

// TestTwilioSettingsDoNotAllocate: verifying a SharedKey delivery
// (HMAC-SHA256 chosen by the header) allocates nothing either.
func TestTwilioSettingsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	env := testEnv(t, nil)
	v := mustNew(t, twilioConfig(""), env)
	h := http.Header{}
	h.Set("X-Twilio-Signature", twilioSig(sha256.New, testPublicURL, "MessageSid=SM1", "To=+15005550009", "Body=café ok", "To=+15005550001"))
	h.Set(twilioSettings, "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256")
	body := []byte(twilioForm)
	if _, err := v.Verify(h, body, now); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { v.Verify(h, body, now) }); n != 0 {
		t.Errorf("Verify allocates %v times", n)
	}
}

// TestAlgorithmHeaderConfig: algorithm_header is refused where it cannot
// work.
func TestAlgorithmHeaderConfig(t *testing.T) {
	env := testEnv(t, nil)
	base := Config{Scheme: SchemeHMAC, Header: "X-Signature", Secrets: []SecretConfig{{Secret: "algorithm-header-secret-0123"}}}
	for name, tt := range map[string]struct {
		alg, hdr, want string
	}{
		"sha512":        {"sha512", "X-Settings", "algorithm must be one of them"},
		"bad name":      {"sha1", "X Settings", "not a header name"},
		"the signature": {"sha1", "x-signature", "must not be the signature's header"},
	} {
		t.Run(name, func(t *testing.T) {
			c := base
			c.Algorithm, c.AlgorithmHeader = tt.alg, tt.hdr
			if _, _, err := New(c, env); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error saying %q", err, tt.want)
			}
		})
	}
	// Without a template, the body is signed; the header still chooses.
	c := base
	c.Algorithm, c.AlgorithmHeader = "sha1", "X-Settings"
	v := mustNew(t, c, env)
	body := []byte(`{"id":"evt_1"}`)
	h := http.Header{"X-Signature": {hexMAC("algorithm-header-secret-0123", string(body))}, "X-Settings": {"algorithm=HMAC_SHA256"}}
	if _, err := v.Verify(h, body, now); err != nil {
		t.Errorf("sha256 over the body: %v", err)
	}
}

// TestShopifyEventsHeader: Shopify Events' Shopify-Hmac-Sha256 verifies
// as X-Shopify-Hmac-Sha256 does, and is read first when present and not
// empty, as @shopify/shopify-api reads it; the signature covers the body
// alone, whichever header carries it.
func TestShopifyEventsHeader(t *testing.T) {
	const secret = "shopify-client-secret-0123456789"
	env := testEnv(t, nil)
	v := mustNew(t, Config{Scheme: SchemeShopify, Secrets: []SecretConfig{{ID: "s1", Secret: secret}}}, env)
	body := []byte(`{"id":1,"admin_graphql_api_id":"gid://shopify/Order/1"}`)
	good := b64MAC([]byte(secret), string(body))
	bad := flipB64Char(good, 3)
	const absent = "(absent)"
	for _, tt := range []struct {
		events, webhooks, want string
	}{
		{good, absent, ""},
		{absent, good, ""},
		{good, good, ""},
		{good, bad, ""},
		{bad, good, "mismatch"},
		{bad, absent, "mismatch"},
		{"", good, ""},
		{" \t", good, ""},
		{"!!", good, "malformed"},
		{absent, absent, "missing"},
		{"", "", "missing"},
	} {
		t.Run(tt.events+"/"+tt.webhooks, func(t *testing.T) {
			h := http.Header{}
			if tt.events != absent {
				h["Shopify-Hmac-Sha256"] = []string{tt.events}
			}
			if tt.webhooks != absent {
				h["X-Shopify-Hmac-Sha256"] = []string{tt.webhooks}
			}
			id, err := v.Verify(h, body, now)
			wantReason(t, id, err, tt.want, "s1")
			if tt.want == "" {
				if _, err := v.Verify(h, flipByte(body, 5), now); Reason(err) != "mismatch" || err == nil {
					t.Errorf("a changed body: %v, want mismatch", err)
				}
			}
		})
	}
	// A hand-built header map, names in any case.
	if id, err := v.Verify(http.Header{"shopify-hmac-sha256": {good}}, body, now); err != nil || id != "s1" {
		t.Errorf("lower-case Shopify-Hmac-Sha256: %q %v", id, err)
	}
	// The signature binds no header, and the digest is the body's alone.
	if got := SignedHeaders(SchemeShopify); len(got) != 0 {
		t.Errorf("SignedHeaders(shopify) = %v, want none", got)
	}
	d := v.(SignedDigester)
	d1, _ := d.SignedDigest(http.Header{"X-Shopify-Hmac-Sha256": {good}}, body)
	d2, _ := d.SignedDigest(http.Header{"Shopify-Hmac-Sha256": {good}}, body)
	if d1 != d2 || d1 != signedDigest(body) {
		t.Error("the digest depends on the header carrying the signature")
	}
	// The Signer sets the webhooks header.
	s, err := NewSigner(Config{Scheme: SchemeShopify, Secrets: []SecretConfig{{Secret: secret}}}, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, body, now); err != nil {
		t.Fatal(err)
	}
	if h.Get("X-Shopify-Hmac-Sha256") != good || h.Get("Shopify-Hmac-Sha256") != "" {
		t.Errorf("the Signer set %v", h)
	}
}

// TestSvixSignerHeaders: with header svix-signature (Clerk, Resend), the
// Signer sends svix-id, svix-timestamp and svix-signature, as Svix does,
// and no webhook-* header; without it, the webhook-* ones. The verifier
// accepts either family whatever the header says.
func TestSvixSignerHeaders(t *testing.T) {
	env := testEnv(t, nil)
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("svix-header-test-secret-0123456"))
	body := []byte(`{"type":"user.created"}`)
	for _, tt := range []struct {
		header     string
		send, drop string
		given      http.Header
		wantID     string
	}{
		{"", "Webhook-", "Svix-", http.Header{}, ""},
		{"webhook-signature", "Webhook-", "Svix-", http.Header{"Svix-Id": {"msg_given"}}, "msg_given"},
		{"svix-signature", "Svix-", "Webhook-", http.Header{}, ""},
		{"Svix-Signature", "Svix-", "Webhook-", http.Header{"Webhook-Id": {"msg_given"}, "Webhook-Timestamp": {"1"}}, "msg_given"},
		{" svix-signature ", "Svix-", "Webhook-", http.Header{"Svix-Id": {"msg_svix"}, "Webhook-Id": {"msg_webhook"}}, "msg_svix"},
		{"svix-signature", "Svix-", "Webhook-", http.Header{"webhook-id": {"msg_lower"}}, "msg_lower"},
	} {
		t.Run(tt.header, func(t *testing.T) {
			c := Config{Scheme: SchemeStandardWebhooks, Header: tt.header, Secrets: []SecretConfig{{ID: "s1", Secret: secret}}}
			s, err := NewSigner(c, env, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := tt.given.Clone()
			if err := s.Sign(h, body, now); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"Id", "Timestamp", "Signature"} {
				if h.Get(tt.send+n) == "" {
					t.Errorf("no %s%s in %v", tt.send, n, h)
				}
			}
			for k := range h {
				if strings.HasPrefix(strings.ToLower(k), strings.ToLower(tt.drop)) {
					t.Errorf("%s sent beside the %s* headers: %v", k, tt.send, h)
				}
			}
			if tt.wantID != "" && h.Get(tt.send+"Id") != tt.wantID {
				t.Errorf("id %q, want %q", h.Get(tt.send+"Id"), tt.wantID)
			}
			v := mustNew(t, c, env)
			id, err := v.Verify(h, body, now)
			wantReason(t, id, err, "", "s1")
			// The other family verifies too.
			other := http.Header{}
			for _, n := range []string{"Id", "Timestamp", "Signature"} {
				other.Set(tt.drop+n, h.Get(tt.send+n))
			}
			id, err = v.Verify(other, body, now)
			wantReason(t, id, err, "", "s1")
		})
	}
	for _, bad := range []string{"X-Signature", "svix-id", "webhook-id"} {
		c := Config{Scheme: SchemeStandardWebhooks, Header: bad, Secrets: []SecretConfig{{Secret: secret}}}
		if _, _, err := New(c, env); err == nil || !strings.Contains(err.Error(), "svix-signature") {
			t.Errorf("header %q: %v, want an error naming the valid ones", bad, err)
		}
	}
}
