package verdict

import (
	"bytes"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		statuses []int
		want     Class
		finishes bool
	}{
		{[]int{200, 201, 202, 204, 226, 299}, Success, true},
		{[]int{400, 401, 403, 404, 410, 413, 422, 424, 426, 451, 499}, Refused, true},
		{[]int{408, 409, 425, 429, 500, 502, 503, 504, 599}, Transient, false},
		{[]int{-1, 0, 99, 100, 101, 103, 199, 300, 301, 304, 399, 600, 999}, Unexpected, false},
	} {
		for _, s := range tc.statuses {
			t.Run(fmt.Sprint(s), func(t *testing.T) {
				if got := Classify(s); got != tc.want {
					t.Fatalf("Classify(%d) = %d, want %d", s, got, tc.want)
				}
				if got := Classify(s).Finishes(); got != tc.finishes {
					t.Fatalf("Classify(%d).Finishes() = %v, want %v", s, got, tc.finishes)
				}
			})
		}
	}
}

type fakeAnswer struct {
	status int
	ct     string
	body   []byte
}

func (a fakeAnswer) StatusCode() int     { return a.status }
func (a fakeAnswer) ContentType() string { return a.ct }
func (a fakeAnswer) Body() []byte        { return a.body }

func TestCapture(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		limit    int64
		keepBody bool
	}{
		{"empty body", "", 0, true},
		{"under the limit", "ok", 3, true},
		{"at the limit", "abc", 3, true},
		{"over the limit", "abcd", 3, false},
		{"no body allowed", "a", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			out := Capture(fakeAnswer{201, "text/plain", body}, tc.limit, "fp")
			if out.Status != 201 || out.Fingerprint != "fp" {
				t.Fatalf("Capture = %+v", out)
			}
			if !tc.keepBody {
				if out.Body != nil || out.ContentType != "" {
					t.Fatalf("Capture kept %q (%q) over the limit", out.Body, out.ContentType)
				}
				return
			}
			if !bytes.Equal(out.Body, body) || out.ContentType != "text/plain" {
				t.Fatalf("Capture = %+v, want the body %q", out, body)
			}
			if len(body) > 0 {
				body[0] = 'X' // the answer's buffer is reused once released
				if out.Body[0] == 'X' {
					t.Fatal("Capture kept the answer's buffer, not a copy")
				}
			}
		})
	}
}
