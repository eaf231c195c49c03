package grpcserver

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT, how long sent data may stay
// unacknowledged before the kernel drops the connection, on c's TCP
// socket: c itself or, through NetConn, the one a wrapper holds.
func setUserTimeout(c net.Conn, d time.Duration) error {
	tc := tcpConn(c)
	if tc == nil {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}
