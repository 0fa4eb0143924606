package proxy

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestAnswerHeaderPairs: the upstream's answer headers come out as name,
// value pairs in fasthttp's order, without the hop-by-hop ones (also those
// its Connection header names), Content-Length and X-Request-Id, whatever
// their number and size (past the stack buffers AppendHeader starts
// with), and after what dst held.
func TestAnswerHeaderPairs(t *testing.T) {
	long := strings.Repeat("v", 700)
	many := make([]string, 0, 80)
	for i := range 40 {
		many = append(many, fmt.Sprintf("X-Many-%02d", i), fmt.Sprintf("value %d", i))
	}
	for _, tc := range []struct {
		name string
		set  []string // name, value pairs set on the answer
		want []string
	}{
		{"common", []string{"Content-Type", "application/json", "Date", "Fri, 04 Dec 2026 23:00:00 GMT"},
			[]string{"Content-Type", "application/json", "Date", "Fri, 04 Dec 2026 23:00:00 GMT"}},
		{"dropped", []string{"Connection", "X-Hop, close", "X-Hop", "1", "Keep-Alive", "timeout=5",
			"X-Request-Id", "theirs", "X-Kept", "2"},
			[]string{"X-Kept", "2"}},
		{"uncommon and repeated", []string{"X-A", "1", "Set-Cookie", "a=1", "Set-Cookie", "b=2", "Vary", "Accept"},
			// fasthttp keeps cookies apart and yields them first.
			[]string{"Set-Cookie", "a=1", "Set-Cookie", "b=2", "X-A", "1", "Vary", "Accept"}},
		{"long value", []string{"X-Long", long, "Etag", `"x"`}, []string{"X-Long", long, "Etag", `"x"`}},
		{"many", many, many},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The answer as the client reads it off the wire.
			var raw strings.Builder
			raw.WriteString("HTTP/1.1 200 OK\r\n")
			for i := 0; i < len(tc.set); i += 2 {
				raw.WriteString(tc.set[i] + ": " + tc.set[i+1] + "\r\n")
			}
			raw.WriteString("Content-Length: 2\r\n\r\n{}")
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			if err := resp.Read(bufio.NewReader(strings.NewReader(raw.String()))); err != nil {
				t.Fatal(err)
			}
			got := fastAnswer{resp}.AppendHeader([]string{"Allow", "POST"})
			// Content-Type is always there on a fasthttp answer; its
			// place is fasthttp's.
			got = slices.Delete(got, 0, 2)
			if !slices.Contains(tc.set, "Content-Type") {
				i := slices.Index(got, "Content-Type")
				if i < 0 || i%2 != 0 {
					t.Fatalf("no Content-Type pair in %q", got)
				}
				got = slices.Delete(got, i, i+2)
			}
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
