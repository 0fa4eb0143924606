package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the scripts of concurrent deliveries to Redis in pipelines:
// a worker that wakes up with one call takes every call already waiting and
// writes them all at once. Under load that is one write and one read per
// batch instead of per call; alone, a call goes out at once, with no timer.
// Each script is still one atomic EVALSHA: batching changes the syscalls,
// not what Redis does.
type batcher struct {
	client  redis.UniversalClient
	timeout time.Duration // bounds one pipeline, like one call
	calls   chan *scriptCall
	stop    chan struct{}
	once    sync.Once
}

// batchWorkers is how many pipelines may be in flight at once.
const batchWorkers = 4

// maxBatch bounds one pipeline.
const maxBatch = 128

type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

func newBatcher(client redis.UniversalClient, timeout time.Duration) *batcher {
	b := &batcher{client: client, timeout: timeout, calls: make(chan *scriptCall, 1024), stop: make(chan struct{})}
	for i := 0; i < batchWorkers; i++ {
		go b.work()
	}
	return b
}

// run is script.Run through the batcher. It returns when the reply is in
// or ctx is done, whichever comes first.
func (b *batcher) run(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &scriptCall{ctx: ctx, script: s, keys: keys, args: args, done: make(chan struct{})}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		return failedCmd(ctx, ctx.Err())
	case <-b.stop:
		return failedCmd(ctx, redis.ErrClosed)
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		// The script may still run; like a single call that timed out.
		return failedCmd(ctx, ctx.Err())
	}
}

func failedCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

func (b *batcher) close() { b.once.Do(func() { close(b.stop) }) }

func (b *batcher) work() {
	batch := make([]*scriptCall, 0, maxBatch)
	for {
		select {
		case c := <-b.calls:
			batch = append(batch[:0], c)
		case <-b.stop:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.send(batch)
	}
}

// send runs one batch: calls whose caller already gave up are skipped, the
// rest go out as one pipeline, and a script Redis does not know yet (after
// a restart) is run again alone with EVAL, which loads it.
func (b *batcher) send(batch []*scriptCall) {
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.cmd = failedCmd(c.ctx, err)
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		c := live[0]
		c.cmd = c.script.Run(c.ctx, b.client, c.keys, c.args...)
		close(c.done)
		return
	}
	// The pipeline has its own deadline: one caller giving up must not
	// cut the others' commands short.
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, c := range live {
		c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
		cmds[i] = c.cmd
	}
	execPipe(ctx, pipe, cmds...)
	for _, c := range live {
		if err := c.cmd.Err(); err != nil && isNoScript(err) {
			c.cmd = c.script.Run(c.ctx, b.client, c.keys, c.args...)
		}
		close(c.done)
	}
}

// execPipe runs pipe. Each command carries its own error, except when the
// pipeline failed before a command got any reply (a refused dial leaves
// the commands untouched): those get the pipeline's error.
func execPipe(ctx context.Context, pipe redis.Pipeliner, cmds ...*redis.Cmd) {
	_, err := pipe.Exec(ctx)
	if err == nil || isRedisError(err) {
		return
	}
	for _, cmd := range cmds {
		if cmd.Err() == nil && cmd.Val() == nil {
			cmd.SetErr(err)
		}
	}
}

// isRedisError reports whether err is an error reply from Redis, as
// opposed to a failed connection.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

func isNoScript(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "NOSCRIPT")
}
