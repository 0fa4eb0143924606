package ordertest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEvents(t *testing.T) {
	w := Workload{Values: 2, PerValue: 6}
	keys, want, stale := w.Events()
	if len(keys) != 12 || strings.Join(stale, " ") != "v00-0004 v01-0004" {
		t.Fatalf("keys %v stale %v", keys, stale)
	}
	if strings.Join(want["v01"], " ") != "v01-0000 v01-0001 v01-0002 v01-0003 v01-0005" {
		t.Fatalf("want %v", want)
	}
	if w.TS(3) != 30 || w.TS(4) != 20 || w.TS(5) != 50 {
		t.Fatalf("stale values %d %d %d", w.TS(3), w.TS(4), w.TS(5))
	}
}

// Check finds each kind of broken order, and passes a good run.
func TestCheck(t *testing.T) {
	w := Workload{Values: 1, PerValue: 3}
	at := func(ms int) time.Time { return time.UnixMilli(int64(ms)) }
	try := func(key string, start, end int, accepted, cut bool) *Try {
		return &Try{Key: key, Start: at(start), End: at(end), Accepted: accepted, Cut: cut}
	}
	for _, tc := range []struct {
		name      string
		tries     []*Try
		ignoreCut bool
		fail      string // in a failure; "" none
		twice     int
	}{
		{name: "in order", tries: []*Try{try("v00-0000", 0, 5, true, false), try("v00-0001", 6, 9, true, false), try("v00-0002", 10, 12, true, false)}},
		{name: "a retry, then in order", tries: []*Try{try("v00-0000", 0, 5, false, false), try("v00-0000", 6, 7, true, false), try("v00-0001", 8, 9, true, false), try("v00-0002", 10, 12, true, false)}},
		{name: "out of order", tries: []*Try{try("v00-0001", 0, 5, true, false), try("v00-0000", 6, 9, true, false), try("v00-0002", 10, 12, true, false)},
			fail: "the upstream accepted [v00-0001 v00-0000 v00-0002]"},
		{name: "overlap", tries: []*Try{try("v00-0000", 0, 7, true, false), try("v00-0001", 6, 9, true, false), try("v00-0002", 10, 12, true, false)},
			fail: "a try of v00-0001 () began while a try of v00-0000 () was on its way"},
		{name: "overlap of a cut try, ignored", ignoreCut: true, tries: []*Try{try("v00-0000", 0, 7, false, true), try("v00-0000", 6, 8, true, false), try("v00-0001", 9, 9, true, false), try("v00-0002", 10, 12, true, false)}},
		{name: "overlap of a cut try, not ignored", tries: []*Try{try("v00-0000", 0, 7, false, true), try("v00-0000", 6, 8, true, false), try("v00-0001", 9, 9, true, false), try("v00-0002", 10, 12, true, false)},
			fail: "began while"},
		{name: "accepted twice", tries: []*Try{try("v00-0000", 0, 5, true, false), try("v00-0000", 6, 7, true, false), try("v00-0001", 8, 9, true, false), try("v00-0002", 10, 12, true, false)}, twice: 1},
		{name: "missing", tries: []*Try{try("v00-0000", 0, 5, true, false), try("v00-0002", 10, 12, true, false)}, fail: "want [v00-0000 v00-0001 v00-0002]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.Check(map[string][]*Try{"v00": tc.tries}, tc.ignoreCut)
			got := strings.Join(r.Failures, "\n")
			if tc.fail == "" && got != "" || tc.fail != "" && !strings.Contains(got, tc.fail) {
				t.Fatalf("failures %q, want one with %q", got, tc.fail)
			}
			if r.Twice != tc.twice {
				t.Fatalf("twice %d, want %d", r.Twice, tc.twice)
			}
		})
	}
	// A stale event (every fifth) that reaches the upstream.
	w = Workload{Values: 1, PerValue: 5}
	var tries []*Try
	for j := range 5 {
		tries = append(tries, try(w.Key("v00", j), j*10, j*10+5, true, false))
	}
	if r := w.Check(map[string][]*Try{"v00": tries}, false); !strings.Contains(strings.Join(r.Failures, "\n"), "stale event v00-0004 reached the upstream") {
		t.Fatalf("stale event not reported: %v", r.Failures)
	}
}

// Send sends each value's events in order, tries an event again until it
// is acknowledged, and reports an event never acknowledged (and nothing of
// its value after it).
func TestSend(t *testing.T) {
	w := Workload{Values: 2, PerValue: 3}
	var mu sync.Mutex
	sent := map[string][]string{}
	fails := w.Send(3, 0, func(v, key string, ts, j, try int) (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		sent[v] = append(sent[v], key)
		switch {
		case key == "v00-0001" && try == 0:
			return false, "503 busy" // acknowledged at the second try
		case key == "v01-0001":
			return false, "500 down" // never
		}
		return true, "202"
	})
	if strings.Join(fails, ";") != "v01-0001 never acknowledged: 500 down" {
		t.Fatalf("fails %v", fails)
	}
	if !slices.Equal(sent["v00"], []string{"v00-0000", "v00-0001", "v00-0001", "v00-0002"}) {
		t.Fatalf("v00 sent %v", sent["v00"])
	}
	if !slices.Equal(sent["v01"], []string{"v01-0000", "v01-0001", "v01-0001", "v01-0001"}) {
		t.Fatalf("v01 sent %v", sent["v01"])
	}
}
