//go:build unix

package conf

import "syscall"

// fdLimit is how many files the process may open (its soft
// RLIMIT_NOFILE); 1024 when it cannot be read.
func fdLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return r.Cur
}
