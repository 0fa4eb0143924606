package proxy

import "syscall"

// peekHangUp waits until the connection has a byte to read or is closed,
// without taking the byte, and reports whether the caller closed it (an
// end of stream or a reset). It returns false when the wait is cut short
// by a read deadline.
func peekHangUp(rc syscall.RawConn) bool {
	var b [1]byte
	gone := false
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // nothing yet: wait until readable
		case err != nil || n == 0:
			gone = true
		}
		return true
	})
	return gone
}
