package forward

import (
	"net"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/netconn"
)

// limitUnsent sets how many bytes written to c, a TCP connection, may
// wait unsent in its socket (TCP_NOTSENT_LOWAT): a write waits while more
// do. 0, or a connection that is not TCP, leaves the system's default.
func limitUnsent(c net.Conn, n int) error {
	if n <= 0 {
		return nil
	}
	return netconn.SetTCPInt(c, unix.TCP_NOTSENT_LOWAT, n)
}
