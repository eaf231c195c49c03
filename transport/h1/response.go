package h1

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferedBody is how much of an answer is held to be sent with its
// Content-Length; a longer one is streamed.
const bufferedBody = 32 << 10

// errWriteAfterHandler is a write to a ResponseWriter whose handler has
// returned.
var errWriteAfterHandler = errors.New("h1: a write after the handler returned")

// response is the http.ResponseWriter of one request.
type response struct {
	c    *conn
	req  *request
	r    *http.Request
	body *body // nil for none
	// header is the handler's (Header). What the head carries is header
	// as it was at WriteHeader, as with net/http: its fields are written
	// then, in the connection's fields buffer (writeFields), and what
	// sendHead needs of them kept in facts.
	header http.Header
	facts  headFacts
	status int
	// wroteHeader: the status is set; wroteBody: Write was called (no
	// 100 Continue after it); headSent: the status line and headers
	// are in the connection's writer.
	wroteHeader, wroteBody, headSent bool
	chunked                          bool
	// contentLength is the handler's Content-Length, -1 for none.
	contentLength int64
	written       int64
	buf           *[]byte
	head          bool
	bodyAllowed   bool
	closeAfter    bool
	// bodyLeft: the connection closes with some of the request body
	// unread (closeWriteAndWait).
	bodyLeft     bool
	handlerDone  bool
	sentContinue bool
	// readDeadline, writeDeadline: the handler set one, which is undone
	// after the answer.
	readDeadline, writeDeadline bool
}

// headFacts is what the head needs of the handler's header once its
// fields are written.
type headFacts struct {
	// conn is the handler's Connection, written by sendHead (nil: none).
	conn                               []string
	date, contentType, contentEncoding bool
}

// Header returns the header map of the answer.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the answer's status (writing a 1xx one at once); it
// panics, as net/http's does, for a code outside 100-999.
func (w *response) WriteHeader(code int) {
	if w.handlerDone {
		return
	}
	w.writeHeader(code)
}

func (w *response) writeHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		if code == http.StatusContinue {
			_ = w.sendContinue()
			return
		}
		w.writeStatusLine(code)
		_, _ = w.c.bw.Write(w.writeFields(w.c.bw.AvailableBuffer(), w.header, code, false, false))
		_, _ = w.c.bw.WriteString("\r\n")
		_ = w.c.bw.Flush()
		return
	}
	w.wroteHeader, w.status = true, code
	w.bodyAllowed = code != http.StatusNoContent && code != http.StatusNotModified && code >= 200
	h := w.header
	badLength := false
	if cl := h["Content-Length"]; len(cl) > 0 && w.bodyAllowed {
		if n, err := strconv.ParseInt(strings.Trim(cl[0], " \t"), 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			badLength = true // dropped, as net/http does
		}
	}
	// The handler may change the map it holds: the head is the header
	// as it is now.
	w.c.fields = w.writeFields(w.c.fields[:0], h, code, badLength, true)
	_, w.facts.date = h["Date"]
	_, w.facts.contentType = h["Content-Type"]
	w.facts.contentEncoding = len(h.Get("Content-Encoding")) > 0
	if conn, ok := h["Connection"]; ok {
		w.facts.conn = slices.Clone(conn)
	}
}

// Write adds p to the answer's body.
func (w *response) Write(p []byte) (int, error) {
	if w.handlerDone {
		return 0, errWriteAfterHandler
	}
	w.wroteBody = true
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.bodyAllowed {
		return 0, http.ErrBodyNotAllowed
	}
	if w.contentLength >= 0 && w.written+int64(len(p)) > w.contentLength {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if w.head {
		return len(p), nil
	}
	if w.headSent {
		return len(p), w.writeBody(p)
	}
	if w.buf == nil {
		w.buf = w.c.s.getBuf()
	}
	if len(*w.buf)+len(p) > bufferedBody {
		// Longer than an answer holds: sent as it comes, not copied.
		if err := w.stream(p); err != nil {
			return 0, err
		}
		return len(p), w.writeBody(p)
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// WriteString adds s to the answer's body.
func (w *response) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush sends what the answer holds (http.Flusher).
func (w *response) Flush() { _ = w.FlushError() }

// FlushError sends what the answer holds (for http.ResponseController).
func (w *response) FlushError() error {
	if w.handlerDone {
		return errWriteAfterHandler
	}
	w.wroteBody = true
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	if !w.headSent {
		if err := w.stream(nil); err != nil {
			return err
		}
	}
	return w.c.bw.Flush()
}

// SetReadDeadline sets the connection's read deadline (for
// http.ResponseController); it lasts until the answer is sent.
func (w *response) SetReadDeadline(t time.Time) error {
	w.readDeadline = true
	return w.c.rwc.SetReadDeadline(t)
}

// SetWriteDeadline sets the connection's write deadline (for
// http.ResponseController); it lasts until the answer is sent.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.writeDeadline = true
	return w.c.rwc.SetWriteDeadline(t)
}

// sendContinue answers "100 Continue" to a caller waiting for it before
// it sends the body, unless the answer's body has begun, as net/http
// does.
func (w *response) sendContinue() error {
	if w.sentContinue || w.wroteBody || w.headSent || w.handlerDone {
		return nil
	}
	w.sentContinue = true
	if _, err := w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
		return err
	}
	return w.c.bw.Flush()
}

// stream sends the head with the answer's length unknown (chunked, or to
// the connection's close for an HTTP/1.0 caller) unless the handler
// declared it, then what the answer holds; next is what will follow it
// (its Content-Type is sniffed from it when the answer holds nothing).
func (w *response) stream(next []byte) error {
	if w.contentLength < 0 && w.bodyAllowed && !w.head {
		if w.r.ProtoAtLeast(1, 1) {
			w.chunked = true
		} else {
			w.closeAfter = true
		}
	}
	if w.buf != nil && len(*w.buf) > 0 {
		next = *w.buf
	}
	w.sendHead(-1, next)
	if w.buf == nil {
		return nil
	}
	buf := *w.buf
	err := w.writeBody(buf)
	w.c.s.putBuf(w.buf)
	w.buf = nil
	return err
}

// writeBody writes p to the connection, as a chunk when chunked.
func (w *response) writeBody(p []byte) error {
	if len(p) == 0 {
		return nil // an empty chunk would end a chunked body
	}
	bw := w.c.bw
	if w.chunked {
		_, _ = bw.Write(append(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16), "\r\n"...))
		_, _ = bw.Write(p)
		_, err := bw.WriteString("\r\n")
		return err
	}
	_, err := bw.Write(p)
	return err
}

// finish sends the answer, whole if it was held, after the handler.
func (w *response) finish() error {
	if !w.wroteHeader {
		w.writeHeader(http.StatusOK)
	}
	bw := w.c.bw
	switch {
	case !w.headSent:
		n := int64(-1)
		if w.contentLength < 0 && (w.bodyAllowed && !w.head || w.head && w.written > 0) {
			n = w.written
		}
		var start []byte
		if w.buf != nil {
			start = *w.buf
		}
		w.sendHead(n, start)
		if w.buf != nil {
			_, _ = bw.Write(*w.buf)
			w.c.s.putBuf(w.buf)
			w.buf = nil
		}
	case w.chunked:
		_, _ = bw.WriteString("0\r\n\r\n")
	}
	if w.contentLength >= 0 && w.written != w.contentLength && !w.head && w.bodyAllowed {
		w.closeAfter = true // short of what it declared: the caller cannot frame what follows
	}
	err := bw.Flush()
	if w.writeDeadline {
		_ = w.c.rwc.SetWriteDeadline(time.Time{})
	}
	if w.readDeadline {
		_ = w.c.rwc.SetReadDeadline(time.Time{})
	}
	return err
}

// settleBody decides, as the head is about to be sent, what becomes of
// the request body the handler has not read to its end, as net/http
// does: it is read and dropped when at most maxPostHandlerReadBytes are
// left, else (or when the caller waits for 100 Continue that was never
// sent, or the body failed) the connection closes after the answer.
func (w *response) settleBody() {
	b := w.body
	if b == nil || b.eof {
		return
	}
	switch {
	case w.req.expectContinue && !w.sentContinue:
		w.closeAfter = true // the caller may never send it
		return
	case b.err != nil:
		w.closeAfter = true // broken: what is left cannot be framed
		return
	case w.closeAfter:
	case b.remaining() > maxPostHandlerReadBytes:
	default:
		if !w.readDeadline {
			// A caller that never sends the rest must not hold the
			// connection's goroutine.
			_ = w.SetReadDeadline(time.Now().Add(drainTimeout))
		}
		err := b.drain(maxPostHandlerReadBytes + 1)
		if !w.handlerDone {
			// A handler still running reads no more of it, as with
			// net/http, rather than an end it did not reach.
			b.closed = true
		}
		switch {
		case err == io.EOF:
			return
		case err == nil: // more than that is left
		default:
			w.closeAfter = true
			return
		}
	}
	w.closeAfter, w.bodyLeft = true, true
}

// drainTimeout bounds reading what a handler left of a body, unless the
// handler set its own read deadline.
const drainTimeout = 5 * time.Second

func (w *response) writeStatusLine(code int) {
	bw := w.c.bw
	b := bw.AvailableBuffer()
	if w.r.ProtoAtLeast(1, 1) {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	_, _ = bw.Write(append(b, "\r\n"...))
}

// sendHead writes the status line and the headers, with Content-Length
// n when n is not negative and the handler declared none, and a
// Content-Type sniffed from start, the body's start, when it declared
// none.
func (w *response) sendHead(n int64, start []byte) {
	conn, hasConn := w.facts.conn, w.facts.conn != nil
	if httpguts.HeaderValuesContainsToken(conn, "close") || w.c.s.closing.Load() {
		w.closeAfter = true
	}
	w.settleBody()
	w.headSent = true
	// Closing after this answer: a Connection of the handler's that does
	// not say so gives way to "close", as with net/http.
	dropConn := hasConn && w.closeAfter && !httpguts.HeaderValuesContainsToken(conn, "close")
	w.writeStatusLine(w.status)
	bw := w.c.bw
	_, _ = bw.Write(w.c.fields)
	if hasConn && !dropConn {
		_, _ = bw.Write(appendField(bw.AvailableBuffer(), "Connection", conn))
	}
	if !w.facts.date {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(w.c.s.date.get(time.Now()))
		_, _ = bw.WriteString("\r\n")
	}
	if !w.facts.contentType && w.bodyAllowed && len(start) > 0 && !w.facts.contentEncoding {
		_, _ = bw.WriteString("Content-Type: ")
		_, _ = bw.WriteString(http.DetectContentType(start))
		_, _ = bw.WriteString("\r\n")
	}
	switch {
	case w.chunked:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case n >= 0 && w.contentLength < 0 && w.bodyAllowed:
		b := append(bw.AvailableBuffer(), "Content-Length: "...)
		b = strconv.AppendInt(b, n, 10)
		_, _ = bw.Write(append(b, "\r\n"...))
	}
	switch {
	case hasConn && !dropConn:
	case w.closeAfter:
		_, _ = bw.WriteString("Connection: close\r\n")
	case !w.r.ProtoAtLeast(1, 1):
		_, _ = bw.WriteString("Connection: keep-alive\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// writeFields appends the handler's header fields h to b, sorted by
// name, but for those the server frames the answer with
// (Transfer-Encoding; Content-Length when badLength or of an answer
// without a body, and Content-Type of a 304, as net/http drops them;
// Connection when noConnection, which sendHead writes itself); names
// that are not tokens are dropped and line breaks in values become
// spaces, as net/http does.
func (w *response) writeFields(b []byte, h http.Header, code int, badLength, noConnection bool) []byte {
	keys := w.c.keys[:0]
	for k := range h {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slices.Sort(keys)
	}
	noBody := code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
	for _, k := range keys {
		switch {
		case k == "Transfer-Encoding", (noBody || badLength) && k == "Content-Length", code == http.StatusNotModified && k == "Content-Type",
			noConnection && k == "Connection":
			continue
		case !httpguts.ValidHeaderFieldName(k):
			continue
		}
		b = appendField(b, k, h[k])
	}
	clear(keys)
	w.c.keys = keys[:0]
	return b
}

// appendField appends a line "name: value" for each of vals to b.
func appendField(b []byte, name string, vals []string) []byte {
	for _, v := range vals {
		b = append(b, name...)
		b = append(b, ": "...)
		if strings.ContainsAny(v, "\r\n") {
			v = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(v)
		}
		b = append(b, strings.TrimSpace(v)...)
		b = append(b, "\r\n"...)
	}
	return b
}
