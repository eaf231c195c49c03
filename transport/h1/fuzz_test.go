package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"testing"
)

// FuzzReadRequest reads arbitrary bytes as requests, one after the other
// as on a keep-alive connection, with readRequest and with net/http's
// http.ReadRequest: nothing panics, and every request readRequest accepts
// (its body read to its end) net/http reads the same way: method, target,
// version, Host, headers, framing, keep-alive and body, and so where the
// next request starts. (readRequest may refuse what http.ReadRequest accepts:
// it also checks what net/http's server checks beyond it, the Host header,
// header values and Expect.) The seed corpus is in
// testdata/fuzz/FuzzReadRequest.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		tp := textproto.NewReader(br)
		nbr := bufio.NewReader(bytes.NewReader(data))
		var into request // one for every request, as a connection has
		for range 4 {
			req, err := readRequest(br, tp, &into)
			if err != nil {
				var re *requestError
				if !errors.As(err, &re) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("readRequest: an error neither a refusal nor the input's end: %v", err)
				}
				return
			}
			body, berr := io.ReadAll(io.LimitReader(req.Body, 1<<20))
			want, nerr := http.ReadRequest(nbr)
			if nerr != nil {
				t.Fatalf("readRequest accepted %q, http.ReadRequest refused it: %v", data, nerr)
			}
			wbody, wberr := io.ReadAll(io.LimitReader(want.Body, 1<<20))
			got := req.Request
			if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Proto != want.Proto ||
				got.Host != want.Host || got.ContentLength != want.ContentLength || got.Close != want.Close ||
				!reflect.DeepEqual(got.TransferEncoding, want.TransferEncoding) {
				t.Fatalf("%q: readRequest read %s %s %s host %q length %d %q close %v; http.ReadRequest %s %s %s host %q length %d %q close %v",
					data, got.Method, got.URL, got.Proto, got.Host, got.ContentLength, got.TransferEncoding, got.Close,
					want.Method, want.URL, want.Proto, want.Host, want.ContentLength, want.TransferEncoding, want.Close)
			}
			if !reflect.DeepEqual(got.Header, want.Header) {
				t.Fatalf("%q: headers %q, http.ReadRequest's %q", data, got.Header, want.Header)
			}
			if !bytes.Equal(body, wbody) || (berr == nil) != (wberr == nil) {
				t.Fatalf("%q: body %q (%v), http.ReadRequest's %q (%v)", data, body, berr, wbody, wberr)
			}
			if berr != nil {
				return
			}
		}
	})
}
