package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads, validates and compiles the config file at path. Relative
// paths in it are resolved against the file's directory, and environment
// variables are read with os.Getenv. A file that does not validate returns
// an *Error listing every problem.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return Parse(data, path, dir, os.Getenv)
}

// Parse validates and compiles a config held in data. path names the file
// in messages ("gateway.yaml" when empty), dir is the directory relative
// paths are resolved against, and getenv looks up environment variables
// (nil: os.Getenv): those named by *_env fields, and the ${VAR} and
// ${VAR:-default} references in the fields listed in expandable. A config
// that does not validate returns an *Error listing every problem, each
// with its line.
func Parse(data []byte, path, dir string, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	file := path
	if file == "" {
		file = "gateway.yaml"
	}
	ps := &problems{file: file}

	root := parseDocument(data, ps)
	if root == nil {
		return nil, ps.err()
	}
	checkDocument(root, ps)
	// ${VAR} references in the fields that take them are replaced in the
	// document itself, so what is decoded below is the expanded value and
	// every problem keeps its line.
	expandDocument(root, ps, getenv)
	if len(ps.list) > 0 {
		return nil, ps.err()
	}

	// The checker has already refused unknown fields (everywhere, routes
	// included), so the document decodes without KnownFields.
	cfg := Default()
	if err := root.Decode(cfg); err != nil {
		addYAMLError(ps, err)
		return nil, ps.err()
	}
	cfg.Path, cfg.Dir = path, dir

	b := &builder{cfg: cfg, ps: ps, loc: locator{root: root}, getenv: getenv}
	b.build()
	if err := ps.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseDocument parses data into its top-level node, which must be a
// mapping, and checks that data holds exactly one document.
func parseDocument(data []byte, ps *problems) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		ps.add(0, "", "the file is empty; it needs at least a routes list")
		return nil
	}
	if err != nil {
		addSyntaxError(ps, data, err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		addSyntaxError(ps, data, err)
		return nil
	default:
		ps.add(next.Line, "", "a second YAML document starts here; the file must hold exactly one")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			ps.add(0, "", "the file is empty; it needs at least a routes list")
			return nil
		}
		root = root.Content[0]
	}
	if isNull(root) {
		ps.add(0, "", "the file is empty; it needs at least a routes list")
		return nil
	}
	if deref(root).Kind != yaml.MappingNode {
		ps.add(root.Line, "", "the file must be a mapping of settings (listen, admin, routes, ...), got %s", kindName(root))
		return nil
	}
	return root
}

// yamlLine matches the line yaml.v3 puts in its messages.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// addYAMLError records a yaml.v3 error, one problem per line it reports.
func addYAMLError(ps *problems, err error) {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := 0
		if sm := yamlLine.FindStringSubmatch(m); sm != nil {
			line, _ = strconv.Atoi(sm[1])
			m = sm[2]
		}
		ps.list = append(ps.list, &Problem{File: ps.file, Line: line, Msg: "invalid YAML: " + m, Err: err})
	}
}

// addSyntaxError records a YAML syntax error at the line of the token
// that broke the parse. yaml.v3 reports the line of the enclosing block
// (or the line before it) instead: a mis-indented key on line 6 of a
// route would read as an error at `routes:`. The parser stops at the
// first token it cannot take, so the first prefix of the file, in whole
// lines, that fails with the same message ends on that token's line.
func addSyntaxError(ps *problems, data []byte, err error) {
	before := len(ps.list)
	addYAMLError(ps, err)
	if len(ps.list) != before+1 {
		return
	}
	p := ps.list[before]
	msg := syntaxMessage(err)
	if line := syntaxLine(data, p.Line, msg); line > 0 {
		p.Line = line
	}
	switch msg {
	case "did not find expected key", "did not find expected '-' indicator",
		"mapping values are not allowed in this context":
		p.Msg += " (check this line's indentation against the lines above it)"
	}
}

// maxSyntaxScan and maxSyntaxBytes bound the prefixes syntaxLine parses
// (their number and their total size), so that a hostile file cannot make
// the search slow; past them the error keeps yaml.v3's line.
const (
	maxSyntaxScan  = 2000
	maxSyntaxBytes = 16 << 20
)

// syntaxLine returns the 1-based line of the token that makes data fail
// to parse with msg, searching from the line before reported (yaml.v3's
// line, at most two lines before the token's); 0 when not found.
func syntaxLine(data []byte, reported int, msg string) int {
	if msg == "" {
		return 0
	}
	// ends[i] is the offset just past line i+1 (its newline included).
	var ends []int
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	start, parsed := max(reported-1, 1), 0
	for k := start; k <= len(ends) && k < start+maxSyntaxScan && parsed < maxSyntaxBytes; k++ {
		parsed += ends[k-1]
		if syntaxMessage(parsePrefix(data[:ends[k-1]])) == msg {
			return k
		}
	}
	return 0
}

// parsePrefix parses every document of data and returns the first error.
func parsePrefix(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// syntaxMessage returns a yaml.v3 syntax error's text without its line;
// "" for nil and for type errors (whose lines are right).
func syntaxMessage(err error) string {
	var te *yaml.TypeError
	if err == nil || errors.As(err, &te) {
		return ""
	}
	m := strings.TrimPrefix(err.Error(), "yaml: ")
	if sm := yamlLine.FindStringSubmatch(m); sm != nil {
		m = sm[2]
	}
	return m
}
