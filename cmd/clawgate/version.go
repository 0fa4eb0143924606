package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func cmdVersion(stdout io.Writer) int {
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
