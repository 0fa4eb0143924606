// Package dedupe derives a delivery's idempotency key and fingerprint, and
// keeps the in-process window of recent outcomes that answers duplicates
// without a store round trip.
package dedupe
