package redistest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestMissingBinarySaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rec := &recorder{TB: t}
	requireBinary(rec, "redis-server")
	if !strings.Contains(rec.fatal, "make test") || !strings.Contains(rec.fatal, "apt-get install -y redis-server") {
		t.Fatalf("message %q does not say how to install redis-server", rec.fatal)
	}
}

func TestServerStopStart(t *testing.T) {
	s := StartServer(t)
	if _, err := Command(s.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := Command(s.Addr, "PING"); err == nil {
		t.Fatalf("PING answered after Stop")
	}
	s.Stop() // idempotent
	s.Start()
	if v, err := Command(s.Addr, "GET", "k"); err != nil || v != "" {
		t.Fatalf("GET after restart = %q, %v; want an empty server", v, err)
	}
}

func TestPassword(t *testing.T) {
	s := StartServerWith(t, Options{Password: "pw"})
	if _, err := Command(s.Addr, "PING"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without the password = %v", err)
	}
	if v, err := AuthCommand(s.Addr, "pw", "PING"); err != nil || v != "PONG" {
		t.Fatalf("PING with the password = %q, %v", v, err)
	}
}

func TestReplica(t *testing.T) {
	master := StartServerWith(t, Options{Password: "pw"})
	replica := StartReplica(t, master)
	if _, err := AuthCommand(master.Addr, "pw", "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	var v string
	var err error
	eventually.Within(t, 5*time.Second, func() bool {
		v, err = Command(replica.Addr, "GET", "k")
		return err == nil && v == "v"
	}, func() string { return fmt.Sprintf("GET on the replica = %q, %v; the write did not arrive", v, err) })
}
