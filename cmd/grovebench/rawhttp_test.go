package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRawClientReusesOneConnectionAndSendsTheBody(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/x" || r.URL.RawQuery != "a=1" ||
			r.Header.Get("Content-Type") != "application/octet-stream" {
			http.Error(w, "bad request line or headers", 400)
			return
		}
		w.Write(append([]byte("echo:"), b...))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c, err := newRawClient(srv.URL+"/v1/x?a=1", []byte("hello"), "application/octet-stream", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for i := range 50 {
		status, body, err := c.do(context.Background())
		if err != nil || status != 200 || string(body) != "echo:hello" {
			t.Fatalf("request %d: status %d, body %q, err %v", i, status, body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("50 requests used %d connections, want 1", n)
	}
}

func TestRawClientReadsChunkedAndErrorAnswersAndReconnectsAfterClose(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch n.Add(1) {
		case 1: // chunked: flushed in two parts, no Content-Length
			w.Write([]byte("part one,"))
			w.(http.Flusher).Flush()
			w.Write([]byte(" part two"))
		case 2:
			w.Header().Set("Connection", "close")
			w.Write([]byte("closing"))
		default:
			http.Error(w, "no model", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c, err := newRawClient(srv.URL, []byte("{}"), "application/json", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	want := []struct {
		status int
		body   string
	}{{200, "part one, part two"}, {200, "closing"}, {404, "no model\n"}}
	for i, w := range want {
		status, body, err := c.do(context.Background())
		if err != nil || status != w.status || string(body) != w.body {
			t.Fatalf("request %d: status %d, body %q, err %v; want %d %q", i, status, body, err, w.status, w.body)
		}
		if i == 1 && c.conn != nil {
			t.Fatal("connection kept after Connection: close")
		}
	}
}

func TestRawClientReadsABodyThatRunsToTheEndOfTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		br := bufio.NewReader(conn)
		for { // the request's headers, then its 2-byte body
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.ReadFull(br, make([]byte, 2))
		io.WriteString(conn, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
		conn.Close()
	}()
	c, err := newRawClient("http://"+ln.Addr().String()+"/", []byte("{}"), "application/json", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	status, body, err := c.do(context.Background())
	if err != nil || status != 200 || string(body) != "all of it" || c.conn != nil {
		t.Fatalf("status %d, body %q, err %v, connection kept %v", status, body, err, c.conn != nil)
	}
}

func TestRawClientRequestEndsWhenContextIsCancelled(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, err := newRawClient(srv.URL, []byte("{}"), "application/json", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { _, _, err := c.do(ctx); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request still blocked 10s after its context was cancelled")
	}
}

func TestRawClientRejectsURLsItCannotSend(t *testing.T) {
	for _, u := range []string{"ftp://127.0.0.1:1/x", "127.0.0.1:1/x", "http:///x", "http://[::1"} {
		if _, err := newRawClient(u, nil, "application/json", time.Second); err == nil {
			t.Errorf("newRawClient(%q) succeeded, want an error", u)
		}
	}
}

// FuzzReadResponse checks that no byte sequence from a server makes the
// response reader panic or return a body longer than what it read.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.0 404 Not Found\r\n\r\nno model",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var body []byte
		status, _, err := readResponse(bufio.NewReader(strings.NewReader(string(in))), &body)
		if err == nil && (status < 0 || status > 999 || len(body) > len(in)) {
			t.Fatalf("status %d, body of %d bytes from %d input bytes", status, len(body), len(in))
		}
	})
}
