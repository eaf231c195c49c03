package netconn

import (
	"net"
	"testing"
)

// wrapper is a connection over another, as tls.Conn is.
type wrapper struct{ net.Conn }

func (w wrapper) NetConn() net.Conn { return w.Conn }

// cycle is a wrapper whose NetConn returns itself.
type cycle struct{ net.Conn }

func (c *cycle) NetConn() net.Conn { return c }

func TestAsFindsTheConnectionUnderTheWrappers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	inner := wrapper{a}
	c := wrapper{wrapper{inner}}
	if got, ok := As[wrapper](c); !ok || got != c {
		t.Errorf("As[wrapper] = %v, %v; want c itself", got, ok)
	}
	if _, ok := As[*net.TCPConn](c); ok {
		t.Error("As[*net.TCPConn] found a TCP connection under a pipe")
	}
	if got := Innermost(c); got != a {
		t.Errorf("Innermost = %v, want the pipe's end", got)
	}
}

func TestAsAndInnermostEndOnACycle(t *testing.T) {
	c := &cycle{}
	if _, ok := As[*net.TCPConn](c); ok {
		t.Error("As found a TCP connection in a cycle")
	}
	if got := Innermost(c); got != c {
		t.Errorf("Innermost = %v, want the cycle itself", got)
	}
}

// dialLoopback returns a TCP connection to a loopback listener; both
// close when the test ends.
func dialLoopback(t *testing.T) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestAsFindsTheTCPConnectionUnderAWrapper(t *testing.T) {
	c := dialLoopback(t)
	if got, ok := As[*net.TCPConn](wrapper{wrapper{c}}); !ok || got != c {
		t.Errorf("As[*net.TCPConn] = %v, %v; want the dialled connection", got, ok)
	}
}
