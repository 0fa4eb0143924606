package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update", false, "rewrite docs/clawgate.1 from `clawgate man`")

// helpFlags reads the flag names from `clawgate args... -h`: the text a
// user sees, independent of the generators.
func helpFlags(t *testing.T, args ...string) []string {
	t.Helper()
	code, out, errOut := runCmd(t, append(args, "-h")...)
	if code != 0 {
		t.Fatalf("%q -h: exit %d %s", args, code, errOut)
	}
	var names []string
	for _, m := range regexp.MustCompile(`\n  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

// The completion scripts and the man page name every command, verb and
// flag that the commands' -h shows, so adding a command or a flag without
// them cannot pass.
func TestCompletionAndManNameEveryCommandAndFlag(t *testing.T) {
	t.Setenv("CLAWGATE_CONFIG", "")
	outputs := map[string]string{}
	for _, args := range [][]string{{"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"man"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || errOut != "" || out == "" {
			t.Fatalf("%q: exit %d %q", args, code, errOut)
		}
		outputs[strings.Join(args, " ")] = out
	}
	for _, c := range commands {
		flagSets := [][]string{helpFlags(t, c.name)}
		for _, cc := range cliCommands() {
			if cc.name == c.name && cc.verbFlags != nil {
				for _, v := range cc.verbs {
					flagSets = append(flagSets, helpFlags(t, c.name, v))
				}
			}
		}
		for name, out := range outputs {
			if !regexp.MustCompile(`\b` + c.name + `\b`).MatchString(out) {
				t.Errorf("%s lacks command %s", name, c.name)
			}
			for _, fs := range flagSets {
				for _, f := range fs {
					want := "-" + f
					switch {
					case strings.HasPrefix(name, "man"):
						want = `\-` + strings.ReplaceAll(f, "-", `\-`)
					case name == "completion fish":
						want = "-o " + f
					}
					if !strings.Contains(out, want) {
						t.Errorf("%s lacks %s's flag -%s", name, c.name, f)
					}
				}
			}
		}
	}
	// Each script parses in its shell (zsh and fish when installed).
	dir := t.TempDir()
	for shell, name := range map[string]string{"bash": "completion bash", "zsh": "completion zsh", "fish": "completion fish"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Logf("%s not installed: its script's syntax is not checked", shell)
			continue
		}
		file := filepath.Join(dir, shell)
		os.WriteFile(file, []byte(outputs[name]), 0o600)
		if out, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", shell, err, out)
		}
	}
}

// The bash script completes commands, verbs, a verb's own flags and, after
// -config, file names.
func TestBashCompletionCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	_, script, _ := runCmd(t, "completion", "bash")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "gw.yaml"), nil, 0o600)
	file := filepath.Join(dir, "c.bash")
	os.WriteFile(file, []byte(script), 0o600)
	for _, tt := range []struct {
		words string
		want  string
	}{
		{"clawgate re", "reload"},
		{"clawgate dlq ", "list replay purge"},
		{"clawgate dlq list -l", "-limit"},
		{"clawgate dlq purge -", "-admin"},
		{"clawgate serve -li", "-listen"},
		{"clawgate check -config gw", "gw.yaml"},
		{"clawgate completion ", "bash zsh fish"},
	} {
		t.Run(tt.words, func(t *testing.T) {
			words := strings.Fields(tt.words)
			if strings.HasSuffix(tt.words, " ") {
				words = append(words, "")
			}
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = "'" + w + "'"
			}
			prog := "source " + file + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
				strconv.Itoa(len(words)-1) + "; _clawgate; echo \"${COMPREPLY[*]}\""
			cmd := exec.Command(bash, "--norc", "-c", prog)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tt.want {
				t.Errorf("got %q (%v), want %q", out, err, tt.want)
			}
		})
	}
	if code, _, errOut := runCmd(t, "completion", "tcsh"); code != 2 || !strings.Contains(errOut, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "completion"); code != 2 || !strings.Contains(errOut, "missing the SHELL argument") {
		t.Errorf("completion: exit %d %q", code, errOut)
	}
}

// docs/clawgate.1 is `clawgate man`'s output (go test -run TestManPage
// -update ./cmd/clawgate/ rewrites it), and groff renders it without a
// warning when groff is installed.
func TestManPageIsUpToDate(t *testing.T) {
	t.Setenv("CLAWGATE_CONFIG", "")
	_, page, _ := runCmd(t, "man")
	const path = "../../docs/clawgate.1"
	if *updateMan {
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != page {
		t.Fatal("docs/clawgate.1 is stale: go run ./cmd/clawgate man > docs/clawgate.1 (or go test -run TestManPageIsUpToDate -update ./cmd/clawgate/)")
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", path)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff: %v\n%s", err, out)
		}
	}
}
