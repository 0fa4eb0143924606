//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes the kernel SIGKILL a child when the soak dies, even
// by SIGKILL or a crash, so no redis-server or gateway outlives a run.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
