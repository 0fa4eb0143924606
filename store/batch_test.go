package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clawgate/clawgate/store/redistest"
)

// countScript counts a key's calls and answers "ARGV[1]:count".
var countScript = redis.NewScript(`return ARGV[1] .. ':' .. redis.call('INCR', KEYS[1])`)

// concurrentClaims runs a script on n distinct keys at once, twice, so
// the batcher sends them in pipelines, and checks every caller got its
// own answer.
func concurrentClaims(t *testing.T, r *Redis, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("%s:%d", prefix, i)
			for want := 1; want <= 2; want++ {
				got, err := r.RunScript(context.Background(), countScript, []string{r.KeyPrefix() + key}, key).Text()
				if err != nil || got != fmt.Sprintf("%s:%d", key, want) {
					errs <- fmt.Errorf("call %d on %s = %q, %v (a reply went to the wrong caller?)", want, key, got, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestBatchedScriptsAfterScriptFlush(t *testing.T) {
	addr := redistest.Start(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{addr}})
	concurrentClaims(t, r, "warm", 50)
	// A restarted Redis forgets loaded scripts: pipelined EVALSHAs get
	// NOSCRIPT and each is run again alone, which loads it.
	if _, err := redistest.Command(addr, "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	concurrentClaims(t, r, "cold", 300)
}

func TestBatchedScriptsOnCluster(t *testing.T) {
	r := newTestRedis(t, RedisOptions{Addrs: redistest.StartCluster(t)})
	concurrentClaims(t, r, "cl", 300) // keys over many slots and all three nodes
}

func TestBatcherCallerGivesUp(t *testing.T) {
	srv := redistest.StartServer(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}, OpTimeout: time.Second})
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.RunScript(ctx, countScript, []string{"k:gone"}, "x").Err(); err == nil {
		t.Fatal("a cancelled caller got an answer")
	}
}

// A pipeline whose dial is refused leaves its commands without a reply;
// each caller gets the connection error, not a decoding error.
func TestBatchedScriptsWhileDown(t *testing.T) {
	srv := redistest.StartServer(t)
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	srv.Stop()
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			err := r.RunScript(context.Background(), countScript, []string{fmt.Sprintf("down:%d", i)}, "x").Err()
			errs <- r.fail("claim", err)
		}(i)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connect") {
			t.Fatalf("claim while down = %v, want ErrUnavailable with the connection error", err)
		}
	}
}
