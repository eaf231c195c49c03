//go:build !linux

package etcdtest

import (
	"errors"
	"os"
	"syscall"
)

// procAttr has no parent-death signal outside Linux.
func procAttr() *syscall.SysProcAttr { return nil }

// freeze is not available outside Linux.
func freeze(*os.Process) error { return errors.New("etcdtest: Freeze needs Linux") }
