package h2guard

import (
	"context"
	"crypto/tls"
	"net/http"

	"golang.org/x/net/http2"
)

// ConfigureServer makes srv, which serves TLS, serve HTTP/2 on guarded
// connections: golang.org/x/net/http2 configures it as net/http would by
// itself (the same settings: srv's IdleTimeout, 250 concurrent streams,
// 1 MiB frames; Shutdown sends GOAWAY), and its TLSNextProto["h2"] serves
// each connection that chose h2 with http2.Server.ServeConn on the
// *tls.Conn wrapped (whose ConnectionState gives handlers r.TLS, the
// client certificates among it). A new connection whose peer the Guard
// closed recently is held before the costly part of its TLS handshake
// (srv's TLSConfig, cloned, gets a GetConfigForClient that holds it, on
// the connection's own goroutine, then defers to the one it had), and so
// before it is served, whatever protocol it then chooses. Call it
// before srv serves. An error
// (srv's TLS cipher suites lack one HTTP/2 requires) leaves srv's HTTP/2
// to net/http, whose ServeTLS then fails with it.
func (g *Guard) ConfigureServer(srv *http.Server) error {
	// x/net marks ConfigureServer and ServeConn deprecated in favour of
	// http.Server.Protocols, but net/http serves HTTP/2 only on the
	// *tls.Conn it made, never on a wrapped connection; ServeConn does, and
	// registers each connection with the state ConfigureServer gives h2
	// (which srv's Shutdown tells to send GOAWAY).
	if srv.TLSConfig != nil {
		srv.TLSConfig = srv.TLSConfig.Clone() // shared with others, perhaps: the hold is this server's
	} else {
		srv.TLSConfig = &tls.Config{}
	}
	next := srv.TLSConfig.GetConfigForClient
	srv.TLSConfig.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		// Bounded by the handshake's context too (the server's close).
		g.hold(hello.Context(), hello.Conn)
		if next != nil {
			return next(hello)
		}
		return nil, nil
	}
	h2 := &http2.Server{}
	if err := http2.ConfigureServer(srv, h2); err != nil {
		return err
	}
	srv.TLSNextProto["h2"] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
		// net/http passes the connection's base context through h, as it
		// does to x/net's own TLSNextProto.
		var ctx context.Context
		if bc, ok := h.(interface{ BaseContext() context.Context }); ok {
			ctx = bc.BaseContext()
		}
		h2.ServeConn(g.Wrap(c), &http2.ServeConnOpts{Context: ctx, Handler: h, BaseConfig: hs})
	}
	// Grove serves no cleartext HTTP/2 (http.Server.Protocols is unset),
	// and a connection handed over this way would not be guarded.
	delete(srv.TLSNextProto, "unencrypted_http2")
	return nil
}
