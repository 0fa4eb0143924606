package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testKeys are generated once per test binary; none is committed.
type testKeys struct {
	rsa, rsa2 *rsa.PrivateKey
	ec256     *ecdsa.PrivateKey
	ec384     *ecdsa.PrivateKey
	ed        ed25519.PrivateKey
}

var (
	keysOnce sync.Once
	keys     testKeys
)

func getKeys(t testing.TB) testKeys {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if keys.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if keys.rsa2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		keys.ec256, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		keys.ec384, _ = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		_, keys.ed, _ = ed25519.GenerateKey(rand.Reader)
	})
	return keys
}

func pemPublic(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func pemCertificate(t testing.TB, priv *rsa.PrivateKey) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "test signer"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkOf renders a public key as a JWK, independently of the package.
func jwkOf(t testing.TB, kid string, pub any) map[string]string {
	t.Helper()
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": b64u(k.N.Bytes()), "e": b64u(big.NewInt(int64(k.E)).Bytes())}
	case *ecdsa.PublicKey:
		raw, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		size := (len(raw) - 1) / 2
		return map[string]string{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64u(raw[1 : 1+size]), "y": b64u(raw[1+size:])}
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64u(k)}
	}
	t.Fatalf("jwkOf: %T", pub)
	return nil
}

func writeJWKS(t testing.TB, dir string, keys ...map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "jwks.json", string(b))
}

// token signs claims with golang-jwt directly (not the package's Signer).
func token(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rawToken assembles a token from a JSON header and claims and a
// signature function, for hand-made attacks.
func rawToken(header, claims string, sign func(string) []byte) string {
	in := b64u([]byte(header)) + "." + b64u([]byte(claims))
	return in + "." + b64u(sign(in))
}

func bodyHash(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

func bearer(tok string) http.Header { return setHeader("Authorization", "Bearer "+tok) }

func claimsAt(at time.Time, extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{"iat": at.Unix(), "exp": at.Add(5 * time.Minute).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

func TestJWTHMAC(t *testing.T) {
	secret := "jwt-hmac-secret-0123456789abcdef"
	env := testEnv(t, map[string]string{"JWT": secret, "JWT_OLD": "old-jwt-secret-0123456789abcdef"})
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"HS256", "HS512"},
		Keys: []JWTKeyConfig{
			{ID: "k1", SecretEnv: "JWT"},
			{ID: "k0", SecretEnv: "JWT_OLD", NotAfter: now.Add(time.Hour)},
		},
		Issuer:        "https://sender.example",
		Audience:      "clawgate",
		Leeway:        30 * time.Second,
		BodyHashClaim: "body_sha256",
	}}
	v := mustNew(t, cfg, env)
	body := []byte(`{"id":"evt_9"}`)
	good := func(at time.Time, extra jwt.MapClaims) jwt.MapClaims {
		c := claimsAt(at, jwt.MapClaims{"iss": "https://sender.example", "aud": "clawgate", "body_sha256": bodyHash(body)})
		for k, val := range extra {
			if val == nil {
				delete(c, k)
			} else {
				c[k] = val
			}
		}
		return c
	}
	hs := func(key, kid string, c jwt.MapClaims) string {
		return token(t, jwt.SigningMethodHS256, []byte(key), kid, c)
	}
	for _, tc := range []struct {
		name   string
		h      http.Header
		body   []byte
		at     time.Time
		want   string
		wantID string
	}{
		{"valid", bearer(hs(secret, "k1", good(now, nil))), body, now, "", "k1"},
		{"HS512 allowed", bearer(token(t, jwt.SigningMethodHS512, []byte(secret), "k1", good(now, nil))), body, now, "", "k1"},
		{"no kid tries all keys", bearer(hs(secret, "", good(now, nil))), body, now, "", "k1"},
		{"no kid, old key", bearer(hs("old-jwt-secret-0123456789abcdef", "", good(now, nil))), body, now, "", "k0"},
		{"old key within window", bearer(hs("old-jwt-secret-0123456789abcdef", "k0", good(now, nil))), body, now, "", "k0"},
		{"old key after window", bearer(hs("old-jwt-secret-0123456789abcdef", "k0", good(now.Add(2*time.Hour), nil))), body, now.Add(2 * time.Hour), "mismatch", ""},
		{"bare token", setHeader("Authorization", hs(secret, "k1", good(now, nil))), body, now, "", "k1"},
		{"lowercase bearer", setHeader("Authorization", "bearer "+hs(secret, "k1", good(now, nil))), body, now, "", "k1"},
		{"missing header", http.Header{}, body, now, "missing", ""},
		{"bearer without token", setHeader("Authorization", "Bearer "), body, now, "missing", ""},
		{"garbage", bearer("not.a.jwt"), body, now, "malformed", ""},
		{"two segments", bearer("abc.def"), body, now, "malformed", ""},
		{"wrong secret", bearer(hs("another-secret-entirely-000000000", "k1", good(now, nil))), body, now, "mismatch", ""},
		{"wrong kid", bearer(hs(secret, "k9", good(now, nil))), body, now, "mismatch", ""},
		{"kid of the other key", bearer(hs(secret, "k0", good(now, nil))), body, now, "mismatch", ""},
		{"kid not a string", bearer(rawToken(`{"alg":"HS256","kid":7}`, mustJSON(good(now, nil)), hmacSign(secret))), body, now, "malformed", ""},
		{"flipped body", bearer(hs(secret, "k1", good(now, nil))), flipByte(body, 2), now, "mismatch", ""},
		{"pretty vs minified body", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"body_sha256": bodyHash(minified)}))), pretty, now, "mismatch", ""},
		{"body hash uppercase", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"body_sha256": strings.ToUpper(bodyHash(body))}))), body, now, "mismatch", ""},
		{"body hash missing", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"body_sha256": nil}))), body, now, "malformed", ""},
		{"wrong aud", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"aud": "someone-else"}))), body, now, "mismatch", ""},
		{"aud list containing ours", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"aud": []string{"x", "clawgate"}}))), body, now, "", "k1"},
		{"missing aud", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"aud": nil}))), body, now, "malformed", ""},
		{"wrong iss", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"iss": "https://evil.example"}))), body, now, "mismatch", ""},
		{"expired", bearer(hs(secret, "k1", good(now.Add(-10*time.Minute), nil))), body, now, "expired", ""},
		{"expired within leeway", bearer(hs(secret, "k1", good(now.Add(-5*time.Minute-20*time.Second), nil))), body, now, "", "k1"},
		{"exp missing", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"exp": nil}))), body, now, "malformed", ""},
		{"nbf in the future", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"nbf": now.Add(2 * time.Minute).Unix()}))), body, now, "future", ""},
		{"iat in the future", bearer(hs(secret, "k1", good(now.Add(3*time.Minute), nil))), body, now, "future", ""},
		{"exp not a number", bearer(hs(secret, "k1", good(now, jwt.MapClaims{"exp": "tomorrow"}))), body, now, "malformed", ""},
		{"alg none", bearer(rawToken(`{"alg":"none","typ":"JWT"}`, mustJSON(good(now, nil)), func(string) []byte { return nil })), body, now, "mismatch", ""},
		{"alg None", bearer(rawToken(`{"alg":"None","typ":"JWT"}`, mustJSON(good(now, nil)), func(string) []byte { return nil })), body, now, "malformed", ""},
		{"alg not allowed", bearer(token(t, jwt.SigningMethodHS384, []byte(secret), "k1", good(now, nil))), body, now, "mismatch", ""},
		{"huge token", bearer(strings.Repeat("a", maxTokenSize+1)), body, now, "malformed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(tc.h, tc.body, tc.at)
			wantReason(t, id, err, tc.want, tc.wantID)
			noLeak(t, err, secret)
		})
	}
	t.Run("no active key", func(t *testing.T) {
		c := cfg
		c.JWT.Keys = []JWTKeyConfig{{SecretEnv: "JWT", NotAfter: now.Add(time.Minute)}}
		v := mustNew(t, c, env)
		at := now.Add(time.Hour)
		id, err := v.Verify(bearer(hs(secret, "", good(at, nil))), body, at)
		wantReason(t, id, err, "no_active_secret", "")
	})
	t.Run("signer", func(t *testing.T) {
		s, err := NewSigner(cfg, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, body, now); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Get("Authorization"), "Bearer ") {
			t.Fatalf("Authorization = %q", h.Get("Authorization"))
		}
		id, err := v.Verify(h, body, now)
		wantReason(t, id, err, "", "k1")
		// Independent check of the claims and the MAC.
		tok := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
		parts := strings.Split(tok, ".")
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(parts[0] + "." + parts[1]))
		if b64u(m.Sum(nil)) != parts[2] {
			t.Fatal("signer's HS256 MAC differs from an independent computation")
		}
		var claims map[string]any
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(raw, &claims)
		if claims["iss"] != "https://sender.example" || claims["aud"] != "clawgate" || claims["body_sha256"] != bodyHash(body) ||
			claims["exp"].(float64)-claims["iat"].(float64) != 300 {
			t.Fatalf("claims = %v", claims)
		}
		// Verified 5 minutes later, the token is expired (beyond the leeway).
		_, err = v.Verify(h, body, now.Add(6*time.Minute))
		wantReason(t, "", err, "expired", "")
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func hmacSign(secret string) func(string) []byte {
	return func(in string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(in))
		return m.Sum(nil)
	}
}

func TestJWTAlgorithmConfusion(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	pubPEM := pemPublic(t, &k.rsa.PublicKey)
	writeFile(t, env.Dir, "rsa.pub", pubPEM)
	writeFile(t, env.Dir, "ec.pub", pemPublic(t, &k.ec256.PublicKey))
	v := mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"RS256", "ES256"},
		Keys:       []JWTKeyConfig{{ID: "rsa", PEMFile: "rsa.pub"}, {ID: "ec", PEMFile: "ec.pub"}},
	}}, env)
	claims := mustJSON(claimsAt(now, nil))
	for _, tc := range []struct {
		name string
		tok  string
		want string
		id   string
	}{
		{"RS256 valid", token(t, jwt.SigningMethodRS256, k.rsa, "rsa", claimsAt(now, nil)), "", "rsa"},
		{"ES256 valid", token(t, jwt.SigningMethodES256, k.ec256, "ec", claimsAt(now, nil)), "", "ec"},
		{"no kid", token(t, jwt.SigningMethodES256, k.ec256, "", claimsAt(now, nil)), "", "ec"},
		{"HS256 keyed with the RSA public key PEM", rawToken(`{"alg":"HS256","kid":"rsa"}`, claims, hmacSign(pubPEM)), "mismatch", ""},
		{"HS256 keyed with the PEM, no kid", rawToken(`{"alg":"HS256"}`, claims, hmacSign(pubPEM)), "mismatch", ""},
		{"ES256 naming the RSA key", token(t, jwt.SigningMethodES256, k.ec256, "rsa", claimsAt(now, nil)), "mismatch", ""},
		{"RS256 naming the EC key", token(t, jwt.SigningMethodRS256, k.rsa, "ec", claimsAt(now, nil)), "mismatch", ""},
		{"PS256 not allowed", token(t, jwt.SigningMethodPS256, k.rsa, "rsa", claimsAt(now, nil)), "mismatch", ""},
		{"alg none", rawToken(`{"alg":"none"}`, claims, func(string) []byte { return nil }), "mismatch", ""},
		{"signed by another RSA key", token(t, jwt.SigningMethodRS256, k.rsa2, "rsa", claimsAt(now, nil)), "mismatch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(bearer(tc.tok), nil, now)
			wantReason(t, id, err, tc.want, tc.id)
		})
	}
	t.Run("keyFits", func(t *testing.T) {
		for _, tc := range []struct {
			key  any
			alg  string
			want bool
		}{
			{[]byte(pubPEM), "HS256", true},
			{[]byte(pubPEM), "RS256", false},
			{&k.rsa.PublicKey, "HS256", false},
			{&k.rsa.PublicKey, "PS512", true},
			{&k.ec256.PublicKey, "ES256", true},
			{&k.ec256.PublicKey, "ES384", false},
			{&k.ec384.PublicKey, "ES384", true},
			{k.ed.Public(), "EdDSA", true},
			{k.ed.Public(), "ES256", false},
		} {
			if got := keyFits(tc.key, tc.alg); got != tc.want {
				t.Errorf("keyFits(%s, %s) = %v", keyKind(tc.key), tc.alg, got)
			}
		}
	})
}

func TestJWTPlaidLike(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeJWKS(t, env.Dir, jwkOf(t, "6c5516e1-92dc-479e-a8ff-5a51992e0001", &k.ec256.PublicKey))
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{
		Header:        "Plaid-Verification",
		Algorithms:    []string{"ES256"},
		JWKSFile:      "jwks.json",
		MaxAge:        5 * time.Minute,
		BodyHashClaim: "request_body_sha256",
	}}
	v := mustNew(t, cfg, env)
	body := []byte("{\n  \"environment\": \"sandbox\",\n  \"webhook_code\": \"DEFAULT_UPDATE\"\n}")
	plaid := func(at time.Time, kid string, b []byte) http.Header {
		c := jwt.MapClaims{"iat": at.Unix(), "request_body_sha256": bodyHash(b)}
		return setHeader("Plaid-Verification", token(t, jwt.SigningMethodES256, k.ec256, kid, c))
	}
	const kid = "6c5516e1-92dc-479e-a8ff-5a51992e0001"
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		at   time.Time
		want string
	}{
		{"valid", plaid(now, kid, body), body, now, ""},
		{"4 minutes old", plaid(now.Add(-4*time.Minute), kid, body), body, now, ""},
		{"iat too old", plaid(now.Add(-6*time.Minute), kid, body), body, now, "expired"},
		{"iat missing", setHeader("Plaid-Verification", token(t, jwt.SigningMethodES256, k.ec256, kid, jwt.MapClaims{"request_body_sha256": bodyHash(body)})), body, now, "malformed"},
		{"body hash mismatch", plaid(now, kid, body), flipByte(body, 5), now, "mismatch"},
		{"re-serialised body", plaid(now, kid, body), []byte(`{"environment":"sandbox","webhook_code":"DEFAULT_UPDATE"}`), now, "mismatch"},
		{"unknown kid", plaid(now, "another-kid", body), body, now, "mismatch"},
		{"Authorization ignored", bearer(token(t, jwt.SigningMethodES256, k.ec256, kid, jwt.MapClaims{"iat": now.Unix()})), body, now, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(tc.h, tc.body, tc.at)
			wantID := ""
			if tc.want == "" {
				wantID = kid
			}
			wantReason(t, id, err, tc.want, wantID)
		})
	}
	t.Run("signer", func(t *testing.T) {
		s, err := NewSigner(cfg, env, pemPKCS8(t, k.ec256))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, body, now); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Get("Plaid-Verification"), "Bearer") {
			t.Fatal("a non-Authorization header carries the bare token")
		}
		id, err := v.Verify(h, body, now)
		wantReason(t, id, err, "", kid)
	})
}

func TestJWTGoogleLike(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeFile(t, env.Dir, "google.pem", pemCertificate(t, k.rsa))
	cfg := Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"RS256"},
		Keys:       []JWTKeyConfig{{PEMFile: "google.pem"}},
		Issuer:     "https://accounts.google.com",
		Audience:   "https://gateway.example/webhook/pubsub",
	}}
	v := mustNew(t, cfg, env)
	google := func(extra jwt.MapClaims) string {
		c := claimsAt(now, jwt.MapClaims{"iss": "https://accounts.google.com", "aud": "https://gateway.example/webhook/pubsub", "email": "pubsub@example.iam.gserviceaccount.com"})
		for key, val := range extra {
			c[key] = val
		}
		return token(t, jwt.SigningMethodRS256, k.rsa, "f5f4bf46e52b31d9b6249f7309ad0338400680cd", c)
	}
	for _, tc := range []struct {
		name string
		tok  string
		want string
	}{
		{"valid, any kid accepted by an unnamed key", google(nil), ""},
		{"wrong aud", google(jwt.MapClaims{"aud": "https://other.example"}), "mismatch"},
		{"wrong iss", google(jwt.MapClaims{"iss": "accounts.google.com.evil"}), "mismatch"},
		{"expired", google(jwt.MapClaims{"exp": now.Add(-time.Second).Unix()}), "expired"},
		{"other RSA key", token(t, jwt.SigningMethodRS256, k.rsa2, "", claimsAt(now, jwt.MapClaims{"iss": "https://accounts.google.com", "aud": "https://gateway.example/webhook/pubsub"})), "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(bearer(tc.tok), []byte(`{"message":{}}`), now)
			wantID := ""
			if tc.want == "" {
				wantID = "0"
			}
			wantReason(t, id, err, tc.want, wantID)
		})
	}
	t.Run("signer with PKCS #1 key", func(t *testing.T) {
		key := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k.rsa)})
		s, err := NewSigner(cfg, env, key)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, nil, now); err != nil {
			t.Fatal(err)
		}
		id, err := v.Verify(h, nil, now)
		wantReason(t, id, err, "", "0")
		if _, err := NewSigner(cfg, env, nil); err == nil {
			t.Fatal("RS256 signer without a private key")
		}
		if _, err := NewSigner(cfg, env, pemPKCS8(t, k.ec256)); err == nil {
			t.Fatal("EC private key accepted for RS256")
		}
	})
}

func TestJWTJWKS(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeJWKS(t, env.Dir,
		jwkOf(t, "rsa-1", &k.rsa.PublicKey),
		jwkOf(t, "ec-1", &k.ec256.PublicKey),
		jwkOf(t, "ed-1", k.ed.Public()),
		jwkOf(t, "ec384", &k.ec384.PublicKey), // fits no allowed algorithm: skipped
		map[string]string{"kty": "oct", "kid": "sym", "k": "c2VjcmV0"},
		map[string]string{"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
	)
	v, warnings, err := New(Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"RS256", "PS256", "ES256", "EdDSA"},
		JWKSFile:   "jwks.json",
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, w := range warnings {
		if strings.Contains(w, "skipped") {
			skipped++
		}
	}
	if skipped != 3 || len(warnings) != 5 {
		t.Errorf("warnings = %q, want 3 skipped keys, no body_hash_claim and no max_age", warnings)
	}
	for _, tc := range []struct {
		name, tok, want, id string
	}{
		{"RS256 by kid", token(t, jwt.SigningMethodRS256, k.rsa, "rsa-1", claimsAt(now, nil)), "", "rsa-1"},
		{"PS256 by kid", token(t, jwt.SigningMethodPS256, k.rsa, "rsa-1", claimsAt(now, nil)), "", "rsa-1"},
		{"ES256 by kid", token(t, jwt.SigningMethodES256, k.ec256, "ec-1", claimsAt(now, nil)), "", "ec-1"},
		{"EdDSA by kid", token(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claimsAt(now, nil)), "", "ed-1"},
		{"EdDSA without kid", token(t, jwt.SigningMethodEdDSA, k.ed, "", claimsAt(now, nil)), "", "ed-1"},
		{"ES384 skipped key", token(t, jwt.SigningMethodES384, k.ec384, "ec384", claimsAt(now, nil)), "mismatch", ""},
		{"wrong kid", token(t, jwt.SigningMethodES256, k.ec256, "rsa-1", claimsAt(now, nil)), "mismatch", ""},
		{"unknown kid", token(t, jwt.SigningMethodES256, k.ec256, "ec-2", claimsAt(now, nil)), "mismatch", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(bearer(tc.tok), nil, now)
			wantReason(t, id, err, tc.want, tc.id)
		})
	}
}

func TestJWTRotation(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, nil)
	writeFile(t, env.Dir, "new.pub", pemPublic(t, &k.rsa.PublicKey))
	writeFile(t, env.Dir, "old.pub", pemPublic(t, &k.rsa2.PublicKey))
	v := mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{
		Algorithms: []string{"RS256"},
		Keys: []JWTKeyConfig{
			{ID: "new", PEMFile: "new.pub", NotBefore: now.Add(-time.Hour)},
			{ID: "old", PEMFile: "old.pub", NotAfter: now.Add(time.Hour)},
		},
	}}, env)
	for _, tc := range []struct {
		name string
		key  *rsa.PrivateKey
		kid  string
		at   time.Time
		want string
		id   string
	}{
		{"old key inside window", k.rsa2, "old", now, "", "old"},
		{"old key without kid inside window", k.rsa2, "", now, "", "old"},
		{"old key after window", k.rsa2, "old", now.Add(2 * time.Hour), "mismatch", ""},
		{"old key without kid after window", k.rsa2, "", now.Add(2 * time.Hour), "mismatch", ""},
		{"new key", k.rsa, "new", now.Add(2 * time.Hour), "", "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(bearer(token(t, jwt.SigningMethodRS256, tc.key, tc.kid, claimsAt(tc.at, nil))), nil, tc.at)
			wantReason(t, id, err, tc.want, tc.id)
		})
	}
}

func TestJWTLoadErrors(t *testing.T) {
	k := getKeys(t)
	env := testEnv(t, map[string]string{"S": "hmac-secret"})
	writeFile(t, env.Dir, "rsa.pub", pemPublic(t, &k.rsa.PublicKey))
	writeFile(t, env.Dir, "ec.pub", pemPublic(t, &k.ec256.PublicKey))
	writeFile(t, env.Dir, "private.pem", string(pemPKCS8(t, k.ec256)))
	writeFile(t, env.Dir, "junk.pem", "hello")
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	writeFile(t, env.Dir, "small.pub", pemPublic(t, &small.PublicKey))
	writeFile(t, env.Dir, "bad.json", `{"keys": [{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`)
	writeFile(t, env.Dir, "notjson.json", `keys`)
	rsaKey := []JWTKeyConfig{{PEMFile: "rsa.pub"}}
	for _, tc := range []struct {
		name string
		jc   JWTConfig
		sec  []SecretConfig
		want string
	}{
		{"none in list", JWTConfig{Algorithms: []string{"RS256", "none"}, Keys: rsaKey}, nil, "none"},
		{"NONE in list", JWTConfig{Algorithms: []string{"NONE"}, Keys: rsaKey}, nil, "none"},
		{"HS and RS mixed", JWTConfig{Algorithms: []string{"HS256", "RS256"}, Keys: rsaKey}, nil, "mix"},
		{"unknown algorithm", JWTConfig{Algorithms: []string{"RS1"}, Keys: rsaKey}, nil, "unknown algorithm"},
		{"RSA key for ES256", JWTConfig{Algorithms: []string{"ES256"}, Keys: rsaKey}, nil, "fits none"},
		{"EC key for RS256", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "ec.pub"}}}, nil, "fits none"},
		{"HMAC secret for RS256", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{SecretEnv: "S"}}}, nil, "fits none"},
		{"RSA key for HS256", JWTConfig{Algorithms: []string{"HS256"}, Keys: rsaKey}, nil, "fits none"},
		{"P-256 key for ES384", JWTConfig{Algorithms: []string{"ES384"}, Keys: []JWTKeyConfig{{PEMFile: "ec.pub"}}}, nil, "fits none"},
		{"missing pem file", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "nope.pub"}}}, nil, "nope.pub"},
		{"not PEM", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "junk.pem"}}}, nil, "no PEM"},
		{"private key in pem_file", JWTConfig{Algorithms: []string{"ES256"}, Keys: []JWTKeyConfig{{PEMFile: "private.pem"}}}, nil, "private key"},
		{"RSA 1024", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "small.pub"}}}, nil, "2048"},
		{"no key", JWTConfig{Algorithms: []string{"RS256"}}, nil, "no key"},
		{"key without source", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{ID: "x"}}}, nil, "no key source"},
		{"two sources", JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{PEMFile: "rsa.pub", SecretEnv: "S"}}}, nil, "only one"},
		{"unset env", JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{SecretEnv: "UNSET_JWT"}}}, nil, "UNSET_JWT"},
		{"duplicate id", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{ID: "a", PEMFile: "rsa.pub"}, {ID: "a", PEMFile: "rsa.pub"}}}, nil, "already used"},
		{"no active key", JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{PEMFile: "rsa.pub", NotAfter: now}}}, nil, "no jwt key is active"},
		{"bad jwks point", JWTConfig{Algorithms: []string{"ES256"}, JWKSFile: "bad.json"}, nil, "EC key"},
		{"jwks not json", JWTConfig{Algorithms: []string{"ES256"}, JWKSFile: "notjson.json"}, nil, "not a JSON Web Key Set"},
		{"jwks missing", JWTConfig{Algorithms: []string{"ES256"}, JWKSFile: "missing.json"}, nil, "missing.json"},
		{"secrets outside jwt block", JWTConfig{Algorithms: []string{"HS256"}}, []SecretConfig{{SecretEnv: "S"}}, "jwt.keys"},
		{"negative leeway", JWTConfig{Algorithms: []string{"RS256"}, Keys: rsaKey, Leeway: -time.Second}, nil, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := New(Config{Scheme: "jwt", JWT: tc.jc, Secrets: tc.sec}, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			noLeak(t, err, "hmac-secret")
		})
	}
	t.Run("default algorithms", func(t *testing.T) {
		v := mustNew(t, Config{Scheme: "jwt", JWT: JWTConfig{Keys: rsaKey}}, env)
		id, err := v.Verify(bearer(token(t, jwt.SigningMethodRS256, k.rsa, "", claimsAt(now, nil))), nil, now)
		wantReason(t, id, err, "", "0")
		if _, _, err := New(Config{Scheme: "jwt", JWT: JWTConfig{Keys: []JWTKeyConfig{{SecretEnv: "S"}}}}, env); err == nil {
			t.Fatal("HMAC key accepted under the default (public-key) algorithms")
		}
	})
	t.Run("inline secret warns", func(t *testing.T) {
		_, w, err := New(Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{Secret: "demo-secret-0123456789"}},
			MaxAge: time.Minute, BodyHashClaim: "body_sha256"}}, env)
		if err != nil || len(w) != 1 || !strings.Contains(w[0], "inline secret") || strings.Contains(w[0], "demo-secret") {
			t.Fatalf("warnings %q, err %v", w, err)
		}
	})
}
