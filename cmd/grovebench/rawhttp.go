package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// rawClient is one closed-loop client's keep-alive HTTP/1.1 connection: it
// writes one prebuilt POST and reads the answer in the calling goroutine,
// like wrk. net/http's client hands every request to a writer and a reader
// goroutine of the connection and allocates a Request and a Response each
// time; on this 2-CPU machine the load generator shares the CPUs with the
// server it measures, so every microsecond it spends is taken from the
// server (and, at concurrency 1, added to the measured latency). The same
// client drives grove and the baseline.
type rawClient struct {
	addr    string
	tls     bool   // an https URL: the connection speaks TLS (clientConn.tlsConf)
	req     []byte // the whole request, headers and body
	timeout time.Duration
	clientConn
	br   *bufio.Reader
	body []byte // the last answer's body, reused
}

// newRawClient returns a client that POSTs body to rawURL (http:// or
// https://; for https the caller sets tlsConf, else the system roots verify) with the given content type and extra header lines ("Name: value");
// each request must finish within timeout.
func newRawClient(rawURL string, body []byte, contentType string, timeout time.Duration, headers ...string) (*rawClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("load URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("load URL %q: want http://host:port/path or https://host:port/path", rawURL)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n",
		u.RequestURI(), u.Host, contentType, len(body))
	for _, h := range headers {
		fmt.Fprintf(&b, "%s\r\n", h)
	}
	b.WriteString("\r\n")
	b.Write(body)
	c := &rawClient{addr: u.Host, req: b.Bytes(), timeout: timeout, tls: u.Scheme == "https"}
	if c.tls {
		c.tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	return c, nil
}

// clientConn is a load client's connection, with the AfterFunc that
// unblocks it when the run's context ends.
type clientConn struct {
	conn net.Conn
	stop func() bool
	// tlsConf, if set, makes dial do a TLS handshake on the connection.
	tlsConf *tls.Config
}

// dial connects to addr. One AfterFunc per connection, not per request:
// cancelling ctx unblocks a read or write in flight.
func (c *clientConn) dial(ctx context.Context, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if c.tlsConf != nil {
		conf := c.tlsConf
		if conf.ServerName == "" {
			conf = conf.Clone()
			conf.ServerName, _, _ = net.SplitHostPort(addr)
		}
		hctx, cancel := context.WithTimeout(ctx, timeout)
		tc := tls.Client(conn, conf)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			return fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	c.conn = conn
	c.stop = context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	return nil
}

// close closes the connection, if one is open.
func (c *clientConn) close() {
	if c.stop != nil {
		c.stop()
		c.stop = nil
	}
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// do sends the request and returns the status code and body (valid until
// the next call). Any failure closes the connection; the next call dials
// a new one. When ctx ends, a request in flight fails at once.
func (c *rawClient) do(ctx context.Context) (int, []byte, error) {
	if c.conn == nil {
		if err := c.dial(ctx, c.addr, c.timeout); err != nil {
			return 0, nil, err
		}
		if c.br == nil {
			c.br = bufio.NewReaderSize(c.conn, 64<<10)
		} else {
			c.br.Reset(c.conn)
		}
	}
	status, keep, err := c.roundTrip()
	if err != nil || !keep {
		c.close()
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return status, c.body, err
}

// roundTrip writes the request and reads one response; keep reports
// whether the connection may carry another request.
func (c *rawClient) roundTrip() (status int, keep bool, err error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, false, err
	}
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, false, fmt.Errorf("writing the request: %w", err)
	}
	return readResponse(c.br, &c.body)
}

// readResponse reads one HTTP/1.1 response from br into *body (reusing its
// array): the status code, and whether the connection stays open.
func readResponse(br *bufio.Reader, body *[]byte) (status int, keep bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, false, fmt.Errorf("reading the status line: %w", err)
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, fmt.Errorf("bad status line %q", clip(line, 80))
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, fmt.Errorf("bad status line %q", clip(line, 80))
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection by default, 1.0 does not
	length, chunked := -1, false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, false, fmt.Errorf("reading the headers: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, fmt.Errorf("bad header line %q", clip(line, 80))
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			} else if asciiEqualFold(value, "keep-alive") {
				keep = true
			}
		}
	}
	b := (*body)[:0]
	switch {
	case chunked:
		b, err = readChunked(br, b)
	case length >= 0:
		b, err = readN(br, b, length)
	default: // the body runs to the end of the connection
		keep = false
		var buf bytes.Buffer
		_, err = buf.ReadFrom(br)
		b = append(b, buf.Bytes()...)
	}
	*body = b
	if err != nil {
		return 0, false, fmt.Errorf("reading the body: %w", err)
	}
	return status, keep, nil
}

// readChunked appends a chunked body (RFC 9112 §7.1; trailers skipped) to b.
func readChunked(br *bufio.Reader, b []byte) ([]byte, error) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return b, err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseUint(string(bytes.TrimSpace(size)), 16, 31)
		if err != nil {
			return b, fmt.Errorf("bad chunk size %q", clip(line, 40))
		}
		if n == 0 {
			for { // trailers, up to the empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return b, err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return b, nil
				}
			}
		}
		if b, err = readN(br, b, int(n)); err != nil {
			return b, err
		}
		if crlf, err := br.ReadSlice('\n'); err != nil || len(bytes.TrimRight(crlf, "\r\n")) != 0 {
			return b, errors.New("chunk not followed by CRLF")
		}
	}
}

// readN appends exactly n bytes from br to b, reusing b's array when it
// is big enough and otherwise growing it only as data arrives (a bogus
// length cannot make it allocate more than was sent).
func readN(br *bufio.Reader, b []byte, n int) ([]byte, error) {
	for n > 0 {
		off := len(b)
		step := n
		if off+step > cap(b) {
			step = min(n, max(cap(b)-off, 64<<10))
			b = slices.Grow(b, step)
		}
		b = b[:off+step]
		if _, err := io.ReadFull(br, b[off:]); err != nil {
			return b[:off], err
		}
		n -= step
	}
	return b, nil
}

// asciiEqualFold reports whether b equals s, ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
