package ledger_test

import (
	"context"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	"github.com/clawgate/clawgate/ledger"
	"github.com/clawgate/clawgate/store"
	"github.com/clawgate/clawgate/store/redistest"
)

// A finished record as schema version 1 wrote it (route "orders", key
// "evt-old"): status 201, application/json, {"points_deducted":100},
// fingerprint "sha256-old".
const v1DoneRecord = "010000c90a7368613235362d6f6c64106170706c69636174696f6e2f6a736f6e177b22706f696e74735f6465647563746564223a3130307d"

func newRedisStore(t *testing.T, addrs []string, legacy time.Duration) (*ledger.RedisStore, *store.Redis) {
	t.Helper()
	r, err := store.NewRedis(store.RedisOptions{Addrs: addrs, KeyPrefix: "s" + strconv.FormatInt(prefixes.Add(1), 10) + ":", OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	one := func(string) int { return 1 }
	return ledger.NewRedisStore(r, ledger.StreamsPlace(r.KeyPrefix(), one), ledger.SyncOptions{}, legacy), r
}

// Records of schema version 1 on the same Redis are answered while they
// can live: a finished one as finished (counted in its own counter), a
// held lock as in flight; a reset forgets them too. On a single server in
// the claim's own script, on a Cluster by a second one.
func TestRedisStoreReadsSchema1Records(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"single", func(t *testing.T) []string { return []string{redistest.Start(t)} }},
		{"cluster", func(t *testing.T) []string { return redistest.StartCluster(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, r := newRedisStore(t, tc.addrs(t), time.Hour)
			c := r.Client()
			rec, _ := hex.DecodeString(v1DoneRecord)
			lock, done, attempts := r.SyncKeys("orders:evt-old")
			c.Set(ctx, done, rec, time.Hour)
			c.HSet(ctx, attempts, "n", 3, "first", 1700000000000, "last", 1700000001000)
			hlock, _, _ := r.SyncKeys("orders:evt-held")
			c.Set(ctx, hlock, "v1-token", time.Minute)
			if v, err := r.CheckSchema(ctx); err != nil || v != store.SchemaVersion {
				t.Fatalf("CheckSchema = %d, %v", v, err)
			}
			if st, out, err := s.Peek(ctx, "orders:evt-old"); err != nil || st != store.Finished || out.Status != 201 {
				t.Fatalf("Peek of a version-1 finished key = %v %+v %v", st, out, err)
			}
			if st, _, err := s.Peek(ctx, "orders:evt-held"); err != nil || st != store.InFlight {
				t.Fatalf("Peek of a version-1 held key = %v %v", st, err)
			}
			got, err := s.Claim(ctx, "orders:evt-old", "sha256-old", time.Minute)
			if err != nil || got.State != store.Finished || got.Outcome.Status != 201 ||
				string(got.Outcome.Body) != `{"points_deducted":100}` || got.Outcome.Fingerprint != "sha256-old" || got.Attempts != 4 {
				t.Fatalf("Claim of a version-1 finished key = %+v, %v; want finished 201, 4 attempts", got, err)
			}
			got, err = s.Claim(ctx, "orders:evt-held", "fp", time.Minute)
			if err != nil || got.State != store.InFlight || got.RetryAfter <= 0 || got.RetryAfter > time.Minute {
				t.Fatalf("Claim of a version-1 held key = %+v, %v; want in flight", got, err)
			}
			// Nothing was left locked in the new record.
			if ks, err := s.Get(ctx, "orders:evt-old"); err != nil || ks.State != store.Absent {
				t.Fatalf("Get = %+v, %v", ks, err)
			}
			// A reset forgets the version-1 keys with the record.
			if _, err := s.Delete(ctx, "orders:evt-old"); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Exists(ctx, lock, done, attempts).Result(); err != nil || n != 0 {
				t.Fatalf("version-1 keys after a reset: %d, %v", n, err)
			}
			if got, err := s.Claim(ctx, "orders:evt-old", "fp", time.Minute); err != nil || got.State != store.Claimed {
				t.Fatalf("Claim after the reset = %+v, %v", got, err)
			}
		})
	}
}

// Once the move is older than the longest a version-1 record lives, they
// are not looked for.
func TestRedisStoreStopsLookingForSchema1(t *testing.T) {
	ctx := context.Background()
	s, r := newRedisStore(t, []string{redistest.Start(t)}, 0)
	rec, _ := hex.DecodeString(v1DoneRecord)
	_, done, _ := r.SyncKeys("orders:evt-old")
	r.Client().Set(ctx, done, rec, time.Hour)
	// Before the move is known: looked for.
	if got, err := s.Claim(ctx, "orders:evt-old", "sha256-old", time.Minute); err != nil || got.State != store.Finished {
		t.Fatalf("Claim before the schema check = %+v, %v", got, err)
	}
	if _, err := r.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Claim(ctx, "orders:evt-old", "sha256-old", time.Minute); err != nil || got.State != store.Claimed {
		t.Fatalf("Claim after the window = %+v, %v; want claimed (not looked for)", got, err)
	}
}

// The sync path's transitions on the shared record, through the store
// interface the guard uses.
func TestRedisStoreTransitions(t *testing.T) {
	ctx := context.Background()
	s, r := newRedisStore(t, []string{redistest.Start(t)}, 0)
	if _, err := r.CheckSchema(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, "orders:k", "fp", time.Minute)
	if err != nil || c.State != store.Claimed || c.Attempts != 1 {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if st, err := s.Get(ctx, "orders:k"); err != nil || st.State != store.InFlight || st.Attempts != 1 || st.Fingerprint != "fp" {
		t.Fatalf("Get = %+v, %v", st, err)
	}
	out := store.Outcome{Status: 200, ContentType: "text/plain", Body: []byte("ok"), Fingerprint: "fp"}
	if err := s.Finish(ctx, "orders:k", "other", out, time.Hour); err != store.ErrNotOwner {
		t.Fatalf("Finish by another token: %v", err)
	}
	if err := s.Finish(ctx, "orders:k", c.Token, out, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Peek reads only what the queue's own enqueue cannot: none here.
	if st, _, err := s.Peek(ctx, "orders:k"); err != nil || st != store.Absent {
		t.Fatalf("Peek = %v %v", st, err)
	}
	if ks, err := s.Delete(ctx, "orders:k"); err != nil || ks.State != store.Finished || ks.Status != 200 {
		t.Fatalf("Delete = %+v, %v", ks, err)
	}
	c, _ = s.Claim(ctx, "orders:k", "fp", time.Minute)
	if err := s.Release(ctx, "orders:k", c.Token); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Get(ctx, "orders:k"); err != nil || st.State != store.Absent || st.Attempts != 1 {
		t.Fatalf("Get after a release = %+v, %v", st, err)
	}
}
