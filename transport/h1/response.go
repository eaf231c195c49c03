package h1

import (
	"errors"
	"fmt"
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
	c      *conn
	req    *http.Request
	header http.Header
	status int
	// wroteHeader: the status is set; headSent: the status line and
	// headers are in the connection's writer.
	wroteHeader, headSent bool
	chunked               bool
	// contentLength is the handler's Content-Length, -1 for none.
	contentLength int64
	written       int64
	buf           []byte
	head          bool
	bodyAllowed   bool
	closeAfter    bool
	handlerDone   bool
	sentContinue  bool
	writeDeadline bool
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
		w.writeFields(false)
		_, _ = w.c.bw.WriteString("\r\n")
		_ = w.c.bw.Flush()
		return
	}
	w.wroteHeader, w.status = true, code
	w.bodyAllowed = code != http.StatusNoContent && code != http.StatusNotModified && code >= 200
	if cl := w.header["Content-Length"]; len(cl) > 0 {
		if n, err := strconv.ParseInt(textprotoTrim(cl[0]), 10, 64); err == nil && n >= 0 {
			w.contentLength = n
		} else {
			delete(w.header, "Content-Length")
		}
	}
}

func textprotoTrim(s string) string { return strings.Trim(s, " \t") }

// Write adds p to the answer's body.
func (w *response) Write(p []byte) (int, error) {
	if w.handlerDone {
		return 0, errWriteAfterHandler
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
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
	if len(w.buf) == 0 && w.buf == nil {
		w.buf = w.c.wbuf[:0]
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) > bufferedBody {
		if err := w.stream(); err != nil {
			return 0, err
		}
	}
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
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		if err := w.stream(); err != nil {
			return err
		}
	}
	return w.c.bw.Flush()
}

// SetReadDeadline sets the connection's read deadline (for
// http.ResponseController).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline (for
// http.ResponseController); it lasts until the answer is sent.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.writeDeadline = true
	return w.c.rwc.SetWriteDeadline(t)
}

// sendContinue answers "100 Continue" to a caller waiting for it before
// it sends the body, unless the answer has begun.
func (w *response) sendContinue() error {
	if w.sentContinue || w.wroteHeader {
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
// declared it, then what the answer holds.
func (w *response) stream() error {
	if w.contentLength < 0 && w.bodyAllowed && !w.head {
		if w.req.ProtoAtLeast(1, 1) {
			w.chunked = true
		} else {
			w.closeAfter = true
		}
	}
	w.sendHead(-1)
	buf := w.buf
	w.buf = nil
	w.keepBuf(buf)
	if len(buf) > 0 {
		return w.writeBody(buf)
	}
	return nil
}

// keepBuf gives buf back to the connection for the next answer.
func (w *response) keepBuf(buf []byte) {
	if cap(buf) <= 4*bufferedBody {
		w.c.wbuf = buf[:0]
	}
}

// writeBody writes p to the connection, as a chunk when chunked.
func (w *response) writeBody(p []byte) error {
	bw := w.c.bw
	if w.chunked {
		var n [20]byte
		_, _ = bw.Write(strconv.AppendInt(n[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
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
		w.sendHead(n)
		if len(w.buf) > 0 {
			_, _ = bw.Write(w.buf)
		}
		w.keepBuf(w.buf)
		w.buf = nil
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
	return err
}

func (w *response) writeStatusLine(code int) {
	bw := w.c.bw
	var n [20]byte
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.Write(strconv.AppendInt(n[:0], int64(code), 10))
	_ = bw.WriteByte(' ')
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	_, _ = bw.WriteString(text)
	_, _ = bw.WriteString("\r\n")
}

// sendHead writes the status line and the headers, with Content-Length
// n when n is not negative and the handler declared none.
func (w *response) sendHead(n int64) {
	w.headSent = true
	if httpguts.HeaderValuesContainsToken(w.header["Connection"], "close") {
		w.closeAfter = true
	}
	if w.c.s.closing.Load() {
		w.closeAfter = true
	}
	w.writeStatusLine(w.status)
	w.writeFields(true)
	bw := w.c.bw
	if _, ok := w.header["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(w.c.s.date.get(time.Now()))
		_, _ = bw.WriteString("\r\n")
	}
	if _, ok := w.header["Content-Type"]; !ok && w.bodyAllowed && len(w.buf) > 0 {
		_, _ = bw.WriteString("Content-Type: ")
		_, _ = bw.WriteString(http.DetectContentType(w.buf))
		_, _ = bw.WriteString("\r\n")
	}
	switch {
	case w.chunked:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case n >= 0 && w.contentLength < 0:
		var b [20]byte
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(strconv.AppendInt(b[:0], n, 10))
		_, _ = bw.WriteString("\r\n")
	}
	if _, ok := w.header["Connection"]; !ok {
		switch {
		case w.closeAfter:
			_, _ = bw.WriteString("Connection: close\r\n")
		case !w.req.ProtoAtLeast(1, 1):
			_, _ = bw.WriteString("Connection: keep-alive\r\n")
		}
	}
	_, _ = bw.WriteString("\r\n")
}

// writeFields writes the handler's header fields, sorted by name, but
// for Transfer-Encoding (the server frames the body) and, unless final,
// Content-Length; names that are not tokens are dropped and line breaks
// in values become spaces, as net/http does.
func (w *response) writeFields(final bool) {
	bw := w.c.bw
	keys := w.c.keys[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		slices.Sort(keys)
	}
	for _, k := range keys {
		if k == "Transfer-Encoding" || !final && k == "Content-Length" || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range w.header[k] {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(v)
			}
			_, _ = bw.WriteString(strings.TrimSpace(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
	clear(keys)
	w.c.keys = keys[:0]
}
