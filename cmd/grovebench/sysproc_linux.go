package main

import "syscall"

// childSysProcAttr puts a child in its own process group (so Ctrl-C reaches
// only grovebench, which stops the group) and has the kernel SIGKILL it if
// grovebench dies without cleaning up.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
