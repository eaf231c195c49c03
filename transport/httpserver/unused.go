package httpserver

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// UnusedConns tracks the connections of an http.Server that have not sent
// a request yet, so that a shutdown need not wait for them: Shutdown
// counts such a connection as in use until it is 5 s old (net/http's rule
// for a client slow to send its first request), and HTTP clients' pools
// open connections they never use (a dial that lost the race to an idle
// connection), which kept a draining grove up to 5 s longer.
type UnusedConns struct {
	mu    sync.Mutex
	since map[net.Conn]time.Time
}

// TrackUnusedConns makes srv report its connections' states to the
// returned UnusedConns (before srv's own ConnState hook, if any). A
// connection handed to one of srv's TLSNextProto functions (HTTP/2, which
// net/http serves without calling the hook again) is in use from then
// on: call it once srv's HTTP/2 is configured (NewHTTPServer does it).
func TrackUnusedConns(srv *http.Server) *UnusedConns {
	u := &UnusedConns{since: map[net.Conn]time.Time{}}
	for proto, serve := range srv.TLSNextProto {
		srv.TLSNextProto[proto] = func(hs *http.Server, c *tls.Conn, h http.Handler) {
			u.mu.Lock()
			delete(u.since, c)
			u.mu.Unlock()
			serve(hs, c, h)
		}
	}
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		u.mu.Lock()
		if s == http.StateNew {
			u.since[c] = time.Now()
		} else {
			delete(u.since, c)
		}
		u.mu.Unlock()
		if next != nil {
			next(c, s)
		}
	}
	return u
}

// CloseAfter closes every connection that has sent no request: those
// open for at least age now, the others when they reach it, if still
// unused then. A client mid-way through its first request (a TLS
// handshake, a slow header) gets age to finish it.
func (u *UnusedConns) CloseAfter(age time.Duration) {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for c, t := range u.since {
		if wait := age - now.Sub(t); wait > 0 {
			time.AfterFunc(wait, func() { u.closeIfUnused(c, t) })
			continue
		}
		delete(u.since, c)
		_ = c.Close()
	}
}

// closeIfUnused closes c if it is still the unused connection opened at t.
func (u *UnusedConns) closeIfUnused(c net.Conn, t time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.since[c]; ok && s.Equal(t) {
		delete(u.since, c)
		_ = c.Close()
	}
}
