//go:build !linux

package main

import "syscall"

// devSysProcAttr puts a dev-cluster node in its own process group: a terminal's Ctrl-C reaches
// only dev-cluster, which then stops the nodes.
func devSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
