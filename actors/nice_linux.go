package actors

import "syscall"

// niceThread gives the calling OS thread the lowest CPU priority (nice 19).
func niceThread() error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19)
}
