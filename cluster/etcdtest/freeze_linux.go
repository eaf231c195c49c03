package etcdtest

import (
	"os"
	"syscall"
)

// freeze stops p (SIGSTOP): its connections stay open, nothing answers.
func freeze(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
