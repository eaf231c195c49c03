// Package tiedproc starts child processes that die with the process that
// started them, and not before.
//
// Linux's parent-death signal (PR_SET_PDEATHSIG, exec.Cmd's
// SysProcAttr.Pdeathsig) is sent when the thread that forked the child
// ends, not the process. Go ends an OS thread when a goroutine locked to
// it exits (Grove's loads run so, internal/lowprio), and the thread that
// forked a child may be any of the process's threads: a child started
// plainly with Pdeathsig is killed at a random moment of its parent's
// life. Start forks from a goroutine locked to its thread, which stays
// until the child has exited.
package tiedproc

import (
	"os/exec"
	"runtime"
)

// Start starts cmd, set (on Linux) to receive SIGKILL when this process
// dies, and returns a channel that receives cmd.Wait's result once the
// child has exited. cmd's other SysProcAttr settings are kept.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	setDeathSignal(cmd)
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		// The child's death signal is tied to this thread: keep it, and
		// keep other goroutines off it, until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}
