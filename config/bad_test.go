package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the # want: lines of testdata/bad/*.yaml from the current output")

const wantPrefix = "# want: "

// splitWants separates a bad file's leading "# want: " lines from its body.
func splitWants(data []byte) (wants []string, body []byte) {
	rest := string(data)
	for strings.HasPrefix(rest, wantPrefix) {
		line, after, _ := strings.Cut(rest, "\n")
		wants = append(wants, strings.TrimPrefix(line, wantPrefix))
		rest = after
	}
	return wants, []byte(rest)
}

// parseBad parses a bad file as gateway.yaml, with the fakes' behaviour.
func parseBad(t *testing.T, data []byte) []string {
	t.Helper()
	cfg, err := Parse(data, "gateway.yaml", "testdata/bad", getenv)
	if err == nil {
		t.Fatalf("loaded without error: %d routes", len(cfg.Routes))
	}
	if cfg != nil {
		t.Errorf("returned a config with the error")
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, not *config.Error: %v", err, err)
	}
	if got := strings.Join(ce.Lines(), "\n"); got != err.Error() {
		t.Errorf("Error() and Lines() differ:\n%s\n%s", err.Error(), got)
	}
	assertNoSecrets(t, err.Error())
	return ce.Lines()
}

// TestBad loads every testdata/bad file and compares its errors, one per
// line, with the file's leading "# want: " comments. `go test -run TestBad
// -update ./config/` rewrites them (review the diff).
func TestBad(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			useFakes(t)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wants, body := splitWants(data)
			if *update {
				// The want lines shift the body; give it as many as it needs.
				n := len(parseBad(t, body))
				placeholder := strings.Repeat(wantPrefix+"x\n", n)
				got := parseBad(t, []byte(placeholder+string(body)))
				var b strings.Builder
				for _, l := range got {
					b.WriteString(wantPrefix + l + "\n")
				}
				b.Write(body)
				if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if len(wants) == 0 {
				t.Fatalf("no %q lines at the top of the file", wantPrefix)
			}
			got := parseBad(t, data)
			if strings.Join(got, "\n") != strings.Join(wants, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wants, "\n"))
			}
		})
	}
}
