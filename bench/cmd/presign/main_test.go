package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestTemplateSize(t *testing.T) {
	for _, size := range []int{600, 1024, 4096} {
		p, s, err := template(size, len(key(0)))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(p) + len(key(12345)) + len(s); n != size {
			t.Errorf("body of %d bytes, want %d", n, size)
		}
	}
	if _, _, err := template(100, 36); err == nil {
		t.Error("a 100-byte body was accepted")
	}
}

func TestKeysDistinctAndSized(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100000; i++ {
		k := key(i)
		if len(k) != 36 || seen[k] {
			t.Fatalf("key(%d) = %q", i, k)
		}
		seen[k] = true
	}
}

// The signature presign writes is what clawgate's generic hmac scheme
// checks: hex HMAC-SHA256 of the raw body after the prefix.
func TestSignatureFormat(t *testing.T) {
	p, s, _ := template(1024, 36)
	body := p + key(7) + s
	m := hmac.New(sha256.New, []byte("secret"))
	m.Write([]byte(body))
	if got := hex.EncodeToString(m.Sum(nil)); len(got) != 64 {
		t.Fatal(got)
	}
}
