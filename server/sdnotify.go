package server

import (
	"errors"
	"fmt"
	"net"
	"os"
)

// errNotifySocket is returned for a NOTIFY_SOCKET that is not a Unix socket
// (a path, or @name in the abstract namespace).
var errNotifySocket = errors.New("NOTIFY_SOCKET is not a Unix socket path or @abstract name")

// sdNotify tells the service manager about the service's state, as
// sd_notify(3) does: one datagram, such as "READY=1" or "STOPPING=1", on the
// Unix socket named by $NOTIFY_SOCKET. systemd sets the variable for a unit
// with Type=notify; without it (not under systemd, or another Type) sdNotify
// does nothing and returns nil.
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	// Go maps a leading @ to the abstract namespace itself.
	if addr[0] != '/' && addr[0] != '@' {
		return fmt.Errorf("sd_notify %s: %q: %w", state, addr, errNotifySocket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}

// notify sends state with sdNotify; a failure is logged, not fatal (systemd
// then stops a Type=notify unit at TimeoutStartSec, which says why).
func (in *Server) notify(state string) {
	if err := sdNotify(state); err != nil {
		in.log.Warn("systemd notification failed", "error", err.Error())
	}
}
