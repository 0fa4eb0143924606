//go:build !linux

package main

import "os/exec"

// setChildAttrs: without Linux's parent-death signal, children are stopped
// by the soak's own cleanup only.
func setChildAttrs(*exec.Cmd) {}
