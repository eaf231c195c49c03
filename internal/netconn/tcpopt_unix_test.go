//go:build unix

package netconn

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSetTCPIntReachesTheTCPConnectionUnderAWrapper(t *testing.T) {
	c := dialLoopback(t)
	if err := SetTCPInt(wrapper{c}, unix.TCP_NODELAY, 0); err != nil {
		t.Fatalf("SetTCPInt through a wrapper: %v", err)
	}
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var got int
	_ = raw.Control(func(fd uintptr) { got, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
	if got != 0 {
		t.Errorf("TCP_NODELAY = %d after SetTCPInt(..., 0), want 0 (Go sets it to 1 on every connection)", got)
	}
	if err := SetTCPInt(wrapper{}, unix.TCP_NODELAY, 1); err != nil {
		t.Errorf("SetTCPInt without a TCP connection: %v, want nothing done", err)
	}
}
