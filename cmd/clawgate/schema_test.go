package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawgate/clawgate/config"
)

// `clawgate schema` prints docs/gateway.schema.json: a draft 2020-12
// schema that refuses unknown top-level fields.
func TestSchemaCommand(t *testing.T) {
	code, out, errOut := runCmd(t, "schema")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", config.SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("clawgate schema differs from %s; run make docs", config.SchemaPath)
	}
	var s struct {
		Schema               string         `json:"$schema"`
		Type                 string         `json:"type"`
		AdditionalProperties *bool          `json:"additionalProperties"`
		Properties           map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.Type != "object" ||
		s.AdditionalProperties == nil || *s.AdditionalProperties || s.Properties["routes"] == nil {
		t.Errorf("not a strict 2020-12 object schema of gateway.yaml: %+v", s)
	}
	if code, _, _ := runCmd(t, "schema", "extra"); code != 2 {
		t.Errorf("schema extra: exit %d, want 2", code)
	}
}

// gateway.yaml names its schema on its first line, for editors, and the
// loader takes it (a comment).
func TestGatewayYAMLNamesItsSchema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const first = "# yaml-language-server: $schema=docs/gateway.schema.json\n"
	if len(raw) < len(first) || string(raw[:len(first)]) != first {
		t.Errorf("gateway.yaml does not start with %q", first)
	}
	if code, out, errOut := runCmd(t, "check", "-config", filepath.Join("..", "..", "gateway.yaml")); code != 0 {
		t.Errorf("check gateway.yaml: exit %d %q %q", code, out, errOut)
	}
}
