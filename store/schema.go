package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// SchemaVersion is the version of the Redis key layout this build reads
// and writes: the webhook_lock/done/attempts/reset keys of the sync
// store, the queue's webhook_qkey records and streams, and the Kafka
// queue's webhook_kkey records. Version 1 is the layout of every release
// before the version was recorded, so a store with records and no
// version key is version 1 and is read as it is.
const SchemaVersion = 1

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

// schemaScript reads the schema version, writing ARGV[1] when absent.
var schemaScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// CheckSchema reads the store's schema version, writing SchemaVersion
// when it is absent (a new store, or one written by a release from
// before the version was recorded: both are version 1). A version newer
// than SchemaVersion, or a value that is not a version, is a *SchemaError
// (errors.Is ErrSchemaNewer for a newer one); a Redis that does not answer
// is an error naming it. It returns the version found.
func (r *Redis) CheckSchema(ctx context.Context) (int, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	key := r.schemaKey()
	v, err := schemaScript.Run(ctx, r.client, []string{key}, SchemaVersion).Text()
	if err != nil {
		return 0, r.fail("schema", err)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("store: the Redis key %s holds %q, not a schema version: it was not written by clawgate; point store.redis at another key_prefix or database", key, v)
	}
	if n > SchemaVersion {
		return n, &SchemaError{Key: key, Found: v, Known: SchemaVersion}
	}
	return n, nil
}
