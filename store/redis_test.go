package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
	"github.com/clawgate/clawgate/store/redistest"
)

var prefixSeq atomic.Int64

// The client library's own log lines (failed dials while a test has Redis
// down) are noise here.
func init() { SetRedisLogger(nil) }

// newTestRedis returns a store on addrs under a key prefix of its own, so
// tests can share one server.
func newTestRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = fmt.Sprintf("test%d:", prefixSeq.Add(1))
	}
	if opts.OpTimeout == 0 {
		// Generous where timing is not what is tested: a loaded CI machine
		// must not turn a slow call into a failure.
		opts.OpTimeout = 2 * time.Second
	}
	r, err := NewRedis(opts)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestNewRedisValidates(t *testing.T) {
	for _, p := range []string{"a{", "}b", "{x}"} {
		if _, err := NewRedis(RedisOptions{KeyPrefix: p}); err == nil {
			t.Fatalf("KeyPrefix %q accepted", p)
		}
	}
	if _, err := NewRedis(RedisOptions{OpTimeout: -1}); err == nil {
		t.Fatalf("negative OpTimeout accepted")
	}
}

// The connection starts while Redis is down and answers once it is back
// (the key operations' own tests are ledger.RedisStore's).
func TestRedisStartsWhileDown(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop()
	r := newTestRedis(t, RedisOptions{Addrs: []string{srv.Addr}})
	if err := r.Ping(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ping while down = %v, want ErrUnavailable", err)
	}
	srv.Start()
	var err error
	eventually.Within(t, 10*time.Second, func() bool { err = r.Ping(context.Background()); return err == nil },
		func() string { return fmt.Sprintf("Redis did not come back: %v", err) })
}

// Regression: SetRedisLogger wrote the client library's global logger
// each time a gateway started, while another gateway's clients in the
// same process could read it (two instances in one test: a data race
// under -race, seen in TestPaceIsSharedByTwoInstances/kafka). The library
// reads it only on rare paths (a pooled connection closed under it), so
// the race is not forced here; what is checked is that setting it again
// while clients run only swaps where the lines go, and that they reach
// the last logger set.
func TestSetRedisLoggerWhileClientsRun(t *testing.T) {
	r := newTestRedis(t, RedisOptions{Addrs: []string{redistest.Start(t)}})
	defer SetRedisLogger(nil)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			_ = r.Client().Ping(ctx).Err()
		}
	}()
	var buf bytes.Buffer
	var mu sync.Mutex
	for i := 0; i < 200; i++ {
		SetRedisLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	<-done
	redisLogger{}.Printf(ctx, "dial %s failed", "127.0.0.1:1")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "dial 127.0.0.1:1 failed") || !strings.Contains(buf.String(), "component=redis") {
		t.Fatalf("the library's line did not reach the last logger set: %q", buf.String())
	}
	SetRedisLogger(nil)
	redisLogger{}.Printf(ctx, "dropped") // nil: discarded, no panic
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
