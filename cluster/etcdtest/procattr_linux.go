package etcdtest

import "syscall"

// procAttr kills etcd when the test process dies before its cleanup runs.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
