package control

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keeps the records in Redis, shared by every instance:
//
//	PREFIX webhook_control:{ROUTE}  hash: v (version), paused, fails,
//	                                open, probe, sync, queue (Unix ms;
//	                                absent: 0)
//	PREFIX webhook_pace:{ROUTE}     the pace: when the next try may go
//	                                (us, the Redis server's clock)
//
// Neither expires; a route's keys are a few bytes.
type Redis struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

var _ Store = (*Redis)(nil)

// NewRedis returns the store on client, its keys under prefix; each call
// is bounded by timeout.
func NewRedis(client redis.UniversalClient, prefix string, timeout time.Duration) *Redis {
	return &Redis{client: client, prefix: prefix, timeout: timeout}
}

func (r *Redis) key(route string) string { return r.prefix + "webhook_control:{" + route + "}" }

func (r *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

func fail(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
		return fmt.Errorf("redis %s: %w: %v", op, ErrCorrupt, err)
	}
	return fmt.Errorf("redis %s: %w: %v", op, ErrUnavailable, err)
}

// Load implements Store.
func (r *Redis) Load(ctx context.Context, route string) (Record, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	v, err := r.client.HMGet(ctx, r.key(route), "v", "paused", "fails", "open", "probe", "sync", "queue").Result()
	if err != nil {
		return Record{}, fail("load", err)
	}
	var n [7]int64
	for i, f := range v {
		if f == nil {
			continue
		}
		s, _ := f.(string)
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil || x < 0 {
			return Record{}, fmt.Errorf("redis load: %w: field %d holds %.32q", ErrCorrupt, i, s)
		}
		n[i] = x
	}
	return Record{Version: n[0], PausedAt: n[1], Failures: n[2], OpenUntil: n[3], ProbeUntil: n[4], SyncSeen: n[5], QueueSeen: n[6]}, nil
}

// swapScript: KEYS: the record. ARGV: the version expected, then paused,
// fails, open, probe, sync, queue. Reply: 1 swapped, 0 the version
// differs.
var swapScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'v') or '0') ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'v', tonumber(ARGV[1]) + 1, 'paused', ARGV[2], 'fails', ARGV[3], 'open', ARGV[4], 'probe', ARGV[5], 'sync', ARGV[6], 'queue', ARGV[7])
return 1
`)

// Swap implements Store.
func (r *Redis) Swap(ctx context.Context, route string, old, next Record) (bool, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	n, err := swapScript.Run(ctx, r.client, []string{r.key(route)}, old.Version, next.PausedAt, next.Failures, next.OpenUntil, next.ProbeUntil, next.SyncSeen, next.QueueSeen).Int()
	if err != nil {
		return false, fail("swap", err)
	}
	return n == 1, nil
}

// paceScript is a GCRA with a burst of one, in integer microseconds of
// the Redis server's clock (one clock for every instance). KEYS: the
// pace. ARGV: the interval between tries (us), n. The key holds the
// theoretical arrival time of the next try; a try may go when it is not
// in the future. Reply: {tries that may go, us until the next may}.
//
// Not github.com/go-redis/redis_rate: it puts its keys under "rate:",
// outside key_prefix (ACLs and shared servers rely on the prefix), and
// with a burst of one its floating-point seconds round a due try to
// "not yet" at intervals such as 0.2s, forever.
var paceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local got = 0
while got < n and tat <= now do
  tat = tat + iv
  got = got + 1
end
if got > 0 then
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
end
local wait = 0
if got < n then
  wait = tat - now
end
return {got, wait}
`)

// Take implements Store: tries are spaced evenly, at most Rate+1 in any
// window of Per, over every instance.
func (r *Redis) Take(ctx context.Context, route string, p Pace, n int) (int, time.Duration, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	iv := max(1, p.Per.Microseconds()/int64(p.Rate))
	v, err := paceScript.Run(ctx, r.client, []string{r.prefix + "webhook_pace:{" + route + "}"}, iv, n).Int64Slice()
	if err != nil {
		return 0, 0, fail("pace", err)
	}
	if len(v) != 2 || v[0] < 0 || v[0] > int64(n) || v[1] < 0 {
		return 0, 0, fmt.Errorf("redis pace: %w: reply %v", ErrCorrupt, v)
	}
	return int(v[0]), time.Duration(v[1]) * time.Microsecond, nil
}
