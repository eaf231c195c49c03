package forward

import (
	"crypto/tls"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// unsentLimit is the TCP_NOTSENT_LOWAT of c (a TCP connection, or TLS
// over one).
func unsentLimit(t *testing.T, c net.Conn) int {
	t.Helper()
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := raw.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return n
}

// TestFramedConnectionsLimitUnsent: both ends of a framed connection, TLS
// or not, let at most maxUnsent bytes wait unsent in their sockets, so
// that a small frame does not wait behind a socket's whole send buffer of
// a large message.
func TestFramedConnectionsLimitUnsent(t *testing.T) {
	p := newPKI(t)
	for _, mtls := range []bool{false, true} {
		var b *started
		var c *Client
		if mtls {
			b, c = p.start(t, "b", compute), p.client(t, "a", ClientOptions{})
		} else {
			b, c = start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true}), NewClient(ClientOptions{})
			defer c.Close()
		}
		if _, err := c.Forward(testCtx(t), []Peer{b.peer}, sumRequest(t)); err != nil {
			t.Fatal(err)
		}
		if n := unsentLimit(t, poolOf(t, c, b.peer.Addr).slots[0].conn.nc); n != maxUnsent {
			t.Errorf("mtls=%v: the client's end lets %d bytes wait unsent, want %d", mtls, n, maxUnsent)
		}
		b.srv.mu.Lock()
		if len(b.srv.conns) != 1 {
			t.Errorf("mtls=%v: the server has %d framed connections, want 1", mtls, len(b.srv.conns))
		}
		for sc := range b.srv.conns {
			if n := unsentLimit(t, sc.nc); n != maxUnsent {
				t.Errorf("mtls=%v: the server's end lets %d bytes wait unsent, want %d", mtls, n, maxUnsent)
			}
		}
		b.srv.mu.Unlock()
	}
	if err := limitUnsent(&net.IPConn{}, maxUnsent); err != nil {
		t.Fatalf("a connection that is not TCP: %v, want nothing done", err)
	}
}
