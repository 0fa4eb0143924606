package dedupe

import (
	"errors"
	"net/http"
)

// Errors from KeySpec.Derive.
var (
	// ErrNoKey: no source yielded a key.
	ErrNoKey = errors.New("dedupe: no idempotency key")
	// ErrBadKey: the key is longer than 255 bytes or has control characters.
	ErrBadKey = errors.New("dedupe: invalid idempotency key")
)

// Source is one compiled key source.
type Source struct {
	// Kind is header, json, form, query, template, body (body:sha256) or
	// literal (a fixed text part of a template).
	Kind string
	// Name is the header name (canonical), dotted JSON path, form or query
	// field, or the literal text.
	Name string
	// Parts of a template.
	Parts []Source
}

// KeySpec is a route's compiled idempotency key sources.
type KeySpec struct {
	Sources []Source
}

// ParseKey compiles key sources such as "header:Idempotency-Key",
// "json:data.object.id" or "template:{json:type}:{json:id}".
func ParseKey(sources []string) (*KeySpec, error) {
	panic("TODO dedupe helper")
}

// Derive returns the first present source's key. Missing: ErrNoKey; invalid:
// ErrBadKey. r is read for headers and query only; body is the raw body.
func (k *KeySpec) Derive(r *http.Request, body []byte) (string, error) {
	panic("TODO dedupe helper")
}

// HeaderSources returns the header names the key may come from, and whether
// every source is a header (a key that the body does not determine).
func (k *KeySpec) HeaderSources() (names []string, onlyHeaders bool) {
	panic("TODO dedupe helper")
}
