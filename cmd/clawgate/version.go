package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// cmdVersion prints the version, the commit (from -ldflags, else from the
// build's VCS stamp) and the Go version and platform.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr)
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	c := commit
	if c == "none" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	fmt.Fprintf(stdout, "clawgate %s (commit %s, %s %s/%s)\n", version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
