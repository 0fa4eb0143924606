package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawgate/clawgate/bench/internal/reqfile"
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

// -objects 0 writes the plain form byte for byte as presign did before the
// object form existed: the SHA-256 of its output for these flags, taken
// from that version.
func TestPlainFormUnchanged(t *testing.T) {
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{n: 3, body: 1024, path: "/webhook/bench", prefix: "sha256=", secret: "s"}, "0fd3da46bb4e15eff349b25327b2f174a48e675f7ac4c06a6e56dd353c5a9d36"},
		{options{n: 5, body: 600, path: "/webhook/bench", prefix: "sha256=", secret: "s"}, "164df791af1d33f1b36c496225b839b18ecfe0205ea45ee5271f8b57b27065e9"},
		{options{n: 4, body: 1024, path: "/p", prefix: "v1=", secret: "s"}, "3cd7f2aba9e78fa178e9757c8c67eff9ea46d25d9c335af9a69ae2a15c84126f"},
	} {
		var b bytes.Buffer
		if err := write(&b, tc.o); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b.Bytes())); got != tc.want {
			t.Errorf("%+v: output hash %s, want %s:\n%s", tc.o, got, tc.want, b.String())
		}
	}
}

// The object form: every body is -body bytes with its key at id and its
// object (i mod N, fixed width) at data.object.id, signed whole, and reads
// back through reqfile with the object ids.
func TestObjectForm(t *testing.T) {
	const n, objects = 2500, 1000
	f, _ := writeFile(t, options{n: n, body: 1024, objects: objects, path: "/webhook/bench", prefix: "sha256=", secret: "s"})
	if !f.Objects || len(f.Keys) != n || len(f.Objs) != n {
		t.Fatalf("objects %v, %d keys, %d objects", f.Objects, len(f.Keys), len(f.Objs))
	}
	seen := map[string]bool{}
	for _, i := range []int{0, 1, 999, 1000, 1042, n - 1} {
		body := f.Body(nil, i)
		if len(body) != 1024 {
			t.Errorf("body %d: %d bytes", i, len(body))
		}
		var ev struct {
			ID   string `json:"id"`
			Data struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("body %d: %v: %s", i, err, body)
		}
		if want := fmt.Sprintf("obj_%04d", i%objects); ev.ID != key(i) || ev.Data.Object.ID != want || f.Objs[i] != want {
			t.Errorf("body %d: id %q object %q (line %q), want %q %q", i, ev.ID, ev.Data.Object.ID, f.Objs[i], key(i), want)
		}
		m := hmac.New(sha256.New, []byte("s"))
		m.Write(body)
		if f.Sigs[i] != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("delivery %d: signature %q is not the body's", i, f.Sigs[i])
		}
	}
	for _, o := range f.Objs {
		seen[o] = true
	}
	if len(seen) != objects {
		t.Errorf("%d distinct objects, want %d", len(seen), objects)
	}
}

func TestObjectIDs(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		want string
	}{{0, 1, "obj_0000"}, {42, 1000, "obj_0042"}, {1042, 1000, "obj_0042"}, {7, 10000, "obj_0007"}, {12345, 100000, "obj_12345"}, {5, 100001, "obj_000005"}} {
		if got := object(tc.i, tc.n); got != tc.want {
			t.Errorf("object(%d, %d) = %q, want %q", tc.i, tc.n, got, tc.want)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	for name, o := range map[string]options{
		"no deliveries":    {n: 0, body: 1024},
		"negative objects": {n: 1, body: 1024, objects: -1},
		"small body":       {n: 1, body: 200, objects: 10},
	} {
		if err := write(io.Discard, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// writeFile writes the request file o describes to a temporary file and
// reads it back: the file and its path.
func writeFile(t *testing.T, o options) (*reqfile.File, string) {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b, o); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.txt")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := reqfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return f, path
}
