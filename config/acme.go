package config

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// DefaultACMEDirectory is tls.acme.directory_url's default: Let's
// Encrypt's production directory.
const DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"

// DefaultACMEHTTPListen is tls.acme.http_listen's default when acme is on.
const DefaultACMEHTTPListen = ":80"

// DefaultACMECacheDir is tls.acme.cache_dir's default, relative to the
// config's directory.
const DefaultACMECacheDir = "acme"

// ACME is tls.acme: certificates obtained and renewed automatically (the
// TLS-ALPN-01 challenge on the delivery listener, HTTP-01 on http_listen).
// Turning it on accepts the CA's terms of service.
type ACME struct {
	// Domains are the host names to obtain certificates for (no wildcards,
	// no IP addresses); a handshake for any other name is refused. Empty:
	// ACME is off.
	Domains []string `yaml:"domains"`
	// Email is the contact address given to the CA for expiry and account
	// notices. Empty: none given.
	Email string `yaml:"email"`
	// CacheDir keeps the ACME account key and the certificates across
	// restarts (created with mode 0700); instances sharing a domain should
	// share it. Relative to the config's directory. Empty: "acme" there.
	CacheDir string `yaml:"cache_dir"`
	// DirectoryURL is the CA's ACME directory, https. Empty: Let's
	// Encrypt's production directory.
	DirectoryURL string `yaml:"directory_url"`
	// CAFile is a PEM bundle of the roots that the directory's HTTPS
	// certificate is checked against (a private CA such as step-ca, or
	// Pebble in tests). Empty: the system's roots.
	CAFile string `yaml:"ca_file"`
	// HTTPListen is the address of the HTTP-01 challenge listener; it
	// answers the CA's challenges and turns other requests away to HTTPS.
	// "off": no listener (TLS-ALPN-01 on the delivery listener only).
	// Empty: ":80" when acme is on.
	HTTPListen string `yaml:"http_listen"`

	// CARoots are CAFile's certificates; nil without CAFile.
	CARoots *x509.CertPool `yaml:"-"`
}

// On reports whether ACME is turned on (domains are listed).
func (a ACME) On() bool { return len(a.Domains) > 0 }

// checkACME validates tls.acme and fills in its defaults.
func (b *builder) checkACME() {
	a := &b.cfg.TLS.ACME
	line := func(field string) int { return b.line("tls", "acme", field) }
	if len(a.Domains) == 0 {
		b.ps.add(b.line("tls", "acme"), "tls.acme.domains", "required: the host names to obtain certificates for, e.g. [hooks.example.com]")
	}
	seen := map[string]bool{}
	for i, d := range a.Domains {
		field := fmt.Sprintf("tls.acme.domains[%d]", i)
		d = strings.TrimSuffix(strings.ToLower(d), ".")
		a.Domains[i] = d
		switch {
		case strings.Contains(d, "*"):
			b.ps.add(b.line("tls", "acme", "domains", i), field, "%q: wildcard names need the DNS-01 challenge, which is not supported; list each name", clip(d))
		case net.ParseIP(d) != nil:
			b.ps.add(b.line("tls", "acme", "domains", i), field, "%q is an IP address; ACME certificates here are for host names", clip(d))
		case !validHostname(d):
			b.ps.add(b.line("tls", "acme", "domains", i), field, "%q is not a host name", clip(d))
		case seen[d]:
			b.ps.add(b.line("tls", "acme", "domains", i), field, "%q is listed twice", clip(d))
		}
		seen[d] = true
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t\r\n")) {
		b.ps.add(line("email"), "tls.acme.email", "%q is not an email address", clip(a.Email))
	}
	if a.DirectoryURL == "" {
		a.DirectoryURL = DefaultACMEDirectory
	} else if u, err := url.Parse(a.DirectoryURL); err != nil || u.Scheme != "https" || u.Host == "" {
		b.ps.add(line("directory_url"), "tls.acme.directory_url", "%q is not an https URL (an ACME directory, e.g. %s)", clip(a.DirectoryURL), DefaultACMEDirectory)
	}
	if a.CacheDir == "" {
		a.CacheDir = DefaultACMECacheDir
	}
	a.CacheDir = b.resolvePath(a.CacheDir)
	if a.CAFile != "" {
		a.CAFile = b.resolvePath(a.CAFile)
		data, err := readRegular(a.CAFile)
		if err != nil {
			b.ps.wrap(line("ca_file"), "tls.acme.ca_file", err)
		} else {
			a.CARoots = x509.NewCertPool()
			if !a.CARoots.AppendCertsFromPEM(data) {
				b.ps.add(line("ca_file"), "tls.acme.ca_file", "%s holds no PEM certificate", a.CAFile)
			}
		}
	}
	switch a.HTTPListen {
	case "":
		a.HTTPListen = DefaultACMEHTTPListen
	case "off":
	default:
		if _, _, err := splitHostPort(a.HTTPListen); err != nil {
			b.ps.add(line("http_listen"), "tls.acme.http_listen", "%q: %v (an address such as \":80\", or off)", clip(a.HTTPListen), err)
		}
	}
}

// validHostname reports whether d is a DNS name of letters, digits and
// hyphens, with at least one dot.
func validHostname(d string) bool {
	if len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
