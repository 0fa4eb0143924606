// Package idkey derives a delivery's idempotency key (from the key sources
// a route names: headers, JSON fields, form and query values, templates, a
// hash of the body) and its fingerprint. It is pure: no I/O, no store, no
// metrics, so the config can parse key sources without linking either.
package idkey

// Scoped is key as the store, the window, the admin API and resets know
// it: the route's name, ':', the key, so that two routes' keys never meet
// (a route name has no ':': the config allows letters, digits, '-', '_'
// and '.').
func Scoped(route, key string) string { return route + ":" + key }
