//go:build unix && !linux

package main

import "syscall"

// childSysProcAttr puts a child in its own process group (so Ctrl-C reaches
// only grovebench, which stops the group).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
