// Package dedupe decides what happens to a delivery's key: the guard
// (window, claim, finish, release) and the in-process window of recent
// outcomes that answers duplicates without a store round trip. The key
// and fingerprint themselves are derived by package idkey.
package dedupe
