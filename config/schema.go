package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// The document is checked against the Config type before it is decoded:
// yaml.v3's KnownFields does not reach inside types with their own
// UnmarshalYAML (Route), and its type errors name a line but not a field.
// The checker reports every unknown field, duplicate field and badly typed
// value with its field path, so the decode that follows cannot fail on
// anything a user wrote.

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
	byteSizeType = reflect.TypeOf(ByteSize(0))
	routeType    = reflect.TypeOf(Route{})
)

// where is a position in the config: the route (if any) and the field path
// inside it.
type where struct {
	route string // "routes[0] (orders)"
	field string // "match.path"
}

func (w where) String() string {
	switch {
	case w.route == "":
		return w.field
	case w.field == "":
		return w.route
	}
	return w.route + ": " + w.field
}

func (w where) child(name string) where {
	if w.field == "" {
		w.field = name
	} else {
		w.field += "." + name
	}
	return w
}

func (w where) index(i int) where {
	w.field += fmt.Sprintf("[%d]", i)
	return w
}

// routeLabel names route i in messages: routes[0] (orders).
func routeLabel(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("routes[%d]", i)
	}
	return fmt.Sprintf("routes[%d] (%s)", i, clip(name))
}

// checker walks a document alongside the Go type it decodes into.
type checker struct {
	ps   *problems
	seen map[visit]bool
}

// visit is an anchored node already checked as a type, so that aliases
// cannot make the walk exponential.
type visit struct {
	n *yaml.Node
	t reflect.Type
}

// checkDocument checks root, the document's top-level node, against Config.
func checkDocument(root *yaml.Node, ps *problems) {
	c := &checker{ps: ps, seen: map[visit]bool{}}
	c.walk(root, reflect.TypeOf(Config{}), where{})
}

func (c *checker) walk(n *yaml.Node, t reflect.Type, w where) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return
		}
		n = n.Alias
	}
	if n.Anchor != "" {
		// An anchored node is checked once, where it is first reached,
		// however many aliases refer to it.
		v := visit{n, t}
		if c.seen[v] {
			return
		}
		c.seen[v] = true
	}
	if isNull(n) {
		return
	}
	switch {
	case t == durationType, t == timeType, t == byteSizeType:
		c.leaf(n, t, w)
	case t.Kind() == reflect.Struct:
		c.mapping(n, t, w)
	case t.Kind() == reflect.Slice:
		c.sequence(n, t, w)
	default:
		c.leaf(n, t, w)
	}
}

// mapping checks a mapping node against struct type t.
func (c *checker) mapping(n *yaml.Node, t reflect.Type, w where) {
	if n.Kind != yaml.MappingNode {
		c.ps.add(n.Line, w.String(), "expected a mapping of fields, got %s", kindName(n))
		return
	}
	fields := structFields(t)
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			c.merge(v, t, w)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.ps.add(k.Line, w.String(), "a field name must be a plain string, got %s", kindName(k))
			continue
		}
		name := k.Value
		at := w.child(clip(name))
		if line, dup := first[name]; dup {
			c.ps.add(k.Line, at.String(), "field is set twice (first at line %d)", line)
			continue
		}
		first[name] = k.Line
		ft, ok := fields.types[name]
		if !ok {
			c.ps.add(k.Line, at.String(), "unknown field %q%s", clip(name), fields.suggest(name))
			continue
		}
		c.walk(v, ft, at)
	}
}

// merge checks the value of a "<<" merge key.
func (c *checker) merge(v *yaml.Node, t reflect.Type, w where) {
	target := v
	if target.Kind == yaml.AliasNode && target.Alias != nil {
		target = target.Alias
	}
	switch target.Kind {
	case yaml.MappingNode:
		c.walk(v, t, w)
	case yaml.SequenceNode:
		for _, e := range target.Content {
			m := e
			if m.Kind == yaml.AliasNode && m.Alias != nil {
				m = m.Alias
			}
			if m.Kind != yaml.MappingNode {
				c.ps.add(e.Line, w.child("<<").String(), "a merge needs a mapping or a list of mappings, got %s", kindName(m))
				continue
			}
			c.walk(e, t, w)
		}
	default:
		c.ps.add(v.Line, w.child("<<").String(), "a merge needs a mapping or a list of mappings, got %s", kindName(target))
	}
}

// sequence checks a sequence node against slice type t.
func (c *checker) sequence(n *yaml.Node, t reflect.Type, w where) {
	if n.Kind != yaml.SequenceNode {
		c.ps.add(n.Line, w.String(), "expected a list, got %s", kindName(n))
		return
	}
	for i, e := range n.Content {
		at := w.index(i)
		if t.Elem() == routeType {
			at = where{route: routeLabel(i, nodeName(e))}
		}
		if isNull(e) || e.Kind == yaml.AliasNode && e.Alias != nil && isNull(e.Alias) {
			c.ps.add(e.Line, at.String(), "empty list entry")
			continue
		}
		c.walk(e, t.Elem(), at)
	}
}

// leaf checks a scalar against type t by decoding it the way the real
// decode will.
func (c *checker) leaf(n *yaml.Node, t reflect.Type, w where) {
	want := describe(t)
	if n.Kind != yaml.ScalarNode {
		c.ps.add(n.Line, w.String(), "expected %s, got %s", want, kindName(n))
		return
	}
	if t == byteSizeType {
		if _, err := byteSizeOf(n); err != nil {
			c.ps.wrap(n.Line, w.String(), err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t != durationType && n.ShortTag() != "!!int" {
			c.ps.add(n.Line, w.String(), "expected %s, got %q", want, clip(n.Value))
			return
		}
		if t == durationType && n.ShortTag() == "!!int" {
			c.ps.add(n.Line, w.String(), "expected %s, got %s: a duration needs a unit, as in %ss", want, clip(n.Value), clip(n.Value))
			return
		}
	case reflect.Bool:
		if n.ShortTag() != "!!bool" {
			c.ps.add(n.Line, w.String(), "expected %s, got %q", want, clip(n.Value))
			return
		}
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil {
		if t.Kind() == reflect.Int {
			c.ps.add(n.Line, w.String(), "%s is out of range", clip(n.Value))
			return
		}
		c.ps.add(n.Line, w.String(), "expected %s, got %q", want, clip(n.Value))
	}
}

// describe names what a value of type t looks like in YAML.
func describe(t reflect.Type) string {
	switch {
	case t == durationType:
		return "a duration such as 10s, 5m or 24h"
	case t == timeType:
		return "an RFC 3339 time such as 2026-12-01T00:00:00Z"
	case t == byteSizeType:
		return "a size such as 64KiB or 1MiB"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Struct:
		return "a mapping of fields"
	}
	return "a " + t.String()
}

// fieldSet is the YAML field names of a struct type.
type fieldSet struct {
	names []string // in declaration order
	types map[string]reflect.Type
}

var fieldSets sync.Map // reflect.Type -> *fieldSet

// yamlName is the name yaml.v3 gives field f: its tag's name, or the
// lower-cased field name; "-" for a field it skips.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

// structFields returns the YAML fields of struct type t, as yaml.v3 sees
// them: the tag's name, or the lower-cased field name; "-" is skipped.
func structFields(t reflect.Type) *fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(*fieldSet)
	}
	fs := &fieldSet{types: map[string]reflect.Type{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := yamlName(f)
		if name == "-" {
			continue
		}
		fs.names = append(fs.names, name)
		fs.types[name] = f.Type
	}
	fieldSets.Store(t, fs)
	return fs
}

// suggest returns " (did you mean "x"?)" for the closest known field, or
// the list of known fields.
func (fs *fieldSet) suggest(name string) string {
	best, bestDist := "", 3
	lname := strings.ToLower(name)
	for _, f := range fs.names {
		if d := editDistance(lname, f, bestDist); d < bestDist {
			best, bestDist = f, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	known := append([]string(nil), fs.names...)
	sort.Strings(known)
	return " (known fields: " + strings.Join(known, ", ") + ")"
}

// editDistance is the Levenshtein distance of a and b, or max when it is
// at least max (the answer is only needed for small distances).
func editDistance(a, b string, max int) int {
	if len(a) > 64 || len(b) > 64 {
		return max
	}
	if d := len(a) - len(b); d >= max || -d >= max {
		return max
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], max)
}

// isNull reports a null scalar (an omitted value, "~" or "null").
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// isMergeKey reports a "<<" merge key, as yaml.v3 recognises it.
func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && (n.Tag == "" || n.Tag == "!" || n.ShortTag() == "!!merge")
}

// kindName describes a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		if n.Alias != nil && n.Alias.Kind != yaml.AliasNode {
			return kindName(n.Alias)
		}
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	case yaml.ScalarNode:
		// The value itself is not repeated: a misplaced line may hold a secret.
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "true or false"
		case "!!timestamp":
			return "a timestamp"
		}
		return "a string"
	}
	return "an unknown node"
}

// nodeName returns the scalar "name" field of a route node, or "".
func nodeName(n *yaml.Node) string {
	if v := lookup(n, "name"); v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
		return v.Value
	}
	return ""
}

// clip shortens s for a message.
func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
