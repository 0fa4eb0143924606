package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Environment expansion: the values of the fields listed in expandable may
// refer to environment variables, so that one gateway.yaml serves several
// environments:
//
//	${NAME}            the variable's value; an error when it is unset or empty
//	${NAME:-default}   the variable's value, or default when it is unset or empty
//	$$                 a literal $
//
// Expansion is done on the parsed document, before it is decoded, so a
// problem is reported with its line. Only the listed fields, all of them
// strings, are expanded: never a secret (secret) nor a field naming a
// variable or a file that holds one (secret_env, secret_file,
// password_env, token_env, ...), whose "$" is kept as written. A
// variable's value is used as it is: a "$" in it is not expanded again,
// and neither is a default, which is plain text up to the first "}". A
// "$" followed by anything but "{", "$" or a name is kept.

// expandSpec is the part of the document below one node that is expanded:
// fields of a mapping, the elements of a list, or the value itself.
type expandSpec struct {
	fields map[string]*expandSpec
	elem   *expandSpec
	// routes: the list is routes, whose elements are named by route.
	routes bool
	// leaf: this value is expanded; example is a default shown in the
	// message about an unset variable.
	leaf    bool
	example string
}

func expandLeaf(example string) *expandSpec { return &expandSpec{leaf: true, example: example} }

func expandFields(f map[string]*expandSpec) *expandSpec { return &expandSpec{fields: f} }

func expandList(elem *expandSpec) *expandSpec { return &expandSpec{elem: elem} }

// expandable lists the fields whose values are expanded.
var expandable = expandFields(map[string]*expandSpec{
	"listen":          expandLeaf(":8080"),
	"server":          expandLeaf("net/http"),
	"trusted_proxies": expandList(expandLeaf("10.0.0.0/8")),
	"tls": expandFields(map[string]*expandSpec{
		"cert_file": expandLeaf("/etc/clawgate/tls/tls.crt"),
		"key_file":  expandLeaf("/etc/clawgate/tls/tls.key"),
	}),
	"admin": expandFields(map[string]*expandSpec{
		"listen": expandLeaf("127.0.0.1:9090"),
	}),
	"store": expandFields(map[string]*expandSpec{
		"backend":  expandLeaf("memory"),
		"on_error": expandLeaf("reject"),
		"redis": expandFields(map[string]*expandSpec{
			"addrs":       expandList(expandLeaf("127.0.0.1:6379")),
			"master_name": expandLeaf("mymaster"),
			"username":    expandLeaf("clawgate"),
			"key_prefix":  expandLeaf("clawgate:"),
		}),
	}),
	"queue": expandFields(map[string]*expandSpec{
		"backend": expandLeaf("redis"),
		"kafka": expandFields(map[string]*expandSpec{
			"brokers":      expandList(expandLeaf("127.0.0.1:9092")),
			"topic_prefix": expandLeaf("clawgate."),
			"client_id":    expandLeaf("clawgate"),
			"group":        expandLeaf("clawgate"),
			"tls": expandFields(map[string]*expandSpec{
				"ca_file":     expandLeaf("/etc/clawgate/kafka/ca.crt"),
				"cert_file":   expandLeaf("/etc/clawgate/kafka/tls.crt"),
				"key_file":    expandLeaf("/etc/clawgate/kafka/tls.key"),
				"server_name": expandLeaf("kafka.example.com"),
			}),
			"sasl": expandFields(map[string]*expandSpec{
				"username": expandLeaf("clawgate"),
			}),
		}),
	}),
	"tracing": expandFields(map[string]*expandSpec{
		"endpoint": expandLeaf("http://127.0.0.1:4318"),
	}),
	"routes": {routes: true, elem: expandFields(map[string]*expandSpec{
		"upstream": expandLeaf("http://127.0.0.1:9000"),
		"match": expandFields(map[string]*expandSpec{
			"host": expandLeaf("hooks.example.com"),
		}),
	})},
})

// expander expands the values of one document.
type expander struct {
	ps     *problems
	getenv func(string) string
	// results maps a scalar written with a "$" to its expansion (nil when
	// it failed), so that a value shared through an anchor is expanded,
	// and reported, once.
	results map[*yaml.Node]*yaml.Node
	// expanded holds the nodes expansion produced, which are never
	// expanded again (a merged mapping is reached once per route).
	expanded map[*yaml.Node]bool
	// seen holds the mappings and lists already walked with a spec, so
	// that aliases cannot make the walk exponential.
	seen map[expandVisit]bool
}

type expandVisit struct {
	n *yaml.Node
	s *expandSpec
}

// expandDocument expands the expandable fields of root, the document's
// top-level mapping, in place, and records a problem for each unset
// variable and malformed reference. A scalar is never changed: the
// expanded value replaces it in its mapping or list, so another field
// that refers to the same anchor (a secret, say) keeps the text as
// written.
func expandDocument(root *yaml.Node, ps *problems, getenv func(string) string) {
	e := &expander{
		ps: ps, getenv: getenv,
		results:  map[*yaml.Node]*yaml.Node{},
		expanded: map[*yaml.Node]bool{},
		seen:     map[expandVisit]bool{},
	}
	e.walk(root, expandable, where{})
}

// walk expands what spec selects below n.
func (e *expander) walk(n *yaml.Node, spec *expandSpec, w where) {
	n = deref(n)
	if n == nil {
		return
	}
	v := expandVisit{n, spec}
	if e.seen[v] {
		return
	}
	e.seen[v] = true
	switch {
	case spec.fields != nil && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if isMergeKey(k) {
				e.merge(n.Content[i+1], spec, w)
				continue
			}
			if k.Kind != yaml.ScalarNode {
				continue
			}
			sub, ok := spec.fields[k.Value]
			if !ok {
				continue
			}
			e.child(&n.Content[i+1], sub, w.child(k.Value))
		}
	case spec.elem != nil && n.Kind == yaml.SequenceNode:
		for i := range n.Content {
			at := w.index(i)
			if spec.routes {
				at = where{route: routeLabel(i, nodeName(n.Content[i]))}
			}
			e.child(&n.Content[i], spec.elem, at)
		}
	}
}

// merge walks the mappings of a "<<" merge key with the spec of the
// mapping they are merged into.
func (e *expander) merge(v *yaml.Node, spec *expandSpec, w where) {
	v = deref(v)
	if v == nil {
		return
	}
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			e.walk(m, spec, w)
		}
		return
	}
	e.walk(v, spec, w)
}

// child expands the value in slot (a mapping's value or a list element),
// or walks into it.
func (e *expander) child(slot **yaml.Node, spec *expandSpec, w where) {
	if !spec.leaf {
		e.walk(*slot, spec, w)
		return
	}
	n := *slot
	if e.expanded[n] {
		return
	}
	orig := deref(n)
	if orig == nil || orig.Kind != yaml.ScalarNode || isNull(orig) || !strings.Contains(orig.Value, "$") {
		return
	}
	out, done := e.results[orig]
	if !done {
		out = e.expand(orig, spec, w)
		e.results[orig] = out
	}
	if out != nil {
		*slot = out
	}
}

// expand returns a copy of scalar n with its value expanded, or nil after
// recording the problems.
func (e *expander) expand(n *yaml.Node, spec *expandSpec, w where) *yaml.Node {
	value, errs := expandString(n.Value, e.getenv, spec.example)
	for _, msg := range errs {
		e.ps.add(n.Line, w.String(), "%s", msg)
	}
	if len(errs) > 0 {
		return nil
	}
	out := *n
	out.Value = value
	// The result is a string whatever it looks like ("8080", "true").
	out.Tag = "!!str"
	out.Anchor = ""
	e.expanded[&out] = true
	return &out
}

// expandString expands s, returning the result or one message per problem.
// example is the default suggested for an unset variable.
func expandString(s string, getenv func(string) string, example string) (string, []string) {
	var b strings.Builder
	var errs []string
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			b.WriteByte('$')
			s = rest[1:]
			continue
		case strings.HasPrefix(rest, "{"):
		case rest != "" && isNameStart(rest[0]):
			name := rest[:nameLen(rest)]
			errs = append(errs, fmt.Sprintf("$%s is not expanded: write ${%s}, or $$%s for a literal $%s", clip(name), clip(name), clip(name), clip(name)))
			return "", errs
		default:
			// A "$" before anything else ("a$", "$1", "$-") is kept.
			b.WriteByte('$')
			s = rest
			continue
		}
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			errs = append(errs, fmt.Sprintf("%q has a ${ without its closing }; write ${NAME} or ${NAME:-default}, and $$ for a literal $", clip(s[i:])))
			return "", errs
		}
		ref := rest[:end+1] // "{...}"
		inner := rest[1:end]
		name, def, hasDefault, msg := parseRef(inner)
		if msg != "" {
			errs = append(errs, fmt.Sprintf("$%s %s", clip(ref), msg))
			return "", errs
		}
		after := rest[end+1:]
		switch v := getenv(name); {
		case v != "":
			b.WriteString(v)
		case hasDefault:
			b.WriteString(def)
		default:
			// The field's example fits only a reference that is the whole value.
			if whole := b.Len() == 0 && after == "" && len(errs) == 0; !whole || example == "" {
				example = "VALUE"
			}
			errs = append(errs, fmt.Sprintf("${%s} is unset or empty; set it, or write ${%s:-%s} to give it a default", name, name, example))
		}
		s = after
	}
	if len(errs) > 0 {
		return "", errs
	}
	return b.String(), nil
}

// parseRef parses the text between ${ and }: NAME or NAME:-default. msg
// says what is wrong with it.
func parseRef(inner string) (name, def string, hasDefault bool, msg string) {
	n := nameLen(inner)
	name, after := inner[:n], inner[n:]
	switch {
	case name == "":
		return "", "", false, "is not a variable reference: a name is letters, digits and _, and does not start with a digit"
	case after == "":
		return name, "", false, ""
	case strings.HasPrefix(after, ":-"):
		def = after[2:]
		if strings.Contains(def, "${") {
			return "", "", false, "has a variable in its default; a default is plain text"
		}
		return name, def, true, ""
	case strings.IndexByte(":-=?+", after[0]) >= 0:
		return "", "", false, "is not supported: write ${NAME} or ${NAME:-default}"
	}
	return "", "", false, "is not a variable reference: a name is letters, digits and _, and does not start with a digit"
}

// nameLen is the length of the variable name at the start of s.
func nameLen(s string) int {
	if s == "" || !isNameStart(s[0]) {
		return 0
	}
	i := 1
	for i < len(s) && (isNameStart(s[i]) || s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return i
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
