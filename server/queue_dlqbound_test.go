package server

import (
	"fmt"
	"testing"
	"time"
)

// A route whose DLQ holds queue.max_dlq events answers new events 503
// with Retry-After: nothing is acknowledged that could not be kept. A
// copy of a dead-lettered event is still answered 202, and a purge makes
// room again. (Issue: the DLQ had no bound.)
func TestQueueDLQBoundAnswers503(t *testing.T) {
	c := qBackends[0].conf(t) // Redis; the memory and Kafka backends are covered in queue/
	up := newQUpstream(t)
	up.setAnswer(func(string, int) int { return 400 }) // dead-lettered at once
	c.upstream = up.srv.URL
	c.extra = "queue: { max_dlq: 2 }\n"
	in := startQueue(t, c, nil)
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", in.log)
		}
	}()
	for _, k := range []string{"dead-0", "dead-1"} {
		if a := qPost(in.url(), k); a.status != 202 {
			t.Fatalf("%s: %d %q %v", k, a.status, a.raw, a.err)
		}
	}
	qEventually(t, 10*time.Second, func() bool { v, _ := in.gauge("dead_letter_queue_fill_ratio"); return v >= 1 },
		func() string {
			v, ok := in.gauge("dead_letter_queue_fill_ratio")
			return fmt.Sprintf("dead_letter_queue_fill_ratio = %v (%v), want 1", v, ok)
		})
	a := qPost(in.url(), "new-0")
	if a.status != 503 || a.retry == "" {
		t.Fatalf("a new event with the DLQ full: %d Retry-After %q %q, want 503 with Retry-After", a.status, a.retry, a.raw)
	}
	if ks := in.keyState("new-0"); ks.State != "absent" {
		t.Fatalf("the refused event was stored: %+v", ks)
	}
	if a := qPost(in.url(), "dead-1"); a.status != 202 || !a.replayed {
		t.Fatalf("a copy of a dead-lettered event: %d replayed %v %q", a.status, a.replayed, a.raw)
	}
	page := in.dlq()
	if len(page.Entries) != 2 {
		t.Fatalf("DLQ %+v", page.Entries)
	}
	if code := in.adminJSON("DELETE", "/admin/dlq/orders/"+page.Entries[0].ID, nil); code != 200 {
		t.Fatalf("purge: %d", code)
	}
	qEventually(t, 10*time.Second, func() bool { return qPost(in.url(), "new-1").status == 202 },
		func() string { return "a new event is still refused after a purge" })
}
