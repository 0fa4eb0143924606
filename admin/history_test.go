package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/store/redistest"
)

// history GETs a key's history through node i.
func (c *cluster) history(i int, path string) (int, admin.History, map[string]any) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.nodes[i].admin.URL+path, nil)
	req.Header.Set(admin.Header, "1")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		c.t.Fatal(err)
	}
	b, _ := json.Marshal(raw)
	var h admin.History
	json.Unmarshal(b, &h)
	return resp.StatusCode, h, raw
}

func kinds(h admin.History) string {
	var s []string
	for _, e := range h.Events {
		d, _, _ := strings.Cut(e.Detail, " ")
		s = append(s, e.Kind+"/"+d)
	}
	return strings.Join(s, " ")
}

func TestKeyHistory(t *testing.T) {
	c := newCluster(t, redistest.Start(t), 1)
	if code, _, _ := c.history(0, "/admin/keys/orders/evt_h/history"); code != 404 {
		t.Fatalf("history of a key never seen: %d, want 404", code)
	}
	if code, _, _ := c.history(0, "/admin/keys/nope/evt_h/history"); code != 404 {
		t.Fatalf("history on an unknown route: %d, want 404", code)
	}
	c.deliver(0, "evt_h")
	if r := c.deliver(0, "evt_h"); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("duplicate not replayed")
	}
	var h admin.History
	var raw map[string]any
	eventually.True(t, "the window's replay in the history", func() bool {
		_, h, raw = c.history(0, "/admin/keys/orders/evt_h/history")
		return len(h.Events) == 3
	})
	if got := kinds(h); got != "arrival/forwarded settle/finished arrival/replayed" {
		t.Fatalf("history = %s", got)
	}
	if h.Route != "orders" || h.Key != "evt_h" || h.State != "finished" {
		t.Fatalf("history header = %+v", h)
	}
	for _, f := range []string{"route", "key", "state", "events"} {
		if _, ok := raw[f]; !ok {
			t.Fatalf("answer lacks %q: %v", f, raw)
		}
	}
	ev := raw["events"].([]any)[0].(map[string]any)
	for _, f := range []string{"at", "kind", "instance", "request_id", "attempt", "status", "ms", "detail"} {
		if _, ok := ev[f]; !ok {
			t.Fatalf("event lacks %q: %v", f, ev)
		}
	}
	e := h.Events[0]
	at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", e.At)
	if err != nil || time.Since(at) > time.Minute || !strings.HasSuffix(e.At, "Z") {
		t.Fatalf("at = %q (%v)", e.At, err)
	}
	if e.Instance != "node-0" || e.RequestID == "" || e.Attempt != 1 ||
		!strings.Contains(e.Detail, "secret=k1") || !strings.Contains(e.Detail, "client=127.0.0.1") {
		t.Fatalf("arrival = %+v", e)
	}
	if s := h.Events[1]; s.Status != 200 || s.RequestID != e.RequestID {
		t.Fatalf("settle = %+v", s)
	}
	// A reset is recorded, by whom, and the history outlives the record.
	if code, _ := c.reset(0, "orders", "evt_h"); code != 200 {
		t.Fatalf("reset: %d", code)
	}
	code, h, _ := c.history(0, "/admin/keys/orders/evt_h/history")
	if code != 200 || h.State != "absent" || len(h.Events) != 4 || h.Events[3].Kind != "reset" ||
		!strings.Contains(h.Events[3].Detail, "by=admin reset") {
		t.Fatalf("after reset: %d %+v", code, h)
	}
	// A key whose own name ends in /history is read with its slash
	// escaped.
	c.deliver(0, "evt_x/history")
	eventually.True(t, "the escaped key's history", func() bool {
		code, h, _ = c.history(0, "/admin/keys/orders/evt_x%2Fhistory/history")
		return code == 200 && len(h.Events) == 2
	})
	if h.Key != "evt_x/history" {
		t.Fatalf("escaped key = %q", h.Key)
	}
}
