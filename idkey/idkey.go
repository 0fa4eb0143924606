// Package idkey derives a delivery's idempotency key (from the key sources
// a route names: headers, JSON fields, form and query values, templates, a
// hash of the body) and its fingerprint. It is pure: no I/O, no store, no
// metrics, so the config can parse key sources without linking either.
package idkey
