package main

import (
	"fmt"
	"io"

	"github.com/clawgate/clawgate/config"
)

// cmdCheck validates a config like `nginx -t`.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	path := configFlag(fs)
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	fmt.Fprintf(stdout, "config ok: %s\n", plural(int64(len(cfg.Routes)), "route"))
	return 0
}
