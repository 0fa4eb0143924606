package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/clawgate/clawgate/config/internal/fielddoc"
)

const regenerate = "run `make docs` (go run ./config/internal/gendoc && go run ./config/internal/gendoc -docs) and commit the result"

// TestFieldDocsUpToDate: config/fielddocs_gen.go holds the doc comments
// as they are in the source.
func TestFieldDocsUpToDate(t *testing.T) {
	d, err := fielddoc.Read("..")
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.Source()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", fielddoc.Output))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: a config type's doc comment changed; %s", fielddoc.Output, regenerate)
	}
}

// TestReferenceUpToDate: docs/configuration.md is what Reference writes.
func TestReferenceUpToDate(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("..", ReferencePath))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Reference() {
		t.Errorf("%s is stale; %s", ReferencePath, regenerate)
	}
}

// TestSchemaUpToDate: docs/gateway.schema.json is what JSONSchema writes.
func TestSchemaUpToDate(t *testing.T) {
	want, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale; %s", SchemaPath, regenerate)
	}
}

// TestEveryFieldDocumented: each field of gateway.yaml has a doc comment
// (the reference and the schema are made from them).
func TestEveryFieldDocumented(t *testing.T) {
	var walk func(n *node)
	walk = func(n *node) {
		for _, c := range n.children {
			if c.doc == "" {
				t.Errorf("%s has no doc comment: say what it does, its default and what its zero value does", c.path)
			}
			walk(c)
		}
	}
	root := tree()
	if len(root.children) == 0 {
		t.Fatal("no fields")
	}
	walk(root)
}

// TestReferenceListsEveryField: every field path of the Config type is in
// the reference (a new field cannot be left out of it).
func TestReferenceListsEveryField(t *testing.T) {
	ref := Reference()
	var walk func(typ reflect.Type, prefix string)
	count := 0
	walk = func(typ reflect.Type, prefix string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name := yamlName(f)
			if !f.IsExported() || name == "-" {
				continue
			}
			count++
			section := strings.TrimSuffix(prefix, ".")
			if section == "" {
				section = "Top level"
			} else {
				section = "`" + section + "`"
			}
			start := strings.Index(ref, "## "+section+"\n")
			if start < 0 {
				t.Errorf("no section %s for %s", section, prefix+name)
				continue
			}
			body := ref[start+1:]
			if end := strings.Index(body, "\n## "); end >= 0 {
				body = body[:end]
			}
			if !strings.Contains(body, "| `"+name+"` |") && !strings.Contains(body, "| [`"+name+"`](") {
				t.Errorf("the reference's section %s lacks %s", section, name)
			}
			ft := f.Type
			switch {
			case leafType(ft):
			case ft.Kind() == reflect.Struct:
				walk(ft, prefix+name+".")
			default:
				walk(ft.Elem(), prefix+name+"[].")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	if count < 50 {
		t.Errorf("only %d fields walked", count)
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("gateway.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("gateway.schema.json")
	if err != nil {
		t.Fatalf("the schema does not compile as draft 2020-12: %v", err)
	}
	return s
}

// yamlInstance is a YAML document as the JSON value an editor validates:
// aliases and merges resolved, timestamps as RFC 3339 strings.
func yamlInstance(t *testing.T, src []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(jsonable(v))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return v
}

// TestSchemaAcceptsGoodConfigs: the repository's gateway.yaml, the deploy
// configs and every good config in testdata pass the schema.
func TestSchemaAcceptsGoodConfigs(t *testing.T) {
	s := compileSchema(t)
	files, err := filepath.Glob("testdata/good/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../gateway.yaml", "../deploy/gateway.yaml", "../deploy/gateway.kafka.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d configs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(yamlInstance(t, src)); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		})
	}
}

// TestSchemaRejects: the schema refuses what the loader refuses for its
// shape: unknown fields at every level, a value of the wrong type, a
// value outside an enum, a duration without a unit, a missing route field.
func TestSchemaRejects(t *testing.T) {
	s := compileSchema(t)
	route := "routes:\n  - name: a\n    match: { path: /a }\n    upstream: http://127.0.0.1:9000\n    verify: { scheme: none }\n"
	if err := s.Validate(yamlInstance(t, []byte(route))); err != nil {
		t.Fatalf("the base config is refused: %v", err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown top-level field", "listn: :8080\n" + route, "listn"},
		{"unknown nested field", "store: { redis: { adrs: [x] } }\n" + route, "adrs"},
		{"unknown route field", route + "    upstreams: http://x\n", "upstreams"},
		{"unknown verify field", strings.Replace(route, "scheme: none", "scheme: none, secret: x", 1), "secret"},
		{"wrong type", "dedupe: { cache_size: many }\n" + route, "cache_size"},
		{"bad enum", "store: { backend: etcd }\n" + route, "backend"},
		{"duration without unit", "dedupe: { window: \"10\" }\n" + route, "window"},
		{"bad size", "routes:\n  - name: a\n    match: { path: /a }\n    upstream: http://x\n    max_body: lots\n", "max_body"},
		{"route without upstream", "routes:\n  - name: a\n    match: { path: /a }\n", "upstream"},
		{"no routes", "listen: :8080\n", "routes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate(yamlInstance(t, []byte(tc.doc)))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error does not name %q: %v", tc.want, err)
			}
		})
	}
}

// TestSchemaExpandedEnum: a field whose value may be ${VAR} accepts one
// in place of its enum values.
func TestSchemaExpandedEnum(t *testing.T) {
	s := compileSchema(t)
	doc := "store: { backend: \"${STORE_BACKEND:-memory}\" }\nroutes:\n  - name: a\n    match: { path: /a }\n    upstream: ${UP}\n    verify: { scheme: none }\n"
	if err := s.Validate(yamlInstance(t, []byte(doc))); err != nil {
		t.Error(err)
	}
}

func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{72 * time.Hour, "72h"}, {5 * time.Minute, "5m"}, {90 * time.Second, "1m30s"},
		{100 * time.Millisecond, "100ms"}, {0, "0s"}, {time.Hour + time.Second, "1h0m1s"},
	} {
		if got := formatDuration(tc.d); got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestUserDoc(t *testing.T) {
	names := map[string]string{"MasterName": "master_name", "TLS": "tls", "Addrs": "addrs", "Retry": "retry"}
	for _, tc := range []struct{ doc, field, want string }{
		{"Addrs are addresses, unless MasterName is set.", "Addrs", "`addrs` are addresses, unless `master_name` is set."},
		{"TLS connects over TLS.", "TLS", "`tls` connects over TLS."},
		{"Retry says how; honours Retry-After.", "Retry", "`retry` says how; honours Retry-After."},
		{"MasterName: the name (see Config.MasterName).", "MasterName", "`master_name`: the name (see Config.MasterName)."},
		{"Addresses are many.", "Addrs", "Addresses are many."},
	} {
		t.Run(tc.field, func(t *testing.T) {
			if got := userDoc(tc.doc, tc.field, names); got != tc.want {
				t.Errorf("userDoc(%q) = %q, want %q", tc.doc, got, tc.want)
			}
		})
	}
}
