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
		addYAMLError(ps, err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		addYAMLError(ps, err)
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
