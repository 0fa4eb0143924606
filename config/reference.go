package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The configuration reference and the JSON Schema of gateway.yaml are both
// made from the Config type (its YAML field names and Go types, by
// reflection), the defaults (Default and a route's defaults) and the doc
// comments of the types' fields (fieldDocs, generated from the source by
// config/internal/fielddoc). `make docs` writes them to these files, and a
// test fails when they are stale.
const (
	ReferencePath = "docs/configuration.md"
	SchemaPath    = "docs/gateway.schema.json"
	// SchemaID is the schema's $id.
	SchemaID = "https://github.com/clawgate/clawgate/blob/main/docs/gateway.schema.json"
)

// defaultOverrides are the defaults applied after decoding (so not in
// Default), by field path.
var defaultOverrides = map[string]any{
	"tracing.protocol":     DefaultTracingProtocol,
	"tracing.sample_ratio": DefaultTracingSampleRatio,
}

// requiredFields are the fields a mapping cannot do without, by the
// mapping's path ("" is the top level).
var requiredFields = map[string][]string{
	"":         {"routes"},
	"routes[]": {"name", "match", "upstream"},
}

// node is one field of gateway.yaml.
type node struct {
	path     string // "store.redis.addrs", "routes[].verify.secrets[]"
	name     string // "addrs"
	t        reflect.Type
	doc      string
	def      reflect.Value // the default; invalid inside lists of mappings other than routes
	enum     []string
	expands  bool    // ${VAR} is expanded in its value
	children []*node // a mapping's fields, or a list of mappings' element's
}

// mapping reports a struct (or a list of structs) of fields.
func (n *node) mapping() bool { return len(n.children) > 0 }

// isList reports a list of mappings.
func (n *node) isList() bool { return n.t.Kind() == reflect.Slice }

// tree is gateway.yaml's fields.
func tree() *node {
	root := &node{t: reflect.TypeOf(Config{})}
	root.children = fieldsOf(root.t, reflect.ValueOf(Default()).Elem(), typeKey(root.t), "", expandable)
	return root
}

// typeKey is a named type's key in fieldDocs and enumValues: "config.Store".
func typeKey(t reflect.Type) string { return path.Base(t.PkgPath()) + "." + t.Name() }

// leafType reports types written as one scalar, even when Go's is a struct.
func leafType(t reflect.Type) bool {
	return t == durationType || t == timeType || t == byteSizeType ||
		t.Kind() != reflect.Struct && !(t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct)
}

func fieldsOf(t reflect.Type, v reflect.Value, key, prefix string, exp *expandSpec) []*node {
	var out []*node
	names := yamlNames(t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		n := &node{path: prefix + name, name: name, t: f.Type, doc: userDoc(fieldDocs[key+"."+f.Name], f.Name, names)}
		if v.IsValid() {
			n.def = v.Field(i)
		}
		var childExp *expandSpec
		if exp != nil && exp.fields != nil {
			childExp = exp.fields[name]
		}
		ft := f.Type
		switch {
		case leafType(ft):
			if ft.Kind() == reflect.String && ft.Name() != "string" {
				n.enum = enumValues[typeKey(ft)]
				// An enum's default ("" for queue.backend: as the store)
				// is one of its values.
				if d := n.def; d.IsValid() && len(n.enum) > 0 && !slices.Contains(n.enum, d.String()) {
					n.enum = append([]string{d.String()}, n.enum...)
				}
			}
			n.expands = childExp != nil && (childExp.leaf || childExp.elem != nil && childExp.elem.leaf)
		case ft.Kind() == reflect.Struct:
			k := key + "." + f.Name
			if ft.Name() != "" {
				k = typeKey(ft)
				if n.doc == "" {
					n.doc = userDoc(typeDocs[k], ft.Name(), yamlNames(ft))
				}
			}
			n.children = fieldsOf(ft, n.def, k, n.path+".", childExp)
		default: // a list of mappings
			et := ft.Elem()
			ev := reflect.Value{}
			if et == routeType {
				var r Route
				r.setDefaults()
				ev = reflect.ValueOf(r)
			} else {
				ev = reflect.New(et).Elem()
			}
			if n.doc == "" {
				n.doc = userDoc(typeDocs[typeKey(et)], et.Name(), yamlNames(et))
			}
			var elemExp *expandSpec
			if childExp != nil {
				elemExp = childExp.elem
			}
			n.path += "[]"
			n.children = fieldsOf(et, ev, typeKey(et), n.path+".", elemExp)
		}
		out = append(out, n)
	}
	return out
}

// yamlNames maps the Go names of struct type t's YAML fields to their
// YAML names.
func yamlNames(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.IsExported() && yamlName(f) != "-" {
			out[f.Name] = yamlName(f)
		}
	}
	return out
}

// goName is a Go identifier in a doc comment, not inside a longer word,
// a dotted name or a header name such as Retry-After.
var goName = regexp.MustCompile(`(^|[^\w.{-])([A-Z][A-Za-z0-9]*)([^\w{}-]|$)`)

// userDoc is a doc comment as the reference shows it: the Go name it
// starts with ("Listen is ...", "MaxDepth: ...") and the Go names of the
// struct's other fields written as their YAML names (`listen`,
// `max_depth`), for the names that are Go-only (two capitals or more).
func userDoc(doc, goField string, names map[string]string) string {
	if rest, ok := strings.CutPrefix(doc, goField); ok && goField != "" && (rest == "" || rest[0] == ' ' || rest[0] == ':' || rest[0] == ',') {
		if y, ok := names[goField]; ok {
			doc = "`" + y + "`" + rest
		}
	}
	return goName.ReplaceAllStringFunc(doc, func(m string) string {
		sub := goName.FindStringSubmatch(m)
		y, ok := names[sub[2]]
		if !ok || !camel(sub[2]) {
			return m
		}
		return sub[1] + "`" + y + "`" + sub[3]
	})
}

// camel reports a Go-looking name: a capital after the first letter, and
// a small letter (MasterName, JWKSRefresh; not an acronym such as TLS).
func camel(s string) bool {
	return strings.IndexFunc(s[1:], func(r rune) bool { return r >= 'A' && r <= 'Z' }) >= 0 &&
		strings.IndexFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' }) >= 0
}

// defaultOf is n's default as a YAML or JSON value: a string, number,
// boolean or list; ok false when there is none to show.
func (n *node) defaultOf() (v any, ok bool) {
	if d, ok := defaultOverrides[n.path]; ok {
		return d, true
	}
	if !n.def.IsValid() {
		return nil, false
	}
	switch d := n.def.Interface().(type) {
	case time.Duration:
		return formatDuration(d), true
	case ByteSize:
		if d == 0 {
			return 0, true
		}
		return d.String(), true
	case time.Time:
		return nil, false
	}
	switch n.def.Kind() {
	case reflect.String:
		return n.def.String(), true
	case reflect.Bool:
		return n.def.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return n.def.Int(), true
	case reflect.Float32, reflect.Float64:
		return n.def.Float(), true
	case reflect.Slice:
		out := []any{}
		for i := 0; i < n.def.Len(); i++ {
			out = append(out, n.def.Index(i).Interface())
		}
		return out, true
	}
	return nil, false
}

// formatDuration writes d as gateway.yaml would: 72h, 5m, 1m30s, 100ms.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// typeName says what n's value is, for the reference.
func (n *node) typeName() string {
	var s string
	switch {
	case n.t == durationType:
		s = "duration"
	case n.t == byteSizeType:
		s = "size"
	case n.t == timeType:
		s = "time (RFC 3339)"
	case len(n.enum) > 0:
		vals := make([]string, len(n.enum))
		for i, v := range n.enum {
			vals[i] = "`" + yamlText(v) + "`"
		}
		s = "one of " + strings.Join(vals, ", ")
	case n.isList() && n.mapping():
		s = "list of mappings"
	case n.mapping():
		s = "mapping"
	case n.t.Kind() == reflect.Slice:
		s = "list of " + scalarName(n.t.Elem()) + "s"
	default:
		s = scalarName(n.t)
	}
	if n.expands {
		s += "; `${VAR}` expanded"
	}
	return s
}

func scalarName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "string"
}

// Reference is docs/configuration.md: every field of gateway.yaml with its
// type, default and doc comment.
func Reference() string {
	var b strings.Builder
	b.WriteString(`# Configuration reference

<!-- Generated from the doc comments of the config types (config/*.go, verify/verify.go) by ` + "`make docs`" + `; do not edit. -->

Every field of ` + "`gateway.yaml`" + `, with its type, its default (the value an
omitted field takes) and what it does, including what its zero value
(` + "`0`, `\"\"`, `false`, an empty list" + `) means where that differs from leaving
it out. ` + "`gateway.yaml`" + ` in the repository shows every field with its default.

- The file is strict: an unknown field, a field written twice or a value of
  the wrong type is an error naming the file, line and field, and
  ` + "`clawgate check -config FILE`" + ` prints every problem at once.
- A duration is written with a unit: ` + "`10s`, `5m`, `72h`, `100ms`" + `. A size
  is a number of bytes or a number with a unit: ` + "`64KiB`, `1MiB`, `1GiB`, `10KB`, `1MB`" + `.
  A time is RFC 3339: ` + "`2026-12-01T00:00:00Z`" + `.
- In the fields marked "` + "`${VAR}`" + ` expanded", ` + "`${VAR}`" + ` is the variable's value
  (an error when it is unset or empty), ` + "`${VAR:-default}`" + ` the default when it
  is unset or empty, and ` + "`$$`" + ` a literal ` + "`$`" + `; see
  [operations.md](operations.md#config-per-environment).
- ` + "`clawgate schema`" + ` prints the same fields as a JSON Schema
  ([gateway.schema.json](gateway.schema.json)), which editors use to
  complete and check the file: ` + "`gateway.yaml`" + ` starts with
  ` + "`# yaml-language-server: $schema=docs/gateway.schema.json`" + `.

`)
	root := tree()
	var sections []*node
	var collect func(n *node)
	collect = func(n *node) {
		for _, c := range n.children {
			if c.mapping() {
				sections = append(sections, c)
				collect(c)
			}
		}
	}
	collect(root)

	b.WriteString("Sections: [top level](#top-level)")
	for _, s := range sections {
		fmt.Fprintf(&b, ", [`%s`](#%s)", s.path, anchor(s.path))
	}
	b.WriteString(".\n\n## Top level\n\n")
	writeTable(&b, root)
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## `%s`\n\n", s.path)
		if s.doc != "" {
			b.WriteString(s.doc + "\n\n")
		}
		if s.isList() {
			fmt.Fprintf(&b, "A list; each entry has these fields.\n\n")
		}
		writeTable(&b, s)
	}
	return b.String()
}

// anchor is GitHub's anchor of a heading `p`.
func anchor(p string) string {
	return strings.NewReplacer(".", "", "[", "", "]", "").Replace(p)
}

func writeTable(b *strings.Builder, s *node) {
	b.WriteString("| field | type | default | what it does |\n|---|---|---|---|\n")
	for _, c := range s.children {
		def := "—"
		if v, ok := c.defaultOf(); ok {
			def = "`" + yamlText(v) + "`"
		}
		name := "`" + c.name + "`"
		doc := c.doc
		if c.mapping() {
			name = fmt.Sprintf("[`%s`](#%s)", c.name, anchor(c.path))
			def = "—"
			if i := strings.Index(doc, ". "); i > 0 {
				doc = doc[:i+1]
			}
		}
		if doc == "" {
			doc = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", name, cell(c.typeName()), def, cell(doc))
	}
}

// yamlText writes a default as it would be written in gateway.yaml.
func yamlText(v any) string {
	switch v := v.(type) {
	case string:
		if v == "" || strings.ContainsAny(v, ":#{}[],&*!|>'\"%@`") || v != strings.TrimSpace(v) {
			return strconv.Quote(v)
		}
		return v
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = yamlText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n\n", "<br><br>", "\n", " ").Replace(s)
}

// Duration and size patterns, as time.ParseDuration and ParseByteSize
// read them.
const (
	durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	sizePattern     = `^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)\s*([kKmMgGtT][iI]?[bB]|[bB])?\s*$`
	expandPattern   = `\$\{`
)

// JSONSchema is the JSON Schema (draft 2020-12) of gateway.yaml, strict
// like the loader: every mapping refuses fields it does not have.
func JSONSchema() ([]byte, error) {
	root := tree()
	s := objectSchema(root, "")
	s = append(ordered{
		{"$schema", "https://json-schema.org/draft/2020-12/schema"},
		{"$id", SchemaID},
		{"title", "clawgate gateway.yaml"},
		{"description", "The clawgate webhook gateway's config file. Generated from the config types by `make docs` (`clawgate schema` prints it); see docs/configuration.md."},
	}, s...)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, fmt.Errorf("config: JSON Schema: %w", err)
	}
	return buf.Bytes(), nil
}

func objectSchema(n *node, p string) ordered {
	props := ordered{}
	for _, c := range n.children {
		props = append(props, kv{c.name, fieldSchema(c)})
	}
	s := ordered{{"type", "object"}, {"additionalProperties", false}, {"properties", props}}
	if req := requiredFields[p]; len(req) > 0 {
		s = append(s, kv{"required", req})
	}
	return s
}

func fieldSchema(n *node) ordered {
	s := ordered{}
	if n.doc != "" {
		s = append(s, kv{"description", n.doc})
	}
	switch {
	case n.isList() && n.mapping():
		return append(s, kv{"type", "array"}, kv{"items", objectSchema(n, n.path)})
	case n.mapping():
		return append(s, objectSchema(n, n.path)...)
	}
	if d, ok := n.defaultOf(); ok {
		s = append(s, kv{"default", d})
	}
	if n.t.Kind() == reflect.Slice {
		return append(s, kv{"type", "array"}, kv{"items", scalarSchema(n.t.Elem(), nil, n.expands)})
	}
	return append(s, scalarSchema(n.t, n.enum, n.expands)...)
}

func scalarSchema(t reflect.Type, enum []string, expands bool) ordered {
	switch {
	case t == durationType:
		return ordered{{"type", "string"}, {"pattern", durationPattern}}
	case t == byteSizeType:
		return ordered{{"anyOf", []ordered{
			{{"type", "integer"}, {"minimum", 0}},
			{{"type", "string"}, {"pattern", sizePattern}},
		}}}
	case t == timeType:
		return ordered{{"type", "string"}, {"format", "date-time"}}
	case len(enum) > 0:
		values := append([]string(nil), enum...)
		if !expands {
			return ordered{{"enum", values}}
		}
		return ordered{{"anyOf", []ordered{
			{{"enum", values}},
			{{"type", "string"}, {"pattern", expandPattern}},
		}}}
	}
	return ordered{{"type", jsonType(t)}}
}

func jsonType(t reflect.Type) string {
	switch scalarName(t) {
	case "boolean":
		return "boolean"
	case "integer":
		return "integer"
	case "number":
		return "number"
	}
	return "string"
}

// ordered is a JSON object that keeps its keys in order.
type ordered []kv

type kv struct {
	k string
	v any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.k)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		var vb bytes.Buffer
		enc := json.NewEncoder(&vb)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.v); err != nil {
			return nil, err
		}
		b.Write(bytes.TrimRight(vb.Bytes(), "\n"))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
