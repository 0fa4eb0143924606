package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"testing"
	"time"
)

// macFixture describes one HMAC-family scheme for the shared table tests.
// sign computes the headers independently (crypto/hmac in the test), never
// with the package's own code.
type macFixture struct {
	name          string
	config        func(secrets []SecretConfig) Config
	secret        func(label string) string // a config secret value
	sign          func(secret string, body []byte, ts time.Time) http.Header
	sigHeader     string
	flipSig       func(h http.Header)
	malformed     map[string]func(h http.Header)
	missing       []string // other headers whose absence is "missing"
	timestamp     bool
	tol           time.Duration
	combine       func(a, b http.Header) http.Header // one header, two signatures
	deterministic bool                               // Signer output equals sign()
}

func plainSecret(label string) string { return "s3cr3t-" + label + "-0123456789abcdef" }

func swSecret(label string) string {
	return "whsec_" + base64.StdEncoding.EncodeToString([]byte("sw-key-"+label+"-32-bytes-long!!"))
}

func swKeyBytes(secret string) []byte {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	return raw
}

func setHeader(name, value string) http.Header {
	h := http.Header{}
	h.Set(name, value)
	return h
}

func bodyMACFixture(name, hdr, prefix string, newHash func() hash.Hash, b64 bool, cfg func([]SecretConfig) Config) macFixture {
	encode := func(b []byte) string {
		if b64 {
			return base64.StdEncoding.EncodeToString(b)
		}
		return hex.EncodeToString(b)
	}
	f := macFixture{
		name:   name,
		config: cfg,
		secret: plainSecret,
		sign: func(secret string, body []byte, _ time.Time) http.Header {
			return setHeader(hdr, prefix+encode(mac(newHash, []byte(secret), string(body))))
		},
		sigHeader: hdr,
		flipSig: func(h http.Header) {
			v := h.Get(hdr)
			if b64 {
				h.Set(hdr, prefix+flipB64Char(v[len(prefix):], 3))
			} else {
				h.Set(hdr, prefix+flipHexChar(v[len(prefix):], 3))
			}
		},
		malformed: map[string]func(h http.Header){
			"not encoded": func(h http.Header) { h.Set(hdr, prefix+"!!not-encoded!!") },
			"truncated":   func(h http.Header) { v := h.Get(hdr); h.Set(hdr, v[:len(v)-1]) },
		},
		deterministic: true,
	}
	if prefix != "" {
		f.malformed["only prefix"] = func(h http.Header) { h.Set(hdr, prefix+" ") }
		f.malformed["prefix missing"] = func(h http.Header) { h.Set(hdr, h.Get(hdr)[len(prefix):]) }
		f.malformed["wrong prefix"] = func(h http.Header) { h.Set(hdr, "md5="+h.Get(hdr)[len(prefix):]) }
	}
	return f
}

func macFixtures() []macFixture {
	hmacCfg := func(alg, enc, prefix string) func([]SecretConfig) Config {
		return func(s []SecretConfig) Config {
			return Config{Scheme: "hmac", Header: "X-Signature", Algorithm: alg, Encoding: enc, Prefix: prefix, Secrets: s}
		}
	}
	fixed := func(scheme string) func([]SecretConfig) Config {
		return func(s []SecretConfig) Config { return Config{Scheme: scheme, Secrets: s} }
	}
	fs := []macFixture{
		bodyMACFixture("hmac-sha256-hex-prefix", "X-Signature", "sha256=", sha256.New, false, hmacCfg("sha256", "hex", "sha256=")),
		bodyMACFixture("hmac-defaults", "X-Signature", "", sha256.New, false, hmacCfg("", "", "")),
		bodyMACFixture("hmac-sha1-hex", "X-Signature", "sha1=", sha1.New, false, hmacCfg("sha1", "hex", "sha1=")),
		bodyMACFixture("hmac-sha512-base64", "X-Signature", "", sha512.New, true, hmacCfg("sha512", "base64", "")),
		bodyMACFixture("github", "X-Hub-Signature-256", "sha256=", sha256.New, false, fixed("github")),
		bodyMACFixture("shopify", "X-Shopify-Hmac-Sha256", "", sha256.New, true, fixed("shopify")),
	}

	stripeSign := func(secret string, body []byte, ts time.Time) http.Header {
		t := unix(ts)
		return setHeader("Stripe-Signature", "t="+t+",v1="+hexMAC(secret, t, ".", string(body)))
	}
	fs = append(fs, macFixture{
		name:      "stripe",
		config:    fixed("stripe"),
		secret:    func(l string) string { return "whsec_" + plainSecret(l) },
		sign:      stripeSign,
		sigHeader: "Stripe-Signature",
		flipSig: func(h http.Header) {
			v := h.Get("Stripe-Signature")
			i := strings.Index(v, "v1=") + 5
			h.Set("Stripe-Signature", flipHexChar(v, i))
		},
		malformed: map[string]func(h http.Header){
			"semicolons": func(h http.Header) {
				h.Set("Stripe-Signature", strings.ReplaceAll(h.Get("Stripe-Signature"), ",", ";"))
			},
			"no t": func(h http.Header) {
				h.Set("Stripe-Signature", h.Get("Stripe-Signature")[strings.Index(h.Get("Stripe-Signature"), ",")+1:])
			},
			"t not numeric": func(h http.Header) {
				h.Set("Stripe-Signature", "t=abc"+h.Get("Stripe-Signature")[strings.Index(h.Get("Stripe-Signature"), ","):])
			},
			"item with two =": func(h http.Header) { h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",v1=ab=cd") },
			"item without =":  func(h http.Header) { h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",v1") },
			"trailing comma":  func(h http.Header) { h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",") },
			"t twice":         func(h http.Header) { h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",t=1") },
			"v1 not hex": func(h http.Header) {
				v := h.Get("Stripe-Signature")
				h.Set("Stripe-Signature", v[:strings.Index(v, "v1=")]+"v1=zz")
			},
			"no signature": func(h http.Header) {
				v := h.Get("Stripe-Signature")
				h.Set("Stripe-Signature", v[:strings.Index(v, ",")])
			},
		},
		timestamp: true,
		tol:       5 * time.Minute,
		combine: func(a, b http.Header) http.Header {
			bv := b.Get("Stripe-Signature")
			return setHeader("Stripe-Signature", a.Get("Stripe-Signature")+","+bv[strings.Index(bv, "v1="):])
		},
		deterministic: true,
	})

	fs = append(fs, macFixture{
		name:   "slack",
		config: func(s []SecretConfig) Config { return Config{Scheme: "slack", Tolerance: 2 * time.Minute, Secrets: s} },
		secret: plainSecret,
		sign: func(secret string, body []byte, ts time.Time) http.Header {
			h := setHeader("X-Slack-Request-Timestamp", unix(ts))
			h.Set("X-Slack-Signature", "v0="+hexMAC(secret, "v0:", unix(ts), ":", string(body)))
			return h
		},
		sigHeader: "X-Slack-Signature",
		flipSig: func(h http.Header) {
			h.Set("X-Slack-Signature", flipHexChar(h.Get("X-Slack-Signature"), 7))
		},
		malformed: map[string]func(h http.Header){
			"no v0=":        func(h http.Header) { h.Set("X-Slack-Signature", h.Get("X-Slack-Signature")[3:]) },
			"v1=":           func(h http.Header) { h.Set("X-Slack-Signature", "v1="+h.Get("X-Slack-Signature")[3:]) },
			"not hex":       func(h http.Header) { h.Set("X-Slack-Signature", "v0=xyz") },
			"ts not number": func(h http.Header) { h.Set("X-Slack-Request-Timestamp", "12e9") },
			"ts negative":   func(h http.Header) { h.Set("X-Slack-Request-Timestamp", "-1") },
		},
		missing:       []string{"X-Slack-Request-Timestamp"},
		timestamp:     true,
		tol:           2 * time.Minute,
		deterministic: true,
	})

	swFixture := func(name, prefix string) macFixture {
		id, ts, sig := prefix+"-id", prefix+"-timestamp", prefix+"-signature"
		return macFixture{
			name:   name,
			config: fixed("standard-webhooks"),
			secret: swSecret,
			sign: func(secret string, body []byte, t time.Time) http.Header {
				h := setHeader(id, "msg_2Lh9KRb0pwNgZ1z9Ihh7XDY6mWX")
				h.Set(ts, unix(t))
				h.Set(sig, "v1,"+b64MAC(swKeyBytes(secret), "msg_2Lh9KRb0pwNgZ1z9Ihh7XDY6mWX", ".", unix(t), ".", string(body)))
				return h
			},
			sigHeader: sig,
			flipSig:   func(h http.Header) { h.Set(sig, flipB64Char(h.Get(sig), 5)) },
			malformed: map[string]func(h http.Header){
				"no comma":      func(h http.Header) { h.Set(sig, strings.Replace(h.Get(sig), ",", "", 1)) },
				"ts not number": func(h http.Header) { h.Set(ts, "yesterday") },
				"ts float":      func(h http.Header) { h.Set(ts, h.Get(ts)+".5") },
			},
			missing:   []string{id, ts},
			timestamp: true,
			tol:       5 * time.Minute,
			combine: func(a, b http.Header) http.Header {
				h := a.Clone()
				h.Set(sig, a.Get(sig)+" "+b.Get(sig))
				return h
			},
		}
	}
	fs = append(fs, swFixture("standard-webhooks", "webhook"), swFixture("svix", "svix"))
	return fs
}

func TestMACSchemes(t *testing.T) {
	for _, f := range macFixtures() {
		t.Run(f.name, func(t *testing.T) {
			newS, oldS := f.secret("new"), f.secret("old")
			env := testEnv(t, map[string]string{"NEW": newS, "OLD": oldS})
			rotation := f.config([]SecretConfig{
				{ID: "new", SecretEnv: "NEW"},
				{ID: "old", SecretEnv: "OLD", NotAfter: now.Add(time.Hour)},
			})
			v := mustNew(t, rotation, env)
			body := []byte(`{"id":"evt_1","amount":42}`)

			check := func(t *testing.T, h http.Header, body []byte, at time.Time, want, wantID string) {
				t.Helper()
				id, err := v.Verify(h, body, at)
				wantReason(t, id, err, want, wantID)
				noLeak(t, err, newS, oldS, h.Get(f.sigHeader))
			}

			t.Run("valid", func(t *testing.T) {
				check(t, f.sign(newS, body, now), body, now, "", "new")
			})
			t.Run("header name case", func(t *testing.T) {
				h := http.Header{}
				for k, vs := range f.sign(newS, body, now) {
					h[strings.ToLower(k)] = vs
				}
				check(t, h, body, now, "", "new")
			})
			t.Run("empty body", func(t *testing.T) {
				check(t, f.sign(newS, nil, now), nil, now, "", "new")
			})
			t.Run("flipped body byte", func(t *testing.T) {
				check(t, f.sign(newS, body, now), flipByte(body, 7), now, "mismatch", "")
			})
			t.Run("flipped signature byte", func(t *testing.T) {
				h := f.sign(newS, body, now)
				f.flipSig(h)
				check(t, h, body, now, "mismatch", "")
			})
			t.Run("wrong secret", func(t *testing.T) {
				check(t, f.sign(f.secret("other"), body, now), body, now, "mismatch", "")
			})
			t.Run("missing header", func(t *testing.T) {
				for _, name := range append([]string{f.sigHeader}, f.missing...) {
					h := f.sign(newS, body, now)
					h.Del(name)
					check(t, h, body, now, "missing", "")
				}
				check(t, http.Header{}, body, now, "missing", "")
				check(t, nil, body, now, "missing", "")
			})
			for name, m := range f.malformed {
				t.Run("malformed/"+name, func(t *testing.T) {
					h := f.sign(newS, body, now)
					m(h)
					check(t, h, body, now, "malformed", "")
				})
			}
			t.Run("raw bytes: pretty and minified", func(t *testing.T) {
				check(t, f.sign(newS, pretty, now), pretty, now, "", "new")
				check(t, f.sign(newS, pretty, now), minified, now, "mismatch", "")
				check(t, f.sign(newS, minified, now), pretty, now, "mismatch", "")
			})
			t.Run("rotation", func(t *testing.T) {
				in := now.Add(30 * time.Minute)
				check(t, f.sign(oldS, body, in), body, in, "", "old")
				check(t, f.sign(newS, body, in), body, in, "", "new")
				after := now.Add(time.Hour)
				check(t, f.sign(oldS, body, after), body, after, "mismatch", "")
				check(t, f.sign(newS, body, after), body, after, "", "new")
			})
			t.Run("expired secret", func(t *testing.T) {
				only := mustNew(t, f.config([]SecretConfig{{ID: "only", SecretEnv: "NEW", NotAfter: now.Add(time.Hour)}}), env)
				later := now.Add(2 * time.Hour)
				id, err := only.Verify(f.sign(newS, body, later), body, later)
				wantReason(t, id, err, "no_active_secret", "")
				early := mustNew(t, f.config([]SecretConfig{{ID: "a", SecretEnv: "NEW"}, {ID: "b", SecretEnv: "OLD", NotBefore: now.Add(time.Hour)}}), env)
				id, err = early.Verify(f.sign(oldS, body, now), body, now)
				wantReason(t, id, err, "mismatch", "")
			})
			if f.combine != nil {
				t.Run("old and new signature in one header", func(t *testing.T) {
					h := f.combine(f.sign(oldS, body, now), f.sign(newS, body, now))
					check(t, h, body, now, "", "new")
					after := now.Add(2 * time.Hour)
					h = f.combine(f.sign(oldS, body, after), f.sign(newS, body, after))
					check(t, h, body, after, "", "new")
					h = f.combine(f.sign(f.secret("stranger"), body, now), f.sign(oldS, body, now))
					check(t, h, body, now, "", "old")
					h = f.combine(f.sign(f.secret("stranger"), body, now), f.sign(f.secret("x"), body, now))
					check(t, h, body, now, "mismatch", "")
				})
			}
			if f.timestamp {
				t.Run("timestamps", func(t *testing.T) {
					check(t, f.sign(newS, body, now.Add(-f.tol)), body, now, "", "new")
					check(t, f.sign(newS, body, now.Add(f.tol)), body, now, "", "new")
					check(t, f.sign(newS, body, now.Add(-f.tol-time.Second)), body, now, "expired", "")
					check(t, f.sign(newS, body, now.Add(f.tol+time.Second)), body, now, "future", "")
					check(t, f.sign(newS, body, now.Add(-24*time.Hour)), body, now, "expired", "")
				})
			}
			t.Run("signer", func(t *testing.T) {
				s, err := NewSigner(rotation, env, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, at := range []time.Time{now, now.Add(2 * time.Hour)} {
					h := http.Header{}
					if err := s.Sign(h, body, at); err != nil {
						t.Fatal(err)
					}
					if f.deterministic {
						want := f.sign(newS, body, at)
						for k := range want {
							if h.Get(k) != want.Get(k) {
								t.Errorf("signer %s = %q, independent = %q", k, h.Get(k), want.Get(k))
							}
						}
					}
					id, err := v.Verify(h, body, at)
					wantReason(t, id, err, "", "new")
				}
				// An explicit key overrides the configured ones.
				s2, err := NewSigner(rotation, env, []byte(oldS))
				if err != nil {
					t.Fatal(err)
				}
				h := http.Header{}
				if err := s2.Sign(h, body, now); err != nil {
					t.Fatal(err)
				}
				check(t, h, body, now, "", "old")
				// No active secret: the signer says so.
				only, err := NewSigner(f.config([]SecretConfig{{SecretEnv: "NEW", NotAfter: now.Add(time.Minute)}}), env, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := only.Sign(http.Header{}, body, now.Add(time.Hour)); !isReason(err, ErrNoActiveSecret) {
					t.Fatalf("Sign with no active secret: %v", err)
				}
			})
		})
	}
}

func TestHMACConfig(t *testing.T) {
	env := testEnv(t, nil)
	s := []SecretConfig{{Secret: "x"}}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"no header", Config{Scheme: "hmac", Secrets: s}, "header is required"},
		{"bad algorithm", Config{Scheme: "hmac", Header: "X-Sig", Algorithm: "md5", Secrets: s}, "sha1, sha256, sha512"},
		{"bad encoding", Config{Scheme: "hmac", Header: "X-Sig", Encoding: "base32", Secrets: s}, "hex, base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := New(tc.c, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// Published example values.

func TestGitHubPublishedExample(t *testing.T) {
	// docs.github.com, "Validating webhook deliveries", test values.
	v := mustNew(t, Config{Scheme: "github", Secrets: []SecretConfig{{Secret: "It's a Secret to Everybody"}}}, testEnv(t, nil))
	h := setHeader("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	id, err := v.Verify(h, []byte("Hello, World!"), now)
	wantReason(t, id, err, "", "0")
	_, err = v.Verify(h, []byte("Hello, World!\n"), now)
	wantReason(t, "", err, "mismatch", "")
}

func TestSlackPublishedExample(t *testing.T) {
	// api.slack.com, "Verifying requests from Slack", worked example.
	const body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	env := testEnv(t, nil)
	env.Now = time.Unix(1531420618, 0)
	v := mustNew(t, Config{Scheme: "slack", Secrets: []SecretConfig{{ID: "slack", Secret: "8f742231b10e8888abcd99yyyzzz85a5"}}}, env)
	h := setHeader("X-Slack-Request-Timestamp", "1531420618")
	h.Set("X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503")
	id, err := v.Verify(h, []byte(body), time.Unix(1531420618+60, 0))
	wantReason(t, id, err, "", "slack")
	_, err = v.Verify(h, []byte(body), time.Unix(1531420618+301, 0))
	wantReason(t, "", err, "expired", "")
}

func TestStandardWebhooksPublishedExample(t *testing.T) {
	// The Standard Webhooks reference libraries' test vector.
	env := testEnv(t, nil)
	env.Now = time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	for _, secret := range []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		v := mustNew(t, Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{Secret: secret}}}, env)
		h := setHeader("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
		h.Set("webhook-timestamp", "1614265330")
		h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
		id, err := v.Verify(h, body, env.Now)
		wantReason(t, id, err, "", "0")
		// Other versions are ignored, and an extra unknown entry is harmless.
		h.Set("webhook-signature", "v2,AAAA v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
		id, err = v.Verify(h, body, env.Now)
		wantReason(t, id, err, "", "0")
		// The signature depends on webhook-id.
		h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJel")
		_, err = v.Verify(h, body, env.Now)
		wantReason(t, "", err, "mismatch", "")
	}
}

func TestStripeOnlyV1Counts(t *testing.T) {
	const secret = "whsec_test_secret"
	v := mustNew(t, Config{Scheme: "stripe", Secrets: []SecretConfig{{ID: "s", Secret: secret}}}, testEnv(t, nil))
	body := []byte(`{"id":"evt_1"}`)
	ts := unix(now)
	good := hexMAC(secret, ts, ".", string(body))
	for _, tc := range []struct {
		name, header, want string
	}{
		{"v0 with the right MAC", "t=" + ts + ",v0=" + good, "mismatch"},
		{"v1 and v0", "t=" + ts + ",v1=" + good + ",v0=00", ""},
		{"spaces around items", "t=" + ts + ", v1=" + good, ""},
		{"bad v1 then good v1", "t=" + ts + ",v1=zz,v1=" + good, ""},
		{"unknown scheme ignored", "t=" + ts + ",v9=abc,v1=" + good, ""},
		{"key decoded instead of whole string", "t=" + ts + ",v1=" + hexMAC("test_secret", ts, ".", string(body)), "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(setHeader("Stripe-Signature", tc.header), body, now)
			wantID := ""
			if tc.want == "" {
				wantID = "s"
			}
			wantReason(t, id, err, tc.want, wantID)
		})
	}
}

func TestStandardWebhooksSecrets(t *testing.T) {
	env := testEnv(t, nil)
	for _, bad := range []string{"whsec_!!!", "whpk_AAAA", "whsk_" + base64.StdEncoding.EncodeToString(make([]byte, 64))} {
		if _, _, err := New(Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{Secret: bad}}}, env); err == nil {
			t.Errorf("secret %q accepted", bad)
		} else {
			noLeak(t, err, bad)
		}
	}
	// webhook-* take precedence over svix-* when both are present.
	secret := swSecret("p")
	v := mustNew(t, Config{Scheme: "standard-webhooks", Secrets: []SecretConfig{{Secret: secret}}}, env)
	h := setHeader("svix-id", "msg_svix")
	h.Set("svix-timestamp", unix(now))
	h.Set("svix-signature", "v1,"+b64MAC(swKeyBytes(secret), "msg_svix.", unix(now), ".", "{}"))
	h.Set("webhook-id", "msg_other")
	_, err := v.Verify(h, []byte("{}"), now)
	wantReason(t, "", err, "missing", "")
	h.Del("webhook-id")
	id, err := v.Verify(h, []byte("{}"), now)
	wantReason(t, id, err, "", "0")
}
