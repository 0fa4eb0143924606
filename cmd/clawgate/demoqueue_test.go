package main

import (
	"strings"
	"testing"
)

func TestDemoQueueAct(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "-queue")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"provider delivery 1: 202",
		"provider delivery 2: 202",
		"(Idempotent-Replayed)",
		"upstream try 4:",
		"200, delivered",
		"reason rejected:422 attempts 1",
		`dead_letter_queue_size{route="orders"} 1`,
		"/replay: 200",
		"webhook_dlq_replays_total 1",
		"evt_3001 evt_3002 evt_3004",
		`200 {"status":"skipped","reason":"stale"} (Idempotent-Replayed)`,
		`webhook_queue_skipped_total{reason="stale"} 1`,
		"ok: every acknowledged event was completed exactly once",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo -queue output lacks %q:\n%s", want, out)
		}
	}
}
