package httpserver

import (
	"bytes"
	"net/http/httptest"
	"testing"
)

// BenchmarkReadBody reads a 16 KiB JSON body: through readBody alone (the
// body reading before Content-Encoding was looked at), through ReadBody
// uncompressed (the cost of looking is one header map lookup), and
// gzipped (pooled decoders).
func BenchmarkReadBody(b *testing.B) {
	doc := bytes.Repeat([]byte(`{"x":[1.5,2.5,3.5]},`), 16<<10/20)
	gz := gzipped(doc)
	s := New(Options{})
	buf := make([]byte, 0, 32<<10)
	run := func(b *testing.B, body []byte, enc string, read func(r *httptest.ResponseRecorder, req []byte) error) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		req := httptest.NewRequest("POST", "/x", nil)
		if enc != "" {
			req.Header.Set("Content-Encoding", enc)
		}
		rd := bytes.NewReader(body)
		for b.Loop() {
			rd.Reset(body)
			req.Body = nopCloser{rd}
			got, code, err := s.ReadBody(req, &buf)
			if code != 200 || err != nil || len(got) != len(doc) {
				b.Fatal(code, err)
			}
		}
	}
	b.Run("readBody", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		rd := bytes.NewReader(doc)
		for b.Loop() {
			rd.Reset(doc)
			got, err := readBody(rd, buf[:0], s.opts.MaxBodyBytes)
			if err != nil || len(got) != len(doc) {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadBody/identity", func(b *testing.B) { run(b, doc, "", nil) })
	b.Run("ReadBody/gzip", func(b *testing.B) { run(b, gz, "gzip", nil) })
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
