package tiedproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel send the child SIGKILL when the thread
// that forks it ends.
func setDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
