package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// TestShutdownAnswersTheRequestsInFlightOfBothProtocols stops a server
// over TLS as grove serve does: on net/http, closing the connections
// that sent no request first (UnusedConns), which must not take an
// HTTP/2 connection, which net/http hands to its TLSNextProto without
// telling the ConnState hook that it is in use; on h1, whose HTTP/2
// connections are its HTTP/2 server's. An HTTP/2 request and an
// HTTP/1.1 request in flight are answered, Shutdown returns once they
// are (with the idle connections of both protocols closed, or it would
// not), and Serve returns http.ErrServerClosed.
func TestShutdownAnswersTheRequestsInFlightOfBothProtocols(t *testing.T) {
	forEachEngine(t, testShutdownAnswersTheRequestsInFlightOfBothProtocols)
}

func testShutdownAnswersTheRequestsInFlightOfBothProtocols(t *testing.T, engine string) {
	ca := certtest.NewCA(t, "ca")
	started, release := make(chan int, 2), make(chan struct{})
	s := New(Options{Logger: slog.New(slog.DiscardHandler)})
	ts := serveTLS(t, engine, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			started <- r.ProtoMajor
			<-release
		}
		_, _ = fmt.Fprintf(w, "done HTTP/%d", r.ProtoMajor)
	}), groveTLS(t, ca), listenLoopback(t))
	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 2)
	for _, h2 := range []bool{true, false} {
		// An idle connection of each protocol (its client's), and a
		// request in flight on another of each.
		if _, code, _ := get(t, tlsClient(t, ca, h2), "https://"+ts.addr+"/"); code != 200 {
			t.Fatalf("GET /: %d", code)
		}
		c := tlsClient(t, ca, h2)
		go func() {
			resp, err := c.Get("https://" + ts.addr + "/block")
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
			if want := map[bool]int{true: 2, false: 1}[h2]; proto != want {
				t.Fatalf("the request came over HTTP/%d, want HTTP/%d", proto, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the request did not reach its handler")
		}
	}

	ts.closeUnused()
	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with requests in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	got := map[string]bool{}
	for range 2 {
		select {
		case a := <-answered:
			if a.err != nil {
				t.Fatalf("a request in flight at shutdown: %v", a.err)
			}
			got[a.body] = true
		case <-time.After(5 * time.Second):
			t.Fatal("a request in flight at shutdown got no answer")
		}
	}
	if !got["done HTTP/2"] || !got["done HTTP/1"] {
		t.Errorf("answers %v, want one over each protocol", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return once the requests were answered")
	}
	if err := <-ts.served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v, want http.ErrServerClosed", err)
	}
}
