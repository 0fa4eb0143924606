package docscheck

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRepositoryDocs: every relative link and every repository path named
// in README.md, CONTRIBUTING.md and docs/*.md exists.
func TestRepositoryDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"README.md", "CONTRIBUTING.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(filepath.Join("docs", filepath.Base(d))))
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckFindsBrokenReferences: the fixture's broken links and paths are
// reported, each on its line, and nothing else is.
func TestCheckFindsBrokenReferences(t *testing.T) {
	problems, err := Check(filepath.Join("testdata", "broken"), []string{"README.md", "docs/guide.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:4: link "docs/gone.md": no such file or directory`,
		`README.md:5: link "docs/guide.md#nope": no heading with anchor #nope`,
		"README.md:8: path `docs/missing.md`: no such file or directory in the repository",
		"README.md:9: path `config/testdata/x.yaml`: no such file or directory in the repository",
		"README.md:9: path `docs/*.txt` matches no file of the repository",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckMissingFile(t *testing.T) {
	if _, err := Check(filepath.Join("testdata", "broken"), []string{"NOPE.md"}); err == nil {
		t.Error("Check of a missing file: no error")
	}
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Two front doors: `server: net/http` or `server: fasthttp`", "two-front-doors-server-nethttp-or-server-fasthttp"},
		{"What is guaranteed, and what is not", "what-is-guaranteed-and-what-is-not"},
		{"Tracing (OpenTelemetry)", "tracing-opentelemetry"},
		{"store.redis", "storeredis"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := Anchor(tc.heading); got != tc.want {
				t.Errorf("Anchor(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
}
