package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// requestError is a request the server cannot read: it answers code with
// msg as text, and closes the connection.
type requestError struct {
	code int
	msg  string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// errHeaderTooLarge is a request line and header block longer than the
// server's limit (431).
var errHeaderTooLarge = &requestError{code: http.StatusRequestHeaderFieldsTooLarge, msg: "request header fields too large"}

// request is what readRequest makes of a request's head: the request the
// handler gets, with a body reading from br, and what the connection
// does around it.
type request struct {
	// Request is the handler's request before its context is set: the
	// handler gets a copy (http.Request.WithContext), so a connection
	// reads each of its requests into one request.
	http.Request
	// body reads the request body: nil for none.
	body *body
	// keepAlive: the caller asked for the connection to stay open after
	// the answer (HTTP/1.1 without "Connection: close", HTTP/1.0 with
	// "Connection: keep-alive" and without "close").
	keepAlive bool
	// expectContinue: the caller waits for "100 Continue" before it
	// sends the body.
	expectContinue bool
}

// readRequest reads one request's line and headers from tp (over br) and
// frames its body as RFC 9112 section 6 does, as net/http's server does:
// Transfer-Encoding chunked (HTTP/1.1 only) wins over Content-Length,
// whose values must agree; a request with neither has no body. An error
// is a *requestError for a request that must be refused, io.EOF for a
// connection that ended before a request began, or the read's error.
// The request is made in into, which it overwrites, and returned.
func readRequest(br *bufio.Reader, tp *textproto.Reader, into *request) (*request, error) {
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return nil, badRequest("malformed request line %q", line)
	}
	if !validMethod(method) {
		return nil, badRequest("invalid method %q", method)
	}
	major, minor, ok := http.ParseHTTPVersion(proto)
	if !ok {
		return nil, badRequest("malformed HTTP version %q", proto)
	}
	if major != 1 {
		return nil, &requestError{code: http.StatusHTTPVersionNotSupported, msg: "unsupported protocol version " + proto}
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, badRequest("malformed request target %q", target)
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		var ne net.Error
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) {
			return nil, err // the connection ended or failed
		}
		// A textproto.ProtocolError, or its "message too large" for a
		// long folded first line: net/http answers 400 to either.
		return nil, badRequest("%v", err)
	}
	h := http.Header(mh)
	*into = request{Request: http.Request{Method: method, URL: u, Proto: proto, ProtoMajor: major, ProtoMinor: minor,
		Header: h, RequestURI: target}}
	req := into
	r := &req.Request
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, badRequest("invalid header name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return nil, badRequest("invalid value of header %s", k)
			}
		}
	}
	hosts, haveHost := h["Host"]
	switch {
	case len(hosts) > 1:
		return nil, badRequest("too many Host headers")
	case haveHost && !httpguts.ValidHostHeader(hosts[0]):
		return nil, badRequest("malformed Host header")
	case !haveHost && r.ProtoAtLeast(1, 1) && method != "CONNECT":
		return nil, badRequest("missing required Host header")
	}
	r.Host = u.Host
	if r.Host == "" && haveHost {
		r.Host = hosts[0]
	}
	delete(h, "Host")

	if p, ok := h["Pragma"]; ok && len(p) > 0 && p[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"} // as net/http does
		}
	}

	conn := h["Connection"]
	if r.ProtoAtLeast(1, 1) {
		req.keepAlive = !httpguts.HeaderValuesContainsToken(conn, "close")
	} else {
		req.keepAlive = httpguts.HeaderValuesContainsToken(conn, "keep-alive") && !httpguts.HeaderValuesContainsToken(conn, "close")
	}
	r.Close = !req.keepAlive
	if ex := h["Expect"]; len(ex) > 0 {
		if len(ex) > 1 || !asciiEqualFold(ex[0], "100-continue") {
			return nil, &requestError{code: http.StatusExpectationFailed, msg: "unsupported Expect header"}
		}
		// An HTTP/1.0 caller's is ignored (RFC 9110 10.1.1), as net/http does.
		req.expectContinue = r.ProtoAtLeast(1, 1)
	}

	// Content-Length must be valid, and repeated values agree, even when
	// chunked framing wins (RFC 9112 6.3; net/http's fixLength).
	if err := dedupContentLength(h); err != nil {
		return nil, err
	}
	n, err := contentLength(h)
	if err != nil {
		return nil, err
	}
	chunked := false
	if te, ok := h["Transfer-Encoding"]; ok {
		delete(h, "Transfer-Encoding")
		if !r.ProtoAtLeast(1, 1) {
			te = nil // ignored in HTTP/1.0, as net/http does
		}
		if len(te) > 1 {
			return nil, &requestError{code: http.StatusNotImplemented, msg: "too many transfer encodings"}
		}
		if len(te) == 1 {
			if !asciiEqualFold(te[0], "chunked") {
				return nil, &requestError{code: http.StatusNotImplemented, msg: fmt.Sprintf("unsupported transfer encoding %q", te[0])}
			}
			chunked = true
			if _, ok := h["Content-Length"]; ok {
				// RFC 9112 6.3: Transfer-Encoding wins, and the
				// connection closes after the answer.
				delete(h, "Content-Length")
				req.keepAlive = false
			}
			r.TransferEncoding = []string{"chunked"}
		}
		if te == nil {
			req.keepAlive = false // Transfer-Encoding in HTTP/1.0: closed after the answer (RFC 9112 6.1)
		}
	}
	switch {
	case chunked:
		r.ContentLength = -1
		req.body = &body{chunked: true, cr: httputil.NewChunkedReader(br), br: br, tp: tp}
	default:
		r.ContentLength = n
		if n > 0 {
			req.body = &body{lr: io.LimitedReader{R: br, N: n}}
		}
	}
	if req.body != nil {
		r.Body = req.body
	} else {
		r.Body = http.NoBody
	}
	return req, nil
}

// dedupContentLength refuses repeated Content-Length values that differ,
// and keeps one of those that agree, as net/http does.
func dedupContentLength(h http.Header) error {
	vs := h["Content-Length"]
	if len(vs) < 2 {
		return nil
	}
	first := textproto.TrimString(vs[0])
	for _, v := range vs[1:] {
		if textproto.TrimString(v) != first {
			return badRequest("message cannot contain multiple Content-Length headers; got %q", vs)
		}
	}
	h["Content-Length"] = []string{first}
	return nil
}

// contentLength parses a request's Content-Length (dedupContentLength
// has run), which must be a non-negative decimal number; 0 for none.
func contentLength(h http.Header) (int64, error) {
	vs := h["Content-Length"]
	if len(vs) == 0 {
		return 0, nil
	}
	first := textproto.TrimString(vs[0])
	if first == "" || strings.TrimLeft(first, "0123456789") != "" {
		return 0, badRequest("bad Content-Length %q", first)
	}
	n, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return 0, badRequest("bad Content-Length %q", first)
	}
	return n, nil
}

// asciiEqualFold reports whether s and t are equal with ASCII letters
// compared without case, as net/http compares Transfer-Encoding (unlike
// strings.EqualFold, for which "chun\u212aed", with a Kelvin sign, is
// "chunked").
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// validMethod reports whether m is an HTTP method token (RFC 9110 9.1).
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

// body is a request's body: Content-Length bytes of the connection, or
// its chunks and then its trailer. Reading it first sends "100 Continue"
// when the caller waits for it (sendContinue), and its end is reported
// once (onEOF).
type body struct {
	lr      io.LimitedReader
	chunked bool
	cr      io.Reader
	br      *bufio.Reader
	tp      *textproto.Reader
	// sendContinue, when set, is called before the first read (once).
	sendContinue func() error
	// onEOF, when set, is called once the body has been read to its end.
	onEOF func()
	// eof: the body was read to its end; err: the error the body ended
	// with, returned again; closed: the handler closed it.
	eof, closed bool
	err         error
}

// Read reads the body. A connection that ends within it is
// io.ErrUnexpectedEOF.
func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.read(p)
}

// read reads the body, closed or not (the server drains it).
func (b *body) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if send := b.sendContinue; send != nil {
		b.sendContinue = nil
		if err := send(); err != nil {
			b.err = err
			return 0, err
		}
	}
	var n int
	var err error
	if b.chunked {
		n, err = b.cr.Read(p)
		if err == io.EOF {
			err = b.readTrailer()
		}
	} else {
		if b.lr.N <= 0 {
			return 0, b.end()
		}
		n, err = b.lr.Read(p)
		switch {
		case err == io.EOF:
			err = io.ErrUnexpectedEOF // the connection ended before the body did
		case err == nil && b.lr.N == 0:
			err = io.EOF
		}
	}
	if err == io.EOF {
		err = b.end()
	} else if err != nil {
		b.err = err
	}
	return n, err
}

// readTrailer reads the trailer section after the last chunk (its
// fields are dropped) up to the empty line that ends the request, as
// net/http does: a trailer must end, with CRLF CRLF, within the
// connection's read buffer.
func (b *body) readTrailer() error {
	buf, _ := b.br.Peek(2)
	if bytes.Equal(buf, crlf) {
		_, _ = b.br.Discard(2)
		return io.EOF
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if !seeUpcomingDoubleCRLF(b.br) {
		return errors.New("suspiciously long trailer after the chunked body")
	}
	if _, err := b.tp.ReadMIMEHeader(); err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return fmt.Errorf("reading the chunked body's trailer: %w", err)
	}
	return io.EOF
}

var (
	crlf          = []byte("\r\n")
	doubleCRLF    = []byte("\r\n\r\n")
	errTrailerEOF = fmt.Errorf("the connection ended in the chunked body's trailer: %w", io.ErrUnexpectedEOF)
)

// seeUpcomingDoubleCRLF reports whether r's buffer holds CRLF CRLF,
// reading no further than its size.
func seeUpcomingDoubleCRLF(r *bufio.Reader) bool {
	for n := 4; ; n++ {
		buf, err := r.Peek(n)
		if bytes.HasSuffix(buf, doubleCRLF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// end marks the body read to its end.
func (b *body) end() error {
	b.err = io.EOF
	if !b.eof {
		b.eof = true
		if b.onEOF != nil {
			b.onEOF()
		}
	}
	return io.EOF
}

// Close ends the handler's reading (a later Read fails, as net/http's
// does); the server reads or drops what is left when it answers.
func (b *body) Close() error {
	b.closed = true
	return nil
}

// drain reads what is left of the body, up to max bytes: io.EOF when it
// reached the end, nil when more is left, or the read's error.
func (b *body) drain(max int64) error {
	_, err := io.CopyN(io.Discard, readerFunc(b.read), max)
	return err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// remaining is how many bytes of a Content-Length body are unread; -1
// for a chunked body not read to its end.
func (b *body) remaining() int64 {
	if b.eof || b.err != nil {
		return 0
	}
	if b.chunked {
		return -1
	}
	return b.lr.N
}
