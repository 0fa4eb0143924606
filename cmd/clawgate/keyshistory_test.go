package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clawgate/clawgate/admin"
	"github.com/clawgate/clawgate/config"
	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
)

func TestKeysHistoryPrintsTheTimeline(t *testing.T) {
	st := ledger.NewMemoryStore(store.MemoryOptions{})
	st.SetHistory(ledger.HistoryOptions{Cap: 50, Instance: "gw-1"})
	ctx := store.WithNote(context.Background(), store.Note{RequestID: "req-1", Secret: "k1", Client: "10.0.0.7"})
	c, err := st.Claim(ctx, "orders:evt_1", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fctx := store.WithNote(context.Background(), store.Note{RequestID: "req-1", UpstreamMS: 17})
	if err := st.Finish(fctx, "orders:evt_1", c.Token, store.Outcome{Status: 200, Fingerprint: "fp"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// A request id with a terminal escape prints escaped.
	st.Claim(store.WithNote(context.Background(), store.Note{RequestID: "evil\x1b[2J"}), "orders:evt_1", "fp", time.Minute)
	cfg := &config.Config{Routes: []config.Route{{Name: "orders"}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Gatherer: prometheus.NewRegistry(), Store: st, Gateway: stubGateway{cfg},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}))
	defer srv.Close()

	code, out, errOut := runCmd(t, "keys", "history", "-admin", srv.URL, "orders", "evt_1")
	if code != 0 {
		t.Fatalf("exit %d %q %q", code, out, errOut)
	}
	at := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
	want := regexp.MustCompile(`^orders evt_1: finished, 3 events\n` +
		at + `  arrival   forwarded secret=k1 client=10\.0\.0\.7  copy 1  req req-1  on gw-1\n` +
		at + `  settle    finished  try 1  status 200  17 ms  req req-1  on gw-1\n` +
		at + `  arrival   replayed  copy 2  req evil\\x1b\[2J  on gw-1\n$`)
	if !want.MatchString(out) {
		t.Fatalf("timeline:\n%s", out)
	}
	code, out, _ = runCmd(t, "keys", "history", "-json", "-admin", srv.URL, "orders", "evt_1")
	var h admin.History
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || h.State != "finished" || len(h.Events) != 3 || h.Events[1].MS != 17 {
		t.Fatalf("-json: exit %d %q", code, out)
	}
	code, _, errOut = runCmd(t, "keys", "history", "-admin", srv.URL, "orders", "never")
	if code != 1 || !strings.Contains(errOut, "orders never has no record and no history") {
		t.Fatalf("unknown key: exit %d %q", code, errOut)
	}
}
