package forward

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// The framed transport: the Forward service's messages on a TCP (or TLS)
// connection with no HTTP/2 under them. A forwarded request over gRPC
// wakes, on each node, gRPC's reader goroutine, a stream worker and the
// writer goroutine (loopy) besides the request's own. On this transport
// the forwarding node's caller writes its frame itself and, when no other
// call is reading the connection, reads its own answer (clientConn.lead);
// the serving node's reader hands each call to the model actor
// (AsyncLocal), whose goroutine writes the answer (docs/cluster.md, "The
// transport"). The gRPC service stays on the same port: a connection
// chooses by ALPN (TLS) or by its first bytes (plaintext).
//
// A connection opens with a preface in each direction (the client's, then
// the server's reply), then carries frames: a header of frameHeaderLen
// bytes (payload length, big-endian uint32; type; call id, big-endian
// uint64) and the payload.

// ALPN is the TLS application protocol of the framed transport; a server
// offers it before "h2".
const ALPN = "grove-forward/1"

// preface opens a framed connection in both directions: the client sends
// it, the server answers it. An HTTP/2 connection opens with "PRI *", so
// the server tells the two apart by the first bytes.
var preface = []byte("GROVEFWD\x01")

// frameHeaderLen is the size of a frame's header.
const frameHeaderLen = 13

// maxFrameLen is the longest payload a frame's header can say.
const maxFrameLen = 1<<32 - 1

// The frame types.
const (
	// frameCall carries a Call, from the forwarding node.
	frameCall byte = 1
	// frameAnswer carries the PredictResponse of a call.
	frameAnswer byte = 2
	// frameFailure carries the Failure of a call.
	frameFailure byte = 3
	// frameCancel (empty) says the forwarding node no longer waits for
	// the call.
	frameCancel byte = 4
	// frameGoaway (empty, call id 0) says the server takes no new calls on
	// the connection; those sent before it are answered.
	frameGoaway byte = 5
)

// errFrame is the error of a frame that breaks the protocol: the
// connection cannot be trusted after it and is closed.
var errFrame = errors.New("framed transport: protocol error")

// frameHeader is a frame's header.
type frameHeader struct {
	length uint32
	typ    byte
	id     uint64
}

// readFrameHeader reads one header from r.
func readFrameHeader(r *bufio.Reader) (frameHeader, error) {
	var b [frameHeaderLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return frameHeader{}, err
	}
	return frameHeader{length: binary.BigEndian.Uint32(b[:4]), typ: b[4], id: binary.BigEndian.Uint64(b[5:])}, nil
}

// readPayload reads h's payload from r, refusing (errFrame, the
// connection to be closed) one longer than limit that the reader cannot
// skip: a caller that can answer an oversized call skips it with
// skipPayload instead.
func readPayload(r *bufio.Reader, h frameHeader, limit int) ([]byte, error) {
	if int64(h.length) > int64(limit) {
		return nil, fmt.Errorf("%w: a frame of %d bytes, more than the %d bytes allowed", errFrame, h.length, limit)
	}
	if h.length == 0 {
		return nil, nil
	}
	b := make([]byte, h.length)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// skipPayload reads and drops h's payload.
func skipPayload(r *bufio.Reader, h frameHeader) error {
	_, err := r.Discard(int(h.length))
	return err
}

// appendFrame returns a frame of type typ and call id with m (nil: empty)
// as its payload, in one buffer with room for nothing else; a payload
// longer than limit bytes (at most maxFrameLen) is an error.
func appendFrame(typ byte, id uint64, m proto.Message, limit int) ([]byte, error) {
	n := 0
	if m != nil {
		n = proto.Size(m)
	}
	if most := min(int64(limit), maxFrameLen); int64(n) > most {
		return nil, fmt.Errorf("a message of %d bytes, more than the %d bytes a frame may carry", n, most)
	}
	b := make([]byte, frameHeaderLen, frameHeaderLen+n)
	if m != nil {
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, m); err != nil {
			return nil, err
		}
	}
	putFrameHeader(b, frameHeader{length: uint32(len(b) - frameHeaderLen), typ: typ, id: id})
	return b, nil
}

// putFrameHeader writes h at the start of b.
func putFrameHeader(b []byte, h frameHeader) {
	binary.BigEndian.PutUint32(b[:4], h.length)
	b[4] = h.typ
	binary.BigEndian.PutUint64(b[5:frameHeaderLen], h.id)
}
