package idkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseKeyErrors(t *testing.T) {
	const want = "(want header:, json:, form:, query:, template: or body:sha256)"
	tests := []struct {
		name    string
		sources []string
		err     string
	}{
		{"nil", nil, "dedupe: no key sources (want at least one of header:, json:, form:, query:, template: or body:sha256)"},
		{"empty list", []string{}, "dedupe: no key sources (want at least one of header:, json:, form:, query:, template: or body:sha256)"},
		{"unknown kind", []string{"xyz:abc"}, `dedupe: unknown key source "xyz:abc" ` + want},
		{"no colon", []string{"Idempotency-Key"}, `dedupe: unknown key source "Idempotency-Key" ` + want},
		{"empty string", []string{""}, `dedupe: unknown key source "" ` + want},
		{"kind is case sensitive", []string{"Header:X"}, `dedupe: unknown key source "Header:X" ` + want},
		{"bare template word", []string{"template"}, `dedupe: unknown key source "template" ` + want},
		{"unknown after good", []string{"header:A", "jsn:id"}, `dedupe: unknown key source "jsn:id" ` + want},
		{"empty header", []string{"header:"}, `dedupe: key source "header:": empty header name`},
		{"header with space", []string{"header:X Key"}, `dedupe: key source "header:X Key": invalid character ' ' in header name`},
		{"header with colon", []string{"header:X:Y"}, `dedupe: key source "header:X:Y": invalid character ':' in header name`},
		{"empty json", []string{"json:"}, `dedupe: key source "json:": empty JSON path`},
		{"json leading dot", []string{"json:.id"}, `dedupe: key source "json:.id": empty segment 1 in JSON path ".id"`},
		{"json trailing dot", []string{"json:data."}, `dedupe: key source "json:data.": empty segment 2 in JSON path "data."`},
		{"json double dot", []string{"json:a..b"}, `dedupe: key source "json:a..b": empty segment 2 in JSON path "a..b"`},
		{"empty form", []string{"form:"}, `dedupe: key source "form:": empty form field name`},
		{"empty query", []string{"query:"}, `dedupe: key source "query:": empty query parameter name`},
		{"body md5", []string{"body:md5"}, `dedupe: key source "body:md5": unknown body digest "md5" (want body:sha256)`},
		{"body empty", []string{"body:"}, `dedupe: key source "body:": unknown body digest "" (want body:sha256)`},
		{"empty template", []string{"template:"}, `dedupe: key source "template:": empty template`},
		{"no placeholder", []string{"template:abc"}, `dedupe: key source "template:abc": template has no {source} placeholder`},
		{"unclosed", []string{"template:{json:id"}, `dedupe: key source "template:{json:id": unbalanced '{' at offset 0 of the template`},
		{"unopened", []string{"template:json:id}"}, `dedupe: key source "template:json:id}": unbalanced '}' at offset 7 of the template`},
		{"double open", []string{"template:{{json:id}}"}, `dedupe: key source "template:{{json:id}}": unbalanced '{' at offset 0 of the template`},
		{"stray close", []string{"template:{json:id}}"}, `dedupe: key source "template:{json:id}}": unbalanced '}' at offset 9 of the template`},
		{"open inside", []string{"template:{json:{id}"}, `dedupe: key source "template:{json:{id}": unbalanced '{' at offset 0 of the template`},
		{"empty placeholder", []string{"template:a{}b"}, `dedupe: key source "template:a{}b": empty placeholder {} at offset 1 of the template`},
		{"nested", []string{"template:{template:{json:id}}"}, `dedupe: key source "template:{template:{json:id}}": unbalanced '{' at offset 0 of the template`},
		{"nested flat", []string{"template:{template:x}"}, `dedupe: key source "template:{template:x}": nested templates are not allowed (placeholder {template:x})`},
		{"unknown placeholder", []string{"template:{xyz:a}"}, `dedupe: key source "template:{xyz:a}": unknown placeholder source "xyz:a" (want header:, json:, form:, query: or body:sha256)`},
		{"placeholder no colon", []string{"template:{id}"}, `dedupe: key source "template:{id}": unknown placeholder source "id" (want header:, json:, form:, query: or body:sha256)`},
		{"bad placeholder", []string{"template:{json:a..b}"}, `dedupe: key source "template:{json:a..b}": placeholder {json:a..b}: empty segment 2 in JSON path "a..b"`},
		{"control in literal", []string{"template:{json:id}\n"}, `dedupe: key source "template:{json:id}\n": control character '\n' in template text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.sources)
			if err == nil {
				t.Fatalf("ParseKey(%q) = %+v, want error %q", tt.sources, k, tt.err)
			}
			if err.Error() != tt.err {
				t.Fatalf("ParseKey(%q) error\n got %q\nwant %q", tt.sources, err.Error(), tt.err)
			}
			if k != nil {
				t.Errorf("ParseKey returned a spec with an error")
			}
		})
	}
}

func TestParseKeyTooManyJSON(t *testing.T) {
	var srcs []string
	for i := range MaxJSONSources + 1 {
		srcs = append(srcs, fmt.Sprintf("json:f%d", i))
	}
	_, err := ParseKey(srcs)
	if err == nil || err.Error() != "dedupe: 65 distinct json: key sources, at most 64 allowed" {
		t.Fatalf("got %v", err)
	}
	if _, err := ParseKey(srcs[:MaxJSONSources]); err != nil {
		t.Fatalf("64 json sources: %v", err)
	}
	// Repeats do not count twice.
	if _, err := ParseKey(append(srcs[:MaxJSONSources:MaxJSONSources], "json:f0", "template:{json:f1}-{json:f2}")); err != nil {
		t.Fatalf("repeated json sources: %v", err)
	}
}

func TestParseKeyCompiles(t *testing.T) {
	tests := []struct {
		src  string
		want Source
	}{
		{"header:idempotency-key", Source{Kind: KindHeader, Name: "Idempotency-Key"}},
		{"header:X-GitHub-Delivery", Source{Kind: KindHeader, Name: "X-Github-Delivery"}},
		{"json:id", Source{Kind: KindJSON, Name: "id"}},
		{"json:data.items.0.id", Source{Kind: KindJSON, Name: "data.items.0.id"}},
		{"json:a:b", Source{Kind: KindJSON, Name: "a:b"}},
		{"form:event_id", Source{Kind: KindForm, Name: "event_id"}},
		{"query:id", Source{Kind: KindQuery, Name: "id"}},
		{"body:sha256", Source{Kind: KindBody, Name: "sha256"}},
		{"template:{json:type}:{json:data.order_id}:{json:created_at}", Source{
			Kind: KindTemplate, Name: "{json:type}:{json:data.order_id}:{json:created_at}",
			Parts: []Source{
				{Kind: KindJSON, Name: "type"},
				{Kind: KindLiteral, Name: ":"},
				{Kind: KindJSON, Name: "data.order_id"},
				{Kind: KindLiteral, Name: ":"},
				{Kind: KindJSON, Name: "created_at"},
			},
		}},
		{"template:evt-{header:x-id}", Source{
			Kind: KindTemplate, Name: "evt-{header:X-Id}",
			Parts: []Source{{Kind: KindLiteral, Name: "evt-"}, {Kind: KindHeader, Name: "X-Id"}},
		}},
		{"template:{query:a}{form:b}{body:sha256}", Source{
			Kind: KindTemplate, Name: "{query:a}{form:b}{body:sha256}",
			Parts: []Source{{Kind: KindQuery, Name: "a"}, {Kind: KindForm, Name: "b"}, {Kind: KindBody, Name: "sha256"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			k, err := ParseKey([]string{tt.src})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(k.Sources, []Source{tt.want}) {
				t.Fatalf("got %+v\nwant %+v", k.Sources, tt.want)
			}
			if got, want := k.Sources[0].String(), tt.want.Kind+":"+tt.want.Name; tt.want.Kind != KindBody && got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}

func mustParse(t testing.TB, sources ...string) *KeySpec {
	t.Helper()
	k, err := ParseKey(sources)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type req struct {
	headers []string // name, value pairs
	query   string
	ctype   string
	body    string
}

func (q req) build() (*http.Request, []byte) {
	target := "/webhook"
	if q.query != "" {
		target += "?" + q.query
	}
	r := httptest.NewRequest(http.MethodPost, target, nil)
	for i := 0; i+1 < len(q.headers); i += 2 {
		r.Header.Add(q.headers[i], q.headers[i+1])
	}
	if q.ctype != "" {
		r.Header.Set("Content-Type", q.ctype)
	}
	return r, []byte(q.body)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const formCT = "application/x-www-form-urlencoded"

func TestDerive(t *testing.T) {
	long := strings.Repeat("k", 255)
	tests := []struct {
		name    string
		sources []string
		req     req
		want    string
		err     error // ErrNoKey or ErrBadKey when set
	}{
		// header
		{"header bare", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324"}}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"header quoted", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`}}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"quoted and bare agree", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc"`}}, "abc", nil},
		{"quoted escapes", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"a\"b\\c"`}}, `a"b\c`, nil},
		{"quoted with space", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"a b"`}}, "a b", nil},
		{"quoted with parameters", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc";v=1;  x="y";flag;t=tok/en;b=:aGk=:;d=1.5;n=-7;q=?1;at=@1700000000;ds=%"caf%c3%a9"`}}, "abc", nil},
		{"quoted empty is absent", []string{"header:Idempotency-Key", "query:id"}, req{headers: []string{"Idempotency-Key", `""`}, query: "id=q"}, "q", nil},
		{"quoted on other header", []string{"header:X-Delivery"}, req{headers: []string{"X-Delivery", `"d-1"`}}, "d-1", nil},
		{"bare with inner quote", []string{"header:X-Delivery"}, req{headers: []string{"X-Delivery", `a"b`}}, `a"b`, nil},
		{"header ows trimmed", []string{"header:X-Delivery"}, req{headers: []string{"X-Delivery", " \tabc \t"}}, "abc", nil},
		{"header name case", []string{"header:x-delivery"}, req{headers: []string{"X-DELIVERY", "abc"}}, "abc", nil},
		{"header first value", []string{"header:X-Delivery"}, req{headers: []string{"X-Delivery", "one", "X-Delivery", "two"}}, "one", nil},
		{"empty header absent", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", ""}}, "", ErrNoKey},
		{"blank header absent", []string{"header:Idempotency-Key", "json:id"}, req{headers: []string{"Idempotency-Key", "  "}, body: `{"id":"j"}`}, "j", nil},
		{"missing header", []string{"header:Idempotency-Key"}, req{}, "", ErrNoKey},
		{"header 255 bytes", []string{"header:K"}, req{headers: []string{"K", long}}, long, nil},
		{"header 256 bytes", []string{"header:K"}, req{headers: []string{"K", long + "k"}}, "", ErrBadKey},
		{"header control", []string{"header:K"}, req{headers: []string{"K", "a\x01b"}}, "", ErrBadKey},
		{"header DEL", []string{"header:K"}, req{headers: []string{"K", "a\x7fb"}}, "", ErrBadKey},
		{"header tab inside", []string{"header:K"}, req{headers: []string{"K", "a\tb"}}, "", ErrBadKey},
		{"header non-ASCII", []string{"header:K"}, req{headers: []string{"K", "café"}}, "café", nil},
		{"bad key does not fall back", []string{"header:K", "header:L"}, req{headers: []string{"K", "a\x01", "L", "ok"}}, "", ErrBadKey},
		// malformed sf-strings
		{"sf unterminated", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc`}}, "", ErrBadKey},
		{"sf lone quote", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"`}}, "", ErrBadKey},
		{"sf bad escape", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"a\nb"`}}, "", ErrBadKey},
		{"sf trailing backslash", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"ab\`}}, "", ErrBadKey},
		{"sf trailing garbage", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc"def`}}, "", ErrBadKey},
		{"sf two strings", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"a", "b"`}}, "", ErrBadKey},
		{"sf non-ASCII", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"café"`}}, "", ErrBadKey},
		{"sf bad param key", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc";K=1`}}, "", ErrBadKey},
		{"sf bad param value", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc";k=1.2345`}}, "", ErrBadKey},
		{"sf empty param", []string{"header:Idempotency-Key"}, req{headers: []string{"Idempotency-Key", `"abc";`}}, "", ErrBadKey},
		{"sf bad param no fall back", []string{"header:Idempotency-Key", "json:id"}, req{headers: []string{"Idempotency-Key", `"abc`}, body: `{"id":"x"}`}, "", ErrBadKey},
		// json
		{"json string", []string{"json:id"}, req{body: `{"id":"evt_123"}`}, "evt_123", nil},
		{"json escapes", []string{"json:id"}, req{body: `{"id":"a\/b\u00e9\ud83d\ude00"}`}, "a/bé😀", nil},
		{"json escaped name", []string{"json:id"}, req{body: `{"\u0069d":"x"}`}, "x", nil},
		{"json escaped newline is control", []string{"json:id"}, req{body: `{"id":"a\nb"}`}, "", ErrBadKey},
		{"json invalid utf8 replaced", []string{"json:id"}, req{body: "{\"id\":\"a\xffb\"}"}, "a\uFFFDb", nil},
		{"json lone surrogate replaced", []string{"json:id"}, req{body: `{"id":"a\ud800b"}`}, "a\uFFFDb", nil},
		{"json big int", []string{"json:id"}, req{body: `{"id":12345678901234567890}`}, "12345678901234567890", nil},
		{"json decimal", []string{"json:amount"}, req{body: `{"amount":1.50}`}, "1.50", nil},
		{"json exponent", []string{"json:n"}, req{body: `{"n":-1.5E+300}`}, "-1.5E+300", nil},
		{"json huge exponent", []string{"json:n"}, req{body: `{"n":1e999999}`}, "1e999999", nil},
		{"json zero", []string{"json:n"}, req{body: `{"n":0}`}, "0", nil},
		{"json true", []string{"json:ok"}, req{body: `{"ok":true}`}, "true", nil},
		{"json false", []string{"json:ok"}, req{body: `{"ok":false}`}, "false", nil},
		{"json null", []string{"json:id"}, req{body: `{"id":null}`}, "", ErrNoKey},
		{"json object", []string{"json:id"}, req{body: `{"id":{"a":1}}`}, "", ErrNoKey},
		{"json array", []string{"json:id"}, req{body: `{"id":[1]}`}, "", ErrNoKey},
		{"json empty string", []string{"json:id"}, req{body: `{"id":""}`}, "", ErrNoKey},
		{"json nested", []string{"json:data.object.id"}, req{body: `{"type":"x","data":{"object":{"id":"ch_1","amount":5}}}`}, "ch_1", nil},
		{"json nested missing", []string{"json:data.object.id"}, req{body: `{"data":{"object":{}}}`}, "", ErrNoKey},
		{"json nested through scalar", []string{"json:data.object.id"}, req{body: `{"data":"object"}`}, "", ErrNoKey},
		{"json array index", []string{"json:data.items.0.id"}, req{body: `{"data":{"items":[{"id":"first"},{"id":"second"}]}}`}, "first", nil},
		{"json array index 1", []string{"json:data.items.1.id"}, req{body: `{"data":{"items":[{"id":"first"},{"id":"second"}]}}`}, "second", nil},
		{"json array index out of range", []string{"json:data.items.2.id"}, req{body: `{"data":{"items":[{"id":"first"},{"id":"second"}]}}`}, "", ErrNoKey},
		{"json top-level array", []string{"json:1"}, req{body: `["a","b"]`}, "b", nil},
		{"json numeric name on object", []string{"json:a.0"}, req{body: `{"a":{"0":"zero"}}`}, "zero", nil},
		{"json leading zero index", []string{"json:a.01"}, req{body: `{"a":["x","y"]}`}, "", ErrNoKey},
		{"json name not index", []string{"json:a.x"}, req{body: `{"a":["x","y"]}`}, "", ErrNoKey},
		{"json duplicate last wins", []string{"json:id"}, req{body: `{"id":"first","id":"second"}`}, "second", nil},
		{"json duplicate parent last wins", []string{"json:a.b"}, req{body: `{"a":{"b":"one"},"a":{"c":"two"}}`}, "", ErrNoKey},
		{"json duplicate null last", []string{"json:id"}, req{body: `{"id":"x","id":null}`}, "", ErrNoKey},
		{"json whitespace", []string{"json:a.b"}, req{body: " \n{ \"a\" :\t{ \"b\" : 42 } } \r\n"}, "42", nil},
		{"json not JSON", []string{"json:id"}, req{body: `id=1`}, "", ErrNoKey},
		{"json empty body", []string{"json:id"}, req{}, "", ErrNoKey},
		{"json trailing garbage", []string{"json:id"}, req{body: `{"id":"x"} x`}, "", ErrNoKey},
		{"json two values", []string{"json:id"}, req{body: `{"id":"x"}{"id":"y"}`}, "", ErrNoKey},
		{"json truncated", []string{"json:id"}, req{body: `{"id":"x","more":`}, "", ErrNoKey},
		{"json trailing comma", []string{"json:id"}, req{body: `{"id":"x",}`}, "", ErrNoKey},
		{"json bad number", []string{"json:id"}, req{body: `{"id":01}`}, "", ErrNoKey},
		{"json bad later", []string{"json:id"}, req{body: `{"id":"x","y":tru}`}, "", ErrNoKey},
		{"json raw control in string", []string{"json:id"}, req{body: "{\"id\":\"a\x01\"}"}, "", ErrNoKey},
		{"json BOM", []string{"json:id"}, req{body: "\xef\xbb\xbf{\"id\":\"x\"}"}, "", ErrNoKey},
		{"json deep nesting", []string{"json:id"}, req{body: strings.Repeat("[", 20000) + strings.Repeat("]", 20000)}, "", ErrNoKey},
		{"json nesting at limit", []string{"json:id"}, req{body: `{"id":"x","d":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + "}"}, "x", nil},
		{"json deep but fine", []string{"json:a.a.a.a.a.a.a.a"}, req{body: strings.Repeat(`{"a":`, 8) + `"deep"` + strings.Repeat("}", 8)}, "deep", nil},
		{"json 255", []string{"json:id"}, req{body: `{"id":"` + long + `"}`}, long, nil},
		{"json 256", []string{"json:id"}, req{body: `{"id":"` + long + `k"}`}, "", ErrBadKey},
		{"json 256 escaped", []string{"json:id"}, req{body: `{"id":"` + long + `\u00e9"}`}, "", ErrBadKey},
		{"json long number", []string{"json:id"}, req{body: `{"id":` + strings.Repeat("9", 300) + `}`}, "", ErrBadKey},
		{"json with form content type", []string{"json:id"}, req{ctype: formCT, body: `{"id":"x"}`}, "x", nil},
		// form
		{"form", []string{"form:event_id"}, req{ctype: formCT, body: "a=1&event_id=ev%201&b=2"}, "ev 1", nil},
		{"form plus", []string{"form:event_id"}, req{ctype: formCT, body: "event_id=a+b"}, "a b", nil},
		{"form charset", []string{"form:event_id"}, req{ctype: "Application/X-WWW-Form-Urlencoded; charset=utf-8", body: "event_id=e"}, "e", nil},
		{"form first value", []string{"form:id"}, req{ctype: formCT, body: "id=1&id=2"}, "1", nil},
		{"form wrong content type", []string{"form:event_id"}, req{ctype: "text/plain", body: "event_id=e"}, "", ErrNoKey},
		{"form no content type", []string{"form:event_id"}, req{body: "event_id=e"}, "", ErrNoKey},
		{"form multipart", []string{"form:event_id"}, req{ctype: "multipart/form-data; boundary=x", body: "event_id=e"}, "", ErrNoKey},
		{"form empty value", []string{"form:event_id", "body:sha256"}, req{ctype: formCT, body: "event_id="}, sha("event_id="), nil},
		{"form bad pair skipped", []string{"form:id"}, req{ctype: formCT, body: "x=%zz&id=ok"}, "ok", nil},
		{"form control", []string{"form:id"}, req{ctype: formCT, body: "id=a%00b"}, "", ErrBadKey},
		// query
		{"query", []string{"query:id"}, req{query: "x=1&id=q-1"}, "q-1", nil},
		{"query escaped", []string{"query:id"}, req{query: "id=a%2Fb"}, "a/b", nil},
		{"query missing", []string{"query:id"}, req{query: "x=1"}, "", ErrNoKey},
		{"query empty", []string{"query:id"}, req{query: "id="}, "", ErrNoKey},
		{"query not body", []string{"query:id"}, req{ctype: formCT, body: "id=1"}, "", ErrNoKey},
		// body
		{"body sha256", []string{"body:sha256"}, req{body: `{"a":1}`}, sha(`{"a":1}`), nil},
		{"body sha256 empty body", []string{"body:sha256"}, req{}, sha(""), nil},
		// order and fallback
		{"first present wins", []string{"header:Idempotency-Key", "json:id"}, req{headers: []string{"Idempotency-Key", "h"}, body: `{"id":"j"}`}, "h", nil},
		{"falls back to json", []string{"header:Idempotency-Key", "json:id"}, req{body: `{"id":"j"}`}, "j", nil},
		{"falls back to body", []string{"header:Idempotency-Key", "json:id", "body:sha256"}, req{body: `nope`}, sha("nope"), nil},
		{"falls back past json", []string{"json:id", "json:data.id", "query:id"}, req{body: `{"data":{"id":7}}`, query: "id=q"}, "7", nil},
		{"none present", []string{"header:A", "json:id", "form:f", "query:q"}, req{body: `{}`}, "", ErrNoKey},
		// template
		{"template all present", []string{"template:{json:type}:{json:data.order_id}:{json:created_at}"}, req{body: `{"type":"order.paid","created_at":1700000000,"data":{"order_id":"o-9"}}`}, "order.paid:o-9:1700000000", nil},
		{"template one missing", []string{"template:{json:type}:{json:data.order_id}:{json:created_at}"}, req{body: `{"type":"order.paid","data":{"order_id":"o-9"}}`}, "", ErrNoKey},
		{"template missing falls back", []string{"template:{json:type}:{json:id}", "header:X-Id"}, req{headers: []string{"X-Id", "h"}, body: `{"type":"t"}`}, "h", nil},
		{"template mixed", []string{"template:{header:X-Shop}/{query:topic}/{json:id}/{body:sha256}"}, req{headers: []string{"X-Shop", `"s1"`}, query: "topic=orders", body: `{"id":5}`}, "s1/orders/5/" + sha(`{"id":5}`), nil},
		{"template form", []string{"template:{form:a}-{form:b}"}, req{ctype: formCT, body: "a=1&b=2"}, "1-2", nil},
		{"template null part", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"x","b":null}`}, "", ErrNoKey},
		{"template escaped part", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"\u0041","b":"\u00e9"}`}, "A-é", nil},
		{"template empty part", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"x","b":""}`}, "", ErrNoKey},
		{"template not json", []string{"template:{json:a}-{json:b}"}, req{body: `a=1`}, "", ErrNoKey},
		{"template too long", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"` + long[:200] + `","b":"` + long[:55] + `"}`}, "", ErrBadKey},
		{"template exactly 255", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"` + long[:200] + `","b":"` + long[:54] + `"}`}, long[:200] + "-" + long[:54], nil},
		{"template body hash too long", []string{"template:" + long[:200] + "{body:sha256}"}, req{}, "", ErrBadKey},
		{"template bad header part", []string{"template:{header:X-A}-{json:id}"}, req{headers: []string{"X-A", `"x`}}, "", ErrBadKey},
		{"template control part", []string{"template:{json:a}-{json:b}"}, req{body: `{"a":"x","b":"\u007f"}`}, "", ErrBadKey},
		{"template same path twice", []string{"template:{json:a}{json:a}"}, req{body: `{"a":"x"}`}, "xx", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := mustParse(t, tt.sources...)
			r, body := tt.req.build()
			got, err := deriveReq(k, r, body)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Derive = %q, %v; want error %v", got, err, tt.err)
				}
				if got != "" {
					t.Errorf("key %q returned with error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Derive = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// Regression: keys with C1 controls, line separators or bidirectional
// overrides were accepted, so two different keys could look the same in a
// log line or the admin API.
func TestKeysWithC1OrBidiCharactersAreRejected(t *testing.T) {
	for _, v := range []string{
		"evt\u0085x", "evt\u0080", "evt\u009f", "evt\u2028x", "evt\u2029", "evt\u202ex", "evt\u202a",
		"evt\u200e", "evt\u200f", "evt\u2066", "evt\u2069", "evt\u061c", "evt\xff", "evt\xc3",
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header["K"] = []string{v}
		if _, err := deriveReq(mustParse(t, "header:K"), r, nil); !errors.Is(err, ErrBadKey) {
			t.Errorf("%+q: got %v, want ErrBadKey", v, err)
		}
	}
	for _, v := range []string{"évt_1", "注文-1001", "evt\ufffd", "a b"} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header["K"] = []string{v}
		if got, err := deriveReq(mustParse(t, "header:K"), r, nil); err != nil || got != v {
			t.Errorf("%+q: got %q, %v; want it accepted", v, got, err)
		}
	}
}

func TestDeriveErrorMessages(t *testing.T) {
	tests := []struct {
		src, header, want string
	}{
		{"header:K", strings.Repeat("a", 256), "dedupe: invalid idempotency key: longer than 255 bytes"},
		{"header:K", "a\x01", "dedupe: invalid idempotency key: contains control, separator or bidirectional formatting characters"},
		{"header:K", `"a`, `dedupe: invalid idempotency key: header K starts with '"' but is not a valid RFC 8941 string`},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("K", tt.header)
		_, err := deriveReq(mustParse(t, tt.src), r, nil)
		if err == nil || err.Error() != tt.want || !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: got %v, want %q", tt.header, err, tt.want)
		}
	}
}

func TestDeriveNilAndHandBuilt(t *testing.T) {
	var nilSpec *KeySpec
	if _, err := deriveReq(nilSpec, nil, nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil spec: %v", err)
	}
	k := mustParse(t, "header:K", "query:q", "form:f", "json:id")
	if _, err := deriveReq(k, nil, []byte("x")); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil request: %v", err)
	}
	if got, err := deriveReq(k, nil, []byte(`{"id":"x"}`)); err != nil || got != "x" {
		t.Errorf("nil request with JSON body: %q %v", got, err)
	}
	r := &http.Request{Header: http.Header{}}
	if _, err := deriveReq(k, r, nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("request without URL: %v", err)
	}

	// A KeySpec built by hand (no plan) works, as does one changed after
	// ParseKey, and unknown kinds are ignored.
	hand := &KeySpec{Sources: []Source{
		{Kind: "nope", Name: "x"},
		{Kind: KindTemplate, Parts: []Source{{Kind: "nope"}}},
		{Kind: KindJSON, Name: "a.b"},
	}}
	if got, err := deriveReq(hand, nil, []byte(`{"a":{"b":"hb"}}`)); err != nil || got != "hb" {
		t.Errorf("hand-built: %q %v", got, err)
	}
	changed := mustParse(t, "json:a")
	changed.Sources[0].Name = "b"
	if got, err := deriveReq(changed, nil, []byte(`{"a":"1","b":"2"}`)); err != nil || got != "2" {
		t.Errorf("changed: %q %v", got, err)
	}
	// More than 64 json paths in a hand-built spec still resolve.
	var many KeySpec
	for i := range 100 {
		many.Sources = append(many.Sources, Source{Kind: KindJSON, Name: "f" + strconv.Itoa(i)})
	}
	if got, err := deriveReq(&many, nil, []byte(`{"f99":"last","f2":null}`)); err != nil || got != "last" {
		t.Errorf("many: %q %v", got, err)
	}
}

// TestDeriveParsesJSONOnce checks that the body is scanned once however many
// json: sources and template parts ask for it.
func TestDeriveParsesJSONOnce(t *testing.T) {
	k := mustParse(t, "json:missing", "template:{json:a}-{json:nope}", "template:{json:a}-{json:b.0}", "json:a")
	d := deriver{k: k, body: []byte(`{"a":"x","b":[1]}`)}
	var got string
	for i := range k.Sources {
		v, ok, err := d.value(&k.Sources[i])
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = v
			break
		}
	}
	if got != "x-1" {
		t.Fatalf("got %q", got)
	}
	if len(d.plan.paths) != 4 || !d.jsonDone {
		t.Fatalf("plan %d paths, done %v", len(d.plan.paths), d.jsonDone)
	}
	if d.plan != k.plan {
		t.Fatal("plan was rebuilt")
	}
}

func TestDeriveConcurrent(t *testing.T) {
	k := mustParse(t, "header:Idempotency-Key", "template:{json:type}:{json:data.id}", "json:id", "body:sha256")
	body := []byte(`{"type":"t","data":{"id":7},"id":"x"}`)
	done := make(chan string)
	for range 8 {
		go func() {
			var last string
			for range 200 {
				last, _ = deriveReq(k, httptest.NewRequest("POST", "/", nil), body)
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; got != "t:7" {
			t.Errorf("got %q", got)
		}
	}
}

// refLookup is the reference for the scanner: encoding/json with UseNumber
// and a walk of the decoded tree.
func refLookup(body []byte, path string) (string, bool, bool) {
	if !json.Valid(body) {
		return "", false, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false, true // valid but too deep for the decoder
	}
	for _, seg := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return "", false, true
			}
		case []any:
			i := arrayIndex(seg)
			if i < 0 || i >= len(x) {
				return "", false, true
			}
			v = x[i]
		default:
			return "", false, true
		}
	}
	switch x := v.(type) {
	case string:
		return x, x != "", true
	case json.Number:
		return string(x), true, true
	case bool:
		return strconv.FormatBool(x), true, true
	}
	return "", false, true
}

func TestScannerMatchesEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"a":{"b":[{"c":"x"},{"c":12.50e3}]},"d":true,"e":null,"f":"\u00e9\ud800\udc00"}`,
		`[1,[2,[3]],{"0":"zero"}]`,
		`{"a":"1","a":{"b":"2"}}`,
		`{"a":{"b":"2"},"a":"1"}`,
		"{\"a\":\"\xff\xfe\"}",
		`{"\u0061":"esc"}`,
		"{\"\xff\":\"bad name\"}",
		`"top"`, `12`, `true`, `null`, ``, ` `, `{`, `[1,]`, `{"a" 1}`, `{"a":1 "b":2}`,
		`-`, `-0`, `-0.0e-0`, `1.`, `.5`, `1e`, `1e+`, `0x1`, `[tru]`, `[nul]`, `"\u12"`, `"\ud83d\u0041"`,
	}
	paths := []string{"a", "a.b", "a.b.0.c", "a.b.1.c", "d", "e", "f", "0", "1", "1.1.0", "2.0", "\xff"}
	for _, body := range bodies {
		for _, p := range paths {
			checkAgainstRef(t, []byte(body), p)
		}
	}
}

func checkAgainstRef(t *testing.T, body []byte, path string) {
	t.Helper()
	want, wantOK, valid := refLookup(body, path)
	k := &KeySpec{Sources: []Source{{Kind: KindJSON, Name: path}}}
	d := deriver{k: k, body: body}
	v, ok := d.jsonValue(path)
	if d.jsonOK != valid {
		t.Fatalf("body %q: scanner valid=%v, encoding/json valid=%v", body, d.jsonOK, valid)
	}
	var got string
	if ok {
		raw := body[v.start:v.end]
		if v.kind == jsonString && v.esc {
			got = string(appendJSONString(nil, raw, -1))
		} else {
			got = string(raw)
		}
	}
	if ok != wantOK || got != want {
		t.Fatalf("body %q path %q: scanner %q %v, encoding/json %q %v", body, path, got, ok, want, wantOK)
	}
}

func TestDeriveNeverReturnsInvalid(t *testing.T) {
	// Every single byte value as a header, JSON string content and query.
	k := mustParse(t, "header:K", "json:id", "query:q")
	for c := range 256 {
		r := httptest.NewRequest("POST", "/?q=%"+fmt.Sprintf("%02x", c), nil)
		r.Header["K"] = []string{string([]byte{'a', byte(c)})}
		for _, body := range [][]byte{nil, []byte(`{"id":"` + string([]byte{byte(c)}) + `"}`)} {
			key, err := deriveReq(k, r, body)
			if err == nil {
				if verr := validateKey(key); verr != nil || key == "" {
					t.Fatalf("byte %#x: key %q invalid", c, key)
				}
			}
		}
	}
}

// fuzzRequest builds the request FuzzDerive runs: every header source (and
// Idempotency-Key) set to hdr, the raw query set to query, and the form
// content type when form is true.
func fuzzRequest(k *KeySpec, hdr, query string, form bool) *http.Request {
	r := &http.Request{Method: "POST", Header: http.Header{}, URL: &url.URL{Path: "/", RawQuery: query}}
	r.Header["Idempotency-Key"] = []string{hdr}
	if k != nil {
		for _, src := range k.Sources {
			for _, p := range append([]Source{src}, src.Parts...) {
				if p.Kind == KindHeader {
					r.Header[textproto.CanonicalMIMEHeaderKey(p.Name)] = []string{hdr}
				}
			}
		}
	}
	if form {
		r.Header.Set("Content-Type", formCT)
	}
	return r
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"header:Idempotency-Key", "json:data.object.id", "json:data.items.0.id", "form:event_id",
		"query:id", "body:sha256", "template:{json:type}:{json:data.order_id}:{json:created_at}",
		"template:{header:X-A}-{query:b}", "template:{", "template:}", "template:{}", "template:{template:x}",
		"xyz:abc", "header:", "json:a..b", "template:a{json:id}b{body:sha256}c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		srcs := strings.Split(src, "\n")
		k, err := ParseKey(srcs)
		if err != nil {
			if k != nil {
				t.Fatal("spec and error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "dedupe: ") {
				t.Fatalf("error without prefix: %q", msg)
			}
			return
		}
		if len(k.Sources) != len(srcs) {
			t.Fatalf("%d sources from %d", len(k.Sources), len(srcs))
		}
		for i, s := range k.Sources {
			// Compiling what String prints gives the same source back.
			again, err := ParseKey([]string{s.String()})
			if err != nil {
				t.Fatalf("source %q printed as %q: %v", srcs[i], s.String(), err)
			}
			if !reflect.DeepEqual(again.Sources[0], s) {
				t.Fatalf("round trip of %q: %+v != %+v", srcs[i], again.Sources[0], s)
			}
			if s.Kind == KindTemplate {
				placeholders := 0
				for _, p := range s.Parts {
					switch p.Kind {
					case KindTemplate:
						t.Fatalf("nested template in %q", srcs[i])
					case KindLiteral:
						if p.Name == "" || strings.ContainsAny(p.Name, "{}") {
							t.Fatalf("bad literal %q in %q", p.Name, srcs[i])
						}
					default:
						placeholders++
					}
				}
				if placeholders == 0 {
					t.Fatalf("template %q without placeholder", srcs[i])
				}
			}
		}
		if _, err := deriveReq(k, fuzzRequest(k, "x", "a=1", true), []byte(`{"a":1}`)); err != nil && !errors.Is(err, ErrNoKey) && !errors.Is(err, ErrBadKey) {
			t.Fatalf("Derive: %v", err)
		}
	})
}

func FuzzDerive(f *testing.F) {
	f.Add("header:Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "", false, []byte(`{}`))
	f.Add("header:Idempotency-Key\njson:id", `"a\"b";p=1`, "", false, []byte(`{"id":"x"}`))
	f.Add("json:data.items.0.id", "", "", false, []byte(`{"data":{"items":[{"id":12345678901234567890}]}}`))
	f.Add("json:a.b\nbody:sha256", "", "", false, []byte(`{"a":{"b":"\ud83d\ude00\u0000"}}`))
	f.Add("template:{json:type}:{json:data.order_id}:{json:created_at}", "", "", false, []byte(`{"type":"t","data":{"order_id":1.50},"created_at":true}`))
	f.Add("template:{header:X-A}/{query:q}/{form:f}/{body:sha256}", "h", "q=1", true, []byte("f=%41&g=2"))
	f.Add("form:f\nquery:q", "", "q=%zz&q=2", true, []byte("f=a%00b"))
	f.Add("json:0.0.0", "", "", false, []byte("[[[\"\xff\"]]]"))
	f.Add("json:a", "", "", false, []byte(strings.Repeat("[", 10001)))
	f.Fuzz(func(t *testing.T, srcs, hdr, query string, form bool, body []byte) {
		k, err := ParseKey(strings.Split(srcs, "\n"))
		if err != nil {
			return
		}
		r := fuzzRequest(k, hdr, query, form)
		key, err := deriveReq(k, r, body)
		if err != nil {
			if !errors.Is(err, ErrNoKey) && !errors.Is(err, ErrBadKey) {
				t.Fatalf("unexpected error %v", err)
			}
			if key != "" {
				t.Fatalf("key %q with error", key)
			}
		} else {
			if key == "" || len(key) > MaxKeyLen {
				t.Fatalf("key of %d bytes", len(key))
			}
			if validateKey(key) != nil || !utf8.ValidString(key) {
				t.Fatalf("derived key %q breaks the key rules", key)
			}
		}
		key2, err2 := deriveReq(k, r, body)
		if key2 != key || (err == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %q %v, then %q %v", key, err, key2, err2)
		}
	})
}

// FuzzJSONScan checks the scanner against encoding/json: same verdict on
// validity, same value at the path.
func FuzzJSONScan(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[{"c":"x"},{"c":12.50e3}]}}`), "a.b.1.c")
	f.Add([]byte(`{"a":"1","a":{"b":"2"}}`), "a.b")
	f.Add([]byte(`{"\u0061":"\ud83d\ude00\ud800"}`), "a")
	f.Add([]byte("{\"a\":\"\xff\"}"), "a")
	f.Add([]byte(`[true,false,null,-0.5e-7]`), "3")
	f.Add([]byte(`{"0":[0]}`), "0.0")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		for _, seg := range strings.Split(path, ".") {
			if seg == "" {
				return
			}
		}
		checkAgainstRef(t, body, path)
	})
}

const benchBody1K = `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2022-11-15",` +
	`"type":"checkout.session.completed",` +
	`"request":{"id":"req_2f3ZyS0kbA6p9Q","idempotency_key":"3b0c6e51-6c2b-4d3f-9f1a-6a3f1c2b7e10"},` +
	`"data":{"object":{"id":"cs_test_a1B2c3D4e5F6g7H8i9J0","object":"checkout.session","amount_subtotal":4200,` +
	`"amount_total":4200,"currency":"eur","customer":"cus_NffrFeUfNV2Hib","customer_details":{"address":` +
	`{"city":"Berlin","country":"DE","line1":"Musterstra\u00dfe 1","line2":null,"postal_code":"10115","state":null},` +
	`"email":"jenny.rosen@example.com","name":"Jenny Rosen","phone":null,"tax_ids":[]},` +
	`"order_id":"ord_98765432101234567890","line_items":[{"price":"price_1MoBy5LkdIwHu7ixZhnattbh","quantity":2},` +
	`{"price":"price_1MoBy5LkdIwHu7ixZhnattbi","quantity":1}],"metadata":{"cart":"c-77","source":"web"},` +
	`"mode":"payment","payment_intent":"pi_3MtwBwLkdIwHu7ix28a3tqPa","payment_status":"paid","status":"complete",` +
	`"total_details":{"amount_discount":0,"amount_shipping":0,"amount_tax":0}}},` +
	`"created_at":1680064028}`

func TestBenchBody(t *testing.T) {
	if !json.Valid([]byte(benchBody1K)) || len(benchBody1K) < 1000 || len(benchBody1K) > 1100 {
		t.Fatalf("bench body: %d bytes, valid %v", len(benchBody1K), json.Valid([]byte(benchBody1K)))
	}
}

func benchDerive(b *testing.B, k *KeySpec, r *http.Request, body []byte, want string) {
	b.Helper()
	if got, err := deriveReq(k, r, body); err != nil || got != want {
		b.Fatalf("Derive = %q, %v; want %q", got, err, want)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		deriveReq(k, r, body)
	}
}

func BenchmarkDeriveHeader(b *testing.B) {
	k := mustParse(b, "header:Idempotency-Key")
	r := httptest.NewRequest("POST", "/webhook", nil)
	r.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	benchDerive(b, k, r, []byte(benchBody1K), "8e03978e-40d5-43e8-bc93-6894a57f9324")
}

func BenchmarkDeriveHeaderQuoted(b *testing.B) {
	k := mustParse(b, "header:Idempotency-Key")
	r := httptest.NewRequest("POST", "/webhook", nil)
	r.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	benchDerive(b, k, r, []byte(benchBody1K), "8e03978e-40d5-43e8-bc93-6894a57f9324")
}

func BenchmarkDeriveJSONID(b *testing.B) {
	k := mustParse(b, "json:id")
	benchDerive(b, k, httptest.NewRequest("POST", "/webhook", nil), []byte(benchBody1K), "evt_1NG8Du2eZvKYlo2CUI79vXWy")
}

func BenchmarkDeriveTemplate3JSON(b *testing.B) {
	k := mustParse(b, "template:{json:type}:{json:data.object.order_id}:{json:created_at}")
	benchDerive(b, k, httptest.NewRequest("POST", "/webhook", nil), []byte(benchBody1K),
		"checkout.session.completed:ord_98765432101234567890:1680064028")
}

// Baselines for the json: scan, measured on the same body with the
// standard library: validity alone, and decoding into map[string]any.
func BenchmarkBaselineJSONValid(b *testing.B) {
	body := []byte(benchBody1K)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		json.Valid(body)
	}
}

func BenchmarkBaselineJSONDecodeMap(b *testing.B) {
	body := []byte(benchBody1K)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			b.Fatal(err)
		}
		_ = m["id"].(string)
	}
}

func BenchmarkBaselineJSONDecoderTokens(b *testing.B) {
	body := []byte(benchBody1K)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		for {
			if _, err := dec.Token(); err != nil {
				break
			}
		}
	}
}

// deriveReq derives k's key from r (nil: no request) and body.
func deriveReq(k *KeySpec, r *http.Request, body []byte) (string, error) {
	if r == nil {
		return k.Derive(nil, "", body)
	}
	q := ""
	if r.URL != nil {
		q = r.URL.RawQuery
	}
	return k.Derive(r.Header, q, body)
}
