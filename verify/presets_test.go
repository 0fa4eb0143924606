package verify

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/idkey"
)

// The providers the gateway must know by name.
var wantPresets = []string{
	"github", "gitlab", "bitbucket", "stripe", "shopify", "slack", "twilio", "sendgrid", "mailgun", "paddle",
	"square", "zoom", "twitch", "discord", "hubspot", "intercom", "linear", "typeform", "calendly", "pagerduty",
	"sentry", "vercel", "lemonsqueezy", "razorpay", "coinbase-commerce", "woocommerce", "dropbox", "telegram",
	"plaid", "google-pubsub", "clerk", "resend",
}

// How each preset protects its key (see the config's replay guard):
// signed, the first key source is covered by the signature; guarded, it is
// not, and the verifier digests the signed content for the replay guard;
// unsigned, nothing can be signed and allow_unsigned_key is set.
var keyProtection = map[string]string{
	"twilio": "guarded", "mailgun": "guarded",
	"gitlab": "unsigned", "telegram": "unsigned", "google-pubsub": "unsigned",
}

const testPublicURL = "https://gateway.example.com/hooks/provider?x=1"

// presetKeys are the key pairs the public-key presets are tested with.
type presetKeys struct {
	ed    ed25519.PrivateKey
	ec    *ecdsa.PrivateKey
	ecPEM []byte // PKCS #8 private key
	jwks  map[string][]byte
}

func newPresetKeys(t testing.TB) *presetKeys {
	t.Helper()
	k := getKeys(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	return &presetKeys{ed: k.ed, ec: ec, ecPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})}
}

// presetConfig returns p's verify block completed as a route would write
// it (a secret or public key, public_url, an audience), and the signing
// key a Signer needs for it.
func presetConfig(t testing.TB, p Preset, env Env, keys *presetKeys) (Config, []byte) {
	t.Helper()
	c := p.Verify
	c.PublicURL = testPublicURL
	var signKey []byte
	switch c.Scheme {
	case SchemeStandardWebhooks:
		c.Secrets = []SecretConfig{{ID: "s1", Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("preset-test-secret-0123456789abc"))}}
	case SchemeEd25519:
		c.Secrets = []SecretConfig{{ID: "s1", Secret: hex.EncodeToString(keys.ed.Public().(ed25519.PublicKey))}}
		signKey = []byte(hex.EncodeToString(keys.ed.Seed()))
	case SchemeECDSAP256:
		der, err := x509.MarshalPKIXPublicKey(&keys.ec.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		c.Secrets = []SecretConfig{{ID: "s1", Secret: base64.StdEncoding.EncodeToString(der)}}
		signKey = keys.ecPEM
	case SchemeJWT:
		var priv any = keys.ec
		if c.JWT.Algorithms[0] == "RS256" {
			priv = getKeys(t).rsa
		}
		pub := priv.(crypto.Signer).Public()
		writeFile(t, env.Dir, p.Name+".pub", pemPublic(t, pub))
		c.JWT.JWKSURL = "" // the test does not fetch Google's keys
		c.JWT.Keys = []JWTKeyConfig{{ID: "s1", PEMFile: p.Name + ".pub"}}
		if p.Name == "google-pubsub" {
			c.JWT.Audience = "https://gateway.example.com/pubsub"
		}
		signKey = pemPKCS8(t, priv)
	default:
		c.Secrets = []SecretConfig{{ID: "s1", Secret: "preset-test-secret-0123456789"}}
	}
	return c, signKey
}

func TestPresetTable(t *testing.T) {
	names := PresetNames()
	if !sort.StringsAreSorted(names) {
		t.Errorf("presets are not sorted by name: %v", names)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("preset %q twice", n)
		}
		seen[n] = true
	}
	for _, n := range wantPresets {
		if !seen[n] {
			t.Errorf("no preset %q", n)
		}
	}
	if p, ok := LookupPreset("  Zoom "); !ok || p.Name != "zoom" {
		t.Errorf("LookupPreset ignores neither case nor spaces")
	}
	if _, ok := LookupPreset("nope"); ok {
		t.Error("unknown preset found")
	}
	env := testEnv(t, nil)
	keys := newPresetKeys(t)
	for _, p := range Presets() {
		t.Run(p.Name, func(t *testing.T) {
			for field, v := range map[string]string{"Title": p.Title, "KeyNote": p.KeyNote, "Retries": p.Retries,
				"Docs": p.Docs, "Vector": p.Vector, "Secret": p.Secret, "Sample": p.Sample, "Family": p.Family()} {
				if strings.TrimSpace(v) == "" {
					t.Errorf("%s is empty", field)
				}
			}
			if !strings.HasPrefix(p.Docs, "https://") {
				t.Errorf("Docs %q is not an https URL", p.Docs)
			}
			if len(p.Verify.Secrets) != 0 {
				t.Error("a preset must hold no secret")
			}
			if _, err := idkey.ParseKey(p.Key); err != nil {
				t.Errorf("key %v: %v", p.Key, err)
			}
			if p.AllowUnsignedKey != (keyProtection[p.Name] == "unsigned") {
				t.Errorf("AllowUnsignedKey %v, protection %q", p.AllowUnsignedKey, keyProtection[p.Name])
			}
			c, _ := presetConfig(t, p, env, keys)
			v, _, err := New(c, env)
			if err != nil {
				t.Fatalf("the preset does not compile: %v", err)
			}
			if _, digests := v.(SignedDigester); keyProtection[p.Name] == "guarded" && !digests {
				t.Error("a guarded preset's verifier must be a SignedDigester")
			}
			if UsesURL(c) != containsString(p.Needs, "public_url") {
				t.Errorf("UsesURL %v, but Needs %v", UsesURL(c), p.Needs)
			}
			body, typ := p.SampleBody("abc123", now)
			if typ == "application/json" && !json.Valid(body) {
				t.Errorf("sample body is not JSON: %s", body)
			}
		})
	}
}

// vector is one entry of testdata/provider_vectors.json.
type vector struct {
	Provider  string            `json:"provider"`
	Source    string            `json:"source"`
	Origin    string            `json:"origin"`
	Note      string            `json:"note"`
	Secret    string            `json:"secret"`
	KeyPEM    string            `json:"key_pem"`
	KeyID     string            `json:"key_id"`
	PublicURL string            `json:"public_url"`
	Now       int64             `json:"now"`
	Headers   map[string]string `json:"headers"`
	Body      string            `json:"body"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/provider_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestProviderVectors verifies every preset against its vector: the
// provider's published example, its official SDK's test, or (labelled
// "built:") one computed by an independent generator from the documented
// algorithm (testdata/vectorgen). Each must pass, and fail once a byte of
// the body or of the signature changes.
func TestProviderVectors(t *testing.T) {
	vs := loadVectors(t)
	byName := map[string]vector{}
	for _, v := range vs {
		if _, dup := byName[v.Provider]; dup {
			t.Errorf("two vectors for %s", v.Provider)
		}
		byName[v.Provider] = v
		if !strings.HasPrefix(v.Source, "published:") && !strings.HasPrefix(v.Source, "SDK:") && !strings.HasPrefix(v.Source, "built: no published vector") {
			t.Errorf("%s: source %q does not say where the vector comes from", v.Provider, v.Source)
		}
		if !strings.HasPrefix(v.Origin, "https://") {
			t.Errorf("%s: origin %q is not a URL", v.Provider, v.Origin)
		}
	}
	for _, p := range Presets() {
		t.Run(p.Name, func(t *testing.T) {
			v, ok := byName[p.Name]
			if !ok {
				t.Fatal("no vector")
			}
			if strings.HasPrefix(v.Source, "built:") != strings.HasPrefix(p.Vector, "built:") {
				t.Errorf("the preset's Vector %q and the vector's source %q disagree", p.Vector, v.Source)
			}
			env := testEnv(t, nil)
			c := p.Verify
			c.PublicURL = v.PublicURL
			switch {
			case v.KeyPEM != "":
				writeFile(t, env.Dir, "key.pem", v.KeyPEM)
				c.JWT.JWKSURL = ""
				c.JWT.Keys = []JWTKeyConfig{{ID: v.KeyID, PEMFile: "key.pem"}}
				if p.Name == "google-pubsub" {
					c.JWT.Audience = "https://gateway.example.com/pubsub"
				}
			default:
				c.Secrets = []SecretConfig{{ID: "vector", Secret: v.Secret}}
			}
			ver := mustNew(t, c, env)
			h := http.Header{}
			for k, val := range v.Headers {
				h.Set(k, val)
			}
			at := time.Unix(v.Now, 0)
			id, err := ver.Verify(h, []byte(v.Body), at)
			wantID := "vector"
			if v.KeyID != "" {
				wantID = v.KeyID
			}
			wantReason(t, id, err, "", wantID)
			if p.Verify.Scheme == SchemeToken {
				return // a token binds no byte of the body
			}
			// A changed byte of the signed content fails.
			body := []byte(v.Body)
			if p.Name == "mailgun" {
				i := bytes.Index(body, []byte(`"token":"`)) + len(`"token":"`)
				body[i] ^= 0x01
			} else if p.Verify.Scheme != SchemeJWT || p.Verify.JWT.BodyHashClaim != "" {
				body = flipByte(body, len(body)/2)
			} else {
				body = nil
			}
			if body != nil {
				_, err = ver.Verify(h, body, at)
				if err == nil {
					t.Error("a changed body verified")
				}
			}
		})
	}
}

// TestPresetDeliveries signs each preset's sample as the provider would and
// checks what the gateway must: the delivery passes under its secret; one
// changed byte of the signature, the timestamp or any signed header fails
// as a mismatch, and so does one of the body where the scheme signs it; a
// timestamp outside the tolerance fails both ways; and the key the route
// derives is covered by the signature (or the route is guarded, or accepts
// the risk, as documented).
func TestPresetDeliveries(t *testing.T) {
	keys := newPresetKeys(t)
	for _, p := range Presets() {
		t.Run(p.Name, func(t *testing.T) {
			env := testEnv(t, nil)
			c, signKey := presetConfig(t, p, env, keys)
			v := mustNew(t, c, env)
			s, err := NewSigner(c, env, signKey)
			if err != nil {
				t.Fatal(err)
			}
			const id = "Ab3xQ9zK7"
			body, typ := p.SampleBody(id, now)
			h := http.Header{"Content-Type": {typ}}
			if bs, ok := s.(BodySigner); ok {
				body, err = bs.SignBody(h, body, now)
			} else {
				err = s.Sign(h, body, now)
			}
			if err != nil {
				t.Fatal(err)
			}
			gotID, err := v.Verify(h, body, now)
			wantReason(t, gotID, err, "", "s1")
			noLeak(t, err, "preset-test-secret")

			check := func(what string, h http.Header, body []byte, at time.Time, want string) {
				t.Helper()
				id, err := v.Verify(h, body, at)
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					return
				}
				if err == nil {
					t.Errorf("%s: verified (id %q), want %s", what, id, want)
					return
				}
				if got := Reason(err); got != want {
					t.Errorf("%s: reason %s (%v), want %s", what, got, err, want)
				}
				var target error
				for _, e := range []error{ErrMissing, ErrMalformed, ErrMismatch, ErrExpired, ErrFuture} {
					if e.Error() == want {
						target = e
					}
				}
				if !errors.Is(err, target) {
					t.Errorf("%s: %v does not wrap %v", what, err, target)
				}
			}

			// The signature.
			sh, sb := flipSignature(t, p, c, h, body)
			check("changed signature", sh, sb, now, "mismatch")

			// The body.
			i := bytes.Index(body, []byte(id))
			if i < 0 {
				t.Fatalf("sample body lacks its id: %s", body)
			}
			changed := append([]byte(nil), body...)
			changed[i] = 'Z'
			bodyBound := SignsBody(c) || p.Name == "mailgun" || p.Name == "twilio"
			if bodyBound {
				check("changed body", h, changed, now, "mismatch")
			} else {
				check("changed body (nothing binds it)", h, changed, now, "")
			}

			// Every signed header, the timestamp among them (svix-id and
			// svix-timestamp where the Signer sends the svix-* family).
			signed := SignedHeadersOf(c)
			if c.Scheme == SchemeStandardWebhooks && strings.EqualFold(c.Header, "svix-signature") {
				signed = append(signed, "Svix-Id", "Svix-Timestamp")
			}
			for _, name := range signed {
				hv := h.Get(name)
				if hv == "" {
					continue // svix-* when webhook-* is used
				}
				h2 := h.Clone()
				h2.Set(name, flipLastDigitOrChar(hv))
				check("changed "+name, h2, body, now, "mismatch")
				h3 := h.Clone()
				h3.Del(name)
				check("no "+name, h3, body, now, "missing")
			}
			if ts := timestampIn(c, h); ts != "" && !containsFold(SignedHeadersOf(c), tsHeaderName(c)) {
				h2 := h.Clone()
				h2.Set(signatureHeader(c), strings.Replace(h.Get(signatureHeader(c)), ts, flipLastDigitOrChar(ts), 1))
				check("changed timestamp", h2, body, now, "mismatch")
			}
			if p.Name == "linear" || p.Name == "mailgun" {
				tb := flipTimestampInBody(t, p, body)
				check("changed timestamp", h, tb, now, "mismatch")
			}

			// The tolerance, both ways.
			if w, field, _ := ReplayWindow(c); w > 0 && field == "tolerance" {
				check("older than the tolerance", h, body, now.Add(w+2*time.Second), "expired")
				check("newer than the tolerance", h, body, now.Add(-w-2*time.Second), "future")
				check("at the tolerance", h, body, now.Add(w-time.Second), "")
			} else if c.Scheme == SchemeJWT {
				check("older than max_age", h, body, now.Add(c.JWT.MaxAge+c.JWT.Leeway+2*time.Second), "expired")
			}

			// The key.
			checkKey(t, p, c, v, h, body, changed)
		})
	}
}

// checkKey checks that the key the route derives is protected as the
// preset documents.
func checkKey(t *testing.T, p Preset, c Config, v Verifier, h http.Header, body, changed []byte) {
	t.Helper()
	spec, err := idkey.ParseKey(p.Key)
	if err != nil {
		t.Fatal(err)
	}
	req := &http.Request{Method: http.MethodPost, Header: h}
	key, err := deriveReq(spec, req, body)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	switch keyProtection[p.Name] {
	case "unsigned":
		if !p.AllowUnsignedKey {
			t.Error("an unsigned key needs allow_unsigned_key")
		}
	case "guarded":
		d, ok := v.(SignedDigester)
		if !ok {
			t.Fatal("a guarded route needs a SignedDigester")
		}
		d1, ok1 := d.SignedDigest(h, body)
		// A copy that still verifies but derives another key has the
		// same digest, which the replay guard refuses.
		other := otherKeyCopy(t, p, body)
		if _, err := v.Verify(h, other, now); err != nil {
			t.Fatalf("the copy under another key does not verify: %v", err)
		}
		k2, _ := deriveReq(spec, req, other)
		d2, ok2 := d.SignedDigest(h, other)
		if k2 == key || !ok1 || !ok2 || d1 != d2 {
			t.Errorf("copy: key %q vs %q, digests equal %v", k2, key, d1 == d2)
		}
	default:
		first := spec.Sources[0]
		switch first.Kind {
		case idkey.KindHeader:
			if !containsFold(SignedHeadersOf(c), first.Name) {
				t.Errorf("key header %s is not signed", first.Name)
			}
		default:
			if !SignsBody(c) {
				t.Errorf("key %v reads the body, which the scheme does not sign", p.Key)
			}
			// The changed body derives another key and does not verify.
			k2, _ := deriveReq(spec, req, changed)
			if k2 == key {
				t.Errorf("the key %q does not depend on the signed id", key)
			}
		}
	}
}

// otherKeyCopy returns a body that the signature still covers but from
// which the route derives another key: Twilio's fields in another order,
// Mailgun's unsigned event-data.id changed.
func otherKeyCopy(t *testing.T, p Preset, body []byte) []byte {
	t.Helper()
	switch p.Name {
	case "twilio":
		fields := strings.Split(string(body), "&")
		for i, j := 0, len(fields)-1; i < j; i, j = i+1, j-1 {
			fields[i], fields[j] = fields[j], fields[i]
		}
		return []byte(strings.Join(fields, "&"))
	case "mailgun":
		return bytes.Replace(body, []byte(`"id":"`), []byte(`"id":"X`), 1)
	}
	t.Fatalf("no copy for %s", p.Name)
	return nil
}

// flipSignature returns h and body with one character of the signature
// changed to another of its alphabet.
func flipSignature(t *testing.T, p Preset, c Config, h http.Header, body []byte) (http.Header, []byte) {
	t.Helper()
	flip := func(s string, i int) string {
		b := []byte(s)
		switch {
		case b[i] == '0':
			b[i] = '1'
		case b[i] == 'A':
			b[i] = 'B'
		case b[i] >= 'a' && b[i] <= 'f', b[i] >= '1' && b[i] <= '9':
			b[i] = '0'
		default:
			b[i] = 'A'
		}
		return string(b)
	}
	if p.Name == "mailgun" {
		i := bytes.Index(body, []byte(`"signature":"`)) + len(`"signature":"`)
		return h, []byte(string(body[:i]) + flip(string(body[i:]), 0))
	}
	name := signatureHeader(c)
	hv := h.Get(name)
	start := 0
	switch {
	case c.Scheme == SchemeJWT:
		start = strings.LastIndexByte(hv, '.') + 1
	case c.Scheme == SchemeStandardWebhooks:
		start = strings.Index(hv, ",") + 1
	case c.Scheme == SchemeToken:
		start = len(hv) / 2
	default:
		for _, prefix := range []string{"v1=", "h1=", "v0=", "sha256=", "sha1="} {
			if i := strings.Index(hv, prefix); i >= 0 {
				start = i + len(prefix)
				break
			}
		}
	}
	h2 := h.Clone()
	h2.Set(name, flip(hv, start))
	return h2, body
}

// signatureHeader names the header carrying c's signature.
func signatureHeader(c Config) string {
	switch c.Scheme {
	case SchemeGitHub:
		return "X-Hub-Signature-256"
	case SchemeShopify:
		return "X-Shopify-Hmac-Sha256"
	case SchemeStripe:
		return stripeHeader
	case SchemeSlack:
		return slackSignatureHeader
	case SchemeStandardWebhooks:
		if strings.EqualFold(c.Header, "svix-signature") {
			return "Svix-Signature"
		}
		return "Webhook-Signature"
	case SchemeJWT:
		return c.JWT.Header
	}
	return c.Header
}

// timestampIn returns the timestamp a format carries inside the signature
// header ("" when it has none there).
func timestampIn(c Config, h http.Header) string {
	var key string
	switch {
	case c.Scheme == SchemeStripe:
		key = "t="
	case c.Format != "" && strings.Contains(c.Format, "{timestamp}"):
		k, _, _ := strings.Cut(c.Format[:strings.Index(c.Format, "{timestamp}")], "=")
		key = k[strings.LastIndexAny(k, ",; ")+1:] + "="
	default:
		return ""
	}
	hv := h.Get(signatureHeader(c))
	i := strings.Index(hv, key)
	if i < 0 {
		return ""
	}
	rest := hv[i+len(key):]
	if j := strings.IndexAny(rest, ",;"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func tsHeaderName(c Config) string {
	if k, name, ok := strings.Cut(c.Timestamp, ":"); ok && k == "header" {
		return name
	}
	return ""
}

// flipTimestampInBody changes the last digit of a timestamp signed inside
// the body (Linear's webhookTimestamp, Mailgun's signature.timestamp).
func flipTimestampInBody(t *testing.T, p Preset, body []byte) []byte {
	t.Helper()
	field := `"webhookTimestamp":`
	if p.Name == "mailgun" {
		field = `"timestamp":"`
	}
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		t.Fatalf("no %s in %s", field, body)
	}
	j := i + len(field)
	for j < len(body) && body[j] >= '0' && body[j] <= '9' {
		j++
	}
	out := append([]byte(nil), body...)
	out[j-1] = flipDigit(out[j-1])
	return out
}

func flipDigit(b byte) byte {
	if b == '9' {
		return '8'
	}
	return b + 1
}

// flipLastDigitOrChar changes the last digit of s (a timestamp stays a
// timestamp, one unit away), or else its last character.
func flipLastDigitOrChar(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] >= '0' && b[i] <= '9' {
			b[i] = flipDigit(b[i])
			return string(b)
		}
	}
	b[len(b)-1] ^= 0x01
	return string(b)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// deriveReq derives k's key from r (nil: no request) and body.
func deriveReq(k *idkey.KeySpec, r *http.Request, body []byte) (string, error) {
	if r == nil {
		return k.Derive(nil, "", body)
	}
	q := ""
	if r.URL != nil {
		q = r.URL.RawQuery
	}
	return k.Derive(r.Header, q, body)
}
