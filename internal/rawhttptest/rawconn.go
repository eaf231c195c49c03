// Package rawhttptest is an HTTP/1.1 client written by hand for tests that
// attack a server: it shows what a client library hides.
package rawhttptest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawConn is an HTTP/1.1 client connection written by hand, to see what a
// client library hides: whether the server closes the connection, and
// when it answers a request whose body has not been sent.
type RawConn struct {
	t testing.TB
	net.Conn
	br *bufio.Reader
}

// DialRaw opens a RawConn to addr (host:port); it is closed when the test
// ends.
func DialRaw(t testing.TB, addr string) *RawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &RawConn{t: t, Conn: c, br: bufio.NewReader(c)}
}

// Send writes s, within 10 s, failing the test when it cannot.
func (c *RawConn) Send(s string) {
	c.t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, s); err != nil {
		c.t.Fatalf("writing a request: %v", err)
	}
}

// Answer reads the next response and its body, within wait.
func (c *RawConn) Answer(wait time.Duration) (*http.Response, string, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// ClosedWithin reports whether the server closes the connection within
// wait (a read ends with EOF or a reset rather than a timeout).
func (c *RawConn) ClosedWithin(wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
