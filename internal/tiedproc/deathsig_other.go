//go:build !linux

package tiedproc

import "os/exec"

// setDeathSignal does nothing: only Linux has a parent-death signal.
func setDeathSignal(*exec.Cmd) {}
