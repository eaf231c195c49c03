package httpserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/h2guard/h2guardtest"
	"github.com/groveml/grove/transport/tlsconf"
)

// tlsServed is a server of one engine serving TLS (serveTLS).
type tlsServed struct {
	addr string
	srv  interface {
		Shutdown(context.Context) error
		Close() error
	}
	// closeUnused is what grove serve does before Shutdown: on net/http,
	// close the connections that sent no request (UnusedConns); h1's own
	// Shutdown does it.
	closeUnused func()
	// served receives what Serve returned.
	served chan error
}

// serveTLS serves h over TLS with cfg on ln, with engine's server
// (NewHTTPServer for net/http, NewH1Server for h1) set up as grove serve
// sets it up, until the test ends.
func serveTLS(t *testing.T, engine string, s *Server, h http.Handler, cfg *tls.Config, ln net.Listener) *tlsServed {
	t.Helper()
	ts := &tlsServed{addr: ln.Addr().String(), closeUnused: func() {}, served: make(chan error, 1)}
	if engine == "h1" {
		srv := s.NewH1Server(h, cfg)
		ts.srv = srv
		go func() { ts.served <- srv.Serve(ln) }()
	} else {
		srv := s.NewHTTPServer(h, cfg)
		unused := TrackUnusedConns(srv)
		ts.srv, ts.closeUnused = srv, func() { unused.CloseAfter(0) }
		go func() { ts.served <- srv.ServeTLS(ln, "", "") }()
	}
	t.Cleanup(func() { _ = ts.srv.Close() })
	return ts
}

// listenLoopback listens on a port of 127.0.0.1 for the test.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// groveTLS returns the TLS config grove serve gives its HTTP listener
// (tlsconf's, chosen per handshake, offering h2 and http/1.1) for a
// server certificate of ca, verifying the client certificates of ca that
// callers present.
func groveTLS(t *testing.T, ca *certtest.CA) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Server(t, "server").Write(t, dir, "server")
	r, err := tlsconf.New(tlsconf.Files{CertFile: cert, KeyFile: key, ClientCAFile: ca.WriteCA(t, dir), ClientAuth: tlsconf.ClientAuthRequest})
	if err != nil {
		t.Fatal(err)
	}
	return r.ServerConfig("h2", "http/1.1")
}

// tlsClient returns a client trusting ca and presenting certs, that
// offers h2 and http/1.1 by ALPN, or http/1.1 alone.
func tlsClient(t *testing.T, ca *certtest.CA, h2 bool, certs ...tls.Certificate) *http.Client {
	tc := &tls.Config{RootCAs: ca.Pool(), Certificates: certs}
	if !h2 {
		tc.NextProtos = []string{"http/1.1"}
	}
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: h2}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get returns the protocol's major version, the status and the body of
// c's answer to GET url.
func get(t *testing.T, c *http.Client, url string) (int, int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.ProtoMajor, resp.StatusCode, string(b)
}

// TestOverTLSEachClientGetsItsProtocolWithItsVerifiedCertificate: over
// TLS (grove serve's config), a client that offers h2 is served HTTP/2,
// and one that offers http/1.1 alone HTTP/1.1, by the same routes; the
// client certificate TLS verified is in r.TLS either way, and a caller
// without one is refused (RequireClientCert) either way.
func TestOverTLSEachClientGetsItsProtocolWithItsVerifiedCertificate(t *testing.T) {
	forEachEngine(t, testOverTLSEachClientGetsItsProtocolWithItsVerifiedCertificate)
}

func testOverTLSEachClientGetsItsProtocolWithItsVerifiedCertificate(t *testing.T, engine string) {
	ca := certtest.NewCA(t, "ca")
	alice := ca.Client(t, "alice", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).TLS(t)
	s := New(Options{RequireClientCert: true, Logger: slog.New(slog.DiscardHandler)})
	s.Handle("GET /who", auth.RoleRead, "who", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.VerifiedChains[0][0].Subject.CommonName+" "+r.Proto)
	})
	ts := serveTLS(t, engine, s, s.Handler(), groveTLS(t, ca), listenLoopback(t))
	url := "https://" + ts.addr + "/who"
	for _, tc := range []struct {
		h2        bool
		wantMajor int
		want      string
	}{{true, 2, "alice HTTP/2.0"}, {false, 1, "alice HTTP/1.1"}} {
		if major, code, body := get(t, tlsClient(t, ca, tc.h2, alice), url); major != tc.wantMajor || code != 200 || body != tc.want {
			t.Errorf("h2 offered %v: HTTP/%d %d %q, want HTTP/%d 200 %q", tc.h2, major, code, body, tc.wantMajor, tc.want)
		}
		if major, code, body := get(t, tlsClient(t, ca, tc.h2), url); major != tc.wantMajor || code != 401 {
			t.Errorf("h2 offered %v, no certificate: HTTP/%d %d %q, want HTTP/%d 401", tc.h2, major, code, body, tc.wantMajor)
		}
	}
}

// TestAnHTTP2FloodIsClosedAndItsPeerHeldBeforeItsNextHandshake: the
// rapid-reset guard (h2guard) covers HTTP/2 over TLS on either server: a
// connection that resets its streams at once gets GOAWAY
// ENHANCE_YOUR_CALM and is closed, counted, and the flooder's next
// connection is held before its TLS handshake (which h1 makes, with the
// guard's config).
func TestAnHTTP2FloodIsClosedAndItsPeerHeldBeforeItsNextHandshake(t *testing.T) {
	forEachEngine(t, testAnHTTP2FloodIsClosedAndItsPeerHeldBeforeItsNextHandshake)
}

func testAnHTTP2FloodIsClosedAndItsPeerHeldBeforeItsNextHandshake(t *testing.T, engine string) {
	ca := certtest.NewCA(t, "ca")
	reg := prometheus.NewRegistry()
	s := New(Options{Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	ts := serveTLS(t, engine, s, s.Handler(), groveTLS(t, ca), listenLoopback(t))
	dial := func() *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("negotiated %q, want h2", p)
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := h2guardtest.Flood(ctx, dial(), h2guardtest.Request{Method: "GET", Path: "/healthz"}, 0)
	if res.GoAway == nil || res.GoAway.Code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("the flood of %d streams ended with GOAWAY %v (read error %v), want ENHANCE_YOUR_CALM", res.Streams, res.GoAway, res.ReadErr)
	}
	_ = dial().Close()
	for name, want := range map[string]float64{h2guard.MetricName: 1, h2guard.HeldMetricName: 1} {
		if got := counterValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// counterValue sums the series of the counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestAnHTTP2HeaderBlockOverTheLimitGets431: MaxHeaderBytes bounds an
// HTTP/2 request's header list on either server as it bounds an HTTP/1
// request's head.
func TestAnHTTP2HeaderBlockOverTheLimitGets431(t *testing.T) {
	forEachEngine(t, testAnHTTP2HeaderBlockOverTheLimitGets431)
}

func testAnHTTP2HeaderBlockOverTheLimitGets431(t *testing.T, engine string) {
	ca := certtest.NewCA(t, "ca")
	s := New(Options{MaxHeaderBytes: 4096, Logger: slog.New(slog.DiscardHandler)})
	ts := serveTLS(t, engine, s, s.Handler(), groveTLS(t, ca), listenLoopback(t))
	c, err := tls.Dial("tcp", ts.addr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/healthz"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// Fields of 2 KiB: a single field past the limit ends the connection
	// (COMPRESSION_ERROR) instead.
	for _, name := range []string{"x-a", "x-b", "x-c", "x-d", "x-e", "x-f"} {
		_ = enc.WriteField(hpack.HeaderField{Name: name, Value: strings.Repeat("a", 2<<10)})
	}
	if err := errors.Join(fr.WriteSettings(), fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer to the request: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY %v %q before an answer", g.ErrCode, g.DebugData())
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
			if status := h.PseudoValue("status"); status != "431" {
				t.Fatalf("a header list of 12 KiB over a limit of 4 KiB: status %s, want 431", status)
			}
			return
		}
	}
}

// TestAnH1ServerShutDownBeforeServingServesNothing: an H1Server over TLS
// shut down before Serve runs has nothing to wait for, and Serve then
// returns http.ErrServerClosed at once.
func TestAnH1ServerShutDownBeforeServingServesNothing(t *testing.T) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	srv := s.NewH1Server(s.Handler(), groveTLS(t, certtest.NewCA(t, "ca")))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := srv.Serve(listenLoopback(t)); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve after Shutdown: %v, want http.ErrServerClosed", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close after Shutdown: %v", err)
	}
}
