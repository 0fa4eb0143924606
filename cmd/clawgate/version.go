package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// cmdVersion prints the version, the commit and the Go version and
// platform. The version and commit come from -ldflags (make release stamps
// X.Y.Z and the full commit); without them, from the build: the module
// version `go install ...@vX.Y.Z` records, and the VCS stamp of a build in a
// git checkout.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stdout, stderr)
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	v, c := version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		v, c = fromBuildInfo(v, c, bi)
	}
	fmt.Fprintf(stdout, "clawgate %s (commit %s, %s %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// fromBuildInfo fills in a version or commit left at its default ("dev",
// "none") from the build information: the main module's version without
// its "v" (as make release and the image tag write it), and vcs.revision.
func fromBuildInfo(v, c string, bi *debug.BuildInfo) (string, string) {
	if mv := bi.Main.Version; v == "dev" && mv != "" && mv != "(devel)" {
		v = strings.TrimPrefix(mv, "v")
	}
	if c == "none" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				c = s.Value
			}
		}
	}
	return v, c
}
