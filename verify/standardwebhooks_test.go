package verify

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"testing"
	"time"
)

func TestStandardWebhooksV1a(t *testing.T) {
	pubNew, privNew, _ := ed25519.GenerateKey(rand.Reader)
	pubOld, privOld, _ := ed25519.GenerateKey(rand.Reader)
	whpk := func(p ed25519.PublicKey) string { return "whpk_" + base64.StdEncoding.EncodeToString(p) }
	env := testEnv(t, map[string]string{"NEW": whpk(pubNew), "OLD": whpk(pubOld), "HMAC": swSecret("h")})
	cfg := Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{
		{ID: "new", SecretEnv: "NEW"},
		{ID: "old", SecretEnv: "OLD", NotAfter: now.Add(time.Hour)},
		{ID: "hmac", SecretEnv: "HMAC"},
	}}
	v := mustNew(t, cfg, env)
	body := []byte(`{"type":"invoice.paid"}`)
	// sign computes the v1a signature independently.
	sign := func(priv ed25519.PrivateKey, id string, at time.Time, body []byte) string {
		return "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(id+"."+unix(at)+"."+string(body))))
	}
	headers := func(sig string, at time.Time) http.Header {
		h := setHeader("webhook-id", "msg_1")
		h.Set("webhook-timestamp", unix(at))
		h.Set("webhook-signature", sig)
		return h
	}
	check := func(t *testing.T, h http.Header, body []byte, at time.Time, want, wantID string) {
		t.Helper()
		id, err := v.Verify(h, body, at)
		wantReason(t, id, err, want, wantID)
	}
	t.Run("valid", func(t *testing.T) {
		check(t, headers(sign(privNew, "msg_1", now, body), now), body, now, "", "new")
	})
	t.Run("flipped body", func(t *testing.T) {
		check(t, headers(sign(privNew, "msg_1", now, body), now), flipByte(body, 3), now, "mismatch", "")
	})
	t.Run("flipped signature", func(t *testing.T) {
		check(t, headers(flipB64Char(sign(privNew, "msg_1", now, body), 8), now), body, now, "mismatch", "")
	})
	t.Run("wrong id", func(t *testing.T) {
		check(t, headers(sign(privNew, "msg_2", now, body), now), body, now, "mismatch", "")
	})
	t.Run("rotation and two signatures", func(t *testing.T) {
		check(t, headers(sign(privOld, "msg_1", now, body), now), body, now, "", "old")
		later := now.Add(2 * time.Hour)
		check(t, headers(sign(privOld, "msg_1", later, body), later), body, later, "mismatch", "")
		both := sign(privOld, "msg_1", later, body) + " " + sign(privNew, "msg_1", later, body)
		check(t, headers(both, later), body, later, "", "new")
	})
	t.Run("v1 and v1a mixed", func(t *testing.T) {
		hm := "v1," + b64MAC(swKeyBytes(swSecret("h")), "msg_1.", unix(now), ".", string(body))
		check(t, headers("v1,AAAA "+hm, now), body, now, "", "hmac")
		// A v1a signature bytes given as v1 does not count.
		check(t, headers("v1,"+sign(privNew, "msg_1", now, body)[4:], now), body, now, "mismatch", "")
	})
	t.Run("timestamps", func(t *testing.T) {
		old := now.Add(-6 * time.Minute)
		check(t, headers(sign(privNew, "msg_1", old, body), old), body, now, "expired", "")
		fut := now.Add(6 * time.Minute)
		check(t, headers(sign(privNew, "msg_1", fut, body), fut), body, now, "future", "")
	})
	t.Run("signer whsk_", func(t *testing.T) {
		for _, key := range [][]byte{
			[]byte("whsk_" + base64.StdEncoding.EncodeToString(privNew)),
			[]byte("whsk_" + base64.StdEncoding.EncodeToString(privNew.Seed())),
			pemPKCS8(t, privNew),
		} {
			s, err := NewSigner(cfg, env, key)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			if err := s.Sign(h, body, now); err != nil {
				t.Fatal(err)
			}
			want := sign(privNew, h.Get("webhook-id"), now, body)
			if h.Get("webhook-signature") != want {
				t.Fatalf("signature %q, independent %q", h.Get("webhook-signature"), want)
			}
			check(t, h, body, now, "", "new")
		}
	})
	t.Run("signer keeps the id", func(t *testing.T) {
		s, err := NewSigner(cfg, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := setHeader("svix-id", "msg_keep")
		if err := s.Sign(h, body, now); err != nil {
			t.Fatal(err)
		}
		if h.Get("webhook-id") != "msg_keep" {
			t.Fatalf("webhook-id = %q", h.Get("webhook-id"))
		}
		check(t, h, body, now, "", "hmac")
		h1, h2 := http.Header{}, http.Header{}
		_ = s.Sign(h1, body, now)
		_ = s.Sign(h2, body, now.Add(time.Second))
		if h1.Get("webhook-id") == "" || h1.Get("webhook-id") != h2.Get("webhook-id") {
			t.Fatalf("derived ids differ: %q %q", h1.Get("webhook-id"), h2.Get("webhook-id"))
		}
	})
	t.Run("signer without whsec_ secret", func(t *testing.T) {
		onlyPK := Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{SecretEnv: "NEW"}}}
		s, err := NewSigner(onlyPK, env, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(http.Header{}, body, now); err == nil {
			t.Fatal("signed v1 without an HMAC secret")
		}
		if _, err := NewSigner(onlyPK, env, []byte("whsk_!!")); err == nil {
			t.Fatal("bad whsk_ accepted")
		}
	})
}

func pemPKCS8(t testing.TB, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
