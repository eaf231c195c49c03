package grpcserver

import (
	"net"
	"time"
)

// defaultKeepaliveTimeout is gRPC's keepalive timeout when
// Options.KeepaliveTimeout is 0.
const defaultKeepaliveTimeout = 20 * time.Second

// userTimeoutListener sets TCP_USER_TIMEOUT on the connections it accepts
// that wrap a TCP connection (a connection limit's, another guard's):
// gRPC sets it to its keepalive timeout, so that a peer that stopped
// acknowledging data is dropped then, but only on a *net.TCPConn, and a
// wrapper would silently lose it.
type userTimeoutListener struct {
	net.Listener
	timeout time.Duration
}

func (l userTimeoutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if _, bare := c.(*net.TCPConn); !bare {
		_ = setUserTimeout(c, l.timeout) // failing, the kernel's default stays
	}
	return c, nil
}
