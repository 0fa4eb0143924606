package main

import (
	"runtime/debug"
	"testing"
)

// A version or commit stamped by -ldflags wins; the defaults are filled in
// from what `go install ...@vX.Y.Z` and a git checkout record.
func TestVersionFromBuildInfo(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}}
	for _, c := range []struct {
		name, v, c, mainVersion string
		settings                []debug.BuildSetting
		wantV, wantC            string
	}{
		{"stamped by make release", "0.2.0", "feedface", "v0.1.0", rev, "0.2.0", "feedface"},
		{"go install @v0.2.0", "dev", "none", "v0.2.0", nil, "0.2.0", "none"},
		{"go build in a checkout", "dev", "none", "(devel)", rev, "dev", "0123abcd"},
		{"nothing known", "dev", "none", "", nil, "dev", "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: c.mainVersion}, Settings: c.settings}
			if v, cm := fromBuildInfo(c.v, c.c, bi); v != c.wantV || cm != c.wantC {
				t.Fatalf("got %q %q, want %q %q", v, cm, c.wantV, c.wantC)
			}
		})
	}
}
