// Command floor is the benchmark's floor: a fasthttp server doing only what
// a Go webhook gateway cannot avoid, so that bench/run.sh can report every
// clawgate target as a fraction of it, measured in the same rounds.
//
//	-mode forward  reads the request body, hashes it (SHA-256, as the
//	               gateway's fingerprint does) and forwards it with a
//	               fasthttp.HostClient to -upstream, answering the
//	               upstream's status, body and content type: the floor of
//	               a unique delivery.
//	-mode answer   reads the request body, hashes it and answers a fixed
//	               small JSON 200 from memory: the floor of a duplicate
//	               answered by the gateway.
//
// Nothing else: no signature check, no key parse, no store, no access log,
// no metrics. It listens on loopback only and writes the address it bound to
// -addr-file.
package main

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// answerBody is floor-answer's answer, the bench upstream's own.
var answerBody = []byte(`{"ok":true}` + "\n")

func main() {
	mode := flag.String("mode", "", "forward or answer")
	listen := flag.String("listen", "127.0.0.1:0", "loopback `address` to listen on")
	upstream := flag.String("upstream", "", "upstream `host:port` (loopback) for -mode forward")
	addrFile := flag.String("addr-file", "", "write the bound address to this `file`")
	flag.Parse()
	if err := loopback(*listen); err != nil {
		fatal(2, "-listen: %v", err)
	}
	var h fasthttp.RequestHandler
	switch *mode {
	case "answer":
		h = answer
	case "forward":
		if err := loopback(*upstream); err != nil {
			fatal(2, "-upstream: %v", err)
		}
		h = forwarder(*upstream)
	default:
		fatal(2, "-mode %q: want forward or answer", *mode)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fatal(1, "%v", err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			fatal(1, "%v", err)
		}
	}
	srv := &fasthttp.Server{
		Handler:                      h,
		NoDefaultServerHeader:        true,
		DisablePreParseMultipartForm: true,
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; ln.Close() }()
	if err := srv.Serve(ln); err != nil {
		select {
		case <-sig:
		default:
			fatal(1, "%v", err)
		}
	}
}

// loopback checks that addr is a loopback IP and a port.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback IP and port", addr)
	}
	return nil
}

// hash is the gateway's unavoidable read of the body: its SHA-256 (a call
// into the assembly block function, never optimised away).
func hash(ctx *fasthttp.RequestCtx) {
	_ = sha256.Sum256(ctx.PostBody())
}

func answer(ctx *fasthttp.RequestCtx) {
	hash(ctx)
	ctx.SetContentType("application/json")
	ctx.SetBody(answerBody)
}

// forwarder returns the forward handler: the request's method, URI, content
// type and body to upstream on a pooled HostClient set up as the gateway's
// (proxy/upstream.go: no retry, 4 s idle connections, 8 KiB read buffer),
// and the upstream's status, content type and body back; 502 when the
// upstream fails.
func forwarder(upstream string) fasthttp.RequestHandler {
	hc := &fasthttp.HostClient{
		Addr:                     upstream,
		NoDefaultUserAgentHeader: true,
		DisablePathNormalizing:   true,
		MaxConns:                 4096,
		MaxIdleConnDuration:      4 * time.Second,
		RetryIfErr:               func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
		ReadBufferSize:           8 << 10,
	}
	return func(ctx *fasthttp.RequestCtx) {
		hash(ctx)
		req := fasthttp.AcquireRequest()
		resp := fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethodBytes(ctx.Method())
		req.SetRequestURIBytes(ctx.RequestURI())
		req.Header.SetHost(upstream)
		req.Header.SetContentTypeBytes(ctx.Request.Header.ContentType())
		req.SetBodyRaw(ctx.PostBody())
		if err := hc.DoTimeout(req, resp, 30*time.Second); err != nil {
			ctx.Error("upstream: "+err.Error(), fasthttp.StatusBadGateway)
			return
		}
		ctx.SetStatusCode(resp.StatusCode())
		ctx.SetContentTypeBytes(resp.Header.ContentType())
		ctx.SetBody(resp.Body())
	}
}

func fatal(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "floor: "+format+"\n", a...)
	os.Exit(code)
}
