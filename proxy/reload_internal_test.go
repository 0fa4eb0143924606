package proxy

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/metrics"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/verify"
)

// lifeVerifier records Start and Close, like a verifier that refreshes a
// JWKS URL in the background.
type lifeVerifier struct {
	verify.Verifier
	started, closed int
}

func (v *lifeVerifier) Start(*slog.Logger) { v.started++ }
func (v *lifeVerifier) Close() error       { v.closed++; return nil }

func lifeConfig(t *testing.T) (*config.Config, *lifeVerifier) {
	t.Helper()
	cfg, err := config.Parse([]byte(`
listen: "127.0.0.1:0"
admin: { listen: "" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9
    verify: { scheme: none }
`), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	v := &lifeVerifier{Verifier: cfg.Routes[0].Verifier}
	cfg.Routes[0].Verifier = v
	return cfg, v
}

// A reload starts the new routes' verifiers and stops the replaced ones;
// Close stops the current ones (no JWKS refresher outlives its route).
func TestReloadStartsNewVerifiersAndClosesOldOnes(t *testing.T) {
	first, v1 := lifeConfig(t)
	g := New(first, Options{Store: ledger.NewMemoryStore(store.MemoryOptions{}), Metrics: metrics.New(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if v1.started != 1 || v1.closed != 0 {
		t.Fatalf("after New: started %d closed %d", v1.started, v1.closed)
	}
	second, v2 := lifeConfig(t)
	g.Reload(second)
	if v1.closed != 1 || v2.started != 1 || v2.closed != 0 {
		t.Fatalf("after Reload: old closed %d, new started %d closed %d", v1.closed, v2.started, v2.closed)
	}
	g.Close()
	if v2.closed != 1 {
		t.Fatalf("after Close: new closed %d", v2.closed)
	}
}
