package etcdtest

import (
	"os"
	"syscall"
)

// procAttr kills etcd when the test process dies before its cleanup runs.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// freeze stops p (SIGSTOP): its connections stay open, nothing answers.
func freeze(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
