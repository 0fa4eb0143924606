package config

import (
	"reflect"
	"slices"
)

// restartOnly are the settings only a restart applies, in the order
// RestartFields names them: listen, server, tls, admin, store, tracing,
// dedupe.window, dedupe.cache_size, queue.backend, queue.shards and
// queue.kafka. field returns a pointer to the setting in c. This is the
// one list: RestartFields and KeepRestartFields both read it.
var restartOnly = []struct {
	name  string
	field func(c *Config) any
}{
	{"listen", func(c *Config) any { return &c.Listen }},
	{"server", func(c *Config) any { return &c.Server }},
	{"tls", func(c *Config) any { return &c.TLS }},
	{"admin", func(c *Config) any { return &c.Admin }},
	{"store", func(c *Config) any { return &c.Store }},
	{"tracing", func(c *Config) any { return &c.Tracing }},
	{"dedupe.window", func(c *Config) any { return &c.Dedupe.Window }},
	{"dedupe.cache_size", func(c *Config) any { return &c.Dedupe.CacheSize }},
	{"dedupe.history", func(c *Config) any { return &c.Dedupe.History }},
	{"queue.backend", func(c *Config) any { return &c.Queue.Backend }},
	{"queue.shards", func(c *Config) any { return &c.Queue.Shards }},
	{"queue.kafka", func(c *Config) any { return &c.Queue.Kafka }},
}

// RestartFields names the settings, such as "store.redis.addrs", whose
// value differs between the running config and next and that only a
// restart applies (restartOnly). A value resolved from the environment
// (the admin token, the Redis and Kafka passwords) is named by the field
// naming its variable; a value compiled from others (queue.kafka's
// TLSConfig) is not compared, its fields are.
func RestartFields(running, next *Config) []string {
	var out []string
	for _, f := range restartOnly {
		a, b := reflect.ValueOf(f.field(running)).Elem(), reflect.ValueOf(f.field(next)).Elem()
		switch {
		case a.Kind() == reflect.Struct:
			out = append(out, changedFields(f.name, a, b)...)
		case !reflect.DeepEqual(a.Interface(), b.Interface()):
			out = append(out, f.name)
		}
	}
	return out
}

// KeepRestartFields sets every restart-only setting of next (restartOnly)
// to running's, whole (resolved secrets and compiled values included), so
// that a reload leaves them as started.
func KeepRestartFields(running, next *Config) {
	for _, f := range restartOnly {
		reflect.ValueOf(f.field(next)).Elem().Set(reflect.ValueOf(f.field(running)).Elem())
	}
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
