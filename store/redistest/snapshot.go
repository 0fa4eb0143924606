package redistest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Snapshot is every key of a Redis as DUMP payloads: a fixture of what
// one build wrote, for the upgrade tests of the builds after it.
type Snapshot struct {
	// Commit and Redis say which build and which redis-server wrote it
	// (RESTORE takes payloads of its own and older RDB versions).
	Commit string `json:"commit"`
	Redis  string `json:"redis"`
	Keys   []Item `json:"keys"`
}

// Item is one key of a Snapshot.
type Item struct {
	Key string `json:"key"`
	// TTL is the key's time to live when dumped (0: none).
	TTL  int64  `json:"ttl_ms,omitempty"`
	Dump string `json:"dump"` // hex
}

// WriteSnapshot dumps every key of the Redis at addr into the JSON file
// path, naming the git commit of the working directory.
func WriteSnapshot(t testing.TB, addr, path string) Snapshot {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	s := Snapshot{Redis: serverVersion(t, c)}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		s.Commit = strings.TrimSpace(string(out))
	}
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("redistest: KEYS: %v", err)
	}
	sort.Strings(keys)
	for _, k := range keys {
		dump, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("redistest: DUMP %s: %v", k, err)
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("redistest: PTTL %s: %v", k, err)
		}
		it := Item{Key: k, Dump: hex.EncodeToString([]byte(dump))}
		if ttl > 0 {
			it.TTL = ttl.Milliseconds()
		}
		s.Keys = append(s.Keys, it)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// LoadSnapshot restores the keys of the snapshot file path into the
// Redis at addr (their times to live counted from now).
func LoadSnapshot(t testing.TB, addr, path string) Snapshot {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("redistest: %s: %v", path, err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for _, it := range s.Keys {
		raw, err := hex.DecodeString(it.Dump)
		if err != nil {
			t.Fatalf("redistest: %s: key %s: %v", path, it.Key, err)
		}
		if err := c.Restore(context.Background(), it.Key, time.Duration(it.TTL)*time.Millisecond, string(raw)).Err(); err != nil {
			t.Fatalf("redistest: RESTORE %s (dumped by redis %s, this is redis %s): %v", it.Key, s.Redis, serverVersion(t, c), err)
		}
	}
	return s
}

func serverVersion(t testing.TB, c *redis.Client) string {
	t.Helper()
	s, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatalf("redistest: INFO server: %v", err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
