package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// cmdEcho runs a tiny upstream that logs and counts what it receives.
func cmdEcho(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("echo", stdout, stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "`address` to listen on")
	if code := parseFlags(fs, args, 0); code >= 0 {
		return code
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	srv := &http.Server{Addr: *listen, Handler: echoHandler(log), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("echo listening", "addr", *listen)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintf(stderr, "clawgate echo: %v\n", err)
		return 1
	}
	return 0
}

// echoHandler answers 200 with a small JSON body naming the delivery's
// count, and logs each one with its idempotency key and attempt.
func echoHandler(log *slog.Logger) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		c := n.Add(1)
		log.Info("echo received", "n", c, "method", r.Method, "path", r.URL.Path,
			"idempotency_key", r.Header.Get("Idempotency-Key"), "attempt", r.Header.Get("X-Clawgate-Attempt"),
			"request_id", r.Header.Get("X-Request-Id"), "bytes", len(body))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"received\":%d,\"bytes\":%d}\n", c, len(body))
	})
}
