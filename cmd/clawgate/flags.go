package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// newFlags returns a flag set that reports errors instead of exiting. Its
// -h prints the command's usage line, its description and its flags to
// stdout, as `clawgate -h` does; a usage error prints them to stderr.
func newFlags(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("clawgate "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{stdout: stdout, stderr: stderr})
	fs.Usage = func() { printUsage(fs, name) }
	return fs
}

// flagOutput is a flag set's output: stderr, except while parseFlags
// parses, when what the flag package prints is held until it is known
// whether it answers -h (stdout) or a usage error (stderr).
type flagOutput struct {
	stdout, stderr io.Writer
	held           *bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) {
	if o.held != nil {
		return o.held.Write(p)
	}
	return o.stderr.Write(p)
}

// printHelp writes a command's usage to stdout: the answer to its -h.
func printHelp(fs *flag.FlagSet) {
	capture(fs)
	o, ok := fs.Output().(*flagOutput)
	if !ok {
		fs.Usage()
		return
	}
	o.held = new(bytes.Buffer)
	fs.Usage()
	held := o.held
	o.held = nil
	o.stdout.Write(held.Bytes())
}

// missingArgs is the usage error for too few positional arguments: one
// sentence naming the ones missing, e.g. "missing the KEY argument (want
// ROUTE KEY)".
func missingArgs(want []string, got int) string {
	missing := want[got:]
	s := "the " + missing[0] + " argument"
	if len(missing) > 1 {
		s = "the " + strings.Join(missing[:len(missing)-1], ", ") + " and " + missing[len(missing)-1] + " arguments"
	}
	return fmt.Sprintf("missing %s (want %s)", s, strings.Join(want, " "))
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
// for -h (0, after the usage is printed to stdout), or -1 to go on. Extra positional
// arguments are a usage error unless allowed.
func parseFlags(fs *flag.FlagSet, args []string, positional int) int {
	o, _ := fs.Output().(*flagOutput)
	if o != nil {
		o.held = new(bytes.Buffer)
	}
	err := fs.Parse(args)
	if o != nil {
		held := o.held
		o.held = nil
		if errors.Is(err, flag.ErrHelp) {
			o.stdout.Write(held.Bytes())
		} else {
			o.stderr.Write(held.Bytes())
		}
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			capture(fs)
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
