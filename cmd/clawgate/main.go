// Command clawgate is a webhook ingress gateway: it verifies every
// delivery's signature, forwards exactly one copy of each event to the
// service behind it, and answers retries and duplicates itself.
//
// Usage: clawgate [serve|check|demo|simulate|keys|echo|version] [flags]
package main

import (
	"fmt"
	"io"
	"os"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "none"
)

const usage = `usage: clawgate <command> [flags]

commands:
  serve     run the gateway (the default): -config FILE
  check     validate a config like nginx -t: -config FILE
  demo      replay the 17-deliveries incident against a built-in upstream
  simulate  send one signed event N times: -url URL [-route NAME] [-times 5] [-config FILE]
  keys      get|reset ROUTE KEY over the admin API: [-admin URL]
  echo      a tiny upstream that logs and counts what it receives: [-listen ADDR]
  version   print version, commit and Go version
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a command and returns the exit code: 0 success, 1
// runtime or validation failure, 2 usage error.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (len(args[0]) == 0 || args[0][0] != '-') {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return cmdServe(args, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "simulate":
		return cmdSimulate(args, stdout, stderr)
	case "keys":
		return cmdKeys(args, stdout, stderr)
	case "echo":
		return cmdEcho(args, stderr)
	case "version":
		return cmdVersion(stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "clawgate: unknown command %q\n%s", cmd, usage)
	return 2
}
