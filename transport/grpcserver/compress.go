package grpcserver

import (
	"compress/zlib"
	"io"
	"sync"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // registers grpc-encoding gzip
)

// Triton's clients compress gRPC messages on request
// (tritonclient.grpc's compression_algorithm "gzip" or "deflate"), which
// Triton's server decodes. grpc-go decodes neither unless a compressor is
// registered under the message's grpc-encoding: gzip is grpc-go's own,
// imported above rather than left to a dependency that happens to import
// it; deflate is deflateCodec, gRPC's deflate being the zlib format
// (RFC 1950). The decoded size of a message is bounded by the server's
// maximum message size, as for an uncompressed one.
func init() { encoding.RegisterCompressor(&deflateCodec{}) }

// deflateCodec is gRPC's "deflate" message encoding, with pooled writers
// and readers.
type deflateCodec struct{ writers, readers sync.Pool }

func (*deflateCodec) Name() string { return "deflate" }

func (c *deflateCodec) Compress(w io.Writer) (io.WriteCloser, error) {
	zw, _ := c.writers.Get().(*zlib.Writer)
	if zw == nil {
		zw = zlib.NewWriter(w)
	} else {
		zw.Reset(w)
	}
	return &deflateWriter{zw, c}, nil
}

type deflateWriter struct {
	*zlib.Writer
	c *deflateCodec
}

func (w *deflateWriter) Close() error {
	err := w.Writer.Close()
	w.c.writers.Put(w.Writer)
	return err
}

func (c *deflateCodec) Decompress(r io.Reader) (io.Reader, error) {
	zr, _ := c.readers.Get().(io.ReadCloser)
	var err error
	if zr == nil {
		zr, err = zlib.NewReader(r)
	} else {
		err = zr.(zlib.Resetter).Reset(r, nil)
	}
	if err != nil {
		if zr != nil {
			c.readers.Put(zr)
		}
		return nil, err
	}
	return &deflateReader{zr, c}, nil
}

// deflateReader gives its zlib reader back to the pool at the end of the
// message (grpc-go reads every message to EOF).
type deflateReader struct {
	r io.ReadCloser
	c *deflateCodec
}

func (d *deflateReader) Read(p []byte) (int, error) {
	if d.r == nil {
		return 0, io.EOF
	}
	n, err := d.r.Read(p)
	if err == io.EOF {
		d.c.readers.Put(d.r)
		d.r = nil
	}
	return n, err
}
