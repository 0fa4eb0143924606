package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// newFlags returns a flag set that reports errors instead of exiting. Its
// -h prints the command's usage line, its description and its flags.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("clawgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs, name) }
	return fs
}

// printUsage writes a command's usage to the flag set's output: usage
// line, description and flags (none for a command without flags).
func printUsage(fs *flag.FlagSet, name string) {
	w := fs.Output()
	c := lookupCommand(name)
	fmt.Fprintf(w, "usage: %s\n", strings.TrimSpace("clawgate "+c.name+" "+c.args))
	if c.about != "" {
		fmt.Fprintf(w, "\n%s\n", c.about)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nflags:\n")
		fs.PrintDefaults()
	}
}

// lookupCommand finds a command by its name; "keys get" is keys.
func lookupCommand(name string) command {
	first, _, _ := strings.Cut(name, " ")
	for _, c := range commands {
		if c.name == first {
			return c
		}
	}
	return command{name: name, args: "[flags]"}
}

// parseFlags parses args and returns the exit code for a usage error (2),
// for -h (0, after the usage is printed), or -1 to go on. Extra positional
// arguments are a usage error unless allowed.
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
// The default is printed by the flag package, once: the variable's value
// when it is set.
func configFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("CLAWGATE_CONFIG")
	if def == "" {
		def = "gateway.yaml"
	}
	return fs.String("config", def, "config `file` to load, or $CLAWGATE_CONFIG when it is set")
}
