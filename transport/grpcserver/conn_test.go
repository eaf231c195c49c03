package grpcserver

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serveTCP serves s on a loopback TCP listener until the test ends.
func serveTCP(t *testing.T, s *Server) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln
}

// rawConn dials ln and sends what a client that makes no call sends:
// nothing, the HTTP/2 magic alone, or the whole client preface (the
// magic and a SETTINGS frame).
func rawConn(t *testing.T, ln net.Listener, send string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	switch send {
	case "magic":
		_, err = io.WriteString(c, http2.ClientPreface)
	case "preface":
		if _, err = io.WriteString(c, http2.ClientPreface); err == nil {
			err = http2.NewFramer(c, nil).WriteSettings()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reads c's frames until the server closes it, within d,
// answering its pings as a client does; it reports how long that took and
// whether a GOAWAY came first.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	fr := http2.NewFramer(c, c)
	goAway := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection was still open after %v", d)
			}
			return time.Since(start), goAway
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			goAway = true
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		}
	}
}

func TestAConnectionWithoutCallsIsClosedWithGOAWAYAfterMaxConnectionIdle(t *testing.T) {
	const idle = 300 * time.Millisecond
	ln := serveTCP(t, New(Options{MaxConnectionIdle: idle}))
	c := rawConn(t, ln, "preface")
	// gRPC sends GOAWAY and a ping, then closes when the ping is answered
	// (or after 5 s).
	took, goAway := closedWithin(t, c, idle+15*time.Second)
	if !goAway || took < idle {
		t.Errorf("closed after %v, GOAWAY %v; want GOAWAY after at least %v", took, goAway, idle)
	}
}

func TestAConnectionThatNeverFinishesItsPrefaceIsClosedAfterHandshakeTimeout(t *testing.T) {
	const handshake = 300 * time.Millisecond
	ln := serveTCP(t, New(Options{HandshakeTimeout: handshake, MaxConnectionIdle: time.Hour}))
	for _, send := range []string{"nothing", "magic"} {
		c := rawConn(t, ln, send)
		// Without the option gRPC waits 120 s.
		if took, _ := closedWithin(t, c, 10*time.Second); took < handshake/2 {
			t.Errorf("sending %s: closed after %v, before the handshake timeout %v", send, took, handshake)
		}
	}
}

// wrapped is a connection a listener wrapper returns, unwrapped by NetConn.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

// wrapListener wraps the connections ln accepts.
type wrapListener struct{ net.Listener }

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrapped{c}, nil
}
