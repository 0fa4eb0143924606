// Command clawgate is a webhook ingress gateway: it verifies every
// delivery's signature, forwards exactly one copy of each event to the
// service behind it, and answers retries and duplicates itself.
//
// Usage: clawgate [serve|check|demo|simulate|keys|dlq|routes|echo|health|reload|schema|completion|man|version] [flags]
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "none"
)

// command is one subcommand: its name, what follows the name on its usage
// line, a one-line summary for the command list and a longer description
// for its own -h.
type command struct {
	name, args, summary, about string
}

// commands is the command list, in the order `clawgate -h` shows it.
var commands = []command{
	{"serve", "[flags]", "run the gateway (the default command)",
		"Run the gateway: serve deliveries on the config's listen address and the\n" +
			"admin API on admin.listen. SIGHUP reloads the config; SIGTERM drains and exits."},
	{"check", "[flags]", "validate a config and print every problem, like nginx -t",
		"Load a config as serve would and print every problem with its file and line.\n" +
			"Exits 0 when the config is valid (warnings go to stderr), 1 when it is not.\n" +
			"-explain prints each route as it runs: provider presets expanded, the key's\n" +
			"source and whether the signature covers it."},
	{"demo", "[flags]", "replay the 17-deliveries incident against a built-in upstream",
		"Push one signed event to an in-process gateway again and again while its\n" +
			"upstream is slow, and show that the upstream completes it exactly once."},
	{"simulate", "-url URL [flags]", "send one signed event several times to a running gateway",
		"Sign one event exactly as a route of the config expects, deliver it several\n" +
			"times and print what each delivery got. Exits 0 when exactly one was\n" +
			"forwarded and the others were replayed or answered as in flight. On a\n" +
			"delivery: queue route the one copy is queued (202), and simulate follows its\n" +
			"key over the admin API (-admin) until it is finished (exit 0) or\n" +
			"dead_lettered (exit 1), for at most -wait. A route\n" +
			"with a provider (or -provider NAME) gets that provider's kind of event,\n" +
			"signed as the provider signs it, before the provider is wired."},
	{"keys", "get|reset|history [flags] ROUTE KEY", "show, reset or trace an idempotency key over the admin API",
		"get shows a key's state, attempts and stored status. reset forgets the key,\n" +
			"so that its next delivery is forwarded to the upstream again. history\n" +
			"prints the key's timeline: each copy's arrival and verdict, each try, the\n" +
			"settle, dead-lettering, replays, resets and purges (-json: the API's\n" +
			"answer). The admin token is read from $CLAWGATE_ADMIN_TOKEN."},
	{"dlq", "list|replay|purge [flags] ROUTE [ID]", "list, replay or purge the dead-lettered events of a delivery: queue route",
		"list prints a queue route's dead-letter queue, one page (-all: every page).\n" +
			"replay ROUTE ID queues one event again; replay -all ROUTE replays the whole\n" +
			"DLQ at queue.replay_rate events per second and follows it (Ctrl-C cancels\n" +
			"it; what was replayed stays replayed). purge ROUTE ID drops one event; its\n" +
			"key stays dead-lettered. The admin token is read from $CLAWGATE_ADMIN_TOKEN."},
	{"routes", "list|pause|resume [flags] [ROUTE]", "list the routes, or pause or resume a delivery: queue route",
		"list (the default) prints every route with its delivery mode, queue depth,\n" +
			"DLQ size, paused flag and breaker state. pause ROUTE stops a queue route's\n" +
			"deliveries on every instance (it keeps acknowledging), until resume ROUTE;\n" +
			"a pause outlasts restarts. The admin token is read from $CLAWGATE_ADMIN_TOKEN."},
	{"echo", "[flags]", "run a tiny upstream that logs and counts what it receives",
		"Answer every request 200 with a small JSON body, and log each one with its\n" +
			"idempotency key, attempt and request id."},
	{"health", "[flags]", "probe the admin listener's /readyz (or /healthz) as a container health check", "GET the admin listener's /readyz (or /healthz with -live) once and print one line.\nExits 0 on 200, 1 otherwise: a Docker HEALTHCHECK or Kubernetes exec probe for\nimages without curl or a shell (distroless)."},
	{"schema", "", "print the JSON Schema of gateway.yaml (for editors and CI)",
		"Print the JSON Schema (draft 2020-12) of gateway.yaml, generated from the\n" +
			"config types: every field, its type, default and description; an unknown\n" +
			"field is refused. docs/gateway.schema.json holds the same schema."},
	{"reload", "[flags]", "reload a running gateway's config over the admin API, like nginx -s reload",
		"POST the admin API's /admin/reload: the gateway reloads its config file as on\n" +
			"SIGHUP. Prints the result; exits 1 when the new config is refused (each\n" +
			"problem printed, the running config kept). The admin token is read from\n" +
			"$CLAWGATE_ADMIN_TOKEN."},
	{"completion", "bash|zsh|fish", "print the shell completion script of bash, zsh or fish",
		"Print a completion script for the shell, generated from the commands and their\n" +
			"flags. bash: source <(clawgate completion bash); zsh: source <(clawgate\n" +
			"completion zsh); fish: clawgate completion fish | source."},
	{"man", "[flags]", "print the clawgate(1) manual page (roff)",
		"Print the manual page, generated from the commands and their flags, as roff:\n" +
			"clawgate man | man -l -   (or save it as clawgate.1 in a man1 directory)."},
	{"version", "", "print the version, commit and Go version",
		"Print the version, commit and Go version this binary was built with."},
}

// usage is the command list `clawgate -h` prints.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: clawgate <command> [flags]\n\n")
	b.WriteString("A webhook ingress gateway: it verifies each delivery's signature, forwards\n")
	b.WriteString("exactly one copy of each event and answers retries and duplicates itself.\n\n")
	b.WriteString("commands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString("\nclawgate <command> -h shows a command's flags; clawgate --version its version.\n")
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a command and returns the exit code: 0 success, 1
// runtime or validation failure, 2 usage error. Without a command it
// serves, so `clawgate -config FILE` runs the gateway; -h, -help and
// --help there print the command list, and -version and --version the
// version.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			if args[0] == "help" && len(args) > 1 {
				// clawgate help CMD: the command's own help.
				return run([]string{args[1], "-h"}, stdout, stderr)
			}
			fmt.Fprint(stdout, usage())
			return 0
		case "-version", "--version":
			return cmdVersion(args[1:], stdout, stderr)
		}
		if args[0] == "" || args[0][0] != '-' {
			cmd, args = args[0], args[1:]
		}
	}
	switch cmd {
	case "serve":
		return cmdServe(args, stdout, stderr)
	case "check":
		return cmdCheck(args, stdout, stderr)
	case "demo":
		return cmdDemo(args, stdout, stderr)
	case "simulate":
		return cmdSimulate(args, stdout, stderr)
	case "keys":
		return cmdKeys(args, stdout, stderr)
	case "dlq":
		return cmdDLQ(args, stdout, stderr)
	case "routes":
		return cmdRoutes(args, stdout, stderr)
	case "echo":
		return cmdEcho(args, stdout, stderr)
	case "health":
		return cmdHealth(args, stdout, stderr)
	case "schema":
		return cmdSchema(args, stdout, stderr)
	case "completion":
		return cmdCompletion(args, stdout, stderr)
	case "man":
		return cmdMan(args, stdout, stderr)
	case "reload":
		return cmdReload(args, stdout, stderr)
	case "version":
		return cmdVersion(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "clawgate: unknown command %q\n\n%s", cmd, usage())
	return 2
}
