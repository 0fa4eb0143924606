package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

// The invariant of the Redis queue, read from the raw keys: every
// accepted event is in exactly one place.

// checkInvariant fails the test when route's raw Redis keys break the
// queue's invariant.
func checkInvariant(t testing.TB, c redis.UniversalClient, prefix, route string) {
	t.Helper()
	if problems := invariantProblems(t, c, prefix, route); len(problems) > 0 {
		t.Fatalf("queue invariant broken:\n  %s", strings.Join(problems, "\n  "))
	}
}

// invariantProblems lists how route's raw keys break the invariant, over
// every shard recorded by Prepare (one when none is).
func invariantProblems(t testing.TB, c redis.UniversalClient, prefix, route string) []string {
	t.Helper()
	ctx := context.Background()
	shards := 1
	n, err := c.Get(ctx, prefix+"webhook_queue_meta:{q:"+route+"}").Int()
	switch {
	case err == nil:
		shards = n
	case !errors.Is(err, redis.Nil):
		t.Fatalf("reading the shard count: %v", err)
	}
	var problems []string
	for s := range shards {
		problems = append(problems, shardProblems(t, c, prefix, route, s)...)
	}
	return problems
}

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanKeys returns every key that starts with prefix, over every master of
// a cluster.
func scanKeys(t testing.TB, c redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, cl redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := cl.Scan(ctx, cursor, globEscape(prefix)+"*", 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, keys...)
			mu.Unlock()
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatalf("SCAN %s*: %v", prefix, err)
	}
	sort.Strings(out)
	return out
}

type rawEntry struct{ id, eid, tok, key string }

func shardProblems(t testing.TB, c redis.UniversalClient, prefix, route string, shard int) []string {
	t.Helper()
	ctx := context.Background()
	tag := "{q:" + route + ":" + strconv.Itoa(shard) + "}"
	qkeyPrefix := prefix + "webhook_qkey:" + tag
	eventPrefix := prefix + "webhook_event:" + tag
	stream := prefix + "webhook_queue:" + tag
	retrySet := prefix + "webhook_retry:" + tag
	ageSet := prefix + "webhook_age:" + tag
	dlq := prefix + "webhook_dlq:" + tag
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("shard %d: ", shard)+fmt.Sprintf(format, args...))
	}
	must := func(what string, err error) {
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("reading %s: %v", what, err)
		}
	}

	// The ready stream, its pending entries and its group's position.
	msgs, err := c.XRange(ctx, stream, "-", "+").Result()
	must("XRANGE "+stream, err)
	entries := map[string]rawEntry{}
	byEvent := map[string][]rawEntry{}
	for _, m := range msgs {
		e := rawEntry{id: m.ID}
		e.eid, _ = m.Values["e"].(string)
		e.tok, _ = m.Values["t"].(string)
		e.key, _ = m.Values["k"].(string)
		entries[m.ID] = e
		byEvent[e.eid] = append(byEvent[e.eid], e)
	}
	pel := map[string]bool{}
	lastDelivered := ""
	groups, err := c.XInfoGroups(ctx, stream).Result()
	if err == nil {
		for _, g := range groups {
			if g.Name == Group {
				lastDelivered = g.LastDeliveredID
			}
		}
	}
	if lastDelivered != "" {
		p, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: Group, Start: "-", End: "+", Count: 1 << 20}).Result()
		must("XPENDING "+stream, err)
		for _, x := range p {
			pel[x.ID] = true
			if _, ok := entries[x.ID]; !ok {
				bad("pending entry %s is not in the stream", x.ID)
			}
		}
		for id := range entries {
			if !pel[id] && !streamIDLess(lastDelivered, id) {
				bad("entry %s was delivered to the group but is neither pending nor deleted: nobody will read it again", id)
			}
		}
	}

	// Retries: "eid|tok|key".
	members, err := c.ZRange(ctx, retrySet, 0, -1).Result()
	must("ZRANGE "+retrySet, err)
	retries := map[string][]rawEntry{}
	for _, m := range members {
		parts := strings.SplitN(m, "|", 3)
		if len(parts) != 3 {
			bad("malformed retry member %q", m)
			continue
		}
		retries[parts[0]] = append(retries[parts[0]], rawEntry{eid: parts[0], tok: parts[1], key: parts[2]})
	}

	ageMembers, err := c.ZRange(ctx, ageSet, 0, -1).Result()
	must("ZRANGE "+ageSet, err)
	age := map[string]bool{}
	for _, m := range ageMembers {
		age[m] = true
	}

	dlqMsgs, err := c.XRange(ctx, dlq, "-", "+").Result()
	must("XRANGE "+dlq, err)
	inDLQ := map[string][]string{} // eid -> DLQ entry ids
	for _, m := range dlqMsgs {
		eid, _ := m.Values["e"].(string)
		inDLQ[eid] = append(inDLQ[eid], m.ID)
	}

	events := map[string]map[string]string{}
	eventKeys := scanKeys(t, c, eventPrefix)
	eventHashes := make([]*redis.MapStringStringCmd, len(eventKeys))
	pipe := c.Pipeline()
	for i, k := range eventKeys {
		eventHashes[i] = pipe.HGetAll(ctx, k)
	}
	if len(eventKeys) > 0 {
		_, err := pipe.Exec(ctx)
		must("the event hashes", err)
	}
	for i, k := range eventKeys {
		if h := eventHashes[i].Val(); len(h) > 0 {
			events[strings.TrimPrefix(k, eventPrefix)] = h
		}
	}

	// Every key record.
	keyOfEvent := map[string]string{}
	stateOfEvent := map[string]string{}
	keyNames := scanKeys(t, c, qkeyPrefix)
	keyHashes := make([]*redis.MapStringStringCmd, len(keyNames))
	keyTTLs := make([]*redis.DurationCmd, len(keyNames))
	pipe = c.Pipeline()
	for i, k := range keyNames {
		keyHashes[i] = pipe.HGetAll(ctx, k)
		keyTTLs[i] = pipe.PTTL(ctx, k)
	}
	if len(keyNames) > 0 {
		_, err := pipe.Exec(ctx)
		must("the key hashes", err)
	}
	for i, k := range keyNames {
		name := strings.TrimPrefix(k, qkeyPrefix)
		h, ttl := keyHashes[i].Val(), keyTTLs[i].Val()
		if len(h) == 0 {
			continue // expired between SCAN and HGETALL
		}
		eid, st, tok := h["eid"], h["st"], h["tok"]
		keyOfEvent[eid], stateOfEvent[eid] = name, st
		ev := events[eid]
		switch st {
		case "queued":
			if ttl >= 0 {
				bad("queued key %q expires (PTTL %v)", name, ttl)
			}
			if ev == nil {
				bad("queued key %q: event %s has no hash", name, eid)
			} else {
				if ev["key"] != name {
					bad("queued key %q: event %s names key %q", name, eid, ev["key"])
				}
			}
			if h["dlq"] != "" || ev["dlq"] != "" {
				bad("queued key %q (event %s) still names DLQ entry %s%s", name, eid, h["dlq"], ev["dlq"])
			}
			live := 0
			for _, e := range byEvent[eid] {
				if e.tok == tok {
					live++
					if e.key != name {
						bad("queued key %q: entry %s names key %q", name, e.id, e.key)
					}
				}
			}
			for _, r := range retries[eid] {
				if r.tok == tok {
					live++
					if r.key != name {
						bad("queued key %q: retry names key %q", name, r.key)
					}
				}
			}
			if live != 1 {
				bad("queued key %q (event %s, tok %s) has %d live places (stream entries and retries with its token), want exactly 1", name, eid, tok, live)
			}
			if !age[eid] {
				bad("queued key %q: event %s is not in the age set", name, eid)
			}
			if len(inDLQ[eid]) != 0 {
				bad("queued key %q: event %s is in the DLQ", name, eid)
			}
		case "dead":
			if tok != "" {
				bad("dead key %q keeps a token", name)
			}
			if age[eid] {
				bad("dead key %q: event %s is in the age set", name, eid)
			}
			if ev == nil {
				// Purged: only the key is kept, for its retention.
				if len(inDLQ[eid]) != 0 || h["dlq"] != "" {
					bad("purged key %q: event %s is still in the DLQ (%v) or named by the key (%q)", name, eid, inDLQ[eid], h["dlq"])
				}
				if ttl < 0 {
					bad("purged key %q never expires", name)
				}
				break
			}
			if len(inDLQ[eid]) != 1 {
				bad("dead key %q: event %s is in the DLQ %d times, want once", name, eid, len(inDLQ[eid]))
			} else if h["dlq"] != inDLQ[eid][0] || ev["dlq"] != inDLQ[eid][0] {
				bad("dead key %q: event %s: the key names DLQ entry %q and the event %q, the DLQ holds it as %s", name, eid, h["dlq"], ev["dlq"], inDLQ[eid][0])
			}
			if ttl >= 0 {
				bad("dead key %q expires before it is purged (PTTL %v)", name, ttl)
			}
		case "done":
			if ev != nil {
				bad("finished key %q: event %s still has a hash", name, eid)
			}
			if age[eid] {
				bad("finished key %q: event %s is in the age set", name, eid)
			}
			if len(inDLQ[eid]) != 0 {
				bad("finished key %q: event %s is in the DLQ", name, eid)
			}
			if ttl < 0 {
				bad("finished key %q never expires", name)
			}
			if h["rec"] == "" {
				bad("finished key %q has no record", name)
			}
		default:
			bad("key %q in state %q", name, st)
		}
	}
	for eid := range age {
		if stateOfEvent[eid] != "queued" {
			bad("age member %s has no queued key (key %q, state %q)", eid, keyOfEvent[eid], stateOfEvent[eid])
		}
	}
	for eid, ids := range inDLQ {
		if stateOfEvent[eid] != "dead" || events[eid] == nil {
			bad("DLQ entries %v of event %s have no dead-lettered key and event (key %q, state %q)", ids, eid, keyOfEvent[eid], stateOfEvent[eid])
		}
	}
	for eid, h := range events {
		if st := stateOfEvent[eid]; st != "queued" && st != "dead" || keyOfEvent[eid] != h["key"] {
			bad("event %s (key %q) is left without its key record (state %q)", eid, h["key"], st)
		}
	}
	// The DLQ's byte count is its events' payloads.
	var dlqBytes int64
	for eid := range inDLQ {
		dlqBytes += int64(len(events[eid]["req"]))
	}
	counted, err := c.Get(ctx, prefix+"webhook_dlq_bytes:"+tag).Int64()
	must("the DLQ byte count", err)
	if counted != dlqBytes {
		bad("the DLQ byte count is %d, its events' payloads %d", counted, dlqBytes)
	}
	return problems
}

// newInvariantRedis returns a queue on a fresh redis-server, its raw
// client, and a check that fails the test, naming step, when the
// invariant is broken.
func newInvariantRedis(t *testing.T) (*Redis, *redis.Client, func(step string)) {
	t.Helper()
	c := newRedisClient(t, redistest.Start(t))
	b := NewRedis(c, "test:", 0)
	if err := b.Prepare(context.Background(), testRoute, 1); err != nil {
		t.Fatal(err)
	}
	return b, c, func(step string) {
		t.Helper()
		if p := invariantProblems(t, c, "test:", testRoute); len(p) > 0 {
			t.Fatalf("after %s: queue invariant broken:\n  %s", step, strings.Join(p, "\n  "))
		}
	}
}

func TestRedisInvariantScripted(t *testing.T) {
	b, _, check := newInvariantRedis(t)
	ctx := context.Background()
	check("start")
	type scriptStep struct {
		name string
		do   func(t *testing.T)
	}
	var steps []scriptStep
	var l Lease
	var j Job
	var ids = map[string]string{}
	step := func(name string, do func(t *testing.T)) {
		steps = append(steps, scriptStep{name, do})
	}
	step("enqueue", func(t *testing.T) {
		for _, k := range []string{"a", "b", "c", "d"} {
			ids[k] = mustEnqueue(t, b, testEntry(k, "fp"), 100).ID
		}
	})
	step("enqueue a copy", func(t *testing.T) { mustEnqueue(t, b, testEntry("a", "fp"), 100) })
	step("read", func(t *testing.T) { l = readOne(t, b, "c1") })
	step("begin", func(t *testing.T) { j = mustBegin(t, b, l) })
	step("retry", func(t *testing.T) {
		mustSettle(t, b, "c1", j, Settlement{Kind: SettleRetry, Due: msNow()}, Recorded)
	})
	step("promote", func(t *testing.T) {
		if n, err := b.Promote(ctx, testRoute, 0, msNow().Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("Promote = %d, %v", n, err)
		}
	})
	step("read all", func(t *testing.T) {
		if ls := tryRead(t, b, "c1", 10); len(ls) != 4 {
			t.Fatalf("read %d entries, want 4", len(ls))
		}
	})
	step("reclaim", func(t *testing.T) {
		ls, err := b.Reclaim(ctx, testRoute, 0, "c2", 0)
		if err != nil || len(ls) != 4 {
			t.Fatalf("Reclaim = %d, %v", len(ls), err)
		}
		for _, x := range ls {
			if x.Key == "a" {
				l = x
			}
		}
	})
	step("begin a", func(t *testing.T) { j = mustBegin(t, b, l) })
	step("dead", func(t *testing.T) { mustSettle(t, b, "c2", j, dead("exhausted", 500, msNow()), Recorded) })
	step("copy of the dead", func(t *testing.T) { mustEnqueue(t, b, testEntry("a", "fp"), 100) })
	step("replay", func(t *testing.T) {
		if err := b.Replay(ctx, testRoute, ids["a"]); err != nil {
			t.Fatal(err)
		}
	})
	step("dead again", func(t *testing.T) {
		j := mustBegin(t, b, readOne(t, b, "c2"))
		mustSettle(t, b, "c2", j, dead("rejected:400", 400, msNow()), Recorded)
	})
	step("purge", func(t *testing.T) {
		if err := b.Purge(ctx, testRoute, ids["a"], time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	step("delete a queued key", func(t *testing.T) {
		if _, err := b.Delete(ctx, testRoute, "b"); err != nil {
			t.Fatal(err)
		}
	})
	step("delete a purged key", func(t *testing.T) {
		if _, err := b.Delete(ctx, testRoute, "a"); err != nil {
			t.Fatal(err)
		}
	})
	step("delete an absent key", func(t *testing.T) {
		if _, err := b.Delete(ctx, testRoute, "zzz"); err != nil {
			t.Fatal(err)
		}
	})
	step("enqueue the deleted key", func(t *testing.T) { mustEnqueue(t, b, testEntry("b", "fp"), 100) })
	step("deliver everything held and ready", func(t *testing.T) {
		ls, err := b.Reclaim(ctx, testRoute, 0, "c3", 0)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, tryRead(t, b, "c3", 10)...)
		for _, x := range ls {
			j, ok, err := b.Begin(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				mustSettle(t, b, "c3", j, delivered(200, "", "fp"), Recorded)
			}
		}
	})
	step("copy of a finished key", func(t *testing.T) {
		if a := mustEnqueue(t, b, testEntry("c", "fp"), 100); a.State != Delivered {
			t.Fatalf("Enqueue = %+v, want Delivered", a)
		}
	})
	for _, s := range steps {
		s.do(t)
		check(s.name)
	}
	if st := mustStats(t, b); st.Depth != 0 || st.DLQ != 0 {
		t.Fatalf("Stats at the end = %+v, want empty", st)
	}
}

// held is a lease read by consumer and maybe begun.
type held struct {
	consumer string
	lease    Lease
	job      *Job
}

func TestRedisInvariantRandomized(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			b, _, check := newInvariantRedis(t)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 0))
			consumers := []string{"c1", "c2", "c3"}
			keys := make([]string, 12)
			for i := range keys {
				keys[i] = fmt.Sprintf("key|%d", i) // '|' is the retry member's separator
			}
			var leases, jobs []held // read and not begun; begun and not settled
			take := func(hs *[]held) (held, bool) {
				if len(*hs) == 0 {
					return held{}, false
				}
				i := rng.IntN(len(*hs))
				h := (*hs)[i]
				*hs = append((*hs)[:i], (*hs)[i+1:]...)
				return h, true
			}
			dlqIDs := func() []string {
				list, _, err := b.ListDLQ(ctx, testRoute, "", 1000)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, d := range list {
					ids = append(ids, d.ID)
				}
				return ids
			}
			// Operations, each as often as it is named.
			var weighted []string
			for op, w := range map[string]int{"enqueue": 3, "read": 2, "begin": 3, "settle": 5, "promote": 2,
				"reclaim": 1, "replay": 2, "purge": 1, "delete": 1, "hand-back": 1} {
				for range w {
					weighted = append(weighted, op)
				}
			}
			sort.Strings(weighted) // map order is random; the seed alone decides the run
			ops := map[string]int{}
			defer func() { t.Logf("operations run: %v", ops) }()
			for i := range 300 {
				var name string
				switch op := weighted[rng.IntN(len(weighted))]; op {
				case "enqueue":
					k := keys[rng.IntN(len(keys))]
					name = "enqueue " + k
					if mustEnqueue(t, b, testEntry(k, "fp"), 8).State == Full {
						name = "full " + k
					}
				case "read":
					c := consumers[rng.IntN(len(consumers))]
					name = "read by " + c
					ls, err := b.Read(ctx, testRoute, 0, c, 1+rng.IntN(3), time.Millisecond)
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range ls {
						leases = append(leases, held{consumer: c, lease: l})
					}
				case "begin":
					h, ok := take(&leases)
					if !ok {
						continue
					}
					name = "begin " + h.lease.Key
					j, ok, err := b.Begin(ctx, h.lease)
					if errors.Is(err, ErrNotOwner) {
						name += " (taken over: refused)"
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						h.job = &j
						jobs = append(jobs, h)
					}
				case "settle":
					h, ok := take(&jobs)
					if !ok {
						continue
					}
					c := h.consumer
					if rng.IntN(5) == 0 {
						c = consumers[rng.IntN(len(consumers))]
					}
					var s Settlement
					switch rng.IntN(4) {
					case 0:
						name = "settle-delivered " + h.lease.Key
						s = delivered(200, "", "fp")
					case 1, 2:
						name = "settle-retry " + h.lease.Key
						s = Settlement{Kind: SettleRetry, Due: msNow().Add(time.Duration(rng.IntN(2)) * time.Hour)}
					default:
						name = "settle-dead " + h.lease.Key
						s = dead("exhausted", 500, msNow())
					}
					name += " by " + c
					if _, err := b.Settle(ctx, c, *h.job, s); err != nil {
						t.Fatal(err)
					}
				case "promote":
					name = "promote"
					at := msNow()
					if rng.IntN(2) == 0 {
						at = at.Add(2 * time.Hour)
					}
					if _, err := b.Promote(ctx, testRoute, 0, at); err != nil {
						t.Fatal(err)
					}
				case "reclaim":
					c := consumers[rng.IntN(len(consumers))]
					name = "reclaim by " + c
					ls, err := b.Reclaim(ctx, testRoute, 0, c, 0)
					if err != nil {
						t.Fatal(err)
					}
					for _, l := range ls {
						leases = append(leases, held{consumer: c, lease: l})
					}
				case "replay":
					ids := dlqIDs()
					if len(ids) == 0 {
						continue
					}
					id := ids[rng.IntN(len(ids))]
					name = "replay " + id
					if err := b.Replay(ctx, testRoute, id); err != nil {
						t.Fatal(err)
					}
				case "purge":
					ids := dlqIDs()
					if len(ids) == 0 {
						continue
					}
					id := ids[rng.IntN(len(ids))]
					name = "purge " + id
					if err := b.Purge(ctx, testRoute, id, time.Hour); err != nil {
						t.Fatal(err)
					}
				case "delete":
					k := keys[rng.IntN(len(keys))]
					name = "delete " + k
					if _, err := b.Delete(ctx, testRoute, k); err != nil {
						t.Fatal(err)
					}
				case "hand-back":
					hs := &leases
					if rng.IntN(2) == 0 {
						hs = &jobs
					}
					h, ok := take(hs)
					if !ok {
						continue
					}
					name = "hand-back " + h.lease.Key + " by " + h.consumer
					if err := b.HandBack(ctx, h.consumer, []Lease{h.lease}, time.Second); err != nil {
						t.Fatal(err)
					}
				}
				if name == "" {
					continue
				}
				ops[strings.Fields(name)[0]]++
				check(fmt.Sprintf("op %d (%s)", i, name))
			}

			// Whatever the run did, every queued event is still delivered.
			for round := 0; ; round++ {
				st := mustStats(t, b)
				if st.Depth == 0 {
					break
				}
				if round == 100 {
					t.Fatalf("%d events still undelivered after %d drain rounds", st.Depth, round)
				}
				if _, err := b.Promote(ctx, testRoute, 0, msNow().Add(3*time.Hour)); err != nil {
					t.Fatal(err)
				}
				ls, err := b.Reclaim(ctx, testRoute, 0, "drain", 0)
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, tryRead(t, b, "drain", 100)...)
				for _, l := range ls {
					j, ok, err := b.Begin(ctx, l)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						mustSettle(t, b, "drain", j, delivered(200, "", "fp"), Recorded)
					}
				}
				check(fmt.Sprintf("drain round %d", round))
			}
			for _, k := range keys {
				if ks := mustGet(t, b, k); ks.State == StateQueued {
					t.Fatalf("key %q is still queued after the drain: %+v", k, ks)
				}
			}
		})
	}
}

// An operator's Delete racing provider copies of the same key must leave
// no event behind without its key.
func TestRedisDeleteRacingEnqueue(t *testing.T) {
	b, c, _ := newInvariantRedis(t)
	ctx := context.Background()
	const rounds = 300
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() {
		for range rounds {
			if _, err := b.Delete(ctx, testRoute, "k"); err != nil {
				errs[0] = err
				return
			}
		}
	})
	wg.Go(func() {
		for range rounds {
			if _, err := b.Enqueue(ctx, testEntry("k", "fp"), 1000); err != nil {
				errs[1] = err
				return
			}
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete(ctx, testRoute, "k"); err != nil {
		t.Fatal(err)
	}
	checkInvariant(t, c, "test:", testRoute)
	if st := mustStats(t, b); st.Depth != 0 {
		t.Fatalf("Depth = %d after the key was deleted, want 0", st.Depth)
	}
}

// The checker itself: each kind of damage to the raw keys is reported.
func TestInvariantCheckerCatchesDamage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, c *redis.Client, ids map[string]string)
	}{
		{"queued event out of the age set", func(t *testing.T, c *redis.Client, ids map[string]string) {
			c.ZRem(context.Background(), "test:webhook_age:{q:hooks:0}", ids["ready"])
		}},
		{"queued event with no live entry", func(t *testing.T, c *redis.Client, ids map[string]string) {
			c.Del(context.Background(), "test:webhook_queue:{q:hooks:0}")
		}},
		{"queued event ready twice", func(t *testing.T, c *redis.Client, ids map[string]string) {
			ctx := context.Background()
			tok := c.HGet(ctx, "test:webhook_qkey:{q:hooks:0}ready", "tok").Val()
			c.XAdd(ctx, &redis.XAddArgs{Stream: "test:webhook_queue:{q:hooks:0}", Values: []string{"e", ids["ready"], "t", tok, "k", "ready"}})
		}},
		{"retry member with the live token besides the entry", func(t *testing.T, c *redis.Client, ids map[string]string) {
			ctx := context.Background()
			tok := c.HGet(ctx, "test:webhook_qkey:{q:hooks:0}ready", "tok").Val()
			c.ZAdd(ctx, "test:webhook_retry:{q:hooks:0}", redis.Z{Score: 1, Member: ids["ready"] + "|" + tok + "|ready"})
		}},
		{"dead event out of the DLQ", func(t *testing.T, c *redis.Client, ids map[string]string) {
			ctx := context.Background()
			d := c.HGet(ctx, "test:webhook_qkey:{q:hooks:0}dead", "dlq").Val()
			c.XDel(ctx, "test:webhook_dlq:{q:hooks:0}", d)
		}},
		{"finished key with an event", func(t *testing.T, c *redis.Client, ids map[string]string) {
			c.HSet(context.Background(), "test:webhook_event:{q:hooks:0}"+ids["done"], "key", "done")
		}},
		{"orphan event", func(t *testing.T, c *redis.Client, ids map[string]string) {
			c.Del(context.Background(), "test:webhook_qkey:{q:hooks:0}ready")
		}},
		{"acknowledged entry left in the stream", func(t *testing.T, c *redis.Client, ids map[string]string) {
			ctx := context.Background()
			ms, _ := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "x", Streams: []string{"test:webhook_queue:{q:hooks:0}", ">"}, Count: 1, Block: -1}).Result()
			c.XAck(ctx, "test:webhook_queue:{q:hooks:0}", Group, ms[0].Messages[0].ID)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, c, check := newInvariantRedis(t)
			ids := map[string]string{}
			ids["dead"] = deadLetter(t, b, "dead", msNow())
			ids["done"] = mustEnqueue(t, b, testEntry("done", "fp"), 10).ID
			mustSettle(t, b, "c", mustBegin(t, b, readOne(t, b, "c")), delivered(200, "", "fp"), Recorded)
			ids["ready"] = mustEnqueue(t, b, testEntry("ready", "fp"), 10).ID
			check("set-up")
			tc.damage(t, c, ids)
			if p := invariantProblems(t, c, "test:", testRoute); len(p) == 0 {
				t.Fatal("the checker found nothing wrong")
			} else {
				t.Logf("found: %v", p)
			}
		})
	}
}
