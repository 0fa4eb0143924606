package idkey

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// FingerprintBytes returns the SHA-256 identifying a delivery's payload:
// its method, path and raw body. The hashed input is
//
//	uint64be(len(method)) || method || uint64be(len(path)) || path || body
//
// so no choice of method, path (which may hold any byte, NUL included once
// decoded) and body collides with another. The format is stable: stored
// fingerprints stay comparable across versions.
func FingerprintBytes(method, path string, body []byte) [sha256.Size]byte {
	// Hash method and path from a stack buffer in one Write when they fit,
	// so that the common case allocates nothing beyond the hash state.
	var head [256]byte
	h := sha256.New()
	if 16+len(method)+len(path) <= len(head) {
		b := head[:0]
		b = binary.BigEndian.AppendUint64(b, uint64(len(method)))
		b = append(b, method...)
		b = binary.BigEndian.AppendUint64(b, uint64(len(path)))
		b = append(b, path...)
		h.Write(b)
	} else {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(method)))
		h.Write(n[:])
		h.Write([]byte(method))
		binary.BigEndian.PutUint64(n[:], uint64(len(path)))
		h.Write(n[:])
		h.Write([]byte(path))
	}
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Fingerprint is FingerprintBytes as 64 lowercase hex digits, the form
// stored beside a finished key and compared to tell a retry (same
// fingerprint) from a key reused for another payload.
func Fingerprint(method, path string, body []byte) string {
	sum := FingerprintBytes(method, path, body)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}
