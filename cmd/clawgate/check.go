package main

import (
	"fmt"
	"io"

	"github.com/clawgate/clawgate/config"
)

// cmdCheck validates a config like `nginx -t`. With -explain it prints
// every route as the gateway runs it, provider presets expanded.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stdout, stderr)
	path := configFlag(fs)
	explain := fs.Bool("explain", false, "print every route as the gateway runs it: provider presets expanded, where the key comes from and whether the signature covers it")
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
	for i := range cfg.Routes {
		if *explain {
			explainRoute(stdout, cfg, &cfg.Routes[i])
		}
		if note := bodyHashNote(&cfg.Routes[i]); note != "" {
			fmt.Fprintln(stdout, "note:", note)
		}
	}
	fmt.Fprintf(stdout, "config ok: %s\n", plural(int64(len(cfg.Routes)), "route"))
	return 0
}
