package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The fuzz targets feed arbitrary header values and bodies to Verify. They
// check that nothing panics and that Verify never succeeds unless one of
// the signatures in the input is, by an independent computation, correct
// for the body and the configured key.

const fuzzSecret = "fuzz-secret-0123456789"

// fuzzHMAC modes: the generic scheme in hex and base64, github, shopify.
var fuzzHMACModes = []struct {
	cfg    Config
	header string
	prefix string
	b64    bool
}{
	{Config{Scheme: "hmac", Header: "X-Signature", Prefix: "sha256=", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, "X-Signature", "sha256=", false},
	{Config{Scheme: "hmac", Header: "X-Signature", Encoding: "base64", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, "X-Signature", "", true},
	{Config{Scheme: "github", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, "X-Hub-Signature-256", "sha256=", false},
	{Config{Scheme: "shopify", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, "X-Shopify-Hmac-Sha256", "", true},
}

func FuzzHMACHeader(f *testing.F) {
	body := []byte(`{"id":1}`)
	sum := mac(sha256.New, []byte(fuzzSecret), string(body))
	f.Add(uint8(0), "sha256="+hex.EncodeToString(sum), body)
	f.Add(uint8(1), base64.StdEncoding.EncodeToString(sum), body)
	f.Add(uint8(2), "sha256="+strings.ToUpper(hex.EncodeToString(sum)), body)
	f.Add(uint8(3), base64.StdEncoding.EncodeToString(sum), body)
	f.Add(uint8(0), "sha256=", []byte{})
	env := testEnv(f, nil)
	verifiers := make([]Verifier, len(fuzzHMACModes))
	for i, m := range fuzzHMACModes {
		verifiers[i] = mustNew(f, m.cfg, env)
	}
	f.Fuzz(func(t *testing.T, mode uint8, sig string, body []byte) {
		m := fuzzHMACModes[int(mode)%len(fuzzHMACModes)]
		id, err := verifiers[int(mode)%len(verifiers)].Verify(setHeader(m.header, sig), body, now)
		if err != nil {
			noLeak(t, err, fuzzSecret)
			return
		}
		want := mac(sha256.New, []byte(fuzzSecret), string(body))
		enc, ok := strings.CutPrefix(strings.Trim(sig, " \t"), m.prefix)
		if !ok {
			t.Fatalf("verified without the prefix: %q", sig)
		}
		var got []byte
		if m.b64 {
			got, err = base64.StdEncoding.DecodeString(enc)
		} else {
			got, err = hex.DecodeString(enc)
		}
		if err != nil || !hmac.Equal(got, want) || id != "0" {
			t.Fatalf("verified a wrong signature %q (id %q)", sig, id)
		}
	})
}

func FuzzStripeHeader(f *testing.F) {
	body := []byte(`{"id":"evt_1"}`)
	ts := unix(now)
	good := hexMAC(fuzzSecret, ts, ".", string(body))
	f.Add("t="+ts+",v1="+good, body)
	f.Add("t="+ts+",v1="+good+",v0="+good, body)
	f.Add("t="+ts+",v0="+good, body)
	f.Add("t="+ts+",v1=00,v1="+good, body)
	f.Add("v1="+good+",t="+ts, body)
	f.Add("t=,v1=", []byte{})
	v := mustNew(f, Config{Scheme: "stripe", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, testEnv(f, nil))
	f.Fuzz(func(t *testing.T, hv string, body []byte) {
		id, err := v.Verify(setHeader("Stripe-Signature", hv), body, now)
		if err != nil {
			noLeak(t, err, fuzzSecret)
			return
		}
		// Independent parse: exactly one t, within 5 minutes, and some v1
		// equal to HMAC(secret, t + "." + body).
		var tsv string
		var sigs []string
		for _, item := range strings.Split(strings.Trim(hv, " \t"), ",") {
			kv := strings.Split(strings.TrimSpace(item), "=")
			if len(kv) != 2 {
				t.Fatalf("verified a malformed header %q", hv)
			}
			switch kv[0] {
			case "t":
				tsv = kv[1]
			case "v1":
				sigs = append(sigs, kv[1])
			}
		}
		want := mac(sha256.New, []byte(fuzzSecret), tsv, ".", string(body))
		ok := false
		for _, s := range sigs {
			if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
				ok = true
			}
		}
		if !ok || id != "0" {
			t.Fatalf("verified without a correct v1 signature: %q", hv)
		}
		sec, perr := parseUnix(tsv)
		if perr != nil || now.Sub(sec).Abs() > 5*time.Minute {
			t.Fatalf("verified a stale or unparsable timestamp %q", tsv)
		}
	})
}

func parseUnix(s string) (time.Time, error) {
	var n int64
	if s == "" {
		return time.Time{}, errBadUnix
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return time.Time{}, errBadUnix
		}
		n = n*10 + int64(c-'0')
	}
	return time.Unix(n, 0), nil
}

var errBadUnix = errors.New("not a Unix time")

func FuzzSlackHeader(f *testing.F) {
	body := []byte("token=x&team_id=T1")
	ts := unix(now)
	f.Add("v0="+hexMAC(fuzzSecret, "v0:", ts, ":", string(body)), ts, body)
	f.Add("v0=", "", []byte{})
	f.Add("v1=00", "+1", body)
	v := mustNew(f, Config{Scheme: "slack", Secrets: []SecretConfig{{Secret: fuzzSecret}}}, testEnv(f, nil))
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := setHeader("X-Slack-Signature", sig)
		h.Set("X-Slack-Request-Timestamp", ts)
		_, err := v.Verify(h, body, now)
		if err != nil {
			noLeak(t, err, fuzzSecret)
			return
		}
		got, derr := hex.DecodeString(strings.TrimPrefix(strings.Trim(sig, " \t"), "v0="))
		want := mac(sha256.New, []byte(fuzzSecret), "v0:", strings.Trim(ts, " \t"), ":", string(body))
		if !strings.HasPrefix(strings.Trim(sig, " \t"), "v0=") || derr != nil || !hmac.Equal(got, want) {
			t.Fatalf("verified a wrong signature %q ts %q", sig, ts)
		}
	})
}

func FuzzStandardWebhooksHeader(f *testing.F) {
	swKey := []byte("standard-webhooks-fuzz-key-32byt")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(swKey)
	pub, priv, _ := ed25519.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	body := []byte(`{"type":"x"}`)
	ts := unix(now)
	v1 := "v1," + b64MAC(swKey, "msg_1.", ts, ".", string(body))
	v1a := "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("msg_1."+ts+"."+string(body))))
	f.Add("msg_1", ts, v1, body, false)
	f.Add("msg_1", ts, v1a, body, true)
	f.Add("msg_1", ts, "v2,abc "+v1+" "+v1a, body, false)
	f.Add("msg_1", ts, ",", []byte{}, false)
	f.Add("", "", "", []byte{}, true)
	v := mustNew(f, Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{
		{ID: "hmac", Secret: secret},
		{ID: "ed", Secret: "whpk_" + base64.StdEncoding.EncodeToString(pub)},
	}}, testEnv(f, nil))
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, svix bool) {
		prefix := "webhook-"
		if svix {
			prefix = "svix-"
		}
		h := setHeader(prefix+"id", id)
		h.Set(prefix+"timestamp", ts)
		h.Set(prefix+"signature", sig)
		matched, err := v.Verify(h, body, now)
		if err != nil {
			noLeak(t, err, secret)
			return
		}
		msg := []byte(strings.Trim(id, " \t") + "." + strings.Trim(ts, " \t") + "." + string(body))
		want := mac(sha256.New, swKey, string(msg))
		ok := false
		for _, entry := range strings.Split(strings.Trim(sig, " \t"), " ") {
			ver, s, found := strings.Cut(entry, ",")
			raw, derr := base64.StdEncoding.DecodeString(s)
			if !found || derr != nil {
				continue
			}
			switch {
			case ver == "v1" && matched == "hmac" && hmac.Equal(raw, want):
				ok = true
			case ver == "v1a" && matched == "ed" && ed25519.Verify(pub, msg, raw):
				ok = true
			}
		}
		if !ok {
			t.Fatalf("verified without a correct signature: id %q ts %q sig %q", id, ts, sig)
		}
	})
}

func FuzzJWT(f *testing.F) {
	k := getKeys(f)
	body := []byte(`{"a":1}`)
	claims := jwt.MapClaims{"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "h": bodyHash(body)}
	f.Add("Bearer "+token(f, jwt.SigningMethodHS256, []byte(fuzzSecret), "hs", claims), body)
	f.Add(token(f, jwt.SigningMethodES256, k.ec256, "ec", claims), body)
	f.Add("Bearer "+rawToken(`{"alg":"none"}`, mustJSON(claims), func(string) []byte { return nil }), body)
	f.Add("Bearer "+rawToken(`{"alg":"HS256","kid":"ec"}`, mustJSON(claims), hmacSign(pemPublic(f, &k.ec256.PublicKey))), body)
	f.Add("Bearer a.b.c", []byte{})
	env := testEnv(f, nil)
	writeJWKS(f, env.Dir, jwkOf(f, "ec", &k.ec256.PublicKey))
	hsV := mustNew(f, Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{ID: "hs", Secret: fuzzSecret}}, BodyHashClaim: "h",
	}}, env)
	ecV := mustNew(f, Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"ES256"}, JWKSFile: "jwks.json", BodyHashClaim: "h",
	}}, env)
	f.Fuzz(func(t *testing.T, hv string, body []byte) {
		h := setHeader("Authorization", hv)
		for _, v := range []Verifier{hsV, ecV} {
			id, err := v.Verify(h, body, now)
			if err != nil {
				noLeak(t, err, fuzzSecret)
				continue
			}
			tok := strings.Trim(hv, " \t")
			if len(tok) >= 7 && strings.EqualFold(tok[:7], "bearer ") {
				tok = strings.TrimSpace(tok[7:])
			}
			parts := strings.Split(tok, ".")
			if len(parts) != 3 {
				t.Fatalf("verified a token with %d parts", len(parts))
			}
			sig, err := base64.RawURLEncoding.DecodeString(parts[2])
			if err != nil {
				t.Fatalf("verified an undecodable signature")
			}
			var hdr struct {
				Alg string `json:"alg"`
			}
			rawHdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
			_ = json.Unmarshal(rawHdr, &hdr)
			signed := []byte(parts[0] + "." + parts[1])
			switch id {
			case "hs":
				m := hmac.New(sha256.New, []byte(fuzzSecret))
				m.Write(signed)
				if hdr.Alg != "HS256" || !hmac.Equal(sig, m.Sum(nil)) {
					t.Fatalf("HS256 verifier accepted a token it cannot have: %q", hv)
				}
			case "ec":
				d := sha256.Sum256(signed)
				if hdr.Alg != "ES256" || len(sig) != 64 ||
					!ecdsa.Verify(&k.ec256.PublicKey, d[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
					t.Fatalf("ES256 verifier accepted a token it cannot have: %q", hv)
				}
			default:
				t.Fatalf("unexpected key id %q", id)
			}
			var claims map[string]any
			rawClaims, _ := base64.RawURLEncoding.DecodeString(parts[1])
			if json.Unmarshal(rawClaims, &claims) != nil || claims["h"] != bodyHash(body) {
				t.Fatalf("verified a token not bound to the body")
			}
		}
	})
}

// TestFuzzSeedsHeaders checks that the header helper used by the fuzz
// targets behaves (sanity for setHeader + canonical lookup).
func TestFuzzSeedsHeaders(t *testing.T) {
	h := http.Header{"x-signature": {" abc "}}
	if header(h, "X-Signature") != "abc" {
		t.Fatal("case-insensitive fallback failed")
	}
}
