package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("clawgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and returns the exit code for a usage error, or -1
// to go on. Extra positional arguments are a usage error unless allowed.
func parseFlags(fs *flag.FlagSet, args []string, positional int) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > positional {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(positional))
		return 2
	}
	return -1
}

// configFlag adds -config, defaulting to $CLAWGATE_CONFIG, else gateway.yaml.
func configFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("CLAWGATE_CONFIG")
	if def == "" {
		def = "gateway.yaml"
	}
	return fs.String("config", def, "config `file` (default $CLAWGATE_CONFIG, else gateway.yaml)")
}
