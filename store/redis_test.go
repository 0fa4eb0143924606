package store

import (
	"context"
	"errors"
	"fmt"
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
