//go:build unix

package main

import "syscall"

// childSysProcAttr puts a child in its own process group, so Ctrl-C
// reaches only grovebench, which stops the group (tiedproc.Start adds the
// signal that kills it if grovebench dies without cleaning up).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
