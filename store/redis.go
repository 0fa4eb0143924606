package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	// WaitReplicas, when positive, makes RunDurable (the sync finish,
	// the queue's enqueue, settle, replay and purge) wait until that many
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

// Redis is the connection every gateway instance shares the keys
// through: a single Redis server, a Redis Cluster or a Sentinel-managed
// master, with the pipelining of concurrent scripts (RunScript), the WAIT
// after writes that acknowledge an event or record an outcome
// (RunDurable), the schema version (CheckSchema), the reset broadcast and
// the durability watch. The keys themselves are package ledger's records
// (ledger.RedisStore is the sync routes' Store on a Redis); SyncKeys names
// the version-1 keys a sync route's key had before them.
type Redis struct {
	client  redis.UniversalClient
	batch   *batcher
	prefix  string
	timeout time.Duration

	waitReplicas int
	waitTimeout  time.Duration
	onShortfall  func()

	// moved is when the store moved from schema version 1 (Unix ms; 0:
	// not read yet), read by CheckSchema.
	moved atomic.Int64
}

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
	return &Redis{
		client: client, batch: newBatcher(client, timeout), prefix: opts.KeyPrefix, timeout: timeout,
		waitReplicas: opts.WaitReplicas, waitTimeout: waitTimeout, onShortfall: opts.OnReplicaShortfall,
	}, nil
}

// SyncKeys names the Redis keys schema version 1 kept a sync route's
// scoped key ("route:key") in: its lock, its finished record and its
// attempt counter (and a reset tombstone, webhook_reset), all with the
// hash tag {K} (an empty K, or one starting with '}' or '%', with a '%'
// prepended). ledger.RedisStore and the Redis queue's enqueue
// (CheckSyncRecords) read them while such records may live.
func (r *Redis) SyncKeys(scoped string) (lock, done, attempts string) {
	tag := scoped
	if tag == "" || tag[0] == '}' || tag[0] == '%' {
		tag = "%" + tag
	}
	return r.prefix + "webhook_lock:{" + tag + "}", r.prefix + "webhook_done:{" + tag + "}", r.prefix + "webhook_attempts:{" + tag + "}"
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

// ms converts d to whole milliseconds, rounding up so a positive duration
// never becomes 0.
func ms(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
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
// trip, outside the batcher): the call returns once that
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

// Ping reports whether Redis answers (/readyz).
func (r *Redis) Ping(ctx context.Context) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return r.fail("ping", err)
	}
	return nil
}

// Close closes the connections.
func (r *Redis) Close() error {
	r.batch.close()
	return r.client.Close()
}

// SetRedisLogger sends the Redis client library's own log lines (a failed
// dial, a discarded connection) to l at debug level instead of the
// library's default plain-text lines on stderr; nil discards them. It is
// process-wide, like the library setting it wraps: the library's logger
// is set once, and a later call (another gateway in the same process, a
// test's second instance) only swaps where its lines go, so clients
// already running never see the setting change under them.
func SetRedisLogger(l *slog.Logger) {
	redisLog.Store(l)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}

var (
	redisLog     atomic.Pointer[slog.Logger]
	redisLogOnce sync.Once
)

type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l := redisLog.Load()
	if l == nil || !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "redis")
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
