// Package ordertest is what the per-object order tests share (server's,
// with instances in one process, and cmd/clawgate's, with a killed
// process): the workload, and the check of what the upstream saw.
package ordertest

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Try is one try of an ordered event as the upstream saw it.
type Try struct {
	Inst, Key  string // the instance that sent it ("" when not told), its key
	Start, End time.Time
	Accepted   bool // answered 2xx to a gateway still waiting for it
	Cut        bool // the gateway hung up first (its instance stopped or died)
}

// Workload is Values order values ("v00", "v01", ...) of PerValue events
// each ("v07-0012": value v07's thirteenth), sent in that order per value.
// Every fifth event of a value is stale: its stale value (TS) is older
// than the event's before it, so it is skipped, never sent.
type Workload struct{ Values, PerValue int }

// Value is the vi-th order value.
func (Workload) Value(vi int) string { return fmt.Sprintf("v%02d", vi) }

// Key is value v's j-th event's key.
func (Workload) Key(v string, j int) string { return fmt.Sprintf("%s-%04d", v, j) }

// Stale tells whether a value's j-th event is stale.
func (Workload) Stale(j int) bool { return j%5 == 4 }

// TS is a value's j-th event's stale value (json:ts): rising by 10, the
// stale ones 20 below the event before them.
func (w Workload) TS(j int) int {
	if w.Stale(j) {
		return (j - 2) * 10
	}
	return j * 10
}

// Events are the workload's keys, the keys each value is to deliver in
// order, and the stale keys.
func (w Workload) Events() (keys []string, want map[string][]string, stale []string) {
	want = map[string][]string{}
	for vi := range w.Values {
		v := w.Value(vi)
		for j := range w.PerValue {
			k := w.Key(v, j)
			keys = append(keys, k)
			if w.Stale(j) {
				stale = append(stale, k)
			} else {
				want[v] = append(want[v], k)
			}
		}
	}
	return keys, want, stale
}

// Result is what Check found.
type Result struct {
	Failures []string // each order the upstream saw broken
	Cuts     int      // tries the gateway hung up on
	Twice    int      // events accepted twice in a row (a try accepted, then tried again)
}

// Check reads tries (by value, in the order they began) against the
// workload: per value, the events accepted are exactly want's, in order
// (an event accepted twice in a row counts once, in Twice); no stale
// event reaches the upstream; no try begins while another try of its
// value is on its way (with ignoreCut, tries the gateway cut are left out
// of that: a stopped instance's hung-up try may end after its successor
// began).
func (w Workload) Check(tries map[string][]*Try, ignoreCut bool) Result {
	_, want, stale := w.Events()
	var r Result
	for vi := range w.Values {
		v := w.Value(vi)
		var got []string
		for i, tr := range tries[v] {
			if tr.Cut {
				r.Cuts++
			}
			if slices.Contains(stale, tr.Key) {
				r.Failures = append(r.Failures, fmt.Sprintf("value %s: stale event %s reached the upstream (%s)", v, tr.Key, tr.Inst))
			}
			if tr.Accepted {
				if len(got) > 0 && got[len(got)-1] == tr.Key {
					r.Twice++
				} else {
					got = append(got, tr.Key)
				}
			}
			for _, other := range tries[v][:i] {
				if ignoreCut && (tr.Cut || other.Cut) {
					continue
				}
				if other.End.After(tr.Start) {
					r.Failures = append(r.Failures, fmt.Sprintf("value %s: a try of %s (%s) began while a try of %s (%s) was on its way", v, tr.Key, tr.Inst, other.Key, other.Inst))
				}
			}
		}
		if !slices.Equal(got, want[v]) {
			r.Failures = append(r.Failures, fmt.Sprintf("value %s: the upstream accepted %v, want %v", v, got, want[v]))
		}
	}
	return r
}

// Send delivers the workload as a provider does: a goroutine per value,
// its events one after another, each sent again (after pause, at most
// tries times) until send reports it acknowledged. send gets the event
// (its value, key, stale value, index in its value) and the try's number,
// from which the tests pick an instance; it returns whether the answer
// acknowledges the event and the answer, for the failure. Send returns
// the events never acknowledged, with their last answer.
func (w Workload) Send(tries int, pause time.Duration, send func(v, key string, ts, j, try int) (bool, string)) []string {
	var mu sync.Mutex
	var fails []string
	var wg sync.WaitGroup
	for vi := range w.Values {
		v := w.Value(vi)
		wg.Go(func() {
			for j := range w.PerValue {
				key := w.Key(v, j)
				ok, last := false, ""
				for try := 0; try < tries && !ok; try++ {
					if ok, last = send(v, key, w.TS(j), j, try); !ok {
						time.Sleep(pause)
					}
				}
				if !ok {
					mu.Lock()
					fails = append(fails, key+" never acknowledged: "+last)
					mu.Unlock()
					return // the value's later events would wait for it
				}
			}
		})
	}
	wg.Wait()
	return fails
}
