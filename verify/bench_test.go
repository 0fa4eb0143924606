package verify

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"testing"
)

func BenchmarkVerify(b *testing.B) {
	k := getKeys(b)
	env := testEnv(b, nil)
	writeFile(b, env.Dir, "rsa.pub", pemPublic(b, &k.rsa.PublicKey))
	writeFile(b, env.Dir, "ec.pub", pemPublic(b, &k.ec256.PublicKey))
	edPub := k.ed.Public().(ed25519.PublicKey)
	secrets := []SecretConfig{{ID: "s", Secret: "whsec_" + base64.StdEncoding.EncodeToString([]byte("benchmark-secret-32-bytes-long!!"))}}
	cases := []struct {
		name    string
		cfg     Config
		signKey []byte
	}{
		{"hmac-sha256", Config{Scheme: "hmac", Header: "X-Signature", Prefix: "sha256=", Secrets: secrets}, nil},
		{"github", Config{Scheme: "github", Secrets: secrets}, nil},
		{"stripe", Config{Scheme: "stripe", Secrets: secrets}, nil},
		{"shopify", Config{Scheme: "shopify", Secrets: secrets}, nil},
		{"slack", Config{Scheme: "slack", Secrets: secrets}, nil},
		{"standard-webhooks-v1", Config{Scheme: "standard-webhooks", Secrets: secrets}, nil},
		{"standard-webhooks-v1a-ed25519", Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{
			{ID: "ed", Secret: "whpk_" + base64.StdEncoding.EncodeToString(edPub)},
		}}, []byte("whsk_" + base64.StdEncoding.EncodeToString(k.ed))},
		{"jwt-HS256", Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"HS256"}, Keys: []JWTKeyConfig{{ID: "hs", Secret: "benchmark-jwt-secret-0123456789ab"}}, BodyHashClaim: "body_sha256"}}, nil},
		{"jwt-RS256", Config{Scheme: "jwt", JWT: JWTConfig{Algorithms: []string{"RS256"}, Keys: []JWTKeyConfig{{ID: "rsa", PEMFile: "rsa.pub"}}, Issuer: "https://accounts.google.com", Audience: "clawgate"}}, pemPKCS8(b, k.rsa)},
		{"jwt-ES256", Config{Scheme: "jwt", JWT: JWTConfig{Header: "Plaid-Verification", Algorithms: []string{"ES256"}, Keys: []JWTKeyConfig{{ID: "ec", PEMFile: "ec.pub"}}, MaxAge: 300e9, BodyHashClaim: "request_body_sha256"}}, pemPKCS8(b, k.ec256)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v := mustNew(b, c.cfg, env)
			s, err := NewSigner(c.cfg, env, c.signKey)
			if err != nil {
				b.Fatal(err)
			}
			h := http.Header{}
			if err := s.Sign(h, body1K, now); err != nil {
				b.Fatal(err)
			}
			if _, err := v.Verify(h, body1K, now); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body1K)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(h, body1K, now); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The replay guard's digest of the same request, where the scheme has one.
		b.Run(c.name+"/digest", func(b *testing.B) {
			v := mustNew(b, c.cfg, env)
			d, ok := v.(SignedDigester)
			if !ok {
				b.Skip("no SignedDigest: the signature does not bind the body")
			}
			s, err := NewSigner(c.cfg, env, c.signKey)
			if err != nil {
				b.Fatal(err)
			}
			h := http.Header{}
			if err := s.Sign(h, body1K, now); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body1K)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := d.SignedDigest(h, body1K); !ok {
					b.Fatal("no digest")
				}
			}
		})
	}
}
