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
	if got := string(g.AppendBody(nil, g.Keys[1])); got != `{"id":"k2","n":1}` {
		t.Fatalf("Body(1) = %s", got)
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
	} {
		path := filepath.Join(t.TempDir(), "r.txt")
		os.WriteFile(path, []byte(text), 0o644)
		if _, err := Read(path); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWriteHeaderRejectsNewline(t *testing.T) {
	f := &File{Method: "POST", BodyPrefix: "a\nb"}
	if err := f.WriteHeader(&bytes.Buffer{}, 1); err == nil || !strings.Contains(err.Error(), "newline") {
		t.Fatalf("err = %v", err)
	}
}
