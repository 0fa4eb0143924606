package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzTemplate parses arbitrary templates. A template that parses has a
// placeholder, writes back to a canonical form that parses to the same
// parts, and expands without panicking; one that does not wraps
// ErrTemplate.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"{body}", "v0:{timestamp}:{body}", "{timestamp}.{body}", "{url}{sorted_form}",
		"{method}{url}{body}{header:X-HubSpot-Request-Timestamp}",
		"{json:signature.timestamp}{json:signature.token}", "{{literal}}{body}",
		"{header:}", "{json:a..b}", "{body", "}{body}", "{nope}", "plain text",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 2*maxTemplateLen {
			return // refused by length alone; keeps minimizing quick
		}
		tpl, err := parseTemplate(src)
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("error %v does not wrap ErrTemplate", err)
			}
			return
		}
		if len(tpl.parts) == 0 || len(tpl.parts) > maxTemplateParts || !tpl.has(func(p tplPart) bool { return p.kind != partLiteral }) {
			t.Fatalf("parsed %q into %d parts", src, len(tpl.parts))
		}
		canon := tpl.canonical()
		again, err := parseTemplate(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, src, err)
		}
		if !reflect.DeepEqual(mergeLiterals(again.parts), mergeLiterals(tpl.parts)) {
			t.Fatalf("%q and its canonical form %q parse differently", src, canon)
		}
		if again.canonical() != canon {
			t.Fatalf("canonical form is not stable: %q then %q", canon, again.canonical())
		}
		// Expansion with every placeholder present never panics and
		// writes every literal.
		h := http.Header{}
		body := []byte(`{"a":{"b":"c"}}`)
		for _, name := range tpl.headers() {
			h.Set(name, "v")
		}
		sc := &signedContent{name: "fuzz", tpl: tpl, method: "POST", url: "https://x.example/"}
		in := &tplInput{h: h, body: body, ts: "1", method: "POST", url: "https://x.example/"}
		if sc.resolve(in) != nil {
			return // a JSON path the body lacks
		}
		var out bytes.Buffer
		tpl.writeTo(&out, nil, in)
		for _, p := range tpl.parts {
			if p.kind == partLiteral && !bytes.Contains(out.Bytes(), []byte(p.text)) {
				t.Fatalf("expansion %q lacks literal %q", out.Bytes(), p.text)
			}
		}
	})
}

// mergeLiterals joins adjacent literals, which "{{" and "}}" may split.
func mergeLiterals(parts []tplPart) []tplPart {
	var out []tplPart
	for _, p := range parts {
		if n := len(out); n > 0 && p.kind == partLiteral && out[n-1].kind == partLiteral {
			out[n-1].text += p.text
			continue
		}
		out = append(out, p)
	}
	return out
}

// FuzzSignatureFormat parses arbitrary formats and reads arbitrary header
// values with them: nothing panics, every signature read is a piece of the
// header value, at most maxCandidates are read, and what a format writes
// reads back the same.
func FuzzSignatureFormat(f *testing.F) {
	for _, s := range [][2]string{
		{"{signature}", "c2lnbmF0dXJl"},
		{"sha256={signature}", "sha256=abcd,sha256=ef01"},
		{"t={timestamp},v1={signature}", "t=1,v1=ab,v0=cd"},
		{"ts={timestamp};h1={signature}", "ts=1671552777;h1=eb4d;h1=00"},
		{"v1={signature}", "v1=0c0b,v1=7020"},
		{"Bearer {signature}", "Bearer tok"},
		{"t={timestamp} v1={signature}", "t=1 v1=a"},
		{"{timestamp}{signature}", "x"},
		{"a={signature}b", "a=b"},
		{"t={timestamp},t={signature}", "t=1"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, format, hv string) {
		fm, err := parseFormat(format)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		var p sigParse
		if err := fm.parse("fuzz", hv, &p); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parse error %v is not malformed", err)
			}
			if strings.Contains(err.Error(), hv) && len(hv) > 8 {
				t.Fatalf("error repeats the header value: %v", err)
			}
		} else {
			if p.n > maxCandidates {
				t.Fatalf("%d signatures read", p.n)
			}
			for _, v := range p.vals[:p.n] {
				if !strings.Contains(hv, v) {
					t.Fatalf("signature %q is not part of %q", v, hv)
				}
			}
			if fm.hasTimestamp() && !p.hasTS {
				t.Fatal("no timestamp read")
			}
		}
		// What the format writes reads back.
		const sig, ts = "c2ln", "1700000000"
		written := fm.format(sig, ts)
		var q sigParse
		if err := fm.parse("fuzz", written, &q); err != nil {
			t.Fatalf("format %q writes %q, which does not parse: %v", format, written, err)
		}
		if q.n != 1 || q.vals[0] != sig || (fm.hasTimestamp() && q.ts != ts) {
			t.Fatalf("format %q writes %q, read back as %q (ts %q)", format, written, q.vals[:q.n], q.ts)
		}
	})
}

// FuzzTemplateVerify feeds arbitrary signature headers, timestamps and
// bodies to a template scheme with a list format (Paddle's layout) and a
// header timestamp (Zoom's): nothing panics, no error repeats the secret,
// and a delivery verifies only when, by an independent computation, one
// of its signatures is right.
func FuzzTemplateVerify(f *testing.F) {
	body := []byte(`{"event_id":"evt_1"}`)
	ts := unix(now)
	good := hex.EncodeToString(mac(sha256.New, []byte(fuzzSecret), ts, ":", string(body)))
	f.Add(uint8(0), "ts="+ts+";h1="+good, ts, body)
	f.Add(uint8(0), "ts="+ts+";h1=00;h1="+good, ts, body)
	zoom := hex.EncodeToString(mac(sha256.New, []byte(fuzzSecret), "v0:", ts, ":", string(body)))
	f.Add(uint8(1), "v0="+zoom, ts, body)
	f.Add(uint8(1), "v0=", "", []byte{})
	modes := []Config{
		{Scheme: "hmac", Header: "Paddle-Signature", Format: "ts={timestamp};h1={signature}", Template: "{timestamp}:{body}"},
		{Scheme: "hmac", Header: "X-Zm-Signature", Format: "v0={signature}", Template: "v0:{header:X-Zm-Request-Timestamp}:{body}", Timestamp: "header:X-Zm-Request-Timestamp"},
	}
	env := testEnv(f, nil)
	verifiers := make([]Verifier, len(modes))
	for i, c := range modes {
		c.Secrets = []SecretConfig{{Secret: fuzzSecret}}
		verifiers[i] = mustNew(f, c, env)
	}
	f.Fuzz(func(t *testing.T, mode uint8, sig, tsHeader string, body []byte) {
		i := int(mode) % len(modes)
		h := http.Header{}
		h.Set(modes[i].Header, sig)
		h.Set("X-Zm-Request-Timestamp", tsHeader)
		_, err := verifiers[i].Verify(h, body, now)
		if err != nil {
			noLeak(t, err, fuzzSecret)
			return
		}
		// It verified: find the signed timestamp and one right signature.
		var p sigParse
		fm, _ := parseFormat(modes[i].Format)
		if fm.parse("fuzz", strings.Trim(sig, " \t"), &p) != nil {
			t.Fatalf("verified an unreadable header %q", sig)
		}
		var want []byte
		if i == 0 {
			want = mac(sha256.New, []byte(fuzzSecret), p.ts, ":", string(body))
		} else {
			want = mac(sha256.New, []byte(fuzzSecret), "v0:", strings.Trim(tsHeader, " \t"), ":", string(body))
			p.ts = strings.Trim(tsHeader, " \t")
		}
		if ts, ok := parseTS(p.ts, tsUnix); !ok || now.Sub(ts) > 5*time.Minute || ts.Sub(now) > 5*time.Minute {
			t.Fatalf("verified a timestamp outside the tolerance: %q", p.ts)
		}
		for _, v := range p.vals[:p.n] {
			if got, err := hex.DecodeString(v); err == nil && hmac.Equal(got, want) {
				return
			}
		}
		t.Fatalf("verified %q without a right signature", sig)
	})
}
