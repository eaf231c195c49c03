// Package netconn finds a connection under the wrappers that carry it:
// a *tls.Conn and Grove's own wrappers (connlimit's, h2guard's, the
// cluster port's) each give the connection they wrap through a NetConn
// method.
package netconn

import "net"

// Wrapper is a connection over another one, which NetConn returns.
type Wrapper interface{ NetConn() net.Conn }

// maxDepth bounds how many wrappers As and Innermost go through: wrappers
// of wrappers, but never a cycle.
const maxDepth = 8

// As returns the first connection of type T in c's chain (c itself, or
// one a wrapper holds), and whether there is one.
func As[T net.Conn](c net.Conn) (T, bool) {
	for range maxDepth {
		if t, ok := c.(T); ok {
			return t, true
		}
		w, ok := c.(Wrapper)
		if !ok {
			break
		}
		c = w.NetConn()
	}
	var zero T
	return zero, false
}

// Innermost returns the last connection of c's chain: the one no wrapper
// holds (usually the *net.TCPConn).
func Innermost(c net.Conn) net.Conn {
	for range maxDepth {
		w, ok := c.(Wrapper)
		if !ok {
			break
		}
		c = w.NetConn()
	}
	return c
}
