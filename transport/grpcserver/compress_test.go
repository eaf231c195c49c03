package grpcserver

import (
	"bytes"
	"compress/zlib"
	"io"
	"testing"

	"google.golang.org/grpc/encoding"
)

// gRPC's deflate message encoding is the zlib format (gRPC core
// compresses with zlib's header and checksum), both ways.
func TestGRPCDeflateIsZlib(t *testing.T) {
	c := encoding.GetCompressor("deflate")
	var buf bytes.Buffer
	w, err := c.Compress(&buf)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("message"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zlib.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || string(got) != "message" {
		t.Fatalf("zlib reads %q, %v", got, err)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write([]byte("from gRPC core"))
	_ = zw.Close()
	for range 2 { // the second time from the pool
		r, err := c.Decompress(bytes.NewReader(z.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(r); err != nil || string(got) != "from gRPC core" {
			t.Fatalf("Decompress reads %q, %v", got, err)
		}
	}
}
