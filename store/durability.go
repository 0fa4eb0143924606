package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability is what a check of every Redis master found about whether the
// keys clawgate writes survive a restart and memory pressure. A finished
// key that Redis loses is a key whose next retry is forwarded again.
type Durability struct {
	// AOF: every master has the append-only file on (aof_enabled:1).
	AOF bool
	// RDB: every master answered CONFIG GET save with snapshots configured.
	RDB bool
	// RDBKnown: every master answered CONFIG GET save. Managed Redis often
	// refuses CONFIG; such a master's snapshots are unknown, not missing.
	RDBKnown bool
	// MaxmemoryPolicy is the masters' maxmemory-policy; distinct policies
	// are listed in order, joined by ",".
	MaxmemoryPolicy string
	// RunIDs are the masters' run_id, in the order of Nodes.
	RunIDs []string
	// Nodes are the masters, by address.
	Nodes []NodeDurability
	// Restarted: a master's run_id differs from the one the previous
	// successful check of the same WatchDurability saw at its address (the
	// server restarted, with or without its data). Always false from
	// CheckDurability.
	Restarted bool
	// Problems say, one plain sentence each, why Durable is false.
	Problems []string
}

// NodeDurability is one master's part of a Durability.
type NodeDurability struct {
	// Addr is the master's address (for a Sentinel-managed master, as the
	// master reports it; "sentinel master" when it does not say).
	Addr  string
	RunID string
	AOF   bool
	// RDB and RDBKnown as in Durability; Save is CONFIG GET save's value
	// ("" when snapshots are off or unknown).
	RDB, RDBKnown bool
	Save          string
	// RDBError is why CONFIG GET save failed (RDBKnown false).
	RDBError        string
	MaxmemoryPolicy string
	// Maxmemory is the memory limit in bytes; 0 is none.
	Maxmemory int64
	// Restarted: as Durability.Restarted, for this master.
	Restarted bool
}

// safePolicy is the one maxmemory-policy under which Redis never evicts a
// clawgate key: the volatile-* policies evict keys with a TTL, and every
// clawgate key has one.
const safePolicy = "noeviction"

// persistent reports whether the master writes its data to disk: the
// append-only file, or RDB snapshots. RDB alone still loses the writes
// made since the last snapshot when the server crashes.
func (n NodeDurability) persistent() bool { return n.AOF || (n.RDBKnown && n.RDB) }

func (n NodeDurability) durable() bool { return n.persistent() && n.MaxmemoryPolicy == safePolicy }

// lossy reports whether keys can certainly be lost on this master.
func (n NodeDurability) lossy() bool {
	return (!n.AOF && n.RDBKnown && !n.RDB) || n.MaxmemoryPolicy != safePolicy
}

// Durable reports whether no key can be lost by a restart or an eviction:
// every master persists (AOF, or RDB snapshots) and has maxmemory-policy
// noeviction. It is false when nothing was checked, and when a master
// without AOF refused CONFIG GET save (unknown).
func (d Durability) Durable() bool {
	if len(d.Nodes) == 0 {
		return false
	}
	for _, n := range d.Nodes {
		if !n.durable() {
			return false
		}
	}
	return true
}

// Gauge is the value of clawgate_store_durable: 1 when Durable, 0 when a
// master certainly loses keys (no persistence at all, or an evicting
// maxmemory-policy), -1 when unknown (no check answered, or a master
// without AOF refused CONFIG GET save).
func (d Durability) Gauge() float64 {
	if d.Durable() {
		return 1
	}
	for _, n := range d.Nodes {
		if n.lossy() {
			return 0
		}
	}
	return -1
}

// InfoLabels are the labels of clawgate_store_persistence_info: aof "yes"
// when every master has AOF on, else "no"; rdb "yes" when every master
// snapshots, "no" when one certainly does not, else "unknown"; and the
// maxmemory-policy. All three are "unknown" when nothing was checked (a
// failed check).
func (d Durability) InfoLabels() (aof, rdb, policy string) {
	if len(d.Nodes) == 0 {
		return "unknown", "unknown", "unknown"
	}
	aof, rdb = "no", "unknown"
	if d.AOF {
		aof = "yes"
	}
	switch {
	case d.RDB:
		rdb = "yes"
	case slices.ContainsFunc(d.Nodes, func(n NodeDurability) bool { return n.RDBKnown && !n.RDB }):
		rdb = "no"
	}
	return aof, rdb, d.MaxmemoryPolicy
}

// CheckDurability asks every master (the single server, the
// Sentinel-managed master, or each Cluster master) for INFO server,
// persistence and memory, and CONFIG GET save, in one round trip per
// master. A refused CONFIG leaves RDBKnown false; any other failure is an
// error wrapping ErrUnavailable, with no Durability.
func (r *Redis) CheckDurability(ctx context.Context) (Durability, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		nodes []NodeDurability
	)
	check := func(ctx context.Context, c *redis.Client) error {
		n, err := checkNode(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		nodes = append(nodes, n)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := r.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	default:
		err = fmt.Errorf("unsupported redis client %T", r.client)
	}
	if err != nil {
		return Durability{}, r.fail("durability", err)
	}
	return summarize(nodes), nil
}

// checkNode reads one master's settings in one pipeline.
func checkNode(ctx context.Context, c *redis.Client) (NodeDurability, error) {
	pipe := c.Pipeline()
	server := pipe.Info(ctx, "server")
	persistence := pipe.Info(ctx, "persistence")
	memory := pipe.Info(ctx, "memory")
	save := pipe.ConfigGet(ctx, "save")
	addr := c.Options().Addr
	var client *redis.ClientInfoCmd
	if addr == "FailoverClient" {
		// The Sentinel client does not say which master it reached; the
		// master's own side of the connection does.
		client = pipe.ClientInfo(ctx)
	}
	var n NodeDurability
	if _, err := pipe.Exec(ctx); err != nil && !isRedisError(err) {
		// Not a refused command (CONFIG may be): the server did not answer.
		return n, fmt.Errorf("%s: %w", addr, err)
	}
	for section, cmd := range map[string]*redis.StringCmd{"server": server, "persistence": persistence, "memory": memory} {
		if err := cmd.Err(); err != nil {
			return n, fmt.Errorf("%s: INFO %s: %w", addr, section, err)
		}
	}
	srv, pers, mem := parseInfo(server.Val()), parseInfo(persistence.Val()), parseInfo(memory.Val())
	n.Addr = addr
	if client != nil {
		n.Addr = "sentinel master"
		if ci, err := client.Result(); err == nil && ci.LAddr != "" {
			n.Addr = ci.LAddr
		}
	}
	n.RunID = srv["run_id"]
	n.AOF = pers["aof_enabled"] == "1"
	n.MaxmemoryPolicy = mem["maxmemory_policy"]
	n.Maxmemory, _ = strconv.ParseInt(mem["maxmemory"], 10, 64)
	if cfg, err := save.Result(); err != nil {
		n.RDBError = err.Error()
	} else if v, ok := cfg["save"]; ok {
		n.RDBKnown = true
		n.Save = v
		n.RDB = strings.TrimSpace(v) != ""
	} else {
		n.RDBError = "CONFIG GET save returned no value"
	}
	return n, nil
}

// parseInfo reads the "field:value" lines of an INFO reply.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			m[k] = v
		}
	}
	return m
}

// summarize combines the masters' answers, sorted by address.
func summarize(nodes []NodeDurability) Durability {
	slices.SortFunc(nodes, func(a, b NodeDurability) int { return strings.Compare(a.Addr, b.Addr) })
	d := Durability{AOF: true, RDB: true, RDBKnown: true, Nodes: nodes}
	var policies []string
	for _, n := range nodes {
		d.AOF = d.AOF && n.AOF
		d.RDB = d.RDB && n.RDBKnown && n.RDB
		d.RDBKnown = d.RDBKnown && n.RDBKnown
		d.RunIDs = append(d.RunIDs, n.RunID)
		if !slices.Contains(policies, n.MaxmemoryPolicy) {
			policies = append(policies, n.MaxmemoryPolicy)
		}
		d.Problems = append(d.Problems, n.problems()...)
	}
	if len(nodes) == 0 {
		d.AOF, d.RDB, d.RDBKnown = false, false, false
	}
	d.MaxmemoryPolicy = strings.Join(policies, ",")
	return d
}

// problems are the reasons this master can lose keys, one sentence each.
func (n NodeDurability) problems() []string {
	var p []string
	switch {
	case n.persistent():
	case n.RDBKnown:
		p = append(p, fmt.Sprintf("redis %s has no persistence (appendonly no, save %q): a restart forgets every finished key and their retries are forwarded again", n.Addr, n.Save))
	default:
		p = append(p, fmt.Sprintf("redis %s has appendonly no and did not answer CONFIG GET save (%s), so whether it snapshots is unknown: without snapshots a restart forgets every finished key and their retries are forwarded again", n.Addr, n.RDBError))
	}
	if n.MaxmemoryPolicy != safePolicy {
		p = append(p, fmt.Sprintf("redis %s has maxmemory-policy %s: once full it evicts keys, every clawgate key can be evicted (each has a TTL), and the retries of an evicted finished key are forwarded again; set maxmemory-policy noeviction", n.Addr, n.MaxmemoryPolicy))
	}
	return p
}

// DefaultDurabilityInterval is how often WatchDurability checks when asked
// for a non-positive interval.
const DefaultDurabilityInterval = time.Minute

// WatchDurability checks the masters at once and then every interval until
// ctx is done, in a goroutine of its own, and calls report with each
// result (a zero Durability and the error when a check fails). A master
// whose run_id changed since the last successful check is reported as
// Restarted, so a restart shows in the first check that reaches the
// server again. report is called from that one goroutine, which ends once
// ctx is done; the caller logs on change and sets the metrics, e.g.
//
//	aof, rdb, policy := d.InfoLabels()
//	m.SetStoreDurability(aof, rdb, policy, d.Gauge())
func (r *Redis) WatchDurability(ctx context.Context, interval time.Duration, report func(Durability, error)) {
	if interval <= 0 {
		interval = DefaultDurabilityInterval
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		var last map[string]string // address -> run_id of the last successful check
		for {
			d, err := r.CheckDurability(ctx)
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				seen := make(map[string]string, len(d.Nodes))
				for i, n := range d.Nodes {
					if prev, ok := last[n.Addr]; ok && prev != n.RunID {
						d.Nodes[i].Restarted = true
						d.Restarted = true
					}
					seen[n.Addr] = n.RunID
				}
				last = seen
			}
			report(d, err)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
