package httpserver

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/internal/rawhttptest"
	"github.com/groveml/grove/transport/connlimit"
)

// engines are the servers of --http-engine: the hardening tests run on
// each (forEachEngine).
var engines = []string{"net/http", "h1"}

// forEachEngine runs test as a subtest for each of engines.
func forEachEngine(t *testing.T, test func(t *testing.T, engine string)) {
	for _, e := range engines {
		t.Run(strings.ReplaceAll(e, "/", ""), func(t *testing.T) { test(t, e) })
	}
}

// limitsServer serves s's handler with engine (NewHTTPServer for
// net/http, NewH1Server for h1) on a loopback listener (limited to
// maxConns connections when positive) until the test ends, and returns
// its address and listener.
func limitsServer(t *testing.T, engine string, s *Server, maxConns int) (string, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener = ln
	if maxConns > 0 {
		l = connlimit.New(ln, connlimit.Options{Name: "http", Max: maxConns, Logger: slog.New(slog.DiscardHandler)})
	}
	if engine == "h1" {
		srv := s.NewH1Server(s.Handler(), nil)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
		return ln.Addr().String(), l
	}
	srv := s.NewHTTPServer(s.Handler(), nil)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), l
}

// refusingServer has a route needing infer for the tokens "tok-infer"
// (which can score) and "tok-read" (which cannot), the first limited to
// one request ever; the route reads its body and answers "queue full"
// 429 when the body says so, as a protocol does for a full model queue.
func refusingServer(t *testing.T, opts Options) *Server {
	t.Helper()
	now := time.Unix(1000, 0)
	opts.Auth = newAuth(t, map[string]string{"tok-infer": "bidder:infer", "tok-read": "console:read", "tok-once": "once:infer"},
		[]auth.Limit{{Name: "once", RPS: 0.001, Burst: 1}}, func() time.Time { return now })
	opts.Logger = slog.New(slog.DiscardHandler)
	s := New(opts)
	s.Handle("POST /v1/inference", auth.RoleInfer, "inference", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.Body(w, r, new([]byte))
		if !ok {
			return
		}
		if string(body) == "full" {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "model queue full", http.StatusTooManyRequests)
			return
		}
		_, _ = fmt.Fprintf(w, "scored %d bytes\n", len(body))
	})
	return s
}

func post(token, body string) string {
	authz := ""
	if token != "" {
		authz = "Authorization: Bearer " + token + "\r\n"
	}
	return fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s", authz, len(body), body)
}

func TestRefusalsCloseTheConnectionButAQueueFull429DoesNot(t *testing.T) {
	forEachEngine(t, testRefusalsCloseTheConnectionButAQueueFull429DoesNot)
}

func testRefusalsCloseTheConnectionButAQueueFull429DoesNot(t *testing.T, engine string) {
	addr, _ := limitsServer(t, engine, refusingServer(t, Options{}), 0)
	once := rawhttptest.DialRaw(t, addr) // spends the limited caller's one request
	once.Send(post("tok-once", "x"))
	if resp, body, err := once.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the limited caller's first request: %v %v %q", resp, err, body)
	}
	for _, tc := range []struct {
		why, token, body string
		code             int
		closes           bool
	}{
		{"no credentials", "", "x", 401, true},
		{"wrong token", "tok-nope", "x", 401, true},
		{"wrong role", "tok-read", "x", 403, true},
		{"over its limit", "tok-once", "x", 429, true},
		{"queue full", "tok-infer", "full", 429, false},
		{"served", "tok-infer", "x", 200, false},
	} {
		c := rawhttptest.DialRaw(t, addr)
		c.Send(post(tc.token, tc.body))
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.why, err)
		}
		if resp.StatusCode != tc.code || resp.Close != tc.closes {
			t.Errorf("%s: %d with Connection: %q, want %d closing %v (%q)", tc.why, resp.StatusCode, resp.Header.Get("Connection"), tc.code, tc.closes, body)
		}
		if closed := c.ClosedWithin(500 * time.Millisecond); closed != tc.closes {
			t.Errorf("%s: the server closed the connection: %v, want %v", tc.why, closed, tc.closes)
		}
	}
}

func TestAnUnknownCallersBodyIsNotWaitedFor(t *testing.T) {
	forEachEngine(t, testAnUnknownCallersBodyIsNotWaitedFor)
}

func testAnUnknownCallersBodyIsNotWaitedFor(t *testing.T, engine string) {
	// The short read deadline of a caller not known yet is the header
	// timeout; an admitted caller gets the read timeout.
	const short, long = 700 * time.Millisecond, 30 * time.Second
	addr, _ := limitsServer(t, engine, refusingServer(t, Options{ReadHeaderTimeout: short, ReadTimeout: long}), 0)

	// Without a token, a body of 200 KiB sent at a trickle: the 401 comes
	// at once, and the connection closes at the short deadline.
	c := rawhttptest.DialRaw(t, addr)
	start := time.Now()
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 200<<10))
	stop := make(chan struct{})
	defer close(stop)
	go func(c *rawhttptest.RawConn) { // this connection's, not the next one's
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}(c)
	resp, _, err := c.Answer(5 * time.Second)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("a trickled body without credentials: %v %v", resp, err)
	}
	if d := time.Since(start); d > short/2 {
		t.Errorf("the 401 took %v: it waited for the body", d)
	}
	if !c.ClosedWithin(short + 5*time.Second) {
		t.Fatal("the refused connection was not closed")
	}
	if d := time.Since(start); d > long/2 {
		t.Errorf("the refused connection closed after %v, want about %v (the short deadline), not %v", d, short, long)
	}

	// With a token, the same trickle is read past the short deadline.
	c = rawhttptest.DialRaw(t, addr)
	const n = 40
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-infer\r\nContent-Length: %d\r\n\r\n", n))
	for range n {
		time.Sleep(2 * short / n) // the body takes twice the short deadline
		c.Send("x")
	}
	if resp, body, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 || body != "scored 40 bytes\n" {
		t.Errorf("an admitted caller's slow body: %v %v %q", resp, err, body)
	}
}

func TestAnOversizedBodyIsRefusedFromItsContentLengthAndDrainedSoTheClientReadsThe413(t *testing.T) {
	forEachEngine(t, testAnOversizedBodyIsRefusedFromItsContentLengthAndDrainedSoTheClientReadsThe413)
}

func testAnOversizedBodyIsRefusedFromItsContentLengthAndDrainedSoTheClientReadsThe413(t *testing.T, engine string) {
	const limit = 4 << 20
	addr, _ := limitsServer(t, engine, refusingServer(t, Options{MaxBodyBytes: limit, ReadTimeout: 10 * time.Second}), 0)
	// The client sends its whole body before it reads, as Python's urllib
	// does: without a drain, the server closes with megabytes in flight
	// and the client's write or read is reset.
	c := rawhttptest.DialRaw(t, addr)
	body := bytes.Repeat([]byte("x"), 3*limit+limit/2) // more than the sockets' buffers hold
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-infer\r\nContent-Length: %d\r\n\r\n", len(body)))
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(body); err != nil {
		t.Fatalf("writing the body: %v", err)
	}
	resp, msg, err := c.Answer(10 * time.Second)
	if err != nil || resp.StatusCode != 413 || !strings.Contains(msg, "Content-Length of 14680064 bytes exceeds the limit of 4194304 bytes") {
		t.Fatalf("an oversized body: %v %v %q", resp, err, msg)
	}

	// Refused from its Content-Length, a body is not read before the
	// answer: the 413 comes with none of it sent.
	c = rawhttptest.DialRaw(t, addr)
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-infer\r\nContent-Length: %d\r\n\r\n", limit+1))
	if resp, _, err := c.Answer(2 * time.Second); err != nil || resp.StatusCode != 413 {
		t.Fatalf("an oversized body not sent: %v %v", resp, err)
	}
	// A body more than four times the limit is not drained: the
	// connection closes at once instead of waiting for it.
	c = rawhttptest.DialRaw(t, addr)
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-infer\r\nContent-Length: %d\r\n\r\n", 5*limit))
	if resp, _, err := c.Answer(2 * time.Second); err != nil || resp.StatusCode != 413 {
		t.Fatalf("a body of five times the limit: %v %v", resp, err)
	}
	if !c.ClosedWithin(3 * time.Second) {
		t.Error("the connection of a body too large to drain was not closed at once")
	}
}

func TestAChunkedRequestClosesItsConnectionAfterItsAnswer(t *testing.T) {
	forEachEngine(t, testAChunkedRequestClosesItsConnectionAfterItsAnswer)
}

func testAChunkedRequestClosesItsConnectionAfterItsAnswer(t *testing.T, engine string) {
	addr, _ := limitsServer(t, engine, refusingServer(t, Options{}), 0)
	// Content-Length and Transfer-Encoding together: net/http reads the
	// body chunked; what follows it must never be read as a request.
	c := rawhttptest.DialRaw(t, addr)
	c.Send("POST /v1/inference HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-infer\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"3\r\nabc\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body, err := c.Answer(5 * time.Second)
	if err != nil || resp.StatusCode != 200 || body != "scored 3 bytes\n" || !resp.Close {
		t.Fatalf("a request with both Content-Length and Transfer-Encoding: %v %v %q", resp, err, body)
	}
	if resp, _, err := c.Answer(time.Second); err == nil {
		t.Fatalf("the bytes after the chunked body were answered as a request: %d", resp.StatusCode)
	}
}

func TestTwoTimeoutHeadersAreRefused(t *testing.T) {
	r := httptest.NewRequest("POST", "/x", nil)
	r.Header.Add(TimeoutHeader, "1s")
	r.Header.Add(TimeoutHeader, "10m")
	if _, _, err := WithTimeout(r); err == nil || !strings.Contains(err.Error(), "more than one Grove-Timeout header") {
		t.Errorf("two Grove-Timeout headers: %v", err)
	}
	w := httptest.NewRecorder()
	if _, _, ok := TimeoutContext(w, r); ok || w.Code != 400 || !strings.Contains(w.Body.String(), "Grove-Timeout") {
		t.Errorf("two Grove-Timeout headers: %v %d %q", ok, w.Code, w.Body)
	}
	r.Header.Set(TimeoutHeader, "1s")
	if ctx, cancel, err := WithTimeout(r); err != nil {
		t.Errorf("one Grove-Timeout header: %v", err)
	} else if _, ok := ctx.Deadline(); !ok {
		t.Error("one Grove-Timeout header: no deadline")
	} else {
		cancel()
	}
}

// TestAtTheConnectionLimitIdleConnectionsMakeRoom serves HTTP/1 on a
// listener limited to 3 connections: idle ones (new, and between two
// requests) are closed for new ones, one serving a request is not.
func TestAtTheConnectionLimitIdleConnectionsMakeRoom(t *testing.T) {
	forEachEngine(t, testAtTheConnectionLimitIdleConnectionsMakeRoom)
}

func testAtTheConnectionLimitIdleConnectionsMakeRoom(t *testing.T, engine string) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	release := make(chan struct{})
	s.Handle("GET /block", auth.RoleRead, "block", func(w http.ResponseWriter, _ *http.Request) { <-release })
	addr, l := limitsServer(t, engine, s, 3)
	busy := rawhttptest.DialRaw(t, addr)
	busy.Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	kept := rawhttptest.DialRaw(t, addr) // idle after one request
	kept.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _, err := kept.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	// The server marks the kept connection idle after it has written the
	// answer, perhaps after the client has read it: wait for it, so that
	// it is idle before the silent one is accepted.
	waitIdle(t, l.(*connlimit.Listener), 1)
	silent := rawhttptest.DialRaw(t, addr) // sends nothing
	waitOpen(t, l.(*connlimit.Listener), 3)
	waitIdle(t, l.(*connlimit.Listener), 2)
	// The newest idle connection is the silent one: the kept one, idle
	// since its answer, goes first.
	probe := rawhttptest.DialRaw(t, addr)
	probe.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _, err := probe.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a probe at the limit: %v %v", resp, err)
	}
	if !kept.ClosedWithin(time.Second) {
		t.Error("the connection idle the longest was not closed for the probe")
	}
	probe2 := rawhttptest.DialRaw(t, addr)
	probe2.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _, err := probe2.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a second probe at the limit: %v %v", resp, err)
	}
	if !silent.ClosedWithin(time.Second) {
		t.Error("the silent connection was not closed for the second probe")
	}
	close(release)
	if resp, _, err := busy.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Errorf("the connection serving a request was cut: %v %v", resp, err)
	}
}

// waitIdle waits until n of l's connections are idle.
func waitIdle(t *testing.T, l *connlimit.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Idle() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the listener holds %d idle connections, want %d", l.Idle(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitOpen(t *testing.T, l *connlimit.Listener, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Open() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the listener holds %d connections, want %d", l.Open(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAnHTTP2ConnectionWithARequestInFlightIsNotClosedToMakeRoom: an
// HTTP/2 connection never leaves net/http's "new" state in the ConnState
// hooks (on h1 too, whose HTTP/2 server is net/http's), so it holds its
// connection while a request is in flight.
func TestAnHTTP2ConnectionWithARequestInFlightIsNotClosedToMakeRoom(t *testing.T) {
	forEachEngine(t, testAnHTTP2ConnectionWithARequestInFlightIsNotClosedToMakeRoom)
}

func testAnHTTP2ConnectionWithARequestInFlightIsNotClosedToMakeRoom(t *testing.T, engine string) {
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	started, release := make(chan struct{}), make(chan struct{})
	s.Handle("GET /block", auth.RoleRead, "block", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = fmt.Fprintf(w, "proto %d", r.ProtoMajor)
	})
	ca := certtest.NewCA(t, "ca")
	l := connlimit.New(listenLoopback(t), connlimit.Options{Name: "http", Max: 1, Logger: slog.New(slog.DiscardHandler)})
	ts := serveTLS(t, engine, s, s.Handler(), groveTLS(t, ca), l)
	url := "https://" + ts.addr
	got := make(chan string, 1)
	go func() {
		resp, err := tlsClient(t, ca, true).Get(url + "/block")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-started
	// A second connection finds the listener full and the HTTP/2 one
	// held: it is refused.
	rc := rawhttptest.DialRaw(t, ts.addr)
	if !rc.ClosedWithin(2 * time.Second) {
		t.Error("a connection over the limit was kept while the only one held a request in flight")
	}
	close(release)
	if b := <-got; b != "proto 2" {
		t.Fatalf("the HTTP/2 request in flight: %q", b)
	}
	// Idle now, the HTTP/2 connection makes room for the next one.
	if major, code, _ := get(t, tlsClient(t, ca, false), url+"/healthz"); major != 1 || code != 200 {
		t.Fatalf("a new connection once the HTTP/2 one is idle: HTTP/%d %d", major, code)
	}
}
