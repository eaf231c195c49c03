package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// maxPostHandlerReadBytes is how much of a body its handler left unread
// the server reads and drops to keep the connection (net/http's figure);
// past it the connection closes.
const maxPostHandlerReadBytes = 256 << 10

// aLongTimeAgo is a deadline in the past, which interrupts a read.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection and the goroutine serving it (serve). Its fields
// are the serving goroutine's, but for state (read by Shutdown) and the
// watch (connReader).
type conn struct {
	s          *Server
	rwc        net.Conn
	remoteAddr string
	tlsState   *tls.ConnectionState
	cr         connReader
	br         *bufio.Reader
	bw         *bufio.Writer
	tp         *textproto.Reader
	ctx        context.Context
	// cancel is the request's in flight; armWatch, made once, watches
	// the connection for it (a body's end calls it).
	cancel   context.CancelFunc
	armWatch func()
	// keys sorts an answer's header names; fields holds its header
	// fields from WriteHeader until its head is sent.
	keys   []string
	fields []byte
	// req is the head of the request being served, read into it again
	// for each (its handler gets a copy with the request's context);
	// header is the answer's header map, emptied for each request: a
	// handler may not use its ResponseWriter once it has returned.
	req    request
	header http.Header

	state atomic.Uint64 // http.ConnState << 48 | unix seconds of the change
}

func (c *conn) setState(st http.ConnState) {
	c.storeState(st)
	if h := c.s.opts.ConnState; h != nil {
		h(c.rwc, st)
	}
}

// storeState records st and when, for Shutdown.
func (c *conn) storeState(st http.ConnState) {
	c.state.Store(uint64(st)<<48 | uint64(time.Now().Unix()))
}

func (c *conn) getState() (http.ConnState, time.Time) {
	v := c.state.Load()
	return http.ConnState(v >> 48), time.Unix(int64(v&(1<<48-1)), 0)
}

// serve serves c's requests one after the other until the caller or the
// server closes it, or a request makes it unusable.
func (c *conn) serve() {
	s := c.s
	handedOff := false // to Options.H2: no longer c's
	defer func() {
		v := recover()
		if v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			s.opts.Logger.Error("h1: panic serving a request", "remote", c.remoteAddr, "panic", fmt.Sprint(v), "stack", string(buf))
		}
		if handedOff {
			if v != nil {
				_ = c.rwc.Close() // H2 panicked with it
			}
			return
		}
		_ = c.rwc.Close()
		c.setState(http.StateClosed)
		s.forget(c)
	}()
	c.remoteAddr = c.rwc.RemoteAddr().String()
	if tc, ok := c.rwc.(*tls.Conn); ok {
		if d := s.opts.ReadHeaderTimeout; d > 0 {
			_ = tc.SetDeadline(time.Now().Add(d))
		}
		if err := tc.HandshakeContext(context.Background()); err != nil {
			s.opts.Logger.Debug("h1: TLS handshake failed", "remote", c.remoteAddr, "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		if st.NegotiatedProtocol == "h2" && s.opts.H2 != nil {
			handedOff = true
			c.setState(http.StateHijacked)
			s.forget(c)
			s.opts.H2(tc)
			return
		}
		c.tlsState = &st
	}
	c.cr.c = c
	c.cr.watch = time.AfterFunc(time.Hour, c.cr.backgroundRead)
	c.cr.watch.Stop()
	defer c.cr.watch.Stop()
	c.br = bufio.NewReaderSize(&c.cr, 4<<10)
	c.bw = bufio.NewWriterSize(c.rwc, 4<<10)
	c.tp = textproto.NewReader(c.br)
	c.ctx = context.WithValue(context.Background(), http.LocalAddrContextKey, c.rwc.LocalAddr())
	c.armWatch = func() { c.cr.arm(c.cancel) }

	for first := true; ; first = false {
		if !first {
			if s.closing.Load() {
				return
			}
			if c.br.Buffered() == 0 {
				if d := s.opts.IdleTimeout; d > 0 {
					_ = c.rwc.SetReadDeadline(time.Now().Add(d))
				}
				if _, err := c.br.Peek(1); err != nil {
					return
				}
			}
			c.setState(http.StateActive)
		}
		if d := s.opts.ReadHeaderTimeout; d > 0 {
			_ = c.rwc.SetReadDeadline(time.Now().Add(d))
		} else if !first && s.opts.IdleTimeout > 0 {
			_ = c.rwc.SetReadDeadline(time.Time{})
		}
		c.cr.setLimit(int64(s.opts.MaxHeaderBytes) + 4096) // bufio's slop, as net/http allows
		req, err := readRequest(c.br, c.tp, &c.req)
		if err != nil {
			c.refuse(err)
			return
		}
		c.cr.setLimit(-1)
		if first {
			c.setState(http.StateActive)
		}
		if s.opts.ReadHeaderTimeout > 0 {
			_ = c.rwc.SetReadDeadline(time.Time{})
		}
		if !c.serveRequest(req) {
			return
		}
		c.setState(http.StateIdle)
	}
}

// refuse answers a request the server could not read, when it can, and
// closes the connection (the caller's return).
func (c *conn) refuse(err error) {
	var re *requestError
	switch {
	case c.cr.hitLimit:
		re = errHeaderTooLarge
	case errors.As(err, &re):
	default:
		return // the connection ended, timed out or failed: nothing to answer
	}
	_ = c.rwc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	text := http.StatusText(re.code)
	msg := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n%d %s: %s",
		re.code, text, re.code, text, re.msg)
	_, _ = io.WriteString(c.rwc, msg)
	// Let the answer reach a caller still sending before the close resets
	// the connection.
	c.closeWriteAndWait()
}

// serveRequest runs the handler for req and writes its answer; it reports
// whether the connection can carry another request.
func (c *conn) serveRequest(req *request) (keep bool) {
	s := c.s
	r := &req.Request
	r.RemoteAddr = c.remoteAddr
	r.TLS = c.tlsState
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	c.cancel = cancel
	r = r.WithContext(ctx)
	if c.header == nil {
		c.header = make(http.Header)
	} else {
		clear(c.header)
	}
	w := &response{c: c, req: req, r: r, body: req.body, header: c.header, contentLength: -1,
		head: r.Method == "HEAD", closeAfter: !req.keepAlive}
	if b := req.body; b != nil {
		if req.expectContinue {
			b.sendContinue = w.sendContinue
		}
		b.onEOF = c.armWatch
	} else {
		c.armWatch()
	}
	panicked := true
	defer func() {
		if panicked {
			c.cr.disarm()
		}
	}()
	s.h.ServeHTTP(w, r)
	panicked = false
	c.cr.disarm()
	if b := req.body; b != nil {
		// Reading what the handler left must not watch the connection
		// nor ask for the body.
		b.onEOF, b.sendContinue = nil, nil
	}
	w.handlerDone = true
	if c.cr.gone {
		w.closeAfter = true // the caller left, or closed its side: answer, then close
	}
	if err := w.finish(); err != nil {
		return false
	}
	if w.closeAfter {
		if w.bodyLeft {
			c.closeWriteAndWait()
		}
		return false
	}
	return true
}

// closeWriteAndWait ends the connection's sending side and reads what
// the caller still sends for a moment before the close, so that a caller
// sending a body it was answered for without reading it reads the answer
// rather than a connection reset (net/http's closeWriteAndWait).
func (c *conn) closeWriteAndWait() {
	cw, ok := c.rwc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	_ = cw.CloseWrite()
	_ = c.rwc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c.rwc, 256<<10)
}

// connReader is what the connection's buffered reader reads: the
// connection, within a limit while a request's head is read, and, while
// a handler runs past Options.WatchAfter, watched in the background for
// its caller leaving (a read that ends in EOF or an error), which
// cancels the request's context, or for the next request's first byte,
// which it keeps.
type connReader struct {
	c *conn
	// limit is how many bytes may still be read (negative: no limit);
	// hitLimit says it ran out.
	limit    int64
	hitLimit bool
	// watch starts backgroundRead; pending counts a started watch until
	// it has ended.
	watch   *time.Timer
	pending sync.WaitGroup
	armed   bool
	// mu orders a watch's start (which clears the read deadline) before
	// disarm's interrupting deadline (abort).
	mu    sync.Mutex
	abort bool
	// cancel is the request's, for backgroundRead; gone says it ran out
	// of connection; the byte it read, if any, is b (hasByte). These are
	// written by backgroundRead and read after pending.Wait.
	cancel  context.CancelFunc
	gone    bool
	hasByte bool
	b       [1]byte
}

func (cr *connReader) setLimit(n int64) { cr.limit, cr.hitLimit = n, false }

// Read reads the connection (the byte a watch read first).
func (cr *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if cr.limit >= 0 {
		if cr.limit == 0 {
			cr.hitLimit = true
			return 0, io.EOF
		}
		if int64(len(p)) > cr.limit {
			p = p[:cr.limit]
		}
	}
	if cr.hasByte {
		p[0] = cr.b[0]
		cr.hasByte = false
		if cr.limit > 0 {
			cr.limit--
		}
		return 1, nil
	}
	if cr.gone {
		return 0, io.EOF
	}
	n, err := cr.c.rwc.Read(p)
	if cr.limit >= 0 {
		cr.limit -= int64(n)
	}
	return n, err
}

// arm watches the connection from Options.WatchAfter on, until disarm,
// when the request (whose context cancel cancels) has no more body to
// read and no byte of the next request is buffered.
func (cr *connReader) arm(cancel context.CancelFunc) {
	if cr.armed || cr.c.br.Buffered() > 0 || cr.hasByte || cr.gone {
		return
	}
	cr.armed, cr.cancel = true, cancel
	cr.pending.Add(1)
	cr.watch.Reset(cr.c.s.opts.WatchAfter)
}

// disarm ends the watch, waiting for a read it started.
func (cr *connReader) disarm() {
	if !cr.armed {
		return
	}
	cr.armed = false
	if cr.watch.Stop() {
		cr.pending.Done() // it never started
	} else {
		cr.mu.Lock()
		cr.abort = true
		cr.mu.Unlock()
		_ = cr.c.rwc.SetReadDeadline(aLongTimeAgo)
		cr.pending.Wait()
		_ = cr.c.rwc.SetReadDeadline(time.Time{})
		cr.abort = false
	}
	cr.cancel = nil
}

// backgroundRead is the watch: one read of a byte, run by the timer.
func (cr *connReader) backgroundRead() {
	defer cr.pending.Done()
	cr.mu.Lock()
	if cr.abort {
		cr.mu.Unlock()
		return
	}
	// The handler's read deadline would end the watch early (net/http
	// clears it too).
	_ = cr.c.rwc.SetReadDeadline(time.Time{})
	cr.mu.Unlock()
	n, err := cr.c.rwc.Read(cr.b[:])
	if n == 1 {
		cr.hasByte = true
		return
	}
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		cr.gone = true
		cr.cancel()
	}
}
