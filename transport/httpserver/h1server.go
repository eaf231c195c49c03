package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/groveml/grove/transport/h1"
)

// H1Server is the server of the h1 engine (NewH1Server): Grove's own
// HTTP/1.1 server and, over TLS, the net/http server that serves the
// connections whose handshake chose HTTP/2. Serve, Shutdown and Close
// act on both.
type H1Server struct {
	h1 *h1.Server
	// h2 serves the connections h1 hands to ln; both are nil without
	// TLS, or when h2's HTTP/2 could not be configured.
	h2      *http.Server
	ln      *handoffListener
	startH2 sync.Once
	log     *slog.Logger
}

// UnusedConnGrace is how long, once an HTTP server shuts down, a
// connection that has sent no request yet gets to send one before it is
// closed (net/http's Shutdown would wait up to 5 s for it): an H1Server's
// own, and what Grove gives a net/http server's (TrackUnusedConns).
const UnusedConnGrace = time.Second

// NewH1Server returns an H1Server serving h with Options' header timeout,
// idle timeout and header limit, over TLS when tlsConfig is set:
// NewHTTPServer's counterpart for the h1 engine (the default). Over TLS,
// h1 offers h2 before http/1.1 by ALPN and hands each connection that
// chooses h2, once it has made its handshake, to an http.Server made by
// NewHTTPServer (its HTTP/2 settings, rapid-reset guard, limits and
// hooks); h1 makes every handshake with that server's TLS config, so
// that the guard holds a peer it penalised before its handshake,
// whatever protocol it then chooses. When that server's HTTP/2 cannot
// be configured (NewHTTPServer warns), h1 offers http/1.1 alone. Like
// NewHTTPServer's, it tells a connlimit.Listener which of its
// connections are idle.
func (s *Server) NewH1Server(h http.Handler, tlsConfig *tls.Config) *H1Server {
	srv := &H1Server{log: s.opts.Logger}
	opts := h1.Options{
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		UnusedGrace:       UnusedConnGrace,
		ConnState:         markIdle,
		TLSConfig:         tlsConfig,
		Logger:            s.opts.Logger,
	}
	if tlsConfig != nil {
		h2 := s.NewHTTPServer(h, tlsConfig)
		opts.TLSConfig = h2.TLSConfig // the guard's: it holds penalised peers
		if _, ok := h2.TLSNextProto["h2"]; ok {
			srv.h2, srv.ln = h2, &handoffListener{conns: make(chan *tls.Conn), done: make(chan struct{})}
			opts.H2 = srv.ln.handOff
		}
	}
	srv.h1 = h1.New(h, opts)
	return srv
}

// Serve accepts connections on ln and serves them until Shutdown or
// Close, when it returns http.ErrServerClosed; it closes ln. The first
// call starts the HTTP/2 server too.
func (s *H1Server) Serve(ln net.Listener) error {
	if s.h2 != nil {
		s.startH2.Do(func() {
			s.ln.addr = ln.Addr()
			go func() {
				if err := s.h2.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
					s.log.Warn("serving the HTTP/2 connections h1 hands over failed", "err", err)
				}
			}()
		})
	}
	return s.h1.Serve(ln)
}

// Shutdown shuts both servers down at once, each as its own Shutdown
// does (h1: idle connections closed, requests in flight answered; HTTP/2:
// GOAWAY, streams in flight answered), and returns when both are done,
// or with ctx's error (Close ends what is left). A connection whose
// handshake chooses h2 after that is closed.
func (s *H1Server) Shutdown(ctx context.Context) error {
	if s.h2 == nil {
		return s.h1.Shutdown(ctx)
	}
	h2Done := make(chan error, 1)
	go func() {
		err := s.h2.Shutdown(ctx)
		_ = s.ln.Close() // when Serve never ran
		h2Done <- err
	}()
	err := s.h1.Shutdown(ctx)
	if err2 := <-h2Done; err == nil {
		err = err2
	}
	return err
}

// Close closes both servers' listeners and connections at once.
func (s *H1Server) Close() error {
	err := s.h1.Close()
	if s.h2 != nil {
		if err2 := s.h2.Close(); err == nil {
			err = err2
		}
		_ = s.ln.Close()
	}
	return err
}

// handoffListener is the listener of an H1Server's HTTP/2 server: Accept
// returns the connections h1 hands over (handOff).
type handoffListener struct {
	addr  net.Addr // of the listener h1 serves, set before Accept runs
	conns chan *tls.Conn
	done  chan struct{}
	once  sync.Once
}

// handOff passes c to Accept, or closes it once the listener is closed.
func (l *handoffListener) handOff(c *tls.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept returns the next connection handed over, or net.ErrClosed once
// the listener is closed.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case <-l.done: // before a connection also waiting
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept, and handOff, give up.
func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address of the listener h1 serves.
func (l *handoffListener) Addr() net.Addr { return l.addr }
