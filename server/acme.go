package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/proxy"
)

// acmeRunner is tls.acme: autocert's Manager, which obtains each domain's
// certificate at its first handshake (TLS-ALPN-01 on the delivery
// listener, or HTTP-01 on the challenge listener), keeps it in cache_dir
// and renews it 30 days before it expires; and the HTTP-01 listener.
type acmeRunner struct {
	m    *autocert.Manager
	http *http.Server // nil with http_listen: off
	addr net.Addr     // the HTTP-01 listener's address
}

// startACME sets up tls.acme and binds its HTTP-01 listener (so that a
// taken port fails Start); nil when acme is off.
func startACME(cfg *config.Config, log *slog.Logger) (*acmeRunner, error) {
	a := cfg.TLS.ACME
	if !a.On() {
		return nil, nil
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if a.CARoots != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: a.CARoots}
	}
	allowed := autocert.HostWhitelist(a.Domains...)
	r := &acmeRunner{m: &autocert.Manager{
		Prompt: autocert.AcceptTOS,
		Cache:  autocert.DirCache(a.CacheDir),
		// The HTTP-01 handler checks the request's Host, which carries a
		// port when http_listen is not on 80.
		HostPolicy: func(ctx context.Context, host string) error {
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			return allowed(ctx, host)
		},
		Email: a.Email,
		Client: &acme.Client{
			DirectoryURL: a.DirectoryURL,
			HTTPClient:   &http.Client{Transport: transport, Timeout: time.Minute},
			UserAgent:    "clawgate",
		},
	}}
	if a.HTTPListen == "off" {
		return r, nil
	}
	ln, err := net.Listen("tcp", a.HTTPListen)
	if err != nil {
		return nil, fmt.Errorf("tls.acme.http_listen: %w", err)
	}
	r.addr = ln.Addr()
	r.http = &http.Server{
		// The CA's HTTP-01 challenges; any other request is sent to HTTPS
		// (GET and HEAD redirected, the rest refused with 400).
		Handler:           r.m.HTTPHandler(nil),
		ReadHeaderTimeout: proxy.DefaultLimits.ReadHeaderTimeout,
		ReadTimeout:       proxy.DefaultLimits.ReadTimeout,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       proxy.DefaultLimits.IdleTimeout,
		MaxHeaderBytes:    proxy.DefaultLimits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := r.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("acme: the HTTP-01 challenge listener failed", "error", err.Error())
		}
	}()
	log.Info("acme: certificates from "+a.DirectoryURL, "domains", a.Domains, "cache_dir", a.CacheDir, "http_listen", a.HTTPListen)
	return r, nil
}

// tlsConfig is the delivery listener's: autocert's certificates, and the
// acme-tls/1 protocol for TLS-ALPN-01 beside h2 and http/1.1 (the
// fasthttp door keeps http/1.1 and acme-tls/1).
func (r *acmeRunner) tlsConfig() *tls.Config {
	return r.m.TLSConfig()
}

// close stops the HTTP-01 listener.
func (r *acmeRunner) close() {
	if r == nil || r.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if r.http.Shutdown(ctx) != nil {
		r.http.Close()
	}
}
