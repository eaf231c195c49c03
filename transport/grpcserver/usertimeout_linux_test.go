package grpcserver

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout reads c's TCP_USER_TIMEOUT.
func userTimeout(t *testing.T, c *net.TCPConn) time.Duration {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ms int
	var gerr error
	if err := raw.Control(func(fd uintptr) { ms, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return time.Duration(ms) * time.Millisecond
}

func TestServeKeepsTheTCPUserTimeoutOfAWrappedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			time.Sleep(time.Second)
		}
	}()
	c, err := userTimeoutListener{Listener: wrapListener{ln}, timeout: 7 * time.Second}.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := userTimeout(t, c.(wrapped).Conn.(*net.TCPConn)); got != 7*time.Second {
		t.Errorf("TCP_USER_TIMEOUT of the wrapped connection = %v, want the keepalive timeout 7s", got)
	}
}
