package httpserver

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/groveml/grove/internal/certtest"
)

// TestUnusedConnsDoNotHoldShutdown: a connection that never sent a
// request (an HTTP client's pool dial that lost its race) keeps
// http.Server.Shutdown waiting for 5 s unless CloseAfter closes it, while
// a connection that is serving a request is left to finish it.
func TestUnusedConnsDoNotHoldShutdown(t *testing.T) {
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, "done")
	})}
	active := make(chan struct{}, 1)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateActive {
			active <- struct{}{}
		}
	}
	u := TrackUnusedConns(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()

	unused, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	busy, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := io.WriteString(busy, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-active:
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not read")
	}
	// Wait until the server has accepted the unused connection too.
	deadline := time.Now().Add(5 * time.Second)
	for {
		u.mu.Lock()
		n := len(u.since)
		u.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections without a request, want 1", n)
		}
		time.Sleep(time.Millisecond) // polling the server's view, bounded above
	}

	start := time.Now()
	u.CloseAfter(0)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Shutdown still waiting 4 s after the last request: the unused connection held it")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Shutdown took %v", took)
	}
	b, _ := io.ReadAll(busy)
	if len(b) == 0 {
		t.Fatal("the request in flight got no answer")
	}
	if _, err := unused.Read(make([]byte, 1)); err == nil {
		t.Fatal("the unused connection is still open")
	}
}

// TestUnusedConnsLeaveAnHTTP2RequestInFlightToFinish: net/http hands an
// HTTP/2 connection to its TLSNextProto without telling the ConnState
// hook that it is in use, so the connection must not count as one that
// sent no request: closing the unused connections at shutdown must let
// the HTTP/2 request in flight finish and get its answer.
func TestUnusedConnsLeaveAnHTTP2RequestInFlightToFinish(t *testing.T) {
	ca := certtest.NewCA(t, "ca")
	leaf := ca.Server(t, "server")
	started, release := make(chan int, 1), make(chan struct{})
	s := New(Options{})
	srv := s.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- r.ProtoMajor
		<-release
		_, _ = io.WriteString(w, "done")
	}), &tls.Config{Certificates: []tls.Certificate{leaf.TLS(t)}})
	u := TrackUnusedConns(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{string(b), err}
	}()
	select {
	case proto := <-started:
		if proto != 2 {
			t.Fatalf("the request came over HTTP/%d, want HTTP/2", proto)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach its handler")
	}

	u.CloseAfter(0)
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	close(release)
	select {
	case a := <-answered:
		if a.err != nil || a.body != "done" {
			t.Fatalf("the HTTP/2 request in flight at shutdown got %q, %v; want its answer", a.body, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the HTTP/2 request in flight got no answer")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return once the HTTP/2 request was answered")
	}
}
