package store

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultOpTimeout bounds every Redis call when RedisOptions.OpTimeout is 0.
const DefaultOpTimeout = 500 * time.Millisecond

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// Addrs: one address for a single server, several for a Redis Cluster
	// (seed nodes), or the sentinels when MasterName is set. Empty means
	// 127.0.0.1:6379.
	Addrs []string
	// MasterName selects Sentinel failover for the named master.
	MasterName string
	Username   string
	Password   string
	// DB is the database number (single server and Sentinel only).
	DB int
	// TLS connects over TLS, with TLSConfig when set, else with the system
	// roots and the server name taken from each address.
	TLS       bool
	TLSConfig *tls.Config
	// KeyPrefix is put before every key, e.g. "clawgate:". It must not
	// contain '{' or '}', which would break the Cluster hash tags.
	KeyPrefix string
	// OpTimeout bounds every call: its context gets a deadline of
	// min(caller's deadline, now+OpTimeout), so a hung Redis cannot hang a
	// request. 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// AttemptsTTL: as MemoryOptions.AttemptsTTL.
	AttemptsTTL time.Duration
	// ResetHold: as MemoryOptions.ResetHold.
	ResetHold time.Duration
	// WaitReplicas, when positive, makes Finish and RunDurable (the
	// queue's enqueue, settle, replay and purge) wait until that many
	// replicas have acknowledged the write (Redis WAIT, sent on the same
	// connection right after the script), so that a failover to a replica
	// does not lose a finished record or an acknowledged event. 0 turns it
	// off.
	WaitReplicas int
	// WaitTimeout bounds that wait; 0 means DefaultWaitTimeout. It must be
	// shorter than OpTimeout.
	WaitTimeout time.Duration
	// OnReplicaShortfall, if set, is called when fewer replicas than
	// WaitReplicas acknowledged such a write within WaitTimeout (or the
	// WAIT itself failed). The write still succeeds: it is on the master.
	OnReplicaShortfall func()
}

// DefaultWaitTimeout bounds each wait for replicas when
// RedisOptions.WaitTimeout is 0.
const DefaultWaitTimeout = 100 * time.Millisecond

// Redis is the Store shared by every gateway instance, on a single Redis
// server, a Redis Cluster or a Sentinel-managed master.
//
// Each idempotency key K (already "route:key") uses up to four Redis keys,
// all with the hash tag {K} so they share a Cluster slot:
//
//	PREFIX webhook_lock:{K}      string: owner token, PX lock TTL
//	PREFIX webhook_done:{K}      string: binary finished record, PX retention
//	PREFIX webhook_attempts:{K}  hash: n (attempts), first, last (unix ms),
//	                             fp (fingerprint of the copy in flight)
//	PREFIX webhook_reset:{K}     string "1": reset tombstone left by every
//	                             Delete, PX the lock's remaining TTL or
//	                             ResetHold, the longer
//
// A K that is empty or starts with '}' or '%' is written with a '%'
// prepended, so the hash tag is never empty and distinct keys stay distinct.
// Every operation is one Lua script (one round trip, atomic), called with
// EVALSHA and loaded on demand. With RedisOptions.WaitReplicas, Finish (and
// every RunDurable) is its script and a WAIT in one pipeline on one
// connection.
type Redis struct {
	client      redis.UniversalClient
	batch       *batcher
	prefix      string
	timeout     time.Duration
	attemptsTTL time.Duration // <0: the counter lives only with the lock
	resetHold   time.Duration

	waitReplicas int
	waitTimeout  time.Duration
	onShortfall  func()

	// moved is when the store moved from schema version 1 (Unix ms; 0:
	// not read yet), read by CheckSchema.
	moved atomic.Int64
}

var _ Store = (*Redis)(nil)

// NewRedis returns a store on the Redis described by opts. It does not
// contact Redis: the gateway may start while Redis is down and recovers by
// itself once it is back; Ping reports whether it answers.
func NewRedis(opts RedisOptions) (*Redis, error) {
	if strings.ContainsAny(opts.KeyPrefix, "{}") {
		return nil, fmt.Errorf("store: redis key_prefix %q must not contain '{' or '}'", opts.KeyPrefix)
	}
	if opts.OpTimeout < 0 {
		return nil, fmt.Errorf("store: redis op timeout %v must not be negative", opts.OpTimeout)
	}
	timeout := opts.OpTimeout
	if timeout == 0 {
		timeout = DefaultOpTimeout
	}
	if opts.WaitReplicas < 0 {
		return nil, fmt.Errorf("store: redis wait replicas %d must not be negative", opts.WaitReplicas)
	}
	if opts.WaitTimeout < 0 {
		return nil, fmt.Errorf("store: redis wait timeout %v must not be negative", opts.WaitTimeout)
	}
	waitTimeout := opts.WaitTimeout
	if waitTimeout == 0 {
		waitTimeout = DefaultWaitTimeout
	}
	if opts.WaitReplicas > 0 && waitTimeout >= timeout {
		return nil, fmt.Errorf("store: redis wait timeout %v must be shorter than the op timeout %v", waitTimeout, timeout)
	}
	addrs := opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:6379"}
	}
	var tlsConfig *tls.Config
	if opts.TLS {
		tlsConfig = opts.TLSConfig
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	uo := &redis.UniversalOptions{
		Addrs:      addrs,
		MasterName: opts.MasterName,
		Username:   opts.Username,
		Password:   opts.Password,
		DB:         opts.DB,
		TLSConfig:  tlsConfig,
		// RESP2 keeps the scripts' replies plain arrays of integers and
		// strings.
		Protocol: 2,
		// The context deadline (OpTimeout) bounds every call; the socket
		// timeouts are only a backstop at the same value.
		ContextTimeoutEnabled: true,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		DialTimeout:           max(timeout, time.Second),
		// No command retries: the library would retry a refused connection
		// with a backoff until the deadline, and a retried script could run
		// twice. A failed call fails at once; the provider retries the
		// delivery. Stale pooled connections (after a Redis restart) are
		// detected by the pool's health check before use.
		MaxRetries:      -1,
		DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}
	// The same choice as redis.NewUniversalClient, made here so that a
	// refused dial fails at once instead of being retried with a backoff
	// until the deadline: while Redis is down every call fails fast.
	var client redis.UniversalClient
	switch {
	case uo.MasterName != "":
		fo := uo.Failover()
		fo.DialerRetries, fo.DialerRetryTimeout = 1, time.Millisecond
		client = redis.NewFailoverClient(fo)
	case len(uo.Addrs) > 1:
		co := uo.Cluster()
		co.DialerRetries, co.DialerRetryTimeout = 1, time.Millisecond
		client = redis.NewClusterClient(co)
	default:
		so := uo.Simple()
		so.DialerRetries, so.DialerRetryTimeout = 1, time.Millisecond
		client = redis.NewClient(so)
	}
	ttl := opts.AttemptsTTL
	if ttl == 0 {
		ttl = DefaultAttemptsTTL
	}
	return &Redis{
		client: client, batch: newBatcher(client, timeout), prefix: opts.KeyPrefix, timeout: timeout, attemptsTTL: ttl, resetHold: opts.ResetHold,
		waitReplicas: opts.WaitReplicas, waitTimeout: waitTimeout, onShortfall: opts.OnReplicaShortfall,
	}, nil
}

// Script replies (all RESP arrays or integers):
//
//	claim:   {0, attempts}                  claimed
//	         {1, attempts, lock PTTL ms}    in flight
//	         {2, attempts, record}          finished
//	finish:  1 recorded, 0 not recorded (another owner, a record or a
//	         tombstone)
//	release: 1 released, 0 not the owner
//	inspect: {bad, has record, record or "", lock PTTL (-2: absent),
//	          n, first, last, fp}
//	         bad is 1 when a key holds the wrong Redis type; missing hash
//	         fields are ""; with ARGV[1] == "1" the lock, record and counter
//	         are deleted after being read, and the reset tombstone is left
//	         for the lock's remaining TTL or ARGV[2] ms (ResetHold), the
//	         longer.
//
// KEYS are always lock, done, attempts, reset. A key of the wrong type makes
// claim fail with a WRONGTYPE error before it has written anything.
var (
	// ARGV: token, lock TTL ms, now ms, fingerprint, attempts TTL ms (0: none)
	claimScript = redis.NewScript(`
local done = redis.call('GET', KEYS[2])
local n = redis.call('HINCRBY', KEYS[3], 'n', 1)
if n == 1 then
  redis.call('HSET', KEYS[3], 'first', ARGV[3], 'last', ARGV[3])
else
  redis.call('HSET', KEYS[3], 'last', ARGV[3])
end
if done then
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[3], ttl)
  else
    redis.call('PERSIST', KEYS[3])
  end
  return {2, n, done}
end
local lockTTL = tonumber(ARGV[2])
local keep = math.max(lockTTL, tonumber(ARGV[5]))
local ttl = redis.call('PTTL', KEYS[1])
local state = 0
if ttl == -2 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', lockTTL, 'NX')
  redis.call('HSET', KEYS[3], 'fp', ARGV[4])
else
  if ttl < 0 then
    ttl = lockTTL
  end
  keep = math.max(keep, ttl)
  state = 1
end
if redis.call('PTTL', KEYS[3]) < keep then
  redis.call('PEXPIRE', KEYS[3], keep)
end
if state == 1 then
  return {1, n, ttl}
end
return {0, n}
`)
	// ARGV: token, record, retention ms. Records when the token owns the
	// lock, or when there is no lock, no record and no tombstone.
	finishScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
  end
elseif t ~= 'none' or ARGV[1] == '' or redis.call('EXISTS', KEYS[2], KEYS[4]) > 0 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('DEL', KEYS[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
`)
	// ARGV: token, "1" to drop the attempt counter with the lock
	releaseScript = redis.NewScript(`
if redis.call('TYPE', KEYS[1]).ok ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[3])
end
return 1
`)
	// ARGV: "1" to delete
	inspectScript = redis.NewScript(`
local bad = 0
local has = 0
local done = redis.pcall('GET', KEYS[2])
if type(done) == 'table' then
  bad = 1
  done = ''
elseif done then
  has = 1
else
  done = ''
end
local m = redis.pcall('HMGET', KEYS[3], 'n', 'first', 'last', 'fp')
if m.err then
  bad = 1
  m = {}
end
local lock = redis.call('PTTL', KEYS[1])
if ARGV[1] == '1' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  local keep = tonumber(ARGV[2]) or 0
  if lock > keep then
    keep = lock
  end
  if keep > 0 then
    redis.call('SET', KEYS[4], '1', 'PX', keep)
  end
end
return {bad, has, done, lock, m[1] or '', m[2] or '', m[3] or '', m[4] or ''}
`)
)

// keys returns the lock, done, attempts and reset keys of key.
func (r *Redis) keys(key string) []string {
	tag := key
	if tag == "" || tag[0] == '}' || tag[0] == '%' {
		tag = "%" + tag
	}
	return []string{
		r.prefix + "webhook_lock:{" + tag + "}",
		r.prefix + "webhook_done:{" + tag + "}",
		r.prefix + "webhook_attempts:{" + tag + "}",
		r.prefix + "webhook_reset:{" + tag + "}",
	}
}

// SyncKeys names the Redis keys of a sync route's scoped key
// ("route:key"): its lock, its finished record and its attempt counter.
// The Redis queue's enqueue reads them, in the same script, on a single
// server or Sentinel (not on a Cluster, where they live in another slot),
// so that a route switched from sync to queue does not deliver again an
// event finished before the switch.
func (r *Redis) SyncKeys(scoped string) (lock, done, attempts string) {
	k := r.keys(scoped)
	return k[0], k[1], k[2]
}

func (r *Redis) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.timeout)
}

// fail wraps a Redis error: a key of the wrong type is ErrCorrupt, anything
// else (refused, timed out, cluster down, ...) ErrUnavailable.
func (r *Redis) fail(op string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.Contains(rerr.Error(), "WRONGTYPE") {
		return fmt.Errorf("store: redis %s: %w: %v", op, ErrCorrupt, err)
	}
	return fmt.Errorf("store: redis %s: %w: %v", op, ErrUnavailable, err)
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

// ms converts d to whole milliseconds, rounding up so a positive duration
// never becomes 0.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Claim implements Store.
func (r *Redis) Claim(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Claim, error) {
	if lockTTL <= 0 {
		return Claim{}, fmt.Errorf("store: lock TTL %v must be positive", lockTTL)
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	token := newToken()
	var keep int64
	if r.attemptsTTL > 0 {
		keep = ms(r.attemptsTTL)
	}
	res, err := r.batch.run(ctx, claimScript, r.keys(key),
		token, ms(lockTTL), time.Now().UnixMilli(), fingerprint, keep).Slice()
	if err != nil {
		return Claim{}, r.fail("claim", err)
	}
	if len(res) < 2 {
		return Claim{}, corruptf("claim reply of %d elements", len(res))
	}
	state, ok1 := res[0].(int64)
	attempts, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return Claim{}, corruptf("claim reply %v", res)
	}
	switch {
	case state == 0:
		return Claim{State: Claimed, Token: token, Attempts: attempts}, nil
	case state == 1 && len(res) == 3:
		pttl, ok := res[2].(int64)
		if !ok {
			return Claim{}, corruptf("claim reply %v", res)
		}
		// PTTL rounds down: a lock in its last millisecond reads 0.
		return Claim{State: InFlight, Attempts: attempts, RetryAfter: time.Duration(max(pttl, 1)) * time.Millisecond}, nil
	case state == 2 && len(res) == 3:
		rec, ok := res[2].(string)
		if !ok {
			return Claim{}, corruptf("claim reply %v", res)
		}
		out, err := decodeRecordOwned([]byte(rec))
		if err != nil {
			return Claim{}, fmt.Errorf("store: redis claim %q: %w", key, err)
		}
		return Claim{State: Finished, Attempts: attempts, Outcome: out}, nil
	}
	return Claim{}, corruptf("claim reply %v", res)
}

// Finish implements Store.
func (r *Redis) Finish(ctx context.Context, key, token string, out Outcome, retention time.Duration) error {
	if retention <= 0 {
		return fmt.Errorf("store: retention %v must be positive", retention)
	}
	rec, err := encodeRecord(make([]byte, 0, recordSize(out)), out)
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if r.waitReplicas > 0 {
		cmd, short := r.runAndWait(ctx, finishScript, r.keys(key), token, rec, ms(retention))
		n, err := cmd.Int64()
		if err != nil {
			return r.fail("finish", err)
		}
		if n != 1 {
			return ErrNotOwner
		}
		if short && r.onShortfall != nil {
			r.onShortfall()
		}
		return nil
	}
	n, err := r.batch.run(ctx, finishScript, r.keys(key), token, rec, ms(retention)).Int64()
	if err != nil {
		return r.fail("finish", err)
	}
	if n != 1 {
		return ErrNotOwner
	}
	return nil
}

// runAndWait runs s and a WAIT for waitReplicas in one pipeline on one
// connection to the master that holds keys[0] (WAIT waits only for the
// writes of its own connection, and with them every earlier write in the
// replication stream), bypassing the batcher: one round trip. short
// reports that fewer replicas than asked acknowledged within waitTimeout,
// or that the WAIT failed; the script's writes are on the master either
// way.
func (r *Redis) runAndWait(ctx context.Context, s *redis.Script, keys []string, args ...any) (cmd *redis.Cmd, short bool) {
	c, err := r.master(ctx, keys[0])
	if err != nil {
		return failedCmd(ctx, err), false
	}
	run := func(load bool) (cmd, wait *redis.Cmd) {
		pipe := c.Pipeline()
		if load {
			cmd = s.Eval(ctx, pipe, keys, args...)
		} else {
			cmd = s.EvalSha(ctx, pipe, keys, args...)
		}
		wait = pipe.Do(ctx, "WAIT", r.waitReplicas, ms(r.waitTimeout))
		execPipe(ctx, pipe, cmd, wait)
		return cmd, wait
	}
	cmd, wait := run(false)
	if isNoScript(cmd.Err()) {
		// A restarted Redis forgot the script: EVAL loads it.
		cmd, wait = run(true)
	}
	acked, err := wait.Int64()
	return cmd, err != nil || acked < int64(r.waitReplicas)
}

// RunDurable runs one Lua script whose writes acknowledge an event or
// record an outcome (the delivery queue's enqueue, settle, replay and
// purge). Without RedisOptions.WaitReplicas it is RunScript. With it, the
// script and a WAIT go out in one pipeline to the key's master (one round
// trip, outside the batcher), as for Finish: the call returns once that
// many replicas acknowledged, or after WaitTimeout with
// OnReplicaShortfall called (the script succeeded; its writes are on the
// master).
func (r *Redis) RunDurable(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	if r.waitReplicas <= 0 {
		return r.batch.run(ctx, s, keys, args...)
	}
	cmd, short := r.runAndWait(ctx, s, keys, args...)
	if short && cmd.Err() == nil && r.onShortfall != nil {
		r.onShortfall()
	}
	return cmd
}

// master returns the client of the master that holds key: the one server
// (single or Sentinel-managed), or the Cluster node owning key's slot.
func (r *Redis) master(ctx context.Context, key string) (*redis.Client, error) {
	switch c := r.client.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	}
	return nil, fmt.Errorf("unsupported redis client %T", r.client)
}

// Release implements Store.
func (r *Redis) Release(ctx context.Context, key, token string) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	drop := "0"
	if r.attemptsTTL < 0 {
		drop = "1"
	}
	n, err := r.batch.run(ctx, releaseScript, r.keys(key), token, drop).Int64()
	if err != nil {
		return r.fail("release", err)
	}
	if n != 1 {
		return ErrNotOwner
	}
	return nil
}

// Get implements Store. A record that cannot be decoded, or a key of the
// wrong Redis type, is reported as ErrCorrupt.
func (r *Redis) Get(ctx context.Context, key string) (KeyState, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	res, err := r.batch.run(ctx, inspectScript, r.keys(key), "0", 0).Slice()
	if err != nil {
		return KeyState{}, r.fail("get", err)
	}
	st, err := parseInspect(res)
	if err != nil {
		return KeyState{}, fmt.Errorf("store: redis get %q: %w", key, err)
	}
	return st, nil
}

// Peek implements Peeker: one read-only script, as Get.
func (r *Redis) Peek(ctx context.Context, key string) (State, Outcome, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	res, err := r.batch.run(ctx, inspectScript, r.keys(key), "0", 0).Slice()
	if err != nil {
		return Absent, Outcome{}, r.fail("peek", err)
	}
	st, err := parseInspect(res)
	if err != nil {
		return Absent, Outcome{}, fmt.Errorf("store: redis peek %q: %w", key, err)
	}
	if st.State != Finished {
		return st.State, Outcome{}, nil
	}
	rec, _ := res[2].(string)
	out, err := decodeRecordOwned([]byte(rec))
	if err != nil {
		return Absent, Outcome{}, fmt.Errorf("store: redis peek %q: %w", key, err)
	}
	return Finished, out, nil
}

// Delete implements Store: the state is read and the keys deleted in one
// atomic script. A corrupted key is deleted all the same (that is how an
// operator clears it) and reported with whatever could be decoded: a
// record that could not be is shown as finished with status 0.
func (r *Redis) Delete(ctx context.Context, key string) (KeyState, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	res, err := r.batch.run(ctx, inspectScript, r.keys(key), "1", ms(r.resetHold)).Slice()
	if err != nil {
		return KeyState{}, r.fail("delete", err)
	}
	st, err := parseInspect(res)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return KeyState{}, fmt.Errorf("store: redis delete %q: %w", key, err)
	}
	return st, nil
}

// parseInspect decodes the inspect script's reply. On ErrCorrupt it still
// returns the state as far as it could be read.
func parseInspect(res []any) (KeyState, error) {
	var st KeyState
	if len(res) != 8 {
		return st, corruptf("inspect reply of %d elements", len(res))
	}
	var f [8]string
	for i, v := range res {
		switch v := v.(type) {
		case string:
			f[i] = v
		case int64:
			f[i] = strconv.FormatInt(v, 10)
		case nil:
		default:
			return st, corruptf("inspect reply element %d of type %T", i, v)
		}
	}
	bad, has, rec, lock, n, first, last, fp := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]
	var errs []error
	if bad == "1" {
		errs = append(errs, corruptf("a key holds the wrong Redis type"))
	}
	if n != "" {
		var err error
		if st.Attempts, err = strconv.ParseInt(n, 10, 64); err != nil {
			errs = append(errs, corruptf("attempts %q", n))
		}
		if st.FirstSeen, err = parseMillis(first); err != nil {
			errs = append(errs, err)
		}
		if st.LastSeen, err = parseMillis(last); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case has == "1":
		st.State = Finished
		out, err := decodeRecordOwned([]byte(rec))
		if err != nil {
			errs = append(errs, err)
			break
		}
		st.Status = out.Status
		st.Fingerprint = out.Fingerprint
	case lock != "-2":
		st.State = InFlight
		st.Fingerprint = fp
	default:
		st.State = Absent
	}
	if len(errs) > 0 {
		return st, errs[0]
	}
	return st, nil
}

func parseMillis(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, corruptf("time %q", s)
	}
	return time.UnixMilli(v), nil
}

// Ping implements Store.
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return r.fail("ping", err)
	}
	return nil
}

// Close implements Store.
func (r *Redis) Close() error {
	r.batch.close()
	return r.client.Close()
}

// SetRedisLogger sends the Redis client library's own log lines (a failed
// dial, a discarded connection) to l at debug level instead of the
// library's default plain-text lines on stderr; nil discards them. It is
// process-wide, like the library setting it wraps.
func SetRedisLogger(l *slog.Logger) {
	redis.SetLogger(redisLogger{l})
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.l == nil || !r.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	r.l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis")
}

// Client is the Redis client the store uses, for the delivery queue that
// lives in the same Redis.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// RunScript runs one Lua script through the store's batcher: concurrent
// calls share pipelines, each script stays one atomic EVALSHA.
func (r *Redis) RunScript(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return r.batch.run(ctx, s, keys, args...)
}

// KeyPrefix is what every key of the store starts with.
func (r *Redis) KeyPrefix() string { return r.prefix }

// OpTimeout bounds each call.
func (r *Redis) OpTimeout() time.Duration { return r.timeout }
