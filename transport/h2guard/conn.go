package h2guard

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/groveml/grove/internal/netconn"
)

// conn is a guarded server connection (Guard.Wrap).
//
// The server reads it from one goroutine at a time, which owns the
// fields under "reader"; it writes under wmu, which guards the fields
// under "writer". A reset over budget is found in Read, which then
// closes the connection itself (finish) before it returns.
type conn struct {
	net.Conn          // the server's connection, after any TLS handshake
	raw      net.Conn // the connection under any TLS
	g        *Guard

	// reader
	in             frames
	ages           streamAges
	budget         budget
	prematureMin   int64 // premature resets that, once over half the streams opened, close the connection
	opened, resets int64 // streams opened and reset over the connection's life
	premature      int64 // resets of streams younger than prematureAge, over the connection's life
	closing        bool  // finish ran: every later Read fails

	// writer
	wmu   sync.Mutex
	out   frames        // the server's frames
	state goAwayState   // whether a GOAWAY is wanted or was written
	last  uint32        // the GOAWAY's last stream id (the reader's in.last when it closed)
	sent  chan struct{} // closed once the GOAWAY is written
}

// goAwayState is where a connection is in closing.
type goAwayState int

const (
	serving       goAwayState = iota
	goAwayWanted              // at the end of the frame the server is writing
	goAwayWritten             // or given up on: what the server writes is dropped
)

// Read reads what the client sent, unchanged, unless it takes the client
// over its reset budget: then it closes the connection (GOAWAY, a
// lingering close) and fails with ErrTooManyResets, as do the reads
// after it.
func (c *conn) Read(b []byte) (int, error) {
	if c.closing {
		return 0, ErrTooManyResets
	}
	n, err := c.Conn.Read(b)
	if n > 0 && !c.in.off {
		now := c.g.now()
		c.in.now = now.UnixNano()
		opened, resets, premature := c.in.feed(b[:n])
		c.opened += int64(opened)
		c.resets += int64(resets)
		c.premature += int64(premature)
		if resets > 0 && (!c.budget.take(resets, now) || c.tooPremature()) {
			c.closing = true
			c.finish()
			return 0, ErrTooManyResets
		}
	}
	return n, err
}

// tooPremature reports whether the client reset at least prematureMin
// streams prematurely, and more than half the streams it opened: a client
// that waits for its answers resets few streams that young, and one that
// races two servers and cancels the slower (hedging) at most about half.
func (c *conn) tooPremature() bool {
	return c.premature >= c.prematureMin && 2*c.premature > c.opened
}

// Write writes what the server sends, following its frames; once the
// connection is closing it writes up to the end of the frame in
// progress, then the GOAWAY, and drops the rest (reporting it written:
// the connection is about to close, and an error would make the server
// close it before the client reads the GOAWAY).
func (c *conn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	switch c.state {
	case goAwayWritten:
		return len(b), nil
	case goAwayWanted:
		k := c.out.until(b)
		if k < 0 {
			break
		}
		n, err := c.Conn.Write(b[:k])
		c.out.feed(b[:n])
		if err != nil {
			return n, err
		}
		c.writeGoAway()
		return len(b), nil
	}
	n, err := c.Conn.Write(b)
	c.out.feed(b[:n])
	return n, err
}

// writeGoAway writes the GOAWAY (wmu held, at a frame boundary); what
// the server writes after it is dropped.
func (c *conn) writeGoAway() {
	_, _ = c.Conn.Write(goAwayFrame(c.last, goAwayDebug))
	c.state = goAwayWritten
	close(c.sent)
}

// finish closes a connection over its budget, on the reading goroutine:
// it writes the GOAWAY at the next boundary of the server's frames
// (within goAwayWait), closes its sending side, reads and discards what
// the client still sends (within lingerTime), and closes the connection.
// c.in.last is read here, on the reader's goroutine, before any write can
// use it.
func (c *conn) finish() {
	c.g.report(c)
	deadline := time.Now().Add(goAwayWait)
	// A write blocked on a client that reads nothing fails by then, and
	// so gives up wmu.
	_ = c.Conn.SetWriteDeadline(deadline)
	c.wmu.Lock()
	c.last = c.in.last
	if c.out.atBoundary() {
		c.writeGoAway()
	} else {
		c.state = goAwayWanted
	}
	c.wmu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	written := true
	select {
	case <-c.sent:
	case <-t.C:
		written = false
	}
	t.Stop()
	if !written {
		c.wmu.Lock()
		c.state = goAwayWritten // given up: drop what the server writes
		c.wmu.Unlock()
	} else {
		c.linger()
	}
	_ = c.Conn.Close()
}

// closeWriter is a connection whose sending side closes alone (TCP's
// FIN, TLS's close_notify).
type closeWriter interface{ CloseWrite() error }

// linger closes the sending side (TLS close_notify where the server's
// connection is a *tls.Conn, then the TCP FIN), reads and discards what
// the client still sends, up to lingerBytes, and then waits, until the
// client closes its side or lingerTime passes: a connection closed with
// unread bytes in its socket is reset, and a reset may lose the GOAWAY
// before the client reads it. A client that goes on sending (a flood)
// finds its socket full instead, and waits without costing the server
// anything.
func (c *conn) linger() {
	if tc, ok := c.Conn.(*tls.Conn); ok {
		_ = tc.CloseWrite()
	}
	tcp := netconn.Innermost(c.raw)
	if cw, ok := tcp.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	deadline := time.Now().Add(lingerTime)
	_ = tcp.SetReadDeadline(deadline)
	buf := make([]byte, 4<<10)
	for n := 0; n < lingerBytes; {
		k, err := tcp.Read(buf)
		if err != nil {
			return
		}
		n += k
	}
	time.Sleep(time.Until(deadline))
}

// tlsConn is a guarded connection over TLS: it reports the TLS state, as
// the connection it wraps does.
type tlsConn struct {
	*conn
	cs connectionStater
}

// ConnectionState is the TLS state of the wrapped connection.
func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.cs.ConnectionState() }
