//go:build unix

package netconn

import (
	"net"

	"golang.org/x/sys/unix"
)

// SetTCPInt sets the IPPROTO_TCP socket option opt to value on the TCP
// connection under c (As); a c with no TCP connection under it is left
// alone.
func SetTCPInt(c net.Conn, opt, value int) error {
	tc, ok := As[*net.TCPConn](c)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, opt, value)
	}); err != nil {
		return err
	}
	return serr
}
