// Package docscheck finds the links and repository paths in Markdown files
// that point at nothing: a relative link to a missing file or heading, or a
// path in backticks (`deploy/helm/clawgate`, `config/testdata/good/*.yaml`)
// that names no file of the repository.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Problem is one broken reference: the file and line it is on, and why.
type Problem struct {
	File string // as given to Check
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

var (
	linkRE    = regexp.MustCompile(`\[[^\]\n]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLinkRE = regexp.MustCompile(`(?m)^\s*\[[^\]\n]+\]:\s*(\S+)`)
	codeRE    = regexp.MustCompile("`([^`]+)`")
	// pathRE is what a repository path in backticks looks like: segments
	// of letters, digits, '.', '_', '-' and '*' separated by '/', at least
	// one '/', optionally "./" first and "/" last.
	pathRE = regexp.MustCompile(`^(\./)?[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)+/?$|^[A-Za-z0-9_.-]+/$`)
	// fileExts mark a path in backticks as a file of the repository even
	// when its first directory does not exist (a typo must not hide it).
	fileExts = []string{".md", ".go", ".yaml", ".yml", ".json", ".sh", ".service", ".tmpl", ".conf", ".tpl", ".txt", ".pml"}
)

// Check reads each file (relative to root, such as "docs/http.md") and
// returns every broken reference in it. A relative link is resolved
// against the file's directory, and its #fragment, if any, must be a
// heading of the target (GitHub's anchors). A path in backticks is
// resolved against root; one with '*' must match at least one file.
// Fenced code blocks are skipped; links to other sites are not followed.
func Check(root string, files []string) ([]Problem, error) {
	var out []Problem
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(raw))
		anchors[path] = a
		return a, nil
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, fmt.Errorf("docscheck: %w", err)
		}
		text := prose(string(raw))
		lineOf := func(off int) int { return 1 + strings.Count(text[:off], "\n") }
		dir := filepath.Dir(filepath.Join(root, f))

		var links [][]int
		links = append(links, linkRE.FindAllStringSubmatchIndex(text, -1)...)
		links = append(links, refLinkRE.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range links {
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := filepath.Join(root, f)
			if file != "" {
				path = filepath.Join(dir, filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					out = append(out, Problem{f, lineOf(m[0]), fmt.Sprintf("link %q: no such file or directory", target)})
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				return nil, fmt.Errorf("docscheck: %w", err)
			}
			if !a[frag] {
				out = append(out, Problem{f, lineOf(m[0]), fmt.Sprintf("link %q: no heading with anchor #%s", target, frag)})
			}
		}

		for _, m := range codeRE.FindAllStringSubmatchIndex(text, -1) {
			span := text[m[2]:m[3]]
			if !looksLikePath(root, span) {
				continue
			}
			p := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(span, "./")))
			if strings.Contains(span, "*") {
				matches, err := filepath.Glob(p)
				if err == nil && len(matches) > 0 {
					continue
				}
				out = append(out, Problem{f, lineOf(m[0]), fmt.Sprintf("path `%s` matches no file of the repository", span)})
				continue
			}
			if _, err := os.Stat(p); err != nil {
				out = append(out, Problem{f, lineOf(m[0]), fmt.Sprintf("path `%s`: no such file or directory in the repository", span)})
			}
		}
	}
	return out, nil
}

// looksLikePath reports whether a code span names a repository path: it
// has the shape of one, and either its first segment is a top-level
// entry of the repository (or "*"), or it ends in a file extension.
// `net/http`, `http/protobuf` and `/admin/reload` are not paths.
func looksLikePath(root, span string) bool {
	if !pathRE.MatchString(span) {
		return false
	}
	rel := strings.TrimPrefix(span, "./")
	first, _, _ := strings.Cut(rel, "/")
	if first == "*" {
		return true
	}
	if _, err := os.Stat(filepath.Join(root, first)); err == nil {
		return true
	}
	for _, ext := range fileExts {
		if strings.HasSuffix(rel, ext) {
			return true
		}
	}
	return false
}

// prose returns text with the lines of fenced code blocks blanked (kept
// as empty lines, so that offsets still give line numbers).
func prose(text string) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence = t[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, spaces made '-', punctuation other than '-'
// and '_' dropped, a repeated anchor suffixed -1, -2, ...
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(prose(text), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimLeft(l, "#")
		if h == "" || h[0] != ' ' {
			continue
		}
		a := Anchor(strings.TrimSpace(h))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Anchor is GitHub's anchor of a heading's text.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
