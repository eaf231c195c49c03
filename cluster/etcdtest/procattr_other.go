//go:build !linux

package etcdtest

import "syscall"

// procAttr has no parent-death signal outside Linux.
func procAttr() *syscall.SysProcAttr { return nil }
