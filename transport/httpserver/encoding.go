package httpserver

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// AcceptedEncodings are the content codings ReadBody decodes, as an
// Accept-Encoding header lists them.
const AcceptedEncodings = "gzip, deflate"

// maxCodings bounds how many codings one body may stack ("gzip, gzip").
const maxCodings = 4

var (
	errUnsupportedEncoding = errors.New("unsupported content encoding")
	errCorrupt             = errors.New("corrupt compressed request body")
)

// decoders pools the decompressors of one Server: each holds tens of
// kilobytes of window and tables, too much to allocate per request.
type decoders struct {
	bufr, gzip, zlib, flate sync.Pool
}

// codings parses the values of a Content-Encoding header into the codings
// applied to the body, in the order they were applied; identity is
// dropped. An unknown coding is an error naming it.
func codings(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			switch c {
			case "", "identity":
				continue
			case "gzip", "x-gzip":
				c = "gzip"
			case "deflate":
			default:
				return nil, fmt.Errorf("%w %q: request bodies may be sent with Content-Encoding %s, or none", errUnsupportedEncoding, c, AcceptedEncodings)
			}
			if len(out) == maxCodings {
				return nil, fmt.Errorf("%w: more than %d content codings", errUnsupportedEncoding, maxCodings)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// limitedReader reads r, failing once more than limit bytes came from it;
// what names those bytes in the error.
type limitedReader struct {
	r        io.Reader
	n, limit int64
	what     string
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		return n, fmt.Errorf("%w: the %s exceeds the limit of %d bytes", errTooLarge, l.what, l.limit)
	}
	return n, err
}

// decodedBody reads body, compressed with codings cs (in the order they
// were applied), into buf. The compressed bytes, each layer that stacked
// codings decode on the way, and the decompressed bytes are all limited
// to limit: a compression bomb stops after limit+1 bytes of output, and a
// layer that decodes to next to nothing cannot make Grove inflate an
// inner one of any size. Any other failure is a corrupt stream.
func (s *Server) decodedBody(body io.Reader, cs []string, buf []byte, limit int64) ([]byte, error) {
	var r io.Reader = &limitedReader{r: body, limit: limit, what: "compressed body"}
	var releases []func()
	defer func() {
		for _, f := range releases {
			f()
		}
	}()
	for i := len(cs) - 1; i >= 0; i-- {
		dr, release, err := s.decoder(cs[i], r)
		if release != nil {
			releases = append(releases, release)
		}
		if err != nil {
			return buf, corrupt(cs[i], err)
		}
		r = dr
		if i > 0 { // decoded by cs[i], still coded with cs[:i]
			r = &limitedReader{r: dr, limit: limit, what: "body decoded of " + cs[i]}
		}
	}
	out, err := readBody(io.LimitReader(r, limit+1), buf, limit)
	if err != nil {
		return out, corrupt(strings.Join(cs, ", "), err)
	}
	return out, nil
}

// corrupt classifies a decoding failure: too large stays so (413), else
// the stream is corrupt (400).
func corrupt(coding string, err error) error {
	if errors.Is(err, errTooLarge) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w (Content-Encoding %s): %w", errCorrupt, coding, err)
}

// decoder returns a reader of the coding c decoded from r, from the pools,
// and the function that gives it back.
func (s *Server) decoder(c string, r io.Reader) (io.Reader, func(), error) {
	br, _ := s.dec.bufr.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReader(r)
	} else {
		br.Reset(r)
	}
	releases := []func(){func() { br.Reset(nil); s.dec.bufr.Put(br) }}
	release := func() {
		for i := len(releases) - 1; i >= 0; i-- {
			releases[i]()
		}
	}
	if c == "gzip" {
		// A gzip body may hold several members (RFC 1952); the reader
		// reads them all, so bytes after the last one are a bad header.
		zr, _ := s.dec.gzip.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(br)
		} else {
			err = zr.Reset(br)
		}
		if zr != nil {
			releases = append(releases, func() { s.dec.gzip.Put(zr) })
		}
		return zr, release, err
	}
	// RFC 9110 defines the deflate coding as the zlib format (RFC 1950);
	// some clients send a raw deflate stream (RFC 1951) under that name,
	// recognised by its lack of a zlib header.
	hdr, err := br.Peek(2)
	if err != nil {
		return nil, release, err
	}
	var dr io.ReadCloser
	if isZlibHeader(hdr) {
		zr, _ := s.dec.zlib.Get().(io.ReadCloser)
		if zr == nil {
			zr, err = zlib.NewReader(br)
		} else {
			err = zr.(zlib.Resetter).Reset(br, nil)
		}
		if zr != nil {
			releases = append(releases, func() { s.dec.zlib.Put(zr) })
		}
		if err != nil {
			return nil, release, err
		}
		dr = zr
	} else {
		fr, _ := s.dec.flate.Get().(io.ReadCloser)
		if fr == nil {
			fr = flate.NewReader(br)
		} else {
			_ = fr.(flate.Resetter).Reset(br, nil)
		}
		releases = append(releases, func() { s.dec.flate.Put(fr) })
		dr = fr
	}
	return &streamEnd{r: dr, br: br}, release, nil
}

// streamEnd reads a deflate stream and, at its end, checks that nothing
// follows it.
type streamEnd struct {
	r  io.Reader
	br *bufio.Reader
}

func (e *streamEnd) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		if _, berr := e.br.ReadByte(); berr == nil {
			return n, errors.New("data after the end of the deflate stream")
		} else if berr != io.EOF {
			return n, berr
		}
	}
	return n, err
}

// isZlibHeader reports whether b starts a zlib stream: deflate with a
// window of at most 32 KiB, no preset dictionary, and a valid header
// check.
func isZlibHeader(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && b[1]&0x20 == 0 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}
