// Command gendoc regenerates what the config types' doc comments describe.
//
//	go run ./config/internal/gendoc          config/fielddocs_gen.go, from the comments (go/ast)
//	go run ./config/internal/gendoc -docs    docs/configuration.md and docs/gateway.schema.json
//
// Run both, in that order (`make docs`): the second is compiled with the
// file the first wrote. Run from the repository's root.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/config/internal/fielddoc"
)

func main() {
	docs := flag.Bool("docs", false, "write docs/configuration.md and docs/gateway.schema.json instead of config/fielddocs_gen.go")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root, *docs); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func run(root string, docs bool) error {
	if !docs {
		changed, err := fielddoc.Write(root)
		if err == nil {
			report(fielddoc.Output, changed)
		}
		return err
	}
	schema, err := config.JSONSchema()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{
		{config.ReferencePath, []byte(config.Reference())},
		{config.SchemaPath, schema},
	} {
		p := filepath.Join(root, filepath.FromSlash(f.path))
		old, _ := os.ReadFile(p)
		if string(old) == string(f.data) {
			report(f.path, false)
			continue
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
		report(f.path, true)
	}
	return nil
}

func report(path string, changed bool) {
	if changed {
		fmt.Println("wrote", path)
	} else {
		fmt.Println(path, "is up to date")
	}
}
