package grpcserver

import (
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/netconn"
)

// setUserTimeout sets TCP_USER_TIMEOUT, how long sent data may stay
// unacknowledged before the kernel drops the connection, on c's TCP
// socket: c itself or, through NetConn, the one a wrapper holds.
func setUserTimeout(c net.Conn, d time.Duration) error {
	return netconn.SetTCPInt(c, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
}
