package verify

import (
	"crypto/sha256"
	"hash"
	"sync"
)

// digestState is a reusable SHA-256 state with a buffer for the signed
// prefix, so that SignedDigest does not allocate.
type digestState struct {
	h   hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// maxPooledPrefix bounds the prefix buffer kept in the pool; a larger one
// (an id near the header size limit) is dropped after use.
const maxPooledPrefix = 4 << 10

var digestStates = sync.Pool{New: func() any { return &digestState{h: sha256.New()} }}

// signedDigest returns the SHA-256 of the prefix parts followed by body.
func signedDigest(body []byte, prefix ...string) [sha256.Size]byte {
	if len(prefix) == 0 {
		return sha256.Sum256(body)
	}
	st := digestStates.Get().(*digestState)
	st.h.Reset()
	st.buf = st.buf[:0]
	for _, p := range prefix {
		st.buf = append(st.buf, p...)
	}
	st.h.Write(st.buf)
	st.h.Write(body)
	st.h.Sum(st.sum[:0])
	d := st.sum
	if cap(st.buf) > maxPooledPrefix {
		st.buf = nil
	}
	digestStates.Put(st)
	return d
}
