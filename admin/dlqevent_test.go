package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/proxy"
	"github.com/clawgate/clawgate/queue"
	"github.com/clawgate/clawgate/store"
)

// GET /admin/dlq/{route}/{id} answers a dead-lettered event with the
// fields of its listing entry and its body; 404 once it left the DLQ or
// for an id, a route or a sync route it does not know; behind the token.
func TestDLQEventShowsOneDeadEvent(t *testing.T) {
	e := newDLQEnv(t, 1000)
	id := e.enqueue("evt_a", 400)
	list := e.waitDLQ(1)
	code, body := e.do("GET", "/admin/dlq/hooks/"+id, token)
	var ev admin.DLQEvent
	if err := json.Unmarshal(body, &ev); code != 200 || err != nil {
		t.Fatalf("GET one: %d %s %v", code, body, err)
	}
	l := list[0]
	if ev.Route != "hooks" || ev.ID != id || ev.Key != "evt_a" || ev.Reason != l.Reason || ev.Status != 400 || ev.Attempts != 1 ||
		!ev.FirstSeen.Equal(l.FirstSeen) || !ev.DiedAt.Equal(l.DiedAt) {
		t.Fatalf("GET one = %+v; listing %+v", ev, l)
	}
	// Without a body reader (Options.Body), the payload is the body.
	if ev.BodyPreview != "400" || ev.BodyTruncated || ev.BodyBytes != 3 || ev.ContentType != "" {
		t.Fatalf("GET one: preview %q truncated %v bytes %d type %q", ev.BodyPreview, ev.BodyTruncated, ev.BodyBytes, ev.ContentType)
	}
	// The JSON has the listing's field names.
	for _, f := range []string{`"id"`, `"key"`, `"reason"`, `"status"`, `"attempts"`, `"first_seen"`, `"died_at"`, `"body_preview"`, `"body_truncated"`, `"content_type"`} {
		if !strings.Contains(string(body), f) {
			t.Errorf("GET one: no %s in %s", f, body)
		}
	}

	for _, tc := range []struct{ path, tok string }{
		{"/admin/dlq/hooks/" + id, ""},
		{"/admin/dlq/hooks/" + id, "wrong-token"},
	} {
		if code, body := e.do("GET", tc.path, tc.tok); code != 401 {
			t.Errorf("GET %s with token %q: %d %s, want 401", tc.path, tc.tok, code, body)
		}
	}
	for _, p := range []string{"/admin/dlq/hooks/0-000000000000000000000000", "/admin/dlq/hooks/nonsense", "/admin/dlq/orders/" + id, "/admin/dlq/nope/" + id} {
		if code, body := e.do("GET", p, token); code != 404 {
			t.Errorf("GET %s: %d %s, want 404", p, code, body)
		}
	}
	if code, body := e.do("GET", "/admin/dlq/hooks/0-000000000000000000000000", token); errorOf(body) != `no dead-lettered event "0-000000000000000000000000" on route "hooks"` {
		t.Errorf("GET unknown id: %d %s", code, body)
	}
	// Reading changed nothing; once replayed, the event is not in the DLQ.
	if ids := e.ids(); len(ids) != 1 || ids[0] != id {
		t.Fatalf("DLQ after GET one: %v", ids)
	}
	e.sender.fixed.Store(true)
	if code, body := e.do("POST", "/admin/dlq/hooks/"+id+"/replay", token); code != 200 {
		t.Fatalf("replay: %d %s", code, body)
	}
	if code, body := e.do("GET", "/admin/dlq/hooks/"+id, token); code != 404 {
		t.Fatalf("GET a replayed event: %d %s, want 404", code, body)
	}
}

// Without a token, GET one is served to a loopback Host only.
func TestDLQEventWithoutTokenServesOnlyLoopbackHosts(t *testing.T) {
	e := newDLQEnvToken(t, 1000, "")
	id := e.enqueue("evt_a", 400)
	e.waitDLQ(1)
	for host, want := range map[string]int{"": 200, "localhost:9090": 200, "evil.example:9090": 403, "10.0.0.5": 403} {
		if code, body := get(t, e.srv.URL+"/admin/dlq/hooks/"+id, host, ""); code != want {
			t.Errorf("Host %q: %d %s, want %d", host, code, body, want)
		}
	}
}

// oneDead is a queue holding one dead-lettered event with payload.
type oneDead struct {
	downQueue
	d       queue.DeadEntry
	payload []byte
}

func (q oneDead) Dead(_ context.Context, _ string, id string) (queue.DeadEntry, []byte, error) {
	if id != q.d.ID {
		return queue.DeadEntry{}, nil, queue.ErrNotFound
	}
	return q.d, q.payload, nil
}

// The preview is the body the upstream would get, read by the proxy
// from the stored request: its first 4 KiB as text, cut at a character,
// invalid UTF-8 replaced, with the Content-Type.
func TestDLQEventBodyPreview(t *testing.T) {
	const id = "0-0123456789abcdef01234567"
	stored := func(body, ct string) []byte {
		r := &proxy.Request{Method: http.MethodPost, URI: "/hook", Body: []byte(body), Key: "k", RequestID: "req-1",
			Header: []string{"X-Forwarded-For", "192.0.2.7"}}
		if ct != "" {
			r.Header = append(r.Header, "Content-Type", ct)
		}
		return r.AppendBinary(nil)
	}
	x := strings.Repeat("x", admin.MaxBodyPreview)
	for _, tc := range []struct {
		name, body, ct string
		want           string
		truncated      bool
	}{
		{"json", `{"id":"k","note":"<img src=x onerror=alert(1)></pre><script>x</script>"}`, "application/json",
			`{"id":"k","note":"<img src=x onerror=alert(1)></pre><script>x</script>"}`, false},
		{"empty", "", "", "", false},
		{"exactly 4 KiB", x, "text/plain", x, false},
		{"longer", x + "tail", "text/plain", x, true},
		{"invalid UTF-8", "a\xffb\xc3", "application/octet-stream", "a\uFFFDb\uFFFD", false},
		{"a character across the cut", x[:admin.MaxBodyPreview-1] + "é and more", "text/plain", x[:admin.MaxBodyPreview-1], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := oneDead{d: queue.DeadEntry{ID: id, Key: "k", Reason: "rejected:400", Status: 400, Attempts: 1}, payload: stored(tc.body, tc.ct)}
			srv := dlqEventServer(t, q)
			code, body, _ := doAdmin(t, "GET", srv.URL+"/admin/dlq/hooks/"+id, token)
			var ev admin.DLQEvent
			if err := json.Unmarshal(body, &ev); code != 200 || err != nil {
				t.Fatalf("%d %s %v", code, body, err)
			}
			if ev.BodyPreview != tc.want || ev.BodyTruncated != tc.truncated || ev.BodyBytes != len(tc.body) || ev.ContentType != tc.ct || ev.ID != id || ev.Reason != "rejected:400" {
				t.Fatalf("preview %q (%d bytes) truncated %v bytes %d type %q; want %q truncated %v bytes %d type %q",
					clipped(ev.BodyPreview), len(ev.BodyPreview), ev.BodyTruncated, ev.BodyBytes, ev.ContentType, clipped(tc.want), tc.truncated, len(tc.body), tc.ct)
			}
		})
	}
	// A stored request the proxy cannot read is a 500 that says so.
	srv := dlqEventServer(t, oneDead{d: queue.DeadEntry{ID: id}, payload: []byte("not a request")})
	if code, body, _ := doAdmin(t, "GET", srv.URL+"/admin/dlq/hooks/"+id, token); code != 500 || !strings.Contains(errorOf(body), "cannot be read") {
		t.Fatalf("damaged payload: %d %s", code, body)
	}
	// A queue that does not answer: 503, as every DLQ call.
	srv = dlqEventServer(t, downQueue{})
	if code, body, h := doAdmin(t, "GET", srv.URL+"/admin/dlq/hooks/"+id, token); code != 503 || h.Get("Retry-After") != "1" {
		t.Fatalf("queue down: %d %s", code, body)
	}
}

func dlqEventServer(t *testing.T, q admin.Queue) *httptest.Server {
	t.Helper()
	cfg := &config.Config{Routes: []config.Route{{Name: "hooks", Delivery: config.DeliveryQueue}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: ledger.NewMemoryStore(store.MemoryOptions{}), Gateway: stubGateway{cfg},
		Queue: q, Body: proxy.QueuedBody, Token: token, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}))
	t.Cleanup(srv.Close)
	return srv
}

func clipped(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...%s", s[:20], s[len(s)-20:])
	}
	return s
}
