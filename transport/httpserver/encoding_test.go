package httpserver

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// compressed returns b written through the writer newW makes.
func compressed(b []byte, newW func(io.Writer) io.WriteCloser) []byte {
	var out bytes.Buffer
	w := newW(&out)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}

func gzipped(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) })
}

func zlibbed(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { return zlib.NewWriter(w) })
}

func rawDeflated(b []byte) []byte {
	return compressed(b, func(w io.Writer) io.WriteCloser { fw, _ := flate.NewWriter(w, flate.BestCompression); return fw })
}

// countReads counts the bytes read from a body.
type countReads struct {
	r io.Reader
	n int
}

func (c *countReads) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// readWith reads body through ReadBody with the given Content-Encoding
// header values (none when nil).
func readWith(s *Server, enc []string, body []byte) ([]byte, int, error) {
	r := httptest.NewRequest("POST", "/x", bytes.NewReader(body))
	if enc != nil {
		r.Header["Content-Encoding"] = enc
	}
	var buf []byte
	return s.ReadBody(r, &buf)
}

func TestReadBodyDecodesGzipAndDeflateBodies(t *testing.T) {
	doc := []byte(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.5]}]}`)
	s := New(Options{MaxBodyBytes: 1 << 10})
	for _, c := range []struct {
		name string
		enc  []string
		body []byte
	}{
		{"no coding", nil, doc},
		{"identity", []string{"identity"}, doc},
		{"gzip", []string{"gzip"}, gzipped(doc)},
		{"x-gzip, any case", []string{"X-GZip"}, gzipped(doc)},
		{"two gzip members", []string{"gzip"}, append(gzipped(doc[:10]), gzipped(doc[10:])...)},
		{"deflate as RFC 9110 defines it (zlib)", []string{"deflate"}, zlibbed(doc)},
		{"raw deflate", []string{"deflate"}, rawDeflated(doc)},
		{"stacked codings, one header", []string{"deflate, gzip"}, gzipped(zlibbed(doc))},
		{"stacked codings, two headers", []string{"gzip", "identity", "deflate"}, rawDeflated(gzipped(doc))},
	} {
		for range 2 { // the second time from the pools
			got, code, err := readWith(s, c.enc, c.body)
			if err != nil || code != http.StatusOK || !bytes.Equal(got, doc) {
				t.Errorf("%s: %d %v %q", c.name, code, err, got)
			}
		}
	}
}

func TestReadBodyRefusesUnknownCodingsAndCorruptStreams(t *testing.T) {
	doc := bytes.Repeat([]byte(`{"a":1}`), 20)
	s := New(Options{MaxBodyBytes: 1 << 10})
	gz := gzipped(doc)
	flipped := append([]byte(nil), gz...)
	flipped[len(flipped)-6] ^= 0xff // the CRC-32
	for _, c := range []struct {
		name string
		enc  string
		body []byte
		code int
		want string
	}{
		{"br", "br", gz, 415, `unsupported content encoding "br"`},
		{"compress", "gzip, compress", gz, 415, `"compress"`},
		{"not gzip", "gzip", doc, 400, "gzip: invalid header"},
		{"truncated gzip", "gzip", gz[:len(gz)/2], 400, "unexpected EOF"},
		{"bad checksum", "gzip", flipped, 400, "checksum"},
		{"garbage after the gzip member", "gzip", append(append([]byte(nil), gz...), "xx"...), 400, "corrupt"},
		{"empty gzip body", "gzip", nil, 400, "unexpected EOF"},
		{"empty deflate body", "deflate", nil, 400, "unexpected EOF"},
		{"truncated zlib", "deflate", zlibbed(doc)[:20], 400, "unexpected EOF"},
		{"garbage after the zlib stream", "deflate", append(zlibbed(doc), 'x'), 400, "data after the end of the deflate stream"},
		{"not deflate", "deflate", []byte("\xff\xff\xff\xff"), 400, "corrupt"},
	} {
		_, code, err := readWith(s, []string{c.enc}, c.body)
		if code != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %d %v, want %d and %q", c.name, code, err, c.code, c.want)
		}
	}
}

func TestCompressionBombIs413AfterAtMostTheLimitPlusOneByte(t *testing.T) {
	const limit = 1 << 20
	zeros := make([]byte, 64<<20)
	s := New(Options{MaxBodyBytes: limit})
	for enc, body := range map[string][]byte{"gzip": gzipped(zeros), "deflate": zlibbed(zeros)} {
		raw := &countReads{r: bytes.NewReader(body)}
		cs, _ := codings([]string{enc})
		out, err := s.decodedBody(raw, cs, nil, limit)
		if err == nil || len(out) > limit+1 {
			t.Errorf("%s bomb of %d bytes: inflated %d bytes, %v", enc, len(body), len(out), err)
		}
		if raw.n >= len(body) {
			t.Errorf("%s bomb: read all %d compressed bytes", enc, raw.n)
		}
		r := httptest.NewRequest("POST", "/x", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", enc)
		if _, code, err := s.ReadBody(r, new([]byte)); code != http.StatusRequestEntityTooLarge || !strings.Contains(err.Error(), "exceeds the limit of 1048576 bytes") {
			t.Errorf("%s bomb: %d %v", enc, code, err)
		}
	}
	// A body of exactly the limit passes; a compressed body larger than
	// the limit is refused as such.
	if got, code, err := readWith(s, []string{"gzip"}, gzipped(zeros[:limit])); code != 200 || len(got) != limit {
		t.Errorf("a body of the limit: %d %v %d bytes", code, err, len(got))
	}
	// Sent chunked, without a Content-Length to refuse it by, it is
	// refused once its bytes pass the limit.
	small := New(Options{MaxBodyBytes: 16})
	r := httptest.NewRequest("POST", "/x", bytes.NewReader(gzipped([]byte("0123456789"))))
	r.ContentLength, r.Header["Content-Encoding"] = -1, []string{"gzip"}
	if _, code, err := small.ReadBody(r, new([]byte)); code != 413 || !strings.Contains(err.Error(), "compressed body exceeds") {
		t.Errorf("a compressed body over the limit: %d %v", code, err)
	}
}

func TestBodyAnswers415WithAcceptEncoding(t *testing.T) {
	s := New(Options{})
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/x", strings.NewReader("x"))
	r.Header.Set("Content-Encoding", "zstd")
	if _, ok := s.Body(rec, r, new([]byte)); ok || rec.Code != 415 || rec.Header().Get("Accept-Encoding") != AcceptedEncodings ||
		!strings.Contains(rec.Body.String(), `"zstd"`) {
		t.Errorf("zstd: %d %q %q", rec.Code, rec.Header(), rec.Body.String())
	}
}

// With stacked codings, every decoded layer is bounded, not only the last:
// an outer layer that decodes to next to nothing (here empty gzip members)
// must not make Grove inflate an inner layer of any size.
func TestStackedCodingsBoundEveryDecodedLayer(t *testing.T) {
	const limit = 1 << 10
	var empties []byte
	for len(empties) <= 64*limit {
		empties = append(empties, gzipped(nil)...)
	}
	body := gzipped(empties) // "gzip, gzip": a few hundred bytes
	if len(body) > limit {
		t.Fatalf("the test body is %d bytes, over the limit itself", len(body))
	}
	s := New(Options{MaxBodyBytes: limit})
	got, code, err := readWith(s, []string{"gzip, gzip"}, body)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(err), "exceeds the limit of 1024 bytes") {
		t.Errorf("an inner layer of %d bytes: %d %v %q", len(empties), code, err, got)
	}
	// Stacked codings of a body within the limit still decode.
	if got, code, err := readWith(s, []string{"gzip", "deflate"}, zlibbed(gzipped([]byte("hello")))); code != 200 || string(got) != "hello" {
		t.Errorf("gzip then deflate: %d %v %q", code, err, got)
	}
}
