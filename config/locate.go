package config

import "gopkg.in/yaml.v3"

// locator finds the lines of fields in the parsed document.
type locator struct {
	root *yaml.Node // the top-level mapping
}

// line returns the line of the field at path (string keys and int list
// indexes), or of its nearest ancestor that exists; 0 when not even the
// first step exists.
func (l locator) line(path ...any) int {
	n, line := l.root, 0
	for _, step := range path {
		if n == nil {
			break
		}
		switch s := step.(type) {
		case string:
			k, v := lookupKey(n, s)
			if k == nil {
				return line
			}
			n, line = v, k.Line
		case int:
			n = deref(n)
			if n.Kind != yaml.SequenceNode || s < 0 || s >= len(n.Content) {
				return line
			}
			n = n.Content[s]
			line = n.Line
		}
	}
	return line
}

// lookup returns the value of key in mapping n (following aliases and
// merges), or nil.
func lookup(n *yaml.Node, key string) *yaml.Node {
	_, v := lookupKey(n, key)
	return v
}

// lookupKey returns the key and value nodes of key in mapping n. Keys
// written in n win over merged ones, as in yaml.v3.
func lookupKey(n *yaml.Node, key string) (k, v *yaml.Node) {
	budget := 1000 // mappings visited through merges; bounds hostile aliasing
	return lookupIn(n, key, &budget)
}

func lookupIn(n *yaml.Node, key string, budget *int) (k, v *yaml.Node) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode || *budget <= 0 {
		return nil, nil
	}
	*budget--
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := n.Content[i]
		if isMergeKey(kn) {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if kn.Kind == yaml.ScalarNode && kn.Value == key {
			return kn, n.Content[i+1]
		}
	}
	for _, m := range merges {
		m = deref(m)
		if m == nil {
			continue
		}
		list := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			list = m.Content
		}
		for _, e := range list {
			if k, v := lookupIn(e, key, budget); k != nil {
				return k, v
			}
		}
	}
	return nil, nil
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// written reports whether the field at path (string keys and int list
// indexes) is written with a value other than null, directly or through
// an alias or a merge.
func (l locator) written(path ...any) bool {
	n := l.root
	for _, step := range path {
		switch s := step.(type) {
		case string:
			n = lookup(n, s)
		case int:
			n = deref(n)
			if n == nil || n.Kind != yaml.SequenceNode || s < 0 || s >= len(n.Content) {
				return false
			}
			n = n.Content[s]
		}
		if n == nil {
			return false
		}
	}
	n = deref(n)
	return n != nil && !isNull(n)
}
