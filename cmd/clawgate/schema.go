package main

import (
	"fmt"
	"io"

	"github.com/clawgate/clawgate/config"
)

// cmdSchema prints the JSON Schema of gateway.yaml.
func cmdSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("schema", stdout, stderr)
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	s, err := config.JSONSchema()
	if err != nil {
		fmt.Fprintf(stderr, "clawgate schema: %v\n", err)
		return 1
	}
	if _, err := stdout.Write(s); err != nil {
		fmt.Fprintf(stderr, "clawgate schema: %v\n", err)
		return 1
	}
	return 0
}
