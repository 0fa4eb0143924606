package verify

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// familyCase is one scheme family at 1 KiB, signed as its provider would.
type familyCase struct {
	name   string
	preset string
	body   []byte
	hmac   bool // an HMAC family: no allocation per verify
}

// form1K is a 1 KiB form body, as Twilio posts.
var form1K = func() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 1024-40; i++ {
		fmt.Fprintf(&b, "Field%02d=value+%02d%%2Bsome+text+here&", i, i)
	}
	s := b.String() + "MessageSid=SMbench"
	return []byte(s + strings.Repeat("x", 1024-len(s)))
}()

// mailgun1K is a 1 KiB Mailgun body: the signed fields and event-data.
var mailgun1K = func() []byte {
	head := `{"signature":{"timestamp":"` + unix(now) + `","token":"0123456789abcdef0123456789abcdef0123456789abcdef01","signature":""},"event-data":{"id":"evt","note":"`
	return []byte(head + strings.Repeat("x", 1024-len(head)-3) + `"}}`)
}()

var familyCases = []familyCase{
	{"hmac-template", "zoom", body1K, true},
	{"hmac-list-format", "paddle", body1K, true},
	{"hmac-rfc3339-headers", "twitch", body1K, true},
	{"hmac-url-signed", "square", body1K, true},
	{"hmac-url-signed-form", "twilio", form1K, true},
	{"hmac-signature-in-body", "mailgun", mailgun1K, true},
	{"token", "gitlab", body1K, true},
	{"ed25519", "discord", body1K, false},
	{"ecdsa-p256", "sendgrid", body1K, false},
}

// signedFamily returns the verifier of c's preset and a delivery signed for
// it.
func signedFamily(tb testing.TB, fc familyCase, keys *presetKeys) (Verifier, http.Header, []byte) {
	tb.Helper()
	p, ok := LookupPreset(fc.preset)
	if !ok {
		tb.Fatalf("no preset %s", fc.preset)
	}
	env := testEnv(tb, nil)
	c, signKey := presetConfig(tb, p, env, keys)
	v := mustNew(tb, c, env)
	s, err := NewSigner(c, env, signKey)
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	body := fc.body
	if bs, ok := s.(BodySigner); ok {
		body, err = bs.SignBody(h, body, now)
	} else {
		err = s.Sign(h, body, now)
	}
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := v.Verify(h, body, now); err != nil {
		tb.Fatal(err)
	}
	return v, h, body
}

// BenchmarkSchemeFamilies measures Verify of each scheme family at 1 KiB,
// with its allocations, and the replay guard's digest of the same request.
func BenchmarkSchemeFamilies(b *testing.B) {
	keys := newPresetKeys(b)
	for _, fc := range familyCases {
		b.Run(fc.name, func(b *testing.B) {
			v, h, body := signedFamily(b, fc, keys)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(h, body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fc.name+"/digest", func(b *testing.B) {
			v, h, body := signedFamily(b, fc, keys)
			d, ok := v.(SignedDigester)
			if !ok {
				b.Skip("no SignedDigest: the scheme signs nothing")
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := d.SignedDigest(h, body); !ok {
					b.Fatal("no digest")
				}
			}
		})
	}
}

// TestHMACFamiliesDoNotAllocate: the HMAC families (and the token) verify
// and digest a 1 KiB delivery without allocating.
func TestHMACFamiliesDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	keys := newPresetKeys(t)
	for _, fc := range familyCases {
		if !fc.hmac {
			continue
		}
		t.Run(fc.name, func(t *testing.T) {
			v, h, body := signedFamily(t, fc, keys)
			if n := testing.AllocsPerRun(200, func() { v.Verify(h, body, now) }); n != 0 {
				t.Errorf("Verify allocates %v times", n)
			}
			if d, ok := v.(SignedDigester); ok {
				if n := testing.AllocsPerRun(200, func() { d.SignedDigest(h, body) }); n != 0 {
					t.Errorf("SignedDigest allocates %v times", n)
				}
			}
		})
	}
}
