package idkey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	// The documented input format, computed independently.
	ref := func(method, path string, body []byte) string {
		var b []byte
		b = binary.BigEndian.AppendUint64(b, uint64(len(method)))
		b = append(b, method...)
		b = binary.BigEndian.AppendUint64(b, uint64(len(path)))
		b = append(b, path...)
		b = append(b, body...)
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	long := strings.Repeat("/seg", 100) // over the stack buffer
	tests := []struct {
		method, path, body string
	}{
		{"POST", "/webhook/order", `{"id":1}`},
		{"POST", "/webhook/order", ""},
		{"", "", ""},
		{"PUT", long, "x"},
		{strings.Repeat("M", 300), "/", "x"},
		{"POST", "/a\x00b", "c"},
	}
	for _, tt := range tests {
		got := Fingerprint(tt.method, tt.path, []byte(tt.body))
		if want := ref(tt.method, tt.path, []byte(tt.body)); got != want {
			t.Errorf("Fingerprint(%q, %.20q, %q) = %s, want %s", tt.method, tt.path, tt.body, got, want)
		}
		sum := FingerprintBytes(tt.method, tt.path, []byte(tt.body))
		if hex.EncodeToString(sum[:]) != got {
			t.Errorf("FingerprintBytes and Fingerprint disagree")
		}
	}
	// A fixed vector (computed with Python's hashlib), so that a change of
	// format is noticed: stored fingerprints must stay comparable across
	// versions.
	const want = "2bb464652d4bda5c3809b1611e7b0440207dd5fe9a14dd485202d83673e0d2e5"
	if got := Fingerprint("POST", "/webhook/order", []byte(`{"id":"evt_1"}`)); got != want {
		t.Errorf("fixed vector: got %s, want %s", got, want)
	}
}

func TestFingerprintUnambiguous(t *testing.T) {
	// Moving bytes between method, path and body changes the fingerprint.
	cases := [][3]string{
		{"POST", "/a", "b"},
		{"POST", "/ab", ""},
		{"POST", "", "/ab"},
		{"POST/", "a", "b"},
		{"POS", "T/a", "b"},
		{"POST", "/a\x00", "\x00b"},
		{"POST", "/a\x00\x00", "b"},
		{"POST\x00", "/a", "b"},
		{"GET", "/a", "b"},
	}
	seen := map[string][3]string{}
	for _, c := range cases {
		fp := Fingerprint(c[0], c[1], []byte(c[2]))
		if prev, dup := seen[fp]; dup {
			t.Errorf("%q and %q share fingerprint %s", prev, c, fp)
		}
		seen[fp] = c
	}
}

func BenchmarkFingerprint1K(b *testing.B) {
	body := []byte(benchBody1K)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Fingerprint("POST", "/webhook/order", body)
	}
}

func BenchmarkFingerprintBytes1K(b *testing.B) {
	body := []byte(benchBody1K)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		FingerprintBytes("POST", "/webhook/order", body)
	}
}
