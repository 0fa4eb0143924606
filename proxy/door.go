package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/clawgate/clawgate/config"
)

// Limits bound what a caller may make the delivery listener wait for or
// hold, the same on both front doors.
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's header, from its
	// first byte.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request. On the fasthttp
	// front door it runs from the end of the header: the body gets that
	// long.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends nothing for
	// that long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header (431 past it).
	MaxHeaderBytes int
}

// DefaultLimits are the delivery listener's limits.
var DefaultLimits = Limits{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       60 * time.Second,
	IdleTimeout:       120 * time.Second,
	MaxHeaderBytes:    64 << 10,
}

// Door is a front door: an HTTP server that reads requests into the
// delivery steps' view and writes their answers (door_http.go,
// door_fast.go).
type Door interface {
	// Serve accepts connections on ln until Shutdown or Close; it returns
	// nil then, and the listener's error otherwise.
	Serve(ln net.Listener) error
	// Shutdown stops accepting, closes idle connections and waits, until
	// ctx is done, for the requests in flight to be answered.
	Shutdown(ctx context.Context) error
	// Close closes every connection at once.
	Close() error
}

// NewDoor returns the front door kind serving g under l; with tlsConfig
// set it serves TLS (with HTTP/2 on net/http). log receives the server's
// own errors (a malformed request, a failed handshake).
func NewDoor(kind config.ServerKind, g *Gateway, l Limits, tlsConfig *tls.Config, log *slog.Logger) Door {
	if kind == config.ServerFastHTTP {
		return newFastDoor(g, l, tlsConfig, log)
	}
	// Each answer gets its own write deadline (Options.WriteTimeout, set
	// as it starts), so WriteTimeout stays 0 here: a server-wide one
	// would run from the request's arrival and cut slow upstreams'
	// answers.
	return &httpDoor{srv: &http.Server{
		Handler:           g,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		// "OPTIONS *" reaches the gateway (no route: its JSON 404) as on
		// the fasthttp front door, not net/http's own empty 200.
		DisableGeneralOptionsHandler: true,
		TLSConfig:                    tlsConfig,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
}

type httpDoor struct{ srv *http.Server }

func (d *httpDoor) Serve(ln net.Listener) error {
	var err error
	if d.srv.TLSConfig != nil {
		err = d.srv.ServeTLS(ln, "", "") // TLSConfig.GetCertificate
	} else {
		err = d.srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (d *httpDoor) Shutdown(ctx context.Context) error { return d.srv.Shutdown(ctx) }
func (d *httpDoor) Close() error                       { return d.srv.Close() }

// fastDoor is fasthttp's server, with the connections it serves tracked
// so that Close can cut them (fasthttp's Shutdown only waits).
// acmeALPN is the TLS-ALPN-01 challenge's protocol (RFC 8737).
const acmeALPN = "acme-tls/1"

type fastDoor struct {
	srv       *fasthttp.Server
	tlsConfig *tls.Config
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
}

func newFastDoor(g *Gateway, l Limits, tlsConfig *tls.Config, log *slog.Logger) *fastDoor {
	d := &fastDoor{conns: map[net.Conn]struct{}{}}
	if tlsConfig != nil {
		d.tlsConfig = tlsConfig.Clone()
		// fasthttp speaks HTTP/1.1 only; acme-tls/1 stays for tls.acme's
		// TLS-ALPN-01 challenge, answered in the handshake.
		d.tlsConfig.NextProtos = []string{"http/1.1"}
		if slices.Contains(tlsConfig.NextProtos, acmeALPN) {
			d.tlsConfig.NextProtos = append(d.tlsConfig.NextProtos, acmeALPN)
		}
	}
	d.srv = &fasthttp.Server{
		Handler: g.ServeFastHTTP,
		// The header, from its first byte, within ReadHeaderTimeout; then
		// the body within ReadTimeout. Before the handler runs, fasthttp
		// reads at most the smallest max_body of the routes (and 8 KiB):
		// the handler reads the rest, up to the route's max_body, as a
		// stream.
		ReadTimeout: l.ReadHeaderTimeout,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: l.ReadTimeout, MaxRequestBodySize: g.tbl.Load().minBody}
		},
		// A request with "Expect: 100-continue" that is refused before
		// its body is read is answered without a 100 Continue, as on
		// net/http (door_fast.go).
		ExpectHandler:                g.expectFast,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true, // the body is the raw bytes the signature covers
		// fasthttp writes the answer once the handler returns, within this.
		WriteTimeout:   g.writeTimeout,
		IdleTimeout:    l.IdleTimeout,
		ReadBufferSize: l.MaxHeaderBytes, // also the largest header
		// Like net/http: no Server header, no default Content-Type.
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// Answers written during a shutdown close their connections.
		CloseOnShutdown: true,
		// Its error lines never quote the request (a signature, a token).
		SecureErrorLogMessage: true,
		Logger:                fastLogger{log},
		ConnState:             d.track,
	}
	return d
}

func (d *fastDoor) track(c net.Conn, s fasthttp.ConnState) {
	switch s {
	case fasthttp.StateNew:
		d.mu.Lock()
		d.conns[c] = struct{}{}
		d.mu.Unlock()
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}
	// StateActive and StateIdle, twice a request, take no lock.
}

func (d *fastDoor) Serve(ln net.Listener) error {
	if d.tlsConfig != nil {
		ln = tls.NewListener(ln, d.tlsConfig)
	}
	err := d.srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (d *fastDoor) Shutdown(ctx context.Context) error { return d.srv.ShutdownWithContext(ctx) }

func (d *fastDoor) Close() error {
	_ = d.srv.ShutdownWithContext(canceled)
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.conns {
		c.Close()
	}
	return nil
}

var canceled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// fastLogger sends fasthttp's own lines to the gateway's log.
type fastLogger struct{ log *slog.Logger }

func (l fastLogger) Printf(format string, args ...any) {
	l.log.Warn("fasthttp: " + fmt.Sprintf(format, args...))
}
