package verify

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		src   string
		parts []tplPart // nil: want an error
		err   string
	}{
		{src: "{body}", parts: []tplPart{{kind: partBody}}},
		{src: "v0:{timestamp}:{body}", parts: []tplPart{{kind: partLiteral, text: "v0:"}, {kind: partTimestamp}, {kind: partLiteral, text: ":"}, {kind: partBody}}},
		{src: "{header:x-zm-request-timestamp}{body}", parts: []tplPart{{kind: partHeader, text: "X-Zm-Request-Timestamp"}, {kind: partBody}}},
		{src: "{json:signature.token}", parts: []tplPart{{kind: partJSON, text: "signature.token", segs: []string{"signature", "token"}}}},
		{src: "{{v}}{url}", parts: []tplPart{{kind: partLiteral, text: "{v}"}, {kind: partURL}}},
		{src: "{method}{sorted_form}", parts: []tplPart{{kind: partMethod}, {kind: partSortedForm}}},
		{src: "", err: "empty"},
		{src: "v0::", err: "no placeholder"},
		{src: "{body", err: "not closed"},
		{src: "a}{body}", err: "closes no placeholder"},
		{src: "{nope}", err: "unknown placeholder {nope}"},
		{src: "{body:x}", err: "takes no argument"},
		{src: "{header:}", err: "needs a header name"},
		{src: "{header:X Y}", err: "needs a header name"},
		{src: "{json:a..b}", err: "not a dotted path"},
		{src: "{json:}", err: "needs a dotted path"},
		{src: strings.Repeat("{body}", 33), err: "more than 32 parts"},
		{src: strings.Repeat("x", 1025), err: "longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			tpl, err := parseTemplate(tt.src)
			if tt.parts == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrTemplate) {
					t.Fatalf("err = %v, want %q wrapping ErrTemplate", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tpl.parts, tt.parts) {
				t.Fatalf("parts %+v, want %+v", tpl.parts, tt.parts)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		src                 string
		kind                int
		prefix, sig, ts     string
		sep                 byte
		err                 string
		header              string
		wantVals            []string
		wantTS, wantErrPart string
	}{
		{src: "", kind: fmtPlain, header: "abc", wantVals: []string{"abc"}},
		{src: "sha256={signature}", kind: fmtList, sig: "sha256", sep: ',', header: "sha256=aa,sha256=bb", wantVals: []string{"aa", "bb"}},
		{src: "t={timestamp},v1={signature}", kind: fmtList, sig: "v1", ts: "t", sep: ',', header: "t=5, v1=aa,v0=cc", wantVals: []string{"aa"}, wantTS: "5"},
		{src: "ts={timestamp};h1={signature}", kind: fmtList, sig: "h1", ts: "ts", sep: ';', header: "ts=5;h1=aa;h1=bb", wantVals: []string{"aa", "bb"}, wantTS: "5"},
		{src: "Bearer {signature}", kind: fmtPrefix, prefix: "Bearer ", header: "Bearer tok", wantVals: []string{"tok"}},
		{src: "v1,{signature}", kind: fmtPrefix, prefix: "v1,", header: "v1,sig", wantVals: []string{"sig"}},
		{src: "t={timestamp},v1={signature}", kind: fmtList, sig: "v1", ts: "t", sep: ',', header: "v1=aa", wantErrPart: "timestamp item"},
		{src: "t={timestamp},v1={signature}", kind: fmtList, sig: "v1", ts: "t", sep: ',', header: "t=1,t=2,v1=aa", wantErrPart: "timestamp given twice"},
		{src: "v1={signature}", kind: fmtList, sig: "v1", sep: ',', header: "v1", wantErrPart: "not key=value"},
		{src: "sha256={signature}", kind: fmtList, sig: "sha256", sep: ',', header: strings.Repeat("sha256=a,", 17), wantErrPart: "too many signatures"},
		{src: "Bearer {signature}", kind: fmtPrefix, prefix: "Bearer ", header: "Basic x", wantErrPart: "prefix missing"},
		{src: "{timestamp}", err: "exactly once"},
		{src: "{signature}{signature}", err: "exactly once"},
		{src: "{signature}x", err: "nothing may follow"},
		{src: "t={timestamp}{signature}", err: "needs a list"},
		{src: "{sig}{signature}", err: "other than"},
	}
	for _, tt := range tests {
		t.Run(tt.src+"|"+tt.header, func(t *testing.T) {
			f, err := parseFormat(tt.src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrFormat) {
					t.Fatalf("err = %v, want %q wrapping ErrFormat", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.kind != tt.kind || f.prefix != tt.prefix || f.sigKey != tt.sig || f.tsKey != tt.ts || (tt.kind == fmtList && f.sep != tt.sep) {
				t.Fatalf("format %+v", f)
			}
			var p sigParse
			err = f.parse("test", tt.header, &p)
			if tt.wantErrPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrPart) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("parse err = %v, want %q (malformed)", err, tt.wantErrPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.vals[:p.n]; !reflect.DeepEqual(got, tt.wantVals) || p.ts != tt.wantTS {
				t.Fatalf("read %q ts %q", got, p.ts)
			}
		})
	}
}

func TestJSONLookup(t *testing.T) {
	tests := []struct {
		body, path, want string
		status           int
	}{
		{`{"a":{"b":"c"}}`, "a.b", "c", fieldFound},
		{` { "a" : { "b" : 12.5 } } `, "a.b", "12.5", fieldFound},
		{`{"a":{"b":true},"z":[1,{"a":2}]}`, "a.b", "true", fieldFound},
		{`{"x":"}{\"","a":"v"}`, "a", "v", fieldFound},
		{`{"a":null}`, "a", "", fieldAbsent},
		{`{"a":{}}`, "a.b", "", fieldAbsent},
		{`{"a":"s"}`, "a.b", "", fieldAbsent},
		{`{"b":1}`, "a", "", fieldAbsent},
		{`{"a":1,"a":2}`, "a", "", fieldMalformed},
		{`{"a":"x\"y"}`, "a", "", fieldMalformed},
		{`{"\u0061":"x"}`, "a", "", fieldMalformed},
		{`{"a":{"b":1}}`, "a", "", fieldMalformed},
		{`[1]`, "a", "", fieldMalformed},
		{`{"a":`, "a", "", fieldMalformed},
		{`{"a":"unterminated}`, "a", "", fieldMalformed},
		{``, "a", "", fieldMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			v, st := jsonLookup([]byte(tt.body), strings.Split(tt.path, "."))
			if st != tt.status || string(v) != tt.want {
				t.Fatalf("got %q status %d, want %q status %d", v, st, tt.want, tt.status)
			}
		})
	}
}

func TestSortedForm(t *testing.T) {
	tests := []struct{ body, want string }{
		{"b=2&a=1", "a1b2"},
		{"To=%2B1&From=%2B2&Body=hi+there", "Bodyhi thereFrom+2To+1"},
		{"a=2&a=1&flag", "a1a2flag"},
		{"&&a=1&", "a1"},
		{"", ""},
		// A repeated name: each distinct value once, in order.
		{"A=1&A=1&MessageSid=SM1", "A1MessageSidSM1"},
		{"A=1&A=1&A=1", "A1"},
		{"A=2&A=1", "A1A2"},
		{"A=2&A=1&A=2&A=1", "A1A2"},
		{"A=1&B=x&A=2&A=1", "A1A2Bx"},
		{"A=&A=&A", "A"},
		{"A=&A=0", "AA0"},
		// Equal once decoded: one pair.
		{"%41=1&A=%31", "A1"},
		{"A=a+b&A=a%20b", "Aa b"},
		// Not equal: a different name or value is kept.
		{"A=1&a=1", "A1a1"},
		{"A=1&A=1+", "A1A1 "},
		{"To=%2B1&To=%2B1&To=%2B2", "To+1To+2"},
		{"A=1&AA=1&A=1", "A1AA1"},
		{"AB=1&A=B1", "AB1AB1"},
	}
	for _, tt := range tests {
		got, ok := appendSortedForm(nil, []byte(tt.body))
		if !ok || string(got) != tt.want || !formOK([]byte(tt.body)) {
			t.Errorf("%q: %q %v, want %q", tt.body, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"a=%zz", "a=%2", strings.Repeat("a=1&", 129)} {
		if _, ok := appendSortedForm(nil, []byte(bad)); ok || formOK([]byte(bad)) {
			t.Errorf("%q: accepted", clipText(bad))
		}
	}
}

// TestTemplateConfigErrors: the mistakes a hand-written block can make are
// refused when the config loads, each with what to do.
func TestTemplateConfigErrors(t *testing.T) {
	env := testEnv(t, nil)
	sec := []SecretConfig{{Secret: "template-secret-0123456789"}}
	tests := []struct {
		name string
		c    Config
		err  string
	}{
		{"timestamp not signed", Config{Scheme: "hmac", Header: "X-Sig", Timestamp: "header:X-Ts"}, "not part of the signed content"},
		{"format timestamp not signed", Config{Scheme: "hmac", Header: "X-Sig", Format: "t={timestamp},v1={signature}"}, "not part of the signed content"},
		{"template timestamp without source", Config{Scheme: "hmac", Header: "X-Sig", Template: "{timestamp}{body}"}, "no timestamp is read"},
		{"two timestamps", Config{Scheme: "hmac", Header: "X-Sig", Format: "t={timestamp},v1={signature}", Template: "{timestamp}.{body}", Timestamp: "header:X-Ts"}, "must not be set"},
		{"url without public_url", Config{Scheme: "hmac", Header: "X-Sig", Template: "{url}{body}"}, "public_url"},
		{"method of several", Config{Scheme: "hmac", Header: "X-Sig", Template: "{method}{body}", Method: "GET,POST"}, "exactly one method"},
		{"prefix and format", Config{Scheme: "hmac", Header: "X-Sig", Prefix: "v1=", Format: "v1={signature}"}, "prefix or format"},
		{"bad format", Config{Scheme: "hmac", Header: "X-Sig", Format: "{sig}"}, "format:"},
		{"bad template", Config{Scheme: "hmac", Header: "X-Sig", Template: "{x}"}, "template:"},
		{"no header", Config{Scheme: "hmac", Template: "{body}"}, "header is required"},
		{"header and signature", Config{Scheme: "hmac", Header: "X-Sig", Signature: "json:sig", Template: "{json:ts}"}, "not both"},
		{"signature not json", Config{Scheme: "hmac", Signature: "header:X", Template: "{json:ts}"}, "json:PATH"},
		{"signature in body signing body", Config{Scheme: "hmac", Signature: "json:sig"}, "cannot be part"},
		{"unknown timestamp format", Config{Scheme: "hmac", Header: "X-Sig", TimestampFormat: "iso"}, "timestamp_format"},
		{"unknown encoding", Config{Scheme: "hmac", Header: "X-Sig", Template: "{body}", Encoding: "b32"}, "encoding"},
		{"ed25519 needs a template", Config{Scheme: "ed25519", Header: "X-Sig"}, "template is required"},
		{"ed25519 bad key", Config{Scheme: "ed25519", Header: "X-Sig", Template: "{body}", Secrets: []SecretConfig{{Secret: "abcd"}}}, "32 bytes"},
		{"ecdsa bad key", Config{Scheme: "ecdsa-p256", Header: "X-Sig", Template: "{body}", Secrets: []SecretConfig{{Secret: "!!"}}}, "not an ECDSA public key"},
		{"token template", Config{Scheme: "token", Header: "X-Token", Template: "{body}"}, "signs nothing"},
		{"token list format", Config{Scheme: "token", Header: "X-Token", Format: "v1={signature}"}, "PREFIX{signature}"},
		{"token header", Config{Scheme: "token"}, "header is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			if c.Secrets == nil {
				c.Secrets = sec
			}
			_, _, err := New(c, env)
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			noLeak(t, err, "template-secret-0123456789")
		})
	}
}

func TestTemplateHelpers(t *testing.T) {
	twitch, _ := LookupPreset("twitch")
	if got := SignedHeadersOf(twitch.Verify); !reflect.DeepEqual(got, []string{"Twitch-Eventsub-Message-Id", "Twitch-Eventsub-Message-Timestamp"}) {
		t.Errorf("twitch signed headers %v", got)
	}
	if got := SignedHeadersOf(Config{Scheme: "slack"}); !reflect.DeepEqual(got, []string{"X-Slack-Request-Timestamp"}) {
		t.Errorf("slack signed headers %v", got)
	}
	if SignedHeadersOf(Config{Scheme: "nope"}) != nil {
		t.Error("unknown scheme has signed headers")
	}
	square, _ := LookupPreset("square")
	hubspot, _ := LookupPreset("hubspot")
	if !UsesURL(square.Verify) || UsesMethod(square.Verify) || !UsesMethod(hubspot.Verify) || UsesURL(twitch.Verify) {
		t.Error("UsesURL/UsesMethod")
	}
	// The body is signed by {body}, not by {sorted_form}.
	for name, want := range map[string]bool{"zoom": true, "twilio": false, "mailgun": false, "gitlab": false, "discord": true, "square": true} {
		p, _ := LookupPreset(name)
		if got := SignsBody(p.Verify); got != want {
			t.Errorf("%s: SignsBody %v, want %v", name, got, want)
		}
	}
	if !SignsBody(Config{Scheme: "hmac", Header: "X"}) {
		t.Error("the plain hmac scheme signs the body")
	}
	// The replay window is the tolerance when a timestamp is read.
	for name, want := range map[string]time.Duration{"zoom": 90 * time.Minute, "paddle": time.Minute, "square": 0, "twilio": 0, "gitlab": 0, "linear": time.Minute} {
		p, _ := LookupPreset(name)
		if w, _, _ := ReplayWindow(p.Verify); w != want {
			t.Errorf("%s: replay window %v, want %v", name, w, want)
		}
	}
}

func TestToken(t *testing.T) {
	env := testEnv(t, nil)
	c := Config{Scheme: "token", Header: "X-Gitlab-Token", Secrets: []SecretConfig{
		{ID: "old", Secret: "old-token-0123456789", NotAfter: now.Add(-time.Hour)},
		{ID: "new", Secret: "new-token-0123456789"},
	}}
	v := mustNew(t, c, env)
	tests := []struct {
		name, value, reason, id string
	}{
		{"current", "new-token-0123456789", "", "new"},
		{"surrounding spaces", "  new-token-0123456789\t", "", "new"},
		{"expired secret", "old-token-0123456789", "mismatch", ""},
		{"prefix of the token", "new-token", "mismatch", ""},
		{"longer", "new-token-0123456789x", "mismatch", ""},
		{"missing", "", "missing", ""},
		{"too long", strings.Repeat("x", maxTokenLen+1), "malformed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.value != "" {
				h.Set("X-Gitlab-Token", tt.value)
			}
			id, err := v.Verify(h, nil, now)
			wantReason(t, id, err, tt.reason, tt.id)
			noLeak(t, err, "new-token-0123456789", "old-token-0123456789")
		})
	}
	bearer := mustNew(t, Config{Scheme: "token", Header: "Authorization", Format: "Bearer {signature}", Secrets: []SecretConfig{{Secret: "bearer-token-0123456789"}}}, env)
	for value, reason := range map[string]string{"Bearer bearer-token-0123456789": "", "bearer-token-0123456789": "malformed", "Bearer ": "malformed"} {
		id, err := bearer.Verify(http.Header{"Authorization": {value}}, nil, now)
		wantReason(t, id, err, reason, "0")
	}
	none := mustNew(t, Config{Scheme: "token", Header: "X-T", Secrets: []SecretConfig{{Secret: "future-token-0123456789", NotBefore: now.Add(time.Hour)}}}, Env{Now: now.Add(2 * time.Hour), Dir: env.Dir})
	_, err := none.Verify(http.Header{"X-T": {"future-token-0123456789"}}, nil, now)
	if !errors.Is(err, ErrNoActiveSecret) {
		t.Errorf("no active secret: %v", err)
	}
}

// FuzzSortedForm compares {sorted_form} with a plain reading of Twilio's
// rule: the fields grouped by decoded name, each name's distinct decoded
// values sorted, the names sorted, each name followed by its value.
func FuzzSortedForm(f *testing.F) {
	for _, s := range []string{"A=1&A=1", "b=2&a=1&a=2&a=1", "%41=1&A=%31", "x&x=&=1&=1", "a=%zz", "To=%2B1&To=%2B1&Body=a+b&Body=a%20b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := appendSortedForm(nil, []byte(body))
		if ok != formOK([]byte(body)) {
			t.Fatalf("%q: appendSortedForm ok %v, formOK %v", body, ok, !ok)
		}
		values := map[string]map[string]bool{}
		n := 0
		for _, field := range strings.Split(body, "&") {
			if field == "" {
				continue
			}
			n++
			k, v, _ := strings.Cut(field, "=")
			dk, err1 := url.QueryUnescape(k)
			dv, err2 := url.QueryUnescape(v)
			if err1 != nil || err2 != nil {
				if ok {
					t.Fatalf("%q: accepted a bad escape", body)
				}
				return
			}
			if values[dk] == nil {
				values[dk] = map[string]bool{}
			}
			values[dk][dv] = true
		}
		if n > maxFormFields {
			if ok {
				t.Fatalf("%q: accepted %d fields", body, n)
			}
			return
		}
		if !ok {
			t.Fatalf("%q: refused", body)
		}
		var want strings.Builder
		for _, k := range slices.Sorted(maps.Keys(values)) {
			for _, v := range slices.Sorted(maps.Keys(values[k])) {
				want.WriteString(k + v)
			}
		}
		if string(got) != want.String() {
			t.Fatalf("%q: %q, want %q", body, got, want.String())
		}
	})
}
