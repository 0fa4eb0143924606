//go:build !linux

package proxy

import "syscall"

// peekHangUp: outside Linux the fasthttp front door does not watch for a
// caller hanging up (a delivery then finishes and its answer's write
// fails), so the watch ends at once.
func peekHangUp(syscall.RawConn) bool { return false }
