package server

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/internal/doortest"
)

// With tracing on, a delivery's spans reach the OTLP receiver by the time
// Shutdown returns (it flushes the batch), in the caller's trace, on each
// front door.
func TestShutdownFlushesDeliverySpans(t *testing.T) {
	doortest.ForEach(t, testShutdownFlushesDeliverySpans)
}

func testShutdownFlushesDeliverySpans(t *testing.T) {
	var mu sync.Mutex
	var spans []string
	traces := map[string]bool{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &coltracepb.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans = append(spans, s.GetName())
					traces[hex.EncodeToString(s.GetTraceId())] = true
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	defer collector.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()

	y := `
listen: "127.0.0.1:0"
admin: { listen: "" }
tracing: { enabled: true, endpoint: "` + collector.URL + `" }
routes:
  - name: orders
    match: { path: /webhook/order }
    upstream: ` + upstream.URL + `
    idempotency: { required: false }
    verify: { scheme: none }
`
	cfg, err := config.Parse([]byte(doorYAML(t, y)), "gateway.yaml", t.TempDir(), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(cfg, opts())
	if err != nil {
		t.Fatal(err)
	}
	checkDoor(t, s)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr().String()+"/webhook/order", strings.NewReader("{}"))
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s.Shutdown(5 * time.Second)

	mu.Lock()
	defer mu.Unlock()
	sort.Strings(spans)
	if got := strings.Join(spans, ","); got != "POST /webhook/order,forward,verify" {
		t.Errorf("collector got spans %s", got)
	}
	if len(traces) != 1 || !traces[traceID] {
		t.Errorf("collector got traces %v, want only %s", traces, traceID)
	}
}
