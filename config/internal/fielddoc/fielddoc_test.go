package fielddoc

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	d, err := Read("testdata/root")
	if err != nil {
		t.Fatal(err)
	}
	wantFields := map[string]string{
		"config.Config.Listen":     `Listen is the address. Default ":8080".`,
		"config.Config.Mode":       "Mode is how.",
		"config.Config.Inner":      "Inner has an unnamed struct type.",
		"config.Config.Inner.Deep": "Deep is inside.",
		"verify.Config.Scheme":     "Scheme names the scheme.\n\nA second paragraph.",
	}
	if !maps.Equal(d.Fields, wantFields) {
		t.Errorf("fields:\n%q\nwant:\n%q", d.Fields, wantFields)
	}
	wantTypes := map[string]string{"config.Config": "Config is the file.", "verify.Config": "Config is verify's."}
	if !maps.Equal(d.Types, wantTypes) {
		t.Errorf("types: %q, want %q", d.Types, wantTypes)
	}
	if got := d.Enums["config.Mode"]; !slices.Equal(got, []string{"a", "b"}) || len(d.Enums) != 1 {
		t.Errorf("enums: %q", d.Enums)
	}
	src, err := d.Source()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"// Code generated", "package config", `"config.Mode": {"a", "b"}`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("source lacks %q:\n%s", want, src)
		}
	}
}

func TestReadMissingDirectory(t *testing.T) {
	if _, err := Read("testdata/nowhere"); err == nil {
		t.Error("no error for a root without config/ and verify/")
	}
}
