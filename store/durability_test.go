package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/store/redistest"
)

func checkDurability(t *testing.T, args ...string) (Durability, string) {
	t.Helper()
	srv := redistest.StartServerWith(t, redistest.Options{Args: args})
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	d, err := r.CheckDurability(context.Background())
	if err != nil {
		t.Fatalf("CheckDurability: %v", err)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].Addr != srv.Addr || len(d.RunIDs) != 1 || len(d.RunIDs[0]) != 40 {
		t.Fatalf("nodes %+v, run ids %q; want the one server %s with its run_id", d.Nodes, d.RunIDs, srv.Addr)
	}
	return d, srv.Addr
}

func TestRedisDurability(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		durable  bool
		gauge    float64
		aof, rdb string
		policy   string
		problems []string // substrings, one per expected problem
	}{
		{
			name: "no persistence", gauge: 0, aof: "no", rdb: "no", policy: "noeviction",
			problems: []string{`has no persistence (appendonly no, save ""): a restart forgets every finished key and their retries are forwarded again`},
		},
		{
			name: "aof", args: []string{"--appendonly", "yes"},
			durable: true, gauge: 1, aof: "yes", rdb: "no", policy: "noeviction",
		},
		{
			name: "rdb", args: []string{"--save", "3600 1"},
			durable: true, gauge: 1, aof: "no", rdb: "yes", policy: "noeviction",
		},
		{
			name: "aof but allkeys-lru", args: []string{"--appendonly", "yes", "--maxmemory-policy", "allkeys-lru"},
			gauge: 0, aof: "yes", rdb: "no", policy: "allkeys-lru",
			problems: []string{"has maxmemory-policy allkeys-lru: once full it evicts keys"},
		},
		{
			// Every clawgate key has a TTL, so volatile-* evicts them too.
			name: "aof but volatile-ttl", args: []string{"--appendonly", "yes", "--maxmemory-policy", "volatile-ttl"},
			gauge: 0, aof: "yes", rdb: "no", policy: "volatile-ttl",
			problems: []string{"has maxmemory-policy volatile-ttl"},
		},
		{
			name: "config refused", args: []string{"--rename-command", "CONFIG", ""},
			gauge: -1, aof: "no", rdb: "unknown", policy: "noeviction",
			problems: []string{"has appendonly no and did not answer CONFIG GET save"},
		},
		{
			name: "config refused with aof", args: []string{"--rename-command", "CONFIG", "", "--appendonly", "yes"},
			durable: true, gauge: 1, aof: "yes", rdb: "unknown", policy: "noeviction",
		},
		{
			name: "nothing at all", args: []string{"--maxmemory-policy", "allkeys-random"},
			gauge: 0, aof: "no", rdb: "no", policy: "allkeys-random",
			problems: []string{"has no persistence", "has maxmemory-policy allkeys-random"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, addr := checkDurability(t, tc.args...)
			if d.Durable() != tc.durable || d.Gauge() != tc.gauge {
				t.Fatalf("Durable %v, Gauge %v; want %v, %v (%+v)", d.Durable(), d.Gauge(), tc.durable, tc.gauge, d)
			}
			if aof, rdb, policy := d.InfoLabels(); aof != tc.aof || rdb != tc.rdb || policy != tc.policy {
				t.Fatalf("InfoLabels = %s, %s, %s; want %s, %s, %s", aof, rdb, policy, tc.aof, tc.rdb, tc.policy)
			}
			if len(d.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d", d.Problems, len(tc.problems))
			}
			for i, want := range tc.problems {
				if p := d.Problems[i]; !strings.Contains(p, want) || !strings.HasPrefix(p, "redis "+addr+" ") {
					t.Fatalf("problem %q does not name %s and say %q", p, addr, want)
				}
			}
			if d.Restarted {
				t.Fatalf("a single check reported a restart")
			}
		})
	}
}

func TestRedisDurabilityWhileDown(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop()
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	d, err := r.CheckDurability(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.HasPrefix(err.Error(), "store: redis durability: ") {
		t.Fatalf("CheckDurability while down = %v, want ErrUnavailable naming the operation", err)
	}
	if d.Durable() || d.Gauge() != -1 {
		t.Fatalf("a failed check: Durable %v, Gauge %v; want false, -1", d.Durable(), d.Gauge())
	}
	if aof, rdb, policy := d.InfoLabels(); aof != "unknown" || rdb != "unknown" || policy != "unknown" {
		t.Fatalf("a failed check's labels = %s, %s, %s", aof, rdb, policy)
	}
}

func TestRedisDurabilityCluster(t *testing.T) {
	addrs := redistest.StartCluster(t)
	r := newTestRedis(t, RedisOptions{Addrs: addrs})
	d, err := r.CheckDurability(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range d.Nodes {
		got = append(got, n.Addr)
	}
	want := slices.Clone(addrs)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(d.RunIDs) != 3 || len(d.Problems) != 3 || d.Gauge() != 0 {
		t.Fatalf("cluster check: nodes %v (want %v), run ids %v, problems %q, gauge %v", got, want, d.RunIDs, d.Problems, d.Gauge())
	}
}

// Durability over several masters is only as good as the worst of them.
func TestDurabilityCombinesMasters(t *testing.T) {
	aof := NodeDurability{Addr: "a", AOF: true, RDBKnown: true, MaxmemoryPolicy: "noeviction"}
	unknown := NodeDurability{Addr: "b", MaxmemoryPolicy: "noeviction", RDBError: "NOPERM"}
	bare := NodeDurability{Addr: "c", RDBKnown: true, MaxmemoryPolicy: "noeviction"}
	lru := NodeDurability{Addr: "d", AOF: true, RDBKnown: true, RDB: true, Save: "60 1", MaxmemoryPolicy: "allkeys-lru"}
	for _, tc := range []struct {
		nodes           []NodeDurability
		gauge           float64
		aof, rdb, pol   string
		wantProblemAddr []string
	}{
		{[]NodeDurability{aof}, 1, "yes", "no", "noeviction", nil},
		{[]NodeDurability{aof, unknown}, -1, "no", "no", "noeviction", []string{"b"}},
		{[]NodeDurability{unknown}, -1, "no", "unknown", "noeviction", []string{"b"}},
		{[]NodeDurability{aof, unknown, bare}, 0, "no", "no", "noeviction", []string{"b", "c"}},
		{[]NodeDurability{lru, aof}, 0, "yes", "no", "noeviction,allkeys-lru", []string{"d"}},
		{nil, -1, "unknown", "unknown", "unknown", nil},
	} {
		d := summarize(slices.Clone(tc.nodes))
		aof, rdb, pol := d.InfoLabels()
		var addrs []string
		for _, p := range d.Problems {
			addrs = append(addrs, strings.Fields(p)[1])
		}
		if d.Gauge() != tc.gauge || aof != tc.aof || rdb != tc.rdb || pol != tc.pol || !slices.Equal(addrs, tc.wantProblemAddr) {
			t.Errorf("%+v: gauge %v, labels %s/%s/%s, problems of %v; want %v, %s/%s/%s, %v",
				tc.nodes, d.Gauge(), aof, rdb, pol, addrs, tc.gauge, tc.aof, tc.rdb, tc.pol, tc.wantProblemAddr)
		}
	}
}

type durabilityReport struct {
	d   Durability
	err error
}

func TestRedisWatchDurabilityDetectsRestart(t *testing.T) {
	srv := redistest.StartServer(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := make(chan durabilityReport)
	r.WatchDurability(ctx, 10*time.Millisecond, func(d Durability, err error) {
		select {
		case reports <- durabilityReport{d, err}:
		case <-ctx.Done():
		}
	})
	next := func() durabilityReport {
		t.Helper()
		select {
		case rep := <-reports:
			return rep
		case <-time.After(10 * time.Second):
			t.Fatal("no durability report")
		}
		panic("unreachable")
	}
	first := next()
	if first.err != nil || first.d.Restarted || first.d.Gauge() != 0 {
		t.Fatalf("first report = %+v, %v", first.d, first.err)
	}
	if again := next(); again.err != nil || again.d.Restarted || !slices.Equal(again.d.RunIDs, first.d.RunIDs) {
		t.Fatalf("second report = %+v, %v; want the same server, not restarted", again.d, again.err)
	}
	srv.Stop()
	for {
		if rep := next(); rep.err != nil {
			if !errors.Is(rep.err, ErrUnavailable) || rep.d.Gauge() != -1 {
				t.Fatalf("report while down = %+v, %v", rep.d, rep.err)
			}
			break
		}
	}
	srv.Start()
	for {
		rep := next()
		if rep.err != nil {
			continue // still reconnecting
		}
		if !rep.d.Restarted || !rep.d.Nodes[0].Restarted || slices.Equal(rep.d.RunIDs, first.d.RunIDs) {
			t.Fatalf("first report after the restart = %+v, want Restarted with a new run_id", rep.d)
		}
		break
	}
	if rep := next(); rep.err != nil || rep.d.Restarted {
		t.Fatalf("the report after that = %+v, %v; want no second restart", rep.d, rep.err)
	}
	cancel()
}
