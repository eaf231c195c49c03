//go:build !unix

package conf

// fdLimit is how many files the process may open: on a system without
// RLIMIT_NOFILE, 1024.
func fdLimit() uint64 { return 1024 }
