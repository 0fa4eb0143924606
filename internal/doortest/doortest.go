// Package doortest runs a test once on each of the gateway's front doors
// (config.Server: net/http and fasthttp), as subtests named "nethttp" and
// "fasthttp", and tells a test which door it runs on from its name.
package doortest

import (
	"strings"
	"testing"

	"github.com/clawgate/clawgate/config"
)

// All are the front doors, in the order ForEach runs them.
var All = []config.ServerKind{config.ServerNetHTTP, config.ServerFastHTTP}

// Name is a door's subtest name: "nethttp", "fasthttp".
func Name(k config.ServerKind) string { return strings.ReplaceAll(string(k), "/", "") }

// ForEach runs test once on each front door, as a subtest named by Name.
func ForEach(t *testing.T, test func(t *testing.T)) {
	t.Helper()
	for _, k := range All {
		t.Run(Name(k), test)
	}
}

// Of is the front door a test runs on: fasthttp inside a "fasthttp"
// subtest (ForEach's), net/http otherwise.
func Of(tb testing.TB) config.ServerKind {
	if strings.Contains(tb.Name()+"/", "/"+Name(config.ServerFastHTTP)+"/") {
		return config.ServerFastHTTP
	}
	return config.ServerNetHTTP
}
