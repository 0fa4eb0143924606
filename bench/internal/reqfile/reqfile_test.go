package reqfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	f := &File{
		Method:     "POST",
		Path:       "/webhook/bench",
		Headers:    [][2]string{{"Content-Type", "application/json"}},
		KeyHeader:  "Idempotency-Key",
		SigHeader:  "X-Signature",
		BodyPrefix: `{"id":"`,
		BodySuffix: `","n":1}`,
	}
	var buf bytes.Buffer
	if err := f.WriteHeader(&buf, 2); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("k1 sha256=aa\nk2 sha256=bb\n")
	path := filepath.Join(t.TempDir(), "r.txt")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Method != f.Method || g.Path != f.Path || g.KeyHeader != f.KeyHeader || g.SigHeader != f.SigHeader ||
		fmt.Sprint(g.Headers) != fmt.Sprint(f.Headers) || len(g.Keys) != 2 || g.Sigs[1] != "sha256=bb" {
		t.Fatalf("read back %+v", g)
	}
	if got := string(g.Body(nil, 1)); got != `{"id":"k2","n":1}` {
		t.Fatalf("Body(1) = %s", got)
	}
	if g.Objects || g.Objs != nil {
		t.Fatalf("a plain file read as the object form: %+v", g)
	}
}

// A file in the plain form, as presign wrote it before the object form,
// reads exactly as before: two fields a line, the signature everything
// after the first space, the body the key between the two halves.
func TestPlainFormReadsAsBefore(t *testing.T) {
	text := Magic + "\nmethod POST\npath /p\nkey-header K\nsig-header S\nbody-prefix {\"id\":\"\nbody-suffix \"}\ncount 2\n" +
		"k1 sha256=aa\nk2 v1 bb\n"
	path := filepath.Join(t.TempDir(), "r.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.Objects || g.Objs != nil || fmt.Sprint(g.Keys) != "[k1 k2]" || fmt.Sprint(g.Sigs) != "[sha256=aa v1 bb]" {
		t.Fatalf("read %+v", g)
	}
	if got := string(g.Body(nil, 0)); got != `{"id":"k1"}` {
		t.Fatalf("Body(0) = %s", got)
	}
	// Written back, the header is the same bytes.
	var buf bytes.Buffer
	if err := g.WriteHeader(&buf, 2); err != nil {
		t.Fatal(err)
	}
	if want := text[:len(text)-len("k1 sha256=aa\nk2 v1 bb\n")]; buf.String() != want {
		t.Fatalf("header written back:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// The object form: a body-middle line and an object id, the last field, on
// every delivery line; delivery i's body is prefix, key, middle, object,
// suffix.
func TestObjectFormRoundTrip(t *testing.T) {
	f := &File{
		Method:     "POST",
		Path:       "/webhook/bench",
		KeyHeader:  "Idempotency-Key",
		SigHeader:  "X-Signature",
		BodyPrefix: `{"id":"`,
		BodyMiddle: `","object":{"id":"`,
		BodySuffix: `"}}`,
		Objects:    true,
	}
	var buf bytes.Buffer
	if err := f.WriteHeader(&buf, 3); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\nbody-prefix {\"id\":\"\nbody-middle \",\"object\":{\"id\":\"\nbody-suffix \"}}\n") {
		t.Fatalf("header:\n%s", buf.String())
	}
	buf.WriteString("k1 sha256=aa obj_0000\nk2 sha256=bb obj_0001\nk3 v1 cc obj_0000\n")
	path := filepath.Join(t.TempDir(), "r.txt")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Objects || g.BodyMiddle != f.BodyMiddle || fmt.Sprint(g.Keys) != "[k1 k2 k3]" ||
		fmt.Sprint(g.Sigs) != "[sha256=aa sha256=bb v1 cc]" || fmt.Sprint(g.Objs) != "[obj_0000 obj_0001 obj_0000]" {
		t.Fatalf("read back %+v", g)
	}
	if got := string(g.Body(nil, 1)); got != `{"id":"k2","object":{"id":"obj_0001"}}` {
		t.Fatalf("Body(1) = %s", got)
	}
	// An empty middle is still the object form.
	f.BodyMiddle = ""
	buf.Reset()
	f.WriteHeader(&buf, 1)
	buf.WriteString("k sha256=aa o\n")
	os.WriteFile(path, buf.Bytes(), 0o644)
	if g, err = Read(path); err != nil || !g.Objects || string(g.Body(nil, 0)) != `{"id":"ko"}}` {
		t.Fatalf("empty middle: %v %+v", err, g)
	}
}

func TestReadRejects(t *testing.T) {
	for name, text := range map[string]string{
		"magic":     "something else\n",
		"count":     Magic + "\ncount 3\na b\n",
		"no count":  Magic + "\nmethod POST\n",
		"bad line":  Magic + "\ncount 1\nnospace\n",
		"unknown":   Magic + "\nbogus x\ncount 1\na b\n",
		"bad count": Magic + "\ncount -1\n",
		// the object form needs an object id on every line
		"no object":    Magic + "\nbody-middle x\ncount 2\nk1 s1 o1\nk2 s2\n",
		"empty object": Magic + "\nbody-middle x\ncount 1\nk1 s1 \n",
	} {
		path := filepath.Join(t.TempDir(), "r.txt")
		os.WriteFile(path, []byte(text), 0o644)
		if _, err := Read(path); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWriteHeaderRejectsNewline(t *testing.T) {
	for _, f := range []*File{{Method: "POST", BodyPrefix: "a\nb"}, {Method: "POST", Objects: true, BodyMiddle: "a\rb"}} {
		if err := f.WriteHeader(&bytes.Buffer{}, 1); err == nil || !strings.Contains(err.Error(), "newline") {
			t.Fatalf("err = %v", err)
		}
	}
}
