package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
)

// TestSoakShort runs the short soak against the real binary, a real
// redis-server and two instances, on each front door: no acknowledged
// event lost, none undelivered, no double the kills do not explain.
func TestSoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak takes about half a minute per front door; skipped under -short")
	}
	for _, door := range doortest.All {
		t.Run(doortest.Name(door), func(t *testing.T) {
			o := Preset(true)
			o.Server = door
			runSoak(t, o)
		})
	}
}

// TestSoakShortQueue runs a brief soak of a queue route (delivery: queue
// on Redis Streams): two instances, one SIGKILLed, one SIGTERMed, Redis
// restarted, provider duplicates and upstream 500s and hangs: every
// acknowledged (202) event is delivered, none twice outside the kill
// windows.
func TestSoakShortQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("the queue soak takes about half a minute; skipped under -short")
	}
	o := Preset(true)
	o.Queue, o.DrainWait = true, 30*time.Second
	o.Events, o.Rate, o.Kills, o.Terms, o.RedisRestarts, o.Duration = 800, 80, 1, 1, 1, 120*time.Second
	runSoak(t, o)
}

// TestSoakShortQueueKafka is TestSoakShortQueue on Kafka (queue.backend:
// kafka, one kfake broker inside the test process, the keys' ledger on the
// Redis that is restarted), with a broker restart as well: a SIGKILLed
// instance's partitions move after the group's session timeout and its
// unsettled records are read again, so the drain waits longer.
func TestSoakShortQueueKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("the Kafka queue soak takes about a minute; skipped under -short")
	}
	o := Preset(true)
	o.Queue, o.QueueBackend, o.DrainWait = true, "kafka", 40*time.Second
	o.Events, o.Rate, o.Kills, o.Terms, o.RedisRestarts, o.KafkaRestarts, o.Duration = 400, 40, 1, 1, 1, 1, 120*time.Second
	runSoak(t, o)
}

// runSoak runs the soak o describes and fails the test with its report
// when anything was lost, left undelivered, or doubled outside the kill
// windows.
func runSoak(t *testing.T, o Options) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH: `make test` installs it (scripts/ensure-pkg.sh), or apt-get install -y redis-server")
	}
	o.Verbose = testing.Verbose()
	o.Log = tlog{t}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	if rep.Failed() {
		t.Fatalf("soak failed:\n%s", b.String())
	}
	// Failed covers these; said once more, as the test's promise.
	if rep.Lost != 0 || rep.Undelivered != 0 || len(rep.Outside) != 0 || rep.Acknowledged != o.Events {
		t.Fatalf("lost %d, undelivered %d, doubles outside kill windows %d, acknowledged %d of %d:\n%s",
			rep.Lost, rep.Undelivered, len(rep.Outside), rep.Acknowledged, o.Events, b.String())
	}
	t.Logf("\n%s", b.String())
}

// The broker restarts go between the other faults, and without any the
// plan of a seed stays what it was (the soak's published runs name seeds).
func TestPlanFaultsKafkaRestarts(t *testing.T) {
	o := Preset(true)
	o.Kills, o.Terms, o.RedisRestarts = 1, 1, 1
	base := planFaults(o)
	o.KafkaRestarts = 1
	withBroker := planFaults(o)
	if len(withBroker) != len(base)+1 {
		t.Fatalf("%d faults with a broker restart, want %d", len(withBroker), len(base)+1)
	}
	var kinds []string
	for i, f := range withBroker {
		switch {
		case f.broker:
			kinds = append(kinds, "broker")
		case f.kill:
			kinds = append(kinds, f.sig.String())
		default:
			kinds = append(kinds, "redis")
		}
		if i > 0 && withBroker[i-1].at >= f.at {
			t.Errorf("fault %d at %v, not after fault %d at %v", i, f.at, i-1, withBroker[i-1].at)
		}
	}
	want := []string{"killed", "redis", "broker", "terminated"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("faults %v, want %v", kinds, want)
	}
	o.KafkaRestarts = 3
	o.Kills, o.Terms, o.RedisRestarts = 0, 0, 0
	for i, f := range planFaults(o) {
		if !f.broker {
			t.Errorf("fault %d is not a broker restart", i)
		}
	}
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestClassifyDoubles(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	acc := []acceptance{
		// a: instance 0 accepted at 1.0, killed at 1.1: inside.
		{ID: "a", Inst: 0, Recv: at(0.99), At: at(1.0)},
		{ID: "a", Inst: 1, Recv: at(6), At: at(6)},
		// b: instance 1 accepted at 2.0, never killed: outside, although
		// instance 0 was killed at 1.1.
		{ID: "b", Inst: 1, Recv: at(1.99), At: at(2.0)},
		{ID: "b", Inst: 0, Recv: at(7), At: at(7)},
		// c: instance 0 accepted at 10, killed at 14.5 > 10 + lock_ttl: outside.
		{ID: "c", Inst: 0, Recv: at(9.99), At: at(10)},
		{ID: "c", Inst: 1, Recv: at(20), At: at(20)},
		// d: killed after the upstream received it, before its 200 was
		// written (the process was seen dead first): inside.
		{ID: "d", Inst: 1, Recv: at(29.9), At: at(30.001)},
		{ID: "d", Inst: 0, Recv: at(35), At: at(35)},
		// e: three copies; the second is explained by the kill at 1.1, the
		// third (after instance 1's copy, no kill of 1 near it) is not.
		{ID: "e", Inst: 1, Recv: at(50), At: at(50)},
		{ID: "e", Inst: 0, Recv: at(0.5), At: at(0.6)},
		{ID: "e", Inst: 1, Recv: at(40), At: at(40)},
		// f: accepted once: no double. A kill before it was received does not count.
		{ID: "f", Inst: 0, Recv: at(14.6), At: at(14.7)},
	}
	kills := []killRec{{Inst: 0, At: at(1.1)}, {Inst: 0, At: at(14.5)}, {Inst: 1, At: at(30)}}
	ds := classifyDoubles(acc, kills, nil, 4*time.Second)
	got := map[string][]bool{}
	for _, d := range ds {
		got[d.ID] = append(got[d.ID], d.Kill != nil)
	}
	want := map[string][]bool{"a": {true}, "b": {false}, "c": {false}, "d": {true}, "e": {true, false}}
	if len(got) != len(want) {
		t.Fatalf("doubles %v, want %v", got, want)
	}
	for id, w := range want {
		g := got[id]
		if len(g) != len(w) {
			t.Fatalf("%s: %v, want %v", id, g, w)
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s copy %d: inside=%v, want %v", id, i+2, g[i], w[i])
			}
		}
	}
	// Inside exactly at the edge of lock_ttl, outside just past it.
	edge := []acceptance{{ID: "x", Inst: 0, Recv: at(100), At: at(100)}, {ID: "x", Inst: 1, Recv: at(200), At: at(200)}}
	if d := classifyDoubles(edge, []killRec{{Inst: 0, At: at(104)}}, nil, 4*time.Second); d[0].Kill == nil {
		t.Error("a kill exactly lock_ttl after the 200 is inside")
	}
	if d := classifyDoubles(edge, []killRec{{Inst: 0, At: at(104.001)}}, nil, 4*time.Second); d[0].Kill != nil {
		t.Error("a kill past lock_ttl after the 200 is outside")
	}
}

// Regression: TestSoakShort failed with 7 doubles "outside the kill
// windows" whose first 200 came while Redis was SIGKILLed: their finishes
// could not be recorded before their locks ran out (Redis down 2.3 s, and
// the gateway's Redis client retries a failed dial once a second), which
// the guarantees leave out ("Redis unreachable for the rest of the lock's
// life"). Such a double is now inside a Redis outage window; one whose
// 200 came while Redis was up, or whose lock outlived the outage and the
// reconnect, is not.
func TestClassifyDoublesRedisOutage(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	outage := []restartRec{{Signal: "SIGKILL", Stopped: at(10.208), Started: at(12.528)}}
	for _, tc := range []struct {
		name           string
		recv, accepted float64
		excused        bool
	}{
		{"evt_906: 200 at the kill, lock ends before the reconnect", 9.846, 10.208, true},
		{"evt_799: 200 while down, lock deadline inside the reconnect", 10.255, 10.279, true},
		{"200 before Redis went down", 9.0, 10.1, false},
		{"200 after Redis was back", 12.6, 12.7, false},
		{"lock outlives the outage and the reconnect", 11.2, 11.3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := []acceptance{{ID: "x", Inst: 1, Recv: at(tc.recv), At: at(tc.accepted)}, {ID: "x", Inst: 0, Recv: at(14), At: at(14)}}
			d := classifyDoubles(acc, nil, outage, 4*time.Second)
			if len(d) != 1 || d[0].Excused() != tc.excused {
				t.Fatalf("doubles %+v, want one, excused %v", d, tc.excused)
			}
		})
	}
}
