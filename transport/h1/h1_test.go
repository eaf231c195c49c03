package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/internal/rawhttptest"
)

// describe is a handler that answers with what it was given: the request
// as a handler sees it, and its body.
func describe(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s host=%q proto=%s cl=%d te=%q close=%v uri=%q\n", r.Method, r.URL, r.Host, r.Proto, r.ContentLength, r.TransferEncoding, r.Close, r.RequestURI)
	for _, k := range keys {
		fmt.Fprintf(&sb, "%s: %q\n", k, r.Header[k])
	}
	fmt.Fprintf(&sb, "body=%q err=%v\n", b, err)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, sb.String())
}

// serveBoth serves h with an h1 Server and with net/http's on loopback
// until the test ends, and returns their addresses.
func serveBoth(t *testing.T, h http.Handler, opts Options) (h1Addr, netAddr string) {
	t.Helper()
	h1Addr = serveH1(t, h, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: opts.ReadHeaderTimeout, IdleTimeout: opts.IdleTimeout,
		MaxHeaderBytes: opts.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h1Addr, ln.Addr().String()
}

// serveH1 serves h with an h1 Server on loopback until the test ends.
func serveH1(t *testing.T, h http.Handler, opts Options) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := New(h, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// exchange sends raw on a new connection to addr and reads one answer:
// its status, its body and whether the server closed the connection
// after it.
func exchange(t *testing.T, addr, raw string) (int, string, bool) {
	t.Helper()
	c := rawhttptest.DialRaw(t, addr)
	c.Send(raw)
	resp, body, err := c.Answer(5 * time.Second)
	if err != nil {
		t.Fatalf("%q: no answer: %v", raw, err)
	}
	return resp.StatusCode, body, c.ClosedWithin(200 * time.Millisecond)
}

func TestRequestsReachTheHandlerAsNetHTTPsServerGivesThem(t *testing.T) {
	h1Addr, netAddr := serveBoth(t, http.HandlerFunc(describe), Options{MaxHeaderBytes: 4 << 10})
	long := strings.Repeat("a", 12<<10)
	for _, tc := range []struct {
		name, raw string
		// bodies: compare the handler's view too (for answered requests).
		bodies bool
	}{
		{"GET", "GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: h\r\nUser-Agent: u\r\nAccept: */*\r\n\r\n", true},
		{"POST with Content-Length", "POST /v1/inference HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello", true},
		{"chunked with a trailer", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nT: v\r\n\r\n", true},
		{"Content-Length and chunked", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", true},
		{"repeated equal Content-Length", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab", true},
		{"absolute form", "GET http://example.com:8/p?q HTTP/1.1\r\nHost: other\r\n\r\n", true},
		{"HTTP/1.0 without Host", "GET /x HTTP/1.0\r\n\r\n", true},
		{"HTTP/1.0 keep-alive", "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
		{"Connection: close", "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", true},
		{"repeated header", "GET /x HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nX-A: 2\r\nx-b: 3\r\n\r\n", true},
		{"Pragma: no-cache", "GET /x HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n", true},
		{"chunked with different Content-Lengths", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"different Content-Lengths", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", false},
		{"signed Content-Length", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: +2\r\n\r\nab", false},
		{"negative Content-Length", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", false},
		{"Content-Length not a number", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\nab", false},
		{"gzip transfer encoding", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", false},
		{"chunked spelled with a Kelvin sign", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chun\u212aed\r\n\r\n0\r\n\r\n", false},
		{"HTTP/1.0 keep-alive and close", "GET /x HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", true},
		{"two transfer encodings", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
		{"missing Host", "GET /x HTTP/1.1\r\n\r\n", false},
		{"two Hosts", "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
		{"bad Host", "GET /x HTTP/1.1\r\nHost: a b\r\n\r\n", false},
		{"HTTP/2.0", "GET /x HTTP/2.0\r\nHost: h\r\n\r\n", false},
		{"bad version", "GET /x HTTP/x\r\nHost: h\r\n\r\n", false},
		{"bad method", "G@T /x HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"bad target", "GET x HTTP/1.1\r\nHost: h\r\n\r\n", false},
		{"control character in a value", "GET /x HTTP/1.1\r\nHost: h\r\nX-A: a\x01b\r\n\r\n", false},
		{"a long first header line folded", "GET /x HTTP/1.1\r\n " + strings.Repeat("x", 100) + "\r\nHost: h\r\n\r\n", false},
		{"space before the colon", "GET /x HTTP/1.1\r\nHost: h\r\nX-A : b\r\n\r\n", false},
		{"headers past the limit", "GET /x HTTP/1.1\r\nHost: h\r\nX-A: " + long + "\r\n\r\n", false},
		{"HTTP/1.0 expecting 100 Continue", "POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc", true},
		{"unknown expectation", "POST /x HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\nx", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, closed := exchange(t, h1Addr, tc.raw)
			wantCode, wantBody, wantClosed := exchange(t, netAddr, tc.raw)
			if tc.name == "Content-Length and chunked" {
				// h1 closes after this answer where net/http keeps the
				// connection (RFC 9112 6.3).
				wantClosed = true
			}
			if tc.name == "HTTP/1.0 keep-alive and close" {
				// net/http sets r.Close yet keeps the connection; h1
				// closes it, as "close" asks (RFC 9112 9.3).
				wantClosed = true
			}
			if code != wantCode || closed != wantClosed {
				t.Errorf("h1: %d, closed %v; net/http: %d, closed %v (h1 said %q)", code, closed, wantCode, wantClosed, body)
			}
			if tc.bodies && body != wantBody {
				t.Errorf("the handler saw\n%s\nwith h1, and with net/http\n%s", body, wantBody)
			}
		})
	}
}

func TestKeepAliveAndPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(describe), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /1 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\naGET /2 HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /3 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nc\r\n0\r\n\r\n")
	for _, want := range []string{"POST /1", "GET /2", "POST /3"} {
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, want+" ") {
			t.Fatalf("want the answer to %s: %v %v %q", want, resp, err, body)
		}
	}
	// A handler that leaves its body unread: the server reads it, and the
	// next request on the connection is served.
	unread := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Path) }), Options{})
	c = rawhttptest.DialRaw(t, unread)
	c.Send("POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nxyzGET /b HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []string{"/a", "/b"} {
		if resp, body, err := c.Answer(5 * time.Second); err != nil || body != want {
			t.Fatalf("want %s: %v %v %q", want, resp, err, body)
		}
	}
}

func TestAnswersAreFramedByLengthOrChunked(t *testing.T) {
	big := strings.Repeat("0123456789", 10<<10) // past what an answer holds
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			_, _ = io.WriteString(w, "small")
		case "/big":
			_, _ = io.WriteString(w, big)
		case "/declared":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			_, _ = io.WriteString(w, big)
		case "/flushed":
			_, _ = io.WriteString(w, "a")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
			_, _ = io.WriteString(w, "b")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/nothing":
		case "/short":
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "abc")
		}
	}), Options{})
	for _, tc := range []struct {
		path, body string
		length     int64 // -1: chunked
		closes     bool
	}{
		{"/small", "small", 5, false},
		{"/big", big, -1, false},
		{"/declared", big, int64(len(big)), false},
		{"/flushed", "ab", -1, false},
		{"/nocontent", "", 0, false},
		{"/nothing", "", 0, false},
		{"/short", "abc", 10, true},
	} {
		c := rawhttptest.DialRaw(t, addr)
		c.Send("GET " + tc.path + " HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, body, err := c.Answer(5 * time.Second)
		if tc.path == "/short" {
			// Declared 10, sent 3: the caller reads an unexpected EOF,
			// and the connection closes.
			if resp == nil || resp.ContentLength != 10 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s: %v %v %q", tc.path, resp, err, body)
			}
			continue
		}
		if err != nil || body != tc.body || resp.ContentLength != tc.length || resp.Close != tc.closes {
			t.Errorf("%s: %v %v len %d, want %d bytes framed %d", tc.path, resp, err, len(body), len(tc.body), tc.length)
		}
		if (tc.path == "/small" || tc.path == "/big") && (resp.Header.Get("Date") == "" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8") {
			t.Errorf("%s: header %v, want a Date and a sniffed Content-Type", tc.path, resp.Header)
		}
	}
}

func TestExpectContinueIsAnsweredWhenTheBodyIsRead(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("want 100 Continue before the body: %q %v", line, err)
	}
	_, _ = br.ReadString('\n')
	c.Send("body")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the answer after the body: %v %v", resp, err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "body" {
		t.Errorf("body %q", b)
	}
	// A refusal that does not read the body sends no 100 Continue and
	// closes the connection: the caller may never send the body.
	code, _, closed := exchange(t, addr, "POST /refuse HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	if code != 401 || !closed {
		t.Errorf("a refusal of a request waiting for 100 Continue: %d, closed %v", code, closed)
	}
}

func TestACallerThatLeavesCancelsItsRequestsContext(t *testing.T) {
	canceled := make(chan error, 1)
	started := make(chan struct{})
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(started)
		select {
		case <-r.Context().Done():
			canceled <- r.Context().Err()
		case <-time.After(10 * time.Second):
			canceled <- nil
		}
	}), Options{WatchAfter: time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nab")
	<-started
	_ = c.Close()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's context after its caller left: %v, want canceled", err)
	}
}

func TestAByteOfTheNextRequestReadWhileWatchingIsKept(t *testing.T) {
	// A handler that runs past WatchAfter has its connection read in the
	// background; a pipelined request's first byte read then is the
	// next request's, not lost.
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(50 * time.Millisecond)
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), Options{WatchAfter: time.Millisecond})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	time.Sleep(10 * time.Millisecond) // the watch has begun
	c.Send("GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []string{"/slow", "/next"} {
		if resp, body, err := c.Answer(5 * time.Second); err != nil || body != want {
			t.Fatalf("want %s: %v %v %q", want, resp, err, body)
		}
	}
}

func TestHandlerDeadlinesApplyToTheConnection(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Errorf("SetReadDeadline: %v", err)
		}
		_, err := io.ReadAll(r.Body)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("reading a body past the read deadline: %v, want a timeout", err)
		}
		w.WriteHeader(http.StatusRequestTimeout)
	}), Options{})
	code, _, closed := exchange(t, addr, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
	if code != http.StatusRequestTimeout || !closed {
		t.Errorf("%d, closed %v", code, closed)
	}
}

func TestTimeoutsCloseSlowAndIdleConnections(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(describe), Options{ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	slow := rawhttptest.DialRaw(t, addr)
	slow.Send("GET /x HTTP/1.1\r\nHo")
	start := time.Now()
	_ = slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	// Answered 400 for the header cut short, as net/http does, or not.
	if _, err := io.Copy(io.Discard, slow); err != nil {
		t.Fatalf("a connection sending its headers slowly: %v, want it closed", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("closed after %v, want about the header timeout", d)
	}
	idle := rawhttptest.DialRaw(t, addr)
	idle.Send("GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
	if resp, _, err := idle.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	start = time.Now()
	if !idle.ClosedWithin(5 * time.Second) {
		t.Fatal("an idle keep-alive connection was not closed")
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("idle connection closed after %v, want about the idle timeout", d)
	}
}

func TestAPanickingHandlerClosesItsConnectionOnly(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		_, _ = io.WriteString(w, "ok")
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("GET /panic HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, _, err := c.Answer(5 * time.Second); err == nil {
		t.Error("a panicking handler's request was answered")
	}
	if code, body, _ := exchange(t, addr, "GET /ok HTTP/1.1\r\nHost: h\r\n\r\n"); code != 200 || body != "ok" {
		t.Errorf("after a panic: %d %q", code, body)
	}
}

func TestShutdownLetsRequestsInFlightFinish(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var states sync.Map
	s := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, r.URL.Path)
	}), Options{Logger: slog.New(slog.DiscardHandler), ConnState: func(c net.Conn, st http.ConnState) { states.Store(c, st) }})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	addr := ln.Addr().String()
	idle := rawhttptest.DialRaw(t, addr)
	idle.Send("GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, body, err := idle.Answer(5 * time.Second); err != nil || body != "/a" {
		t.Fatalf("%v %q", err, body)
	}
	busy := rawhttptest.DialRaw(t, addr)
	busy.Send("GET /block HTTP/1.1\r\nHost: h\r\n\r\n")
	<-started
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if !idle.ClosedWithin(5 * time.Second) {
		t.Error("Shutdown did not close the idle connection")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if resp, body, err := busy.Answer(5 * time.Second); err != nil || body != "/block" || !resp.Close {
		t.Errorf("the request in flight: %v %v %q, want its answer with Connection: close", resp, err, body)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	closed := 0
	states.Range(func(_, v any) bool {
		if v == http.StateClosed {
			closed++
		}
		return true
	})
	if closed != 2 {
		t.Errorf("%d connections reported closed, want 2", closed)
	}
}

func TestTLSWithClientCertificates(t *testing.T) {
	ca := certtest.NewCA(t, "h1 test CA")
	serverCert := ca.Server(t, "127.0.0.1").TLS(t)
	clientCert := ca.Client(t, "client", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).TLS(t)
	pool := ca.Pool()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "no verified client certificate", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName+" "+r.TLS.NegotiatedProtocol)
	})
	static := &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool,
		ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: []string{"h2", "http/1.1"}}
	// A config chosen per handshake, as tlsconf's reloading one is, that
	// offers h2.
	perHandshake := &tls.Config{NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return static.Clone(), nil }}
	for _, cfg := range []*tls.Config{static, perHandshake} {
		addr := serveH1(t, handler, Options{TLSConfig: cfg})
		client := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool,
			Certificates: []tls.Certificate{clientCert}, NextProtos: []string{"h2", "http/1.1"}}}}
		for range 2 {
			resp, err := client.Get("https://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "client http/1.1" || resp.ProtoMajor != 1 {
				t.Errorf("%s %d %q", resp.Proto, resp.StatusCode, b)
			}
		}
		client.CloseIdleConnections()
	}
}

// TestAConnectionThatChoosesH2IsHandedToH2AndIsNoLongerH1s: with H2, h1
// offers h2 before http/1.1 by ALPN, on a config chosen per handshake
// too; a client that chooses h2 is served by H2 (here x/net's HTTP/2
// server on the same handler), which sees its verified client
// certificate, and one that offers http/1.1 alone is served by h1. The
// connection handed over is reported hijacked, never closed, by h1, whose
// Shutdown neither waits for it nor closes it.
func TestAConnectionThatChoosesH2IsHandedToH2AndIsNoLongerH1s(t *testing.T) {
	ca := certtest.NewCA(t, "h1 test CA")
	serverCert := ca.Server(t, "127.0.0.1").TLS(t)
	clientCert := ca.Client(t, "client", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).TLS(t)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "no verified client certificate", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName+" "+r.Proto)
	})
	static := &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	// A config chosen per handshake, as tlsconf's reloading one is, that
	// offers http/1.1 alone.
	perHandshake := &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := static.Clone()
		c.NextProtos = []string{"http/1.1"}
		return c, nil
	}}
	for name, cfg := range map[string]*tls.Config{"static": static, "per handshake": perHandshake} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			states := map[net.Conn][]http.ConnState{}
			handed := make(chan *tls.Conn, 1)
			var served sync.WaitGroup
			h2 := &http2.Server{}
			s := New(handler, Options{TLSConfig: cfg, Logger: slog.New(slog.DiscardHandler),
				ConnState: func(c net.Conn, st http.ConnState) {
					mu.Lock()
					states[c] = append(states[c], st)
					mu.Unlock()
				},
				H2: func(c *tls.Conn) {
					served.Add(1)
					go func() {
						defer served.Done()
						h2.ServeConn(c, &http2.ServeConnOpts{Handler: handler})
					}()
					handed <- c
				}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serving := make(chan error, 1)
			go func() { serving <- s.Serve(ln) }()
			defer s.Close()
			url := "https://" + ln.Addr().String() + "/"
			get := func(c *http.Client) (int, string) {
				t.Helper()
				resp, err := c.Get(url)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.ProtoMajor, string(b)
			}
			h2Transport := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}}
			defer h2Transport.CloseIdleConnections()
			h2Client := &http.Client{Transport: h2Transport}
			if major, body := get(h2Client); major != 2 || body != "client HTTP/2.0" {
				t.Fatalf("an HTTP/2 client got HTTP/%d %q, want HTTP/2 client HTTP/2.0", major, body)
			}
			h1Transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}, NextProtos: []string{"http/1.1"}}}
			defer h1Transport.CloseIdleConnections()
			if major, body := get(&http.Client{Transport: h1Transport}); major != 1 || body != "client HTTP/1.1" {
				t.Fatalf("an HTTP/1.1 client got HTTP/%d %q, want HTTP/1 client HTTP/1.1", major, body)
			}
			c := <-handed
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown with an HTTP/2 connection open: %v, want it not waited for", err)
			}
			if err := <-serving; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve: %v", err)
			}
			// Served on the same connection: h1 has closed its listener.
			if major, body := get(h2Client); major != 2 || body != "client HTTP/2.0" {
				t.Errorf("the HTTP/2 connection after h1's Shutdown: HTTP/%d %q", major, body)
			}
			mu.Lock()
			got := states[c]
			mu.Unlock()
			if !slices.Equal(got, []http.ConnState{http.StateNew, http.StateHijacked}) {
				t.Errorf("the HTTP/2 connection's states from h1: %v, want [new hijacked]", got)
			}
			_ = c.Close()
			served.Wait()
		})
	}
}

func TestALeftoverBodyIsNotWatchedIntoTheNextRequest(t *testing.T) {
	// The server drains a body its handler left unread; reaching its end
	// must not start a watch that reads the next request's bytes.
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/echo" {
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, r.Method+" "+string(b))
			return
		}
		http.NotFound(w, r)
	}), Options{WatchAfter: time.Millisecond})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /unread HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello")
	if resp, _, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != 404 {
		t.Fatalf("%v %v", resp, err)
	}
	time.Sleep(20 * time.Millisecond)
	c.Send("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n")
	time.Sleep(20 * time.Millisecond)
	c.Send("abcde")
	if resp, body, err := c.Answer(5 * time.Second); err != nil || body != "POST abcde" {
		t.Fatalf("the next request: %v %v %q, want POST abcde", resp, err, body)
	}
}

func TestTheHeadIsWhatTheHeaderWasAtWriteHeader(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/late":
			w.WriteHeader(http.StatusOK)
			w.Header().Set("Content-Length", "1000")
			w.Header().Set("X-Late", "1")
			_, _ = io.WriteString(w, "hello")
		case "/changed":
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusOK)
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, "hello")
		case "/204":
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "3")
			w.WriteHeader(http.StatusNotModified)
		}
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	for _, path := range []string{"/late", "/changed", "/204", "/304", "/late"} {
		c.Send("GET " + path + " HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch path {
		case "/late", "/changed":
			if body != "hello" || len(resp.Header["Content-Length"]) != 1 || resp.ContentLength != 5 || resp.Header.Get("X-Late") != "" {
				t.Errorf("%s: %v %q", path, resp.Header, body)
			}
		case "/204", "/304":
			if resp.Header.Get("Content-Length") != "" || path == "/304" && resp.Header.Get("Content-Type") != "" {
				t.Errorf("%s: %v", path, resp.Header)
			}
		}
	}
}

func TestACallerThatClosesItsSendingSideIsAnswered(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(30 * time.Millisecond) // past WatchAfter: the watch sees the EOF
		_, _ = io.WriteString(w, "late answer")
	}), Options{WatchAfter: time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a caller that half-closed got no answer: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "late answer" || !resp.Close {
		t.Errorf("%q, close %v", b, resp.Close)
	}
}

func TestAnAnswerToABodyLeftUnreadReachesACallerStillSendingIt(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "who are you", http.StatusUnauthorized)
	}), Options{})
	// 1 MiB, sent whole before the answer is read (as urllib does): the
	// caller reads the 401, told the connection closes, not a reset.
	c := rawhttptest.DialRaw(t, addr)
	body := strings.Repeat("x", 1<<20)
	go func() {
		_, _ = io.WriteString(c, fmt.Sprintf("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	}()
	time.Sleep(100 * time.Millisecond)
	resp, msg, err := c.Answer(5 * time.Second)
	if err != nil || resp.StatusCode != 401 || !resp.Close || !strings.Contains(msg, "who are you") {
		t.Fatalf("%v %v %q", resp, err, msg)
	}
}

func TestContinueIsSentWhenTheBodyIsReadAfterWriteHeader(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("want 100 Continue: %q %v", line, err)
	}
}

func TestTheWatchOutlivesTheHandlersReadDeadline(t *testing.T) {
	canceled := make(chan error, 1)
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			canceled <- r.Context().Err()
		case <-time.After(5 * time.Second):
			canceled <- nil
		}
	}), Options{WatchAfter: time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx")
	time.Sleep(50 * time.Millisecond) // past the handler's read deadline
	_ = c.Close()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Errorf("a caller that left after the handler's read deadline: %v, want canceled", err)
	}
}

func TestAnHTTP10CallerIsAnsweredInHTTP10(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(describe), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("GET /x HTTP/1.0\r\n\r\n")
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "HTTP/1.0 200 OK\r\n" {
		t.Errorf("status line %q %v", line, err)
	}
}

func TestAHeaderMapHeldAcrossWriteHeaderDoesNotChangeTheHead(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		switch r.URL.Path {
		case "/set":
			w.WriteHeader(http.StatusOK)
			h.Set("Content-Length", "10")
		case "/del":
			h.Set("Content-Length", "2")
			w.WriteHeader(http.StatusOK)
			h.Del("Content-Length")
		}
		_, _ = io.WriteString(w, "hi")
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	for _, path := range []string{"/set", "/del", "/set"} {
		c.Send("GET " + path + " HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil || body != "hi" || resp.ContentLength != 2 || len(resp.Header["Content-Length"]) != 1 || resp.Close {
			t.Fatalf("%s: %v %v %q", path, resp, err, body)
		}
	}
}

func TestABodyDrainedWhileItsHandlerRunsIsClosedToIt(t *testing.T) {
	got := make(chan string, 1)
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 3)
		_, _ = io.ReadFull(r.Body, b)
		w.(http.Flusher).Flush() // the head goes out: the rest of the body is read and dropped
		rest, err := io.ReadAll(r.Body)
		got <- fmt.Sprintf("%s|%s|%v", b, rest, err)
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabcdefghij")
	if resp, _, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if s := <-got; s != "abc||"+http.ErrBodyReadAfterClose.Error() {
		t.Errorf("the handler read %q, want the rest refused as net/http refuses it", s)
	}
}

func TestClosingAfterTheAnswerOverridesTheHandlersConnection(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "keep-alive")
		_, _ = io.WriteString(w, "ok")
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
	resp, _, err := c.Answer(5 * time.Second)
	// net/http's client drops a Connection: close it acted on: a
	// keep-alive beside it would be left.
	if err != nil || !resp.Close || len(resp.Header["Connection"]) != 0 {
		t.Fatalf("%v %v: want only Connection: close", resp, err)
	}
	if !c.ClosedWithin(time.Second) {
		t.Error("the connection stayed open")
	}
}

// TestShutdownClosesAConnectionThatSentNoRequestAfterUnusedGrace: a
// client that connected and sent nothing holds Shutdown for at most
// Options.UnusedGrace (from the whole second it connected in, as
// net/http counts its 5 s), not for net/http's 5 s.
func TestShutdownClosesAConnectionThatSentNoRequestAfterUnusedGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 1)
	s := New(http.HandlerFunc(describe), Options{Logger: slog.New(slog.DiscardHandler), UnusedGrace: time.Second,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				accepted <- struct{}{}
			}
		}})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	quiet := rawhttptest.DialRaw(t, ln.Addr().String()) // sends nothing
	<-accepted
	start := time.Now()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Shutdown took %v with a connection that sent nothing, want at most its 1 s grace", d)
	}
	if !quiet.ClosedWithin(time.Second) {
		t.Error("the connection that sent nothing was not closed")
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
}

func TestEachRequestOnAConnectionStartsFromNothingOfTheLast(t *testing.T) {
	addr := serveH1(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			w.Header().Set("X-First", "1")
		}
		body, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, "%s %s te=%v cl=%d x=%q body=%q", r.Method, r.URL.Path, r.TransferEncoding, r.ContentLength, r.Header.Get("X-In"), body)
	}), Options{})
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /first HTTP/1.1\r\nHost: h\r\nX-In: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, want := range []struct {
		body  string
		first bool
	}{
		{`POST /first te=[chunked] cl=-1 x="a" body="ab"`, true},
		{`GET /second te=[] cl=0 x="" body=""`, false},
	} {
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil || body != want.body || (resp.Header.Get("X-First") != "") != want.first {
			t.Fatalf("want %q (X-First %v): %v %v %q", want.body, want.first, resp, err, body)
		}
	}
}
