package config

import (
	"reflect"
	"slices"
)

// RestartFields names the settings, such as "store.redis.addrs", whose
// value differs between the running config and next and that only a
// restart applies: listen, server, tls, admin, store, tracing, dedupe.window,
// dedupe.cache_size, queue.backend, queue.shards and queue.kafka. A value
// resolved from the environment (the admin token, the Redis and Kafka
// passwords) is named by the field naming its variable; a value compiled
// from others (queue.kafka's TLSConfig) is not compared, its fields are.
func RestartFields(running, next *Config) []string {
	var out []string
	add := func(name string, changed bool) {
		if changed {
			out = append(out, name)
		}
	}
	add("listen", running.Listen != next.Listen)
	add("server", running.Server != next.Server)
	out = append(out, changedFields("tls", reflect.ValueOf(running.TLS), reflect.ValueOf(next.TLS))...)
	out = append(out, changedFields("admin", reflect.ValueOf(running.Admin), reflect.ValueOf(next.Admin))...)
	out = append(out, changedFields("store", reflect.ValueOf(running.Store), reflect.ValueOf(next.Store))...)
	out = append(out, changedFields("tracing", reflect.ValueOf(running.Tracing), reflect.ValueOf(next.Tracing))...)
	add("dedupe.window", running.Dedupe.Window != next.Dedupe.Window)
	add("dedupe.cache_size", running.Dedupe.CacheSize != next.Dedupe.CacheSize)
	add("queue.backend", running.Queue.Backend != next.Queue.Backend)
	add("queue.shards", running.Queue.Shards != next.Queue.Shards)
	out = append(out, changedFields("queue.kafka", reflect.ValueOf(running.Queue.Kafka), reflect.ValueOf(next.Queue.Kafka))...)
	return out
}

// changedFields compares two values of one config struct type field by
// field (recursing into structs) and names each field that differs by its
// YAML path under prefix. A field without a YAML name (a resolved secret)
// is named by the "_env" field beside it that names its variable.
func changedFields(prefix string, a, b reflect.Value) []string {
	var out []string
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := yamlName(f)
		if name == "-" {
			if env, ok := t.FieldByName(f.Name + "Env"); ok {
				name = yamlName(env)
			}
		}
		if name == "-" {
			continue
		}
		path := prefix + "." + name
		av, bv := a.Field(i), b.Field(i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, changedFields(path, av, bv)...)
			continue
		}
		if !reflect.DeepEqual(av.Interface(), bv.Interface()) && !slices.Contains(out, path) {
			out = append(out, path)
		}
	}
	return out
}
