// Package h1 is Grove's HTTP/1.1 server: it serves an http.Handler, as
// net/http's server does for HTTP/1.1, with less of its own CPU a request
// (docs/performance.md). A handler sees the same *http.Request (method, URL, Host,
// headers, body framing, TLS state, a context canceled when its caller
// leaves or when it returns) and writes through an http.ResponseWriter
// that supports http.ResponseController's Flush and read and write
// deadlines; the protocols' handlers and their middleware run unchanged.
//
// Where the CPU goes: a connection is served by one goroutine, which
// reads requests from a buffered reader and writes each answer with one
// write, its length known when the handler returns (answers longer than
// a buffer, or flushed, are streamed: chunked in HTTP/1.1). net/http
// also starts a goroutine per request, reading the connection in the
// background to notice a caller that leaves, and interrupts it after the
// handler; h1 watches the connection so only for a request still running
// after Options.WatchAfter, so that a quick answer pays for none of it.
//
// What it does not do: HTTP/2 itself (over TLS it offers http/1.1 by
// ALPN, preceded by h2 only with Options.H2, which is handed the
// connections that choose h2 and serves them), connection hijacking,
// CONNECT, request trailers (a chunked body's trailer is read and
// dropped: r.Trailer stays nil), answer trailers, and a server-wide read
// or write timeout past the header's: a handler sets its own deadlines
// through http.ResponseController (Grove's transport/httpserver does, for
// every route), and they last until its answer is sent.
//
// State: a connection's fields belong to the goroutine serving it, but
// for its state (read by Shutdown) and the watch's (connReader), which
// its timer's goroutine writes before the serving goroutine reads it
// after waiting for the watch to end.
package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Server. The zero value serves with no timeouts and
// net/http's header limit.
type Options struct {
	// ReadHeaderTimeout bounds reading a request's line and headers (and
	// a TLS handshake), from the first byte of the request (from the
	// accept for a connection's first); 0 means no bound.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request; 0 means no bound.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (431 past it); 0
	// means http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// ConnState, when set, is told of each connection's states as
	// http.Server's hook is: http.StateNew when accepted, StateActive when
	// a request's first byte arrives, StateIdle after its answer,
	// StateClosed (StateHijacked instead for a connection handed to H2).
	ConnState func(net.Conn, http.ConnState)
	// TLSConfig, when set, serves TLS: its NextProtos are replaced by
	// "http/1.1", preceded by "h2" with H2 (and so are those of a config
	// its GetConfigForClient returns).
	TLSConfig *tls.Config
	// H2, when set with TLSConfig, is handed each connection whose TLS
	// handshake chose "h2", on the goroutine that made the handshake
	// (within ReadHeaderTimeout). From that call on the connection is
	// H2's, to serve and to close: ConnState is told
	// http.StateHijacked, its last state from h1, and Shutdown and Close
	// neither wait for it nor close it.
	H2 func(*tls.Conn)
	// WatchAfter is how long a request may run before its connection is
	// watched for its caller leaving (which cancels the request's
	// context); 0 means 1 ms.
	WatchAfter time.Duration
	// UnusedGrace is how long Shutdown lets a connection that has sent no
	// request yet (or is in its TLS handshake) send one before closing it,
	// counted from the whole second it connected in (as net/http counts);
	// 0 means 5 s, as net/http waits.
	UnusedGrace time.Duration
	// Logger receives the server's errors (a handler's panic, an accept
	// failure); nil means slog.Default().
	Logger *slog.Logger
}

// The protocols the server offers by ALPN: http11 alone, or h2First
// with Options.H2.
var (
	http11  = []string{"http/1.1"}
	h2First = []string{"h2", "http/1.1"}
)

// DefaultUnusedGrace is Options.UnusedGrace's default: net/http's.
const DefaultUnusedGrace = 5 * time.Second

// DefaultWatchAfter is Options.WatchAfter's default.
const DefaultWatchAfter = time.Millisecond

// Server serves HTTP/1.1 with a handler on listeners (Serve) until
// Shutdown or Close.
type Server struct {
	h    http.Handler
	opts Options
	tls  *tls.Config
	date dateCache
	bufs sync.Pool // answers' bodies (getBuf)

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closing   atomic.Bool
	// wg counts the connections being served.
	wg sync.WaitGroup
}

// New returns a Server serving h with opts.
func New(h http.Handler, opts Options) *Server {
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = http.DefaultMaxHeaderBytes
	}
	if opts.WatchAfter <= 0 {
		opts.WatchAfter = DefaultWatchAfter
	}
	if opts.UnusedGrace <= 0 {
		opts.UnusedGrace = DefaultUnusedGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{h: h, opts: opts, listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}}
	if opts.TLSConfig != nil {
		protos := http11
		if opts.H2 != nil {
			protos = h2First
		}
		s.tls = opts.TLSConfig.Clone()
		s.tls.NextProtos = protos
		if get := s.tls.GetConfigForClient; get != nil {
			// A config chosen per handshake (one reloading its
			// certificate) offers the same protocols.
			s.tls.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				c, err := get(hello)
				if c != nil && !slices.Equal(c.NextProtos, protos) {
					c = c.Clone()
					c.NextProtos = protos
				}
				return c, err
			}
		}
	}
	return s
}

// Serve accepts connections on ln and serves them until Shutdown or Close,
// when it returns http.ErrServerClosed; it closes ln. Other accept errors
// end it, but for temporary ones, which it waits out (as net/http does).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		_ = ln.Close()
		return http.ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()
	var wait time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				wait = min(max(2*wait, 5*time.Millisecond), time.Second)
				s.opts.Logger.Warn("accepting a connection failed; retrying", "err", err, "after", wait)
				time.Sleep(wait)
				continue
			}
			return err
		}
		wait = 0
		c := s.newConn(nc)
		if c == nil {
			_ = nc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

// isTemporary reports an accept error worth retrying (a file descriptor
// limit, a connection aborted before it was accepted).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// newConn registers nc, or returns nil when the server is closing.
func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, rwc: nc}
	if s.tls != nil {
		c.rwc = tls.Server(nc, s.tls)
	}
	c.storeState(http.StateNew) // new from now, for Shutdown's idle rule
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	c.setState(http.StateNew)
	return c
}

// getBuf returns a pooled buffer for an answer's body.
func (s *Server) getBuf() *[]byte {
	if b, ok := s.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 4<<10)
	return &b
}

// putBuf gives b back to the pool, unless it grew past what an answer
// holds.
func (s *Server) putBuf(b *[]byte) {
	if cap(*b) <= 2*bufferedBody {
		*b = (*b)[:0]
		s.bufs.Put(b)
	}
}

// forget unregisters c once it has closed.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Shutdown stops accepting, closes idle connections (and new ones
// without a request for Options.UnusedGrace), lets every request in
// flight finish with its answer, and then returns; when ctx ends first,
// it returns ctx's error with those connections still open (Close ends
// them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClosing()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	tick := 5 * time.Millisecond
	for {
		s.closeIdle()
		t := time.NewTimer(tick)
		select {
		case <-done:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		tick = min(2*tick, 500*time.Millisecond)
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.beginClosing()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.rwc.Close()
	}
	s.mu.Unlock()
	return nil
}

func (s *Server) beginClosing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing.Store(true)
	for ln := range s.listeners {
		_ = ln.Close()
	}
}

// closeIdle closes the connections waiting for a request.
func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		st, since := c.getState()
		if st == http.StateIdle || st == http.StateNew && time.Since(since) > s.opts.UnusedGrace {
			_ = c.rwc.Close()
		}
	}
}

// dateCache is the Date header's value, formatted once a second.
type dateCache struct {
	v atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	b   []byte
}

// get returns the Date value of now.
func (d *dateCache) get(now time.Time) []byte {
	sec := now.Unix()
	if v := d.v.Load(); v != nil && v.sec == sec {
		return v.b
	}
	v := &dateValue{sec: sec, b: now.UTC().AppendFormat(make([]byte, 0, len(http.TimeFormat)), http.TimeFormat)}
	d.v.Store(v)
	return v.b
}
