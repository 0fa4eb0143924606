package server

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
)

func testConfig(t *testing.T, listen string) *config.Config {
	t.Helper()
	y := `
listen: "` + listen + `"
admin: { listen: "127.0.0.1:0" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: http://127.0.0.1:9
    verify: { scheme: none }
`
	// On the front door the test runs on (doorYAML).
	cfg, err := config.Parse([]byte(doorYAML(t, y)), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func opts() Options {
	return Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
}

// Start binds both listeners before serving, so a taken port fails at
// once, naming the setting, and leaves nothing running behind.
func TestStartFailsOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Start(testConfig(t, ln.Addr().String()), opts()); err == nil || !strings.HasPrefix(err.Error(), "listen: ") {
		t.Fatalf("Start on a taken port: %v", err)
	}
}

// A started server answers deliveries (here 404 for an unknown path) until
// Shutdown, and not after, on each front door.
func TestStartServeShutdown(t *testing.T) { doortest.ForEach(t, testStartServeShutdown) }

func testStartServeShutdown(t *testing.T) {
	s, err := Start(testConfig(t, "127.0.0.1:0"), opts())
	if err != nil {
		t.Fatal(err)
	}
	checkDoor(t, s)
	url := "http://" + s.Addr().String() + "/nowhere"
	resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s.Shutdown(time.Second)
	if _, err := http.Post(url, "application/json", strings.NewReader("{}")); err == nil {
		t.Fatal("still serving after Shutdown")
	}
}
