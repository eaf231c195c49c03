//go:build !linux

package actors

import "errors"

// niceThread is only implemented on Linux, where a thread has its own nice value.
func niceThread() error { return errors.New("per-thread CPU priority is Linux-only") }
