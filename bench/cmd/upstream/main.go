// Command upstream is the benchmark's upstream service: a minimal fasthttp
// server answering every request 200 with a small JSON body, logging
// nothing, so that it is not the bottleneck of any target. It listens on
// loopback only and writes the address it bound to -addr-file.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "loopback `address` to listen on")
	addrFile := flag.String("addr-file", "", "write the bound address to this `file`")
	flag.Parse()
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(os.Stderr, "upstream: -listen %q must be a loopback IP and port\n", *listen)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		os.Exit(1)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "upstream:", err)
			os.Exit(1)
		}
	}
	body := []byte(`{"ok":true}` + "\n")
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		NoDefaultServerHeader: true,
		NoDefaultDate:         true,
		ReadBufferSize:        16 << 10,
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; ln.Close() }()
	if err := srv.Serve(ln); err != nil {
		select {
		case <-sig:
		default:
		}
	}
}
