package forward

import (
	"net"

	"golang.org/x/sys/unix"
)

// limitUnsent sets how many bytes written to c, a TCP connection, may
// wait unsent in its socket (TCP_NOTSENT_LOWAT): a write waits while more
// do. 0, or a connection that is not TCP, leaves the system's default.
func limitUnsent(c net.Conn, n int) error {
	tc, ok := c.(*net.TCPConn)
	if !ok || n <= 0 {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
