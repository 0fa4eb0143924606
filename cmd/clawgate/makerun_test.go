package main

import (
	"fmt"
	"net"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawgate/clawgate/internal/eventually"
)

// Regression: `make run` listened on every interface with the inline demo
// secret, and its recipe left serve and echo running after a SIGHUP to
// make (serve reloads on SIGHUP; the recipe's shell died without stopping
// it). The gateway binds loopback only, and SIGHUP, SIGINT or SIGTERM to
// make (alone or to its process group, as a closed terminal sends) stops
// both.
func TestMakeRunStopsServeAndEchoOnSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs make run")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	// make run uses gateway.yaml's fixed ports: echo :9000, admin :9090.
	for _, addr := range []string{"127.0.0.1:9000", "127.0.0.1:9090"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("%s is taken (%v); make run needs it", addr, err)
		}
		ln.Close()
	}
	root, _ := filepath.Abs("../..")
	for _, tt := range []struct {
		name  string
		sig   syscall.Signal
		group bool
	}{
		{"HUP to the process group", syscall.SIGHUP, true},
		{"HUP to make", syscall.SIGHUP, false},
		{"INT to make", syscall.SIGINT, false},
		{"TERM to make", syscall.SIGTERM, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if signal.Ignored(tt.sig) {
				t.Skipf("%v is ignored in this process, and so in make", tt.sig)
			}
			listen := freePort(t)
			var out lockedBuffer
			cmd := exec.Command("make", "-s", "-C", root, "run", "RUN_LISTEN="+listen)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			pgid := cmd.Process.Pid
			t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
			// make builds the binary first: up to 2 minutes on a busy machine.
			for _, want := range []string{`"msg":"clawgate listening","addr":"` + listen + `"`, `"msg":"echo listening"`} {
				eventually.Within(t, 2*time.Minute, func() bool { return strings.Contains(out.String(), want) },
					func() string { return fmt.Sprintf("make run never logged %s:\n%s", want, out.String()) })
			}
			if strings.Contains(out.String(), `"addr":"[::]:`) {
				t.Fatalf("gateway not on loopback:\n%s", out.String())
			}
			target := pgid
			if tt.group {
				target = -pgid
			}
			if err := syscall.Kill(target, tt.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("make still running 30 s after the signal:\n%s", out.String())
			}
			// Nothing of the group is left: serve and echo are gone.
			eventually.Within(t, 30*time.Second, func() bool { return syscall.Kill(-pgid, 0) != nil }, func() string {
				ps, _ := exec.Command("ps", "-o", "pid,cmd", "-g", strconv.Itoa(pgid)).CombinedOutput()
				return fmt.Sprintf("processes left after make exited:\n%s", ps)
			})
		})
	}
}
