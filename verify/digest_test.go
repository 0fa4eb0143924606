package verify

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// signedBytes returns, independently of the package, what each fixture's
// signature covers.
func signedBytes(name string, h http.Header, body []byte) []byte {
	switch name {
	case "stripe":
		v := h.Get("Stripe-Signature")
		t := strings.TrimPrefix(v[:strings.Index(v, ",")], "t=")
		return []byte(t + "." + string(body))
	case "slack":
		return []byte("v0:" + h.Get("X-Slack-Request-Timestamp") + ":" + string(body))
	case "standard-webhooks":
		return []byte(h.Get("Webhook-Id") + "." + h.Get("Webhook-Timestamp") + "." + string(body))
	case "svix":
		return []byte(h.Get("Svix-Id") + "." + h.Get("Svix-Timestamp") + "." + string(body))
	}
	return body
}

func digestOf(t *testing.T, d SignedDigester, h http.Header, body []byte) [32]byte {
	t.Helper()
	sum, ok := d.SignedDigest(h, body)
	if !ok {
		t.Fatalf("SignedDigest: ok false for %v", h)
	}
	return sum
}

// TestSignedDigestMACSchemes: every HMAC scheme digests exactly its signed
// bytes; a change to a signed byte changes the digest, a change to what is
// not signed does not.
func TestSignedDigestMACSchemes(t *testing.T) {
	for _, f := range macFixtures() {
		t.Run(f.name, func(t *testing.T) {
			newS, oldS := f.secret("new"), f.secret("old")
			env := testEnv(t, map[string]string{"NEW": newS, "OLD": oldS})
			v := mustNew(t, f.config([]SecretConfig{{ID: "new", SecretEnv: "NEW"}, {ID: "old", SecretEnv: "OLD"}}), env)
			d, ok := v.(SignedDigester)
			if !ok {
				t.Fatalf("%T is not a SignedDigester", v)
			}
			body := []byte(`{"id":"evt_1","amount":42}`)
			h := f.sign(newS, body, now)
			if _, err := v.Verify(h, body, now); err != nil {
				t.Fatal(err)
			}
			base := digestOf(t, d, h, body)
			if want := sha256.Sum256(signedBytes(f.name, h, body)); base != want {
				t.Fatalf("digest is not the SHA-256 of the signed bytes %q", signedBytes(f.name, h, body))
			}

			same := func(t *testing.T, h http.Header, body []byte) {
				t.Helper()
				if _, err := v.Verify(h, body, now); err != nil {
					t.Fatalf("the changed copy no longer verifies: %v", err)
				}
				if got := digestOf(t, d, h, body); got != base {
					t.Error("digest changed with an unsigned change")
				}
			}
			differs := func(t *testing.T, h http.Header, body []byte) {
				t.Helper()
				if got := digestOf(t, d, h, body); got == base {
					t.Error("digest did not change with a signed change")
				}
			}

			t.Run("second copy", func(t *testing.T) { same(t, f.sign(newS, body, now), body) })
			t.Run("other secret", func(t *testing.T) { same(t, f.sign(oldS, body, now), body) })
			t.Run("unsigned header added", func(t *testing.T) {
				c := h.Clone()
				c.Set("X-Forwarded-For", "203.0.113.9")
				c.Set("Idempotency-Key", "fresh")
				same(t, c, body)
			})
			if f.combine != nil {
				t.Run("bogus second signature", func(t *testing.T) {
					same(t, f.combine(h, f.sign(f.secret("attacker"), body, now)), body)
				})
			}
			if strings.Contains(f.name, "hex") || f.name == "github" || f.name == "stripe" || f.name == "slack" || f.name == "hmac-defaults" {
				t.Run("hex case", func(t *testing.T) {
					c := h.Clone()
					c.Set(f.sigHeader, upperHex(c.Get(f.sigHeader)))
					if c.Get(f.sigHeader) == h.Get(f.sigHeader) {
						t.Fatal("upperHex changed nothing")
					}
					same(t, c, body)
				})
			}
			t.Run("body", func(t *testing.T) { differs(t, f.sign(newS, flipByte(body, 5), now), flipByte(body, 5)) })
			t.Run("empty body", func(t *testing.T) { differs(t, f.sign(newS, nil, now), nil) })
			if f.timestamp {
				t.Run("timestamp", func(t *testing.T) {
					later := now.Add(time.Second)
					differs(t, f.sign(newS, body, later), body)
				})
			}
			if strings.Contains(f.name, "webhooks") || f.name == "svix" {
				t.Run("id", func(t *testing.T) {
					c := h.Clone()
					for k := range c {
						if strings.HasSuffix(k, "-Id") {
							c.Set(k, "msg_other")
						}
					}
					differs(t, c, body)
				})
			}
			t.Run("no allocations", func(t *testing.T) {
				if raceEnabled {
					t.Skip("allocation counts are meaningless under the race detector")
				}
				if n := testing.AllocsPerRun(100, func() { d.SignedDigest(h, body1K) }); n != 0 {
					t.Errorf("SignedDigest allocates %v times", n)
				}
			})
		})
	}
}

// upperHex upper-cases the hex digits after the last '=' of a signature
// header, keeping its prefix ("sha256=", "v0=").
func upperHex(v string) string {
	i := strings.LastIndexByte(v, '=')
	return v[:i+1] + strings.ToUpper(v[i+1:])
}

func TestSignedDigestMissingParts(t *testing.T) {
	env := testEnv(t, map[string]string{"S": plainSecret("x"), "W": swSecret("x")})
	cases := []struct {
		scheme string
		h      http.Header
	}{
		{"stripe", http.Header{}},
		{"stripe", setHeader("Stripe-Signature", "v1=00")},
		{"stripe", setHeader("Stripe-Signature", "t=1,t=2")},
		{"slack", setHeader("X-Slack-Signature", "v0=00")},
		{"standard-webhooks", setHeader("Webhook-Timestamp", "1")},
		{"standard-webhooks", setHeader("Webhook-Id", "msg_1")},
		// A webhook-* header selects that family even beside complete
		// svix-* headers, as in Verify.
		{"standard-webhooks", func() http.Header {
			h := setHeader("Svix-Id", "msg_1")
			h.Set("Svix-Timestamp", "1")
			h.Set("Webhook-Signature", "v1,AAAA")
			return h
		}()},
	}
	for _, tc := range cases {
		secret := "S"
		if tc.scheme == "standard-webhooks" {
			secret = "W"
		}
		v := mustNew(t, Config{Scheme: tc.scheme, Secrets: []SecretConfig{{SecretEnv: secret}}}, env)
		if _, ok := v.(SignedDigester).SignedDigest(tc.h, []byte("{}")); ok {
			t.Errorf("%s: SignedDigest(%v) ok, want false", tc.scheme, tc.h)
		}
	}
}

// TestSignedDigesters: which schemes offer a digest.
func TestSignedDigesters(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, map[string]string{"S": plainSecret("x")})
	writeFile(t, env.Dir, "rsa.pub", pemPublic(t, &k.rsa.PublicKey))
	jwtCfg := JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "rsa.pub"}}}
	bound := jwtCfg
	bound.BodyHashClaim = "request_body_sha256"
	for _, tc := range []struct {
		name string
		c    Config
		want bool
	}{
		{"none", Config{Scheme: "none"}, false},
		{"jwt without body_hash_claim", Config{Scheme: "jwt", JWT: jwtCfg}, false},
		{"jwt with body_hash_claim", Config{Scheme: "jwt", JWT: bound}, true},
		{"hmac", Config{Scheme: "hmac", Header: "X-Sig", Secrets: []SecretConfig{{SecretEnv: "S"}}}, true},
		{"github", Config{Scheme: "github", Secrets: []SecretConfig{{SecretEnv: "S"}}}, true},
		{"shopify", Config{Scheme: "shopify", Secrets: []SecretConfig{{SecretEnv: "S"}}}, true},
		{"stripe", Config{Scheme: "stripe", Secrets: []SecretConfig{{SecretEnv: "S"}}}, true},
		{"slack", Config{Scheme: "slack", Secrets: []SecretConfig{{SecretEnv: "S"}}}, true},
	} {
		v := mustNew(t, tc.c, env)
		if _, ok := v.(SignedDigester); ok != tc.want {
			t.Errorf("%s: SignedDigester %v, want %v", tc.name, ok, tc.want)
		}
		if SignsBody(tc.c) != tc.want {
			t.Errorf("%s: SignsBody disagrees with SignedDigester", tc.name)
		}
	}
}

// TestSignedDigestJWT: with body_hash_claim the digest is the body's, the
// same for every token that signs it.
func TestSignedDigestJWT(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeFile(t, env.Dir, "rsa.pub", pemPublic(t, &k.rsa.PublicKey))
	v := mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "rsa.pub"}},
		BodyHashClaim: "request_body_sha256"}}, env)
	d := v.(SignedDigester)
	body := []byte(`{"webhook_code":"SYNC_UPDATES_AVAILABLE"}`)
	sign := func(at time.Time, body []byte) http.Header {
		sum := sha256.Sum256(body)
		return bearer(token(t, jwt.SigningMethodRS256, k.rsa, "", claimsAt(at, jwt.MapClaims{"request_body_sha256": hex.EncodeToString(sum[:])})))
	}
	h1, h2 := sign(now, body), sign(now.Add(-time.Second), body)
	for _, h := range []http.Header{h1, h2} {
		if _, err := v.Verify(h, body, now); err != nil {
			t.Fatal(err)
		}
	}
	a, b := digestOf(t, d, h1, body), digestOf(t, d, h2, body)
	if a != b || a != sha256.Sum256(body) {
		t.Error("two tokens over one body give different digests, or not the body's SHA-256")
	}
	other := flipByte(body, 3)
	if digestOf(t, d, sign(now, other), other) == a {
		t.Error("a different body gives the same digest")
	}
	if n := testing.AllocsPerRun(100, func() { d.SignedDigest(h1, body1K) }); n != 0 && !raceEnabled {
		t.Errorf("SignedDigest allocates %v times", n)
	}
}

// TestSignedDigestV1a: an Ed25519 (v1a) delivery digests the same signed
// message as v1, and extra entries in the signature header do not count.
func TestSignedDigestV1a(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	env := testEnv(t, map[string]string{"PK": "whpk_" + base64.StdEncoding.EncodeToString(pub)})
	v := mustNew(t, Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{SecretEnv: "PK"}}}, env)
	d := v.(SignedDigester)
	body := []byte(`{"type":"invoice.paid"}`)
	sig := func(p ed25519.PrivateKey, id string) string {
		return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(p, []byte(id+"."+unix(now)+"."+string(body))))
	}
	h := setHeader("Webhook-Id", "msg_1")
	h.Set("Webhook-Timestamp", unix(now))
	h.Set("Webhook-Signature", sig(priv, "msg_1"))
	if _, err := v.Verify(h, body, now); err != nil {
		t.Fatal(err)
	}
	base := digestOf(t, d, h, body)
	if base != sha256.Sum256([]byte("msg_1."+unix(now)+"."+string(body))) {
		t.Error("digest is not the SHA-256 of id.timestamp.body")
	}
	c := h.Clone()
	c.Set("Webhook-Signature", sig(other, "msg_1")+" v1,AAAA "+h.Get("Webhook-Signature"))
	c.Set("Svix-Id", "msg_fresh")
	if _, err := v.Verify(c, body, now); err != nil {
		t.Fatal(err)
	}
	if digestOf(t, d, c, body) != base {
		t.Error("extra signatures or an svix-id beside webhook-* headers changed the digest")
	}
}

// TestHeaderValueIsSigned: a header is read with only spaces and tabs
// trimmed, so a value that differs from the signed one in any other byte
// (a no-break space, say) does not verify.
func TestHeaderValueIsSigned(t *testing.T) {
	secret := swSecret("x")
	env := testEnv(t, map[string]string{"W": secret})
	v := mustNew(t, Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{SecretEnv: "W"}}}, env)
	body := []byte(`{}`)
	headers := func(id string) http.Header {
		h := setHeader("Webhook-Id", id)
		h.Set("Webhook-Timestamp", unix(now))
		h.Set("Webhook-Signature", "v1,"+b64MAC(swKeyBytes(secret), "msg_1", ".", unix(now), ".", string(body)))
		return h
	}
	id, err := v.Verify(headers(" \tmsg_1 "), body, now)
	wantReason(t, id, err, "", "0")
	for _, bad := range []string{"msg_1\u00a0", "\u0085msg_1", "msg_1\u2003"} {
		id, err := v.Verify(headers(bad), body, now)
		wantReason(t, id, err, "mismatch", "")
	}
}

// FuzzSignedDigest: SignedDigest never panics, whatever the headers.
func FuzzSignedDigest(f *testing.F) {
	f.Add("t=1,v1=00", "1", "msg_1", "1", "svix", []byte("{}"))
	f.Add("", "", "", "", "", []byte{})
	f.Add(",,=,t=", " ", "\x00", "t=1", "\xff", []byte("x"))
	env := testEnv(f, map[string]string{"S": plainSecret("f"), "W": swSecret("f")})
	var ds []SignedDigester
	for _, c := range []Config{
		{Scheme: "hmac", Header: "X-Sig", Secrets: []SecretConfig{{SecretEnv: "S"}}},
		{Scheme: "stripe", Secrets: []SecretConfig{{SecretEnv: "S"}}},
		{Scheme: "slack", Secrets: []SecretConfig{{SecretEnv: "S"}}},
		{Scheme: "standard-webhooks", Secrets: []SecretConfig{{SecretEnv: "W"}}},
	} {
		ds = append(ds, mustNew(f, c, env).(SignedDigester))
	}
	f.Fuzz(func(t *testing.T, stripeSig, slackTS, id, ts, svixID string, body []byte) {
		h := http.Header{}
		h.Set("Stripe-Signature", stripeSig)
		h.Set("X-Slack-Request-Timestamp", slackTS)
		h.Set("Webhook-Id", id)
		h.Set("Webhook-Timestamp", ts)
		h.Set("Svix-Id", svixID)
		for _, d := range ds {
			d.SignedDigest(h, body)
			d.SignedDigest(nil, body)
		}
	})
}
