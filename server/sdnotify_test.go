package server

import (
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/doortest"
)

// notifySocket listens on a unixgram socket at name (a path, or @name in
// the abstract namespace) and points NOTIFY_SOCKET at it.
func notifySocket(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return conn
}

// nextNotification reads one datagram; the deadline only bounds a test
// that would otherwise hang.
func nextNotification(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestSdNotify(t *testing.T) {
	t.Run("path", func(t *testing.T) {
		conn := notifySocket(t, filepath.Join(t.TempDir(), "notify"))
		if err := sdNotify("READY=1"); err != nil {
			t.Fatal(err)
		}
		if got := nextNotification(t, conn); got != "READY=1" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("abstract", func(t *testing.T) {
		conn := notifySocket(t, "@clawgate-sdnotify-test-"+filepath.Base(t.TempDir()))
		if err := sdNotify("STOPPING=1"); err != nil {
			t.Fatal(err)
		}
		if got := nextNotification(t, conn); got != "STOPPING=1" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("unset", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "")
		if err := sdNotify("READY=1"); err != nil {
			t.Fatalf("without NOTIFY_SOCKET: %v, want nil", err)
		}
	})
	t.Run("not a socket address", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
		if err := sdNotify("READY=1"); !errors.Is(err, errNotifySocket) {
			t.Fatalf("got %v, want errNotifySocket", err)
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
		if err := sdNotify("READY=1"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("got %v, want ENOENT", err)
		}
	})
}

// Start sends READY=1 once both listeners answer, Shutdown STOPPING=1
// first; a Start that fails sends nothing.
func TestStartNotifiesSystemd(t *testing.T) { doortest.ForEach(t, testStartNotifiesSystemd) }

func testStartNotifiesSystemd(t *testing.T) {
	conn := notifySocket(t, filepath.Join(t.TempDir(), "notify"))

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := Start(testConfig(t, taken.Addr().String()), opts()); err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
	// The next datagram is ours, not a READY=1 from the failed Start.
	if err := sdNotify("MARK=1"); err != nil {
		t.Fatal(err)
	}
	if got := nextNotification(t, conn); got != "MARK=1" {
		t.Fatalf("a failed Start sent %q", got)
	}

	s, err := Start(testConfig(t, "127.0.0.1:0"), opts())
	if err != nil {
		t.Fatal(err)
	}
	if got := nextNotification(t, conn); got != "READY=1" {
		t.Fatalf("after Start: %q, want READY=1", got)
	}
	for _, url := range []string{"http://" + s.AdminAddr().String() + "/healthz", "http://" + s.Addr().String() + "/nowhere"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("READY=1 sent but GET %s: %v", url, err)
		}
		resp.Body.Close()
	}
	s.Shutdown(time.Second)
	if got := nextNotification(t, conn); got != "STOPPING=1" {
		t.Fatalf("after Shutdown: %q, want STOPPING=1", got)
	}
}
