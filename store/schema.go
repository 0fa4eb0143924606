package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// SchemaVersion is the version of the Redis key layout this build reads
// and writes. Version 1 is the layout of every release before the
// version was recorded and of the releases that recorded 1: a sync
// route's key in four keys of its own, webhook_lock/done/attempts/reset
// :{ROUTE:KEY}. Version 2 keeps a sync route's key in the same record as
// the route's queue keeps it (package ledger): webhook_qkey (Redis
// Streams queue) or webhook_kkey (Kafka queue). A store with records and
// no version key is version 1.
//
// This build moves a store from version 1 (or no version) to 2 when it
// starts, records when (webhook_schema_moved) and, for as long as a
// version-1 record can still live, answers version-1 sync records too: a
// finished one as finished, a held lock as in flight (Moved).
const SchemaVersion = 2

// ErrSchemaNewer is wrapped by the error of CheckSchema when the store was
// written by a build whose schema is newer than SchemaVersion: this build
// would misread its records, and must not start on it.
var ErrSchemaNewer = errors.New("store: schema newer than this build")

// SchemaError is CheckSchema's error for a store this build cannot use.
type SchemaError struct {
	// Key is the Redis key holding the version.
	Key string
	// Found is what the key holds; Known is SchemaVersion.
	Found string
	Known int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("store: the Redis store's schema version is %s (key %s) but this clawgate knows up to version %d: run a clawgate release that knows version %s on this store, or point store.redis at another key_prefix or database",
		e.Found, e.Key, e.Known, e.Found)
}

// Is makes errors.Is(err, ErrSchemaNewer) true.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaNewer }

// schemaKey holds the store's schema version: PREFIX webhook_schema.
func (r *Redis) schemaKey() string { return r.prefix + "webhook_schema" }

// schemaMovedKey holds when the store moved from version 1 to 2 (Unix
// ms): PREFIX webhook_schema_moved.
func (r *Redis) schemaMovedKey() string { return r.prefix + "webhook_schema_moved" }

// schemaScript reads the schema version (KEYS[1]); when it is absent or
// 1 it writes ARGV[1] and records the move (KEYS[2], ARGV[2] ms: the
// first move only). Reply: {the version found ("" none), the move's
// time ("" none)}. Not on a Cluster, where the two keys live in
// different slots (schemaRead).
var schemaScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or v == '1' then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2], 'NX')
end
return {v or '', redis.call('GET', KEYS[2]) or ''}
`)

// CheckSchema reads the store's schema version and moves a store of
// version 1, or with no version (a new store, or one written by a
// release from before the version was recorded), to SchemaVersion,
// recording when (Moved). A version newer than SchemaVersion, or a value
// that is not a version, is a *SchemaError (errors.Is ErrSchemaNewer for
// a newer one); a Redis that does not answer is an error naming it. It
// returns the store's version: SchemaVersion, or the newer one refused.
func (r *Redis) CheckSchema(ctx context.Context) (int, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	key := r.schemaKey()
	v, err := r.schemaRead(ctx, key)
	if err != nil {
		return 0, err
	}
	if v == "" {
		v = "1"
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("store: the Redis key %s holds %q, not a schema version: it was not written by clawgate; point store.redis at another key_prefix or database", key, v)
	}
	if n > SchemaVersion {
		return n, &SchemaError{Key: key, Found: v, Known: SchemaVersion}
	}
	return SchemaVersion, nil
}

// schemaRead runs schemaScript: on a Cluster the two keys live in
// different slots, so the version is read and written first and the
// move recorded after.
func (r *Redis) schemaRead(ctx context.Context, key string) (string, error) {
	now := time.Now().UnixMilli()
	moved := r.schemaMovedKey()
	var v, at string
	if _, cluster := r.client.(*redis.ClusterClient); cluster {
		old, err := r.client.Get(ctx, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", r.fail("schema", err)
		}
		if old == "" || old == "1" {
			if err := r.client.Set(ctx, key, SchemaVersion, 0).Err(); err != nil {
				return "", r.fail("schema", err)
			}
			if err := r.client.SetNX(ctx, moved, now, 0).Err(); err != nil {
				return "", r.fail("schema", err)
			}
		}
		at, err = r.client.Get(ctx, moved).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", r.fail("schema", err)
		}
		v = old
	} else {
		res, err := schemaScript.Run(ctx, r.client, []string{key, moved}, SchemaVersion, now).StringSlice()
		if err != nil {
			return "", r.fail("schema", err)
		}
		if len(res) != 2 {
			return "", corruptf("schema reply %v", res)
		}
		v, at = res[0], res[1]
	}
	if ms, err := strconv.ParseInt(at, 10, 64); err == nil {
		r.moved.Store(ms)
	}
	return v, nil
}

// Moved reports when the store moved from schema version 1 to 2 (read
// by CheckSchema); ok false before CheckSchema read it, or on a store
// that never was version 1 (none such yet: a store with no version is
// taken for version 1). Version-1 sync records are looked for while it
// may be recent enough for them to live.
func (r *Redis) Moved() (at time.Time, ok bool) {
	ms := r.moved.Load()
	if ms == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
