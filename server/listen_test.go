package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
)

// Options.Listen (serve -listen, make run's loopback address) replaces the
// file's listen at start and at every reload, which does not report
// listen as changed.
func TestListenOverrideKeptAcrossReloads(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(cfgPath, []byte(`
listen: ":0"
admin: { listen: "" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9
    verify: { scheme: none }
`), 0o600)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuf
	s, err := Start(cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registry: prometheus.NewRegistry(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(time.Second)
	if !strings.HasPrefix(s.Addr().String(), "127.0.0.1:") {
		t.Fatalf("listening on %s, want loopback", s.Addr())
	}
	if err := s.Reload(cfgPath); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Contains(l, "listen changed") || !strings.Contains(l, "config reloaded") {
		t.Fatalf("reload log:\n%s", l)
	}
	if cfg.Listen != ":0" {
		t.Fatalf("Start changed the caller's config: listen %q", cfg.Listen)
	}
}
