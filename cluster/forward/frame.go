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
// connection with no HTTP/2 under them. The forwarding node's caller
// writes its own frames and, when no other call is reading the
// connection, reads its own answer (clientConn.lead); the serving node's
// reader hands each call to the model actor (AsyncLocal), whose goroutine
// writes the answer (docs/cluster.md, "The transport"). The gRPC service
// stays on the same port, for tools and probes: a connection chooses by
// ALPN (TLS) or by its first bytes (plaintext).
//
// A connection opens with a preface in each direction (the client's, then
// the server's reply), which carries the protocol version, then carries
// frames: a header of frameHeaderLen bytes (payload length, big-endian
// uint32; type; call id, big-endian uint64) and a payload of at most
// maxFrameLen bytes. A message longer than that travels chunked: a head
// frame (its type | frameChunked, the message's length as its payload),
// then frameData frames of the same call id carrying its bytes in order.
// Writers take turns frame by frame (frameWriter), so that the frames of
// other calls go between a long message's chunks; at most one chunked
// message is in progress on a connection in each direction.

// ALPN is the TLS application protocol of the framed transport; a server
// offers it before "h2". It names the transport, not its version: the
// preface says which version a connection speaks.
const ALPN = "grove-forward"

// prefaceMagic opens the preface in both directions. An HTTP/2 connection
// opens with "PRI *", so a plaintext server tells the two apart by the
// first bytes.
const prefaceMagic = "GROVEFWD"

// protocolVersion is the version of the framed transport this node
// speaks, the preface's last byte. A server that does not speak the
// client's version answers with its own and closes the connection.
// (Version 1, whose messages were not chunked, was never released.)
const protocolVersion byte = 2

// prefaceLen is the length of a preface: the magic and the version.
const prefaceLen = len(prefaceMagic) + 1

// prefaceOf is the preface of version v.
func prefaceOf(v byte) []byte { return append([]byte(prefaceMagic), v) }

// versionError is the error of a connection whose two ends speak
// different versions of the framed transport.
type versionError struct{ peer, own byte }

func (e *versionError) Error() string {
	return fmt.Sprintf("the peer speaks version %d of the framed transport, this node version %d", e.peer, e.own)
}

// frameHeaderLen is the size of a frame's header.
const frameHeaderLen = 13

// maxFrameLen is the longest payload a frame carries: a longer message
// travels chunked. 64 KiB takes some tens of microseconds to write on
// loopback, which is how long a chunk can hold up the frames behind it.
const maxFrameLen = 64 << 10

// maxUnsent is the most a framed connection lets wait unsent in its
// socket (limitUnsent): a frame written after the chunks of a long
// message waits behind no more than this and the bytes in flight,
// instead of behind the socket's whole send buffer (megabytes, which a
// gigabit link takes tens of milliseconds to send). A writer of a long
// message is woken each time less waits: at 128 KiB, every 10 µs at
// 100 Gbit/s, every 100 µs at 10 Gbit/s.
const maxUnsent = 128 << 10

// headLen is the length of a head frame's payload: the message's length,
// a big-endian uint64.
const headLen = 8

// The frame types.
const (
	// frameCall carries a Call, from the forwarding node.
	frameCall byte = 1
	// frameAnswer carries the PredictResponse of a call.
	frameAnswer byte = 2
	// frameFailure carries the Failure of a call.
	frameFailure byte = 3
	// frameCancel (empty) says the forwarding node no longer waits for
	// the call; a call whose chunks are still arriving ends there (no
	// more of its chunks follow).
	frameCancel byte = 4
	// frameGoaway (empty, call id 0) says the server takes no new calls on
	// the connection; those sent before it are answered.
	frameGoaway byte = 5
	// frameData carries the next bytes of the chunked message of its
	// call id.
	frameData byte = 6
	// frameChunked marks a head frame: frameCall, frameAnswer or
	// frameFailure | frameChunked, whose payload is the length of a
	// message longer than maxFrameLen that follows in frameData frames.
	frameChunked byte = 0x80
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

// checkLength refuses (errFrame) a frame whose payload is longer than
// limit, the most a frame carries.
func checkLength(h frameHeader, limit int) error {
	if int64(h.length) > int64(limit) {
		return fmt.Errorf("%w: a frame of %d bytes, more than the %d bytes a frame carries", errFrame, h.length, limit)
	}
	return nil
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

// readHead reads the payload of head frame h: the length of its message,
// which must be longer than chunk (the most a frame carries; a message
// that fits one frame travels whole).
func readHead(r *bufio.Reader, h frameHeader, chunk int) (int64, error) {
	if h.length != headLen {
		return 0, fmt.Errorf("%w: the head of call %d's chunked message has %d bytes, want %d", errFrame, h.id, h.length, headLen)
	}
	var b [headLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint64(b[:])
	if n <= uint64(chunk) || n > 1<<62 {
		return 0, fmt.Errorf("%w: call %d's chunked message says %d bytes, want more than a frame's %d (and at most 2^62)", errFrame, h.id, n, chunk)
	}
	return int64(n), nil
}

// inbound is a chunked message being received: its head has come, its
// data frames are coming. A connection has at most one in each
// direction, whose length its reader checked against its limit before
// making room for it, as it does for a message that comes whole (and as
// gRPC does for each message): a refused or unwanted one is dropped as it
// comes, and takes no room.
type inbound struct {
	id    uint64
	typ   byte // frameCall, frameAnswer or frameFailure
	total int64
	got   int64
	buf   []byte // the message, total bytes; nil while dropped
	from  string // on the server: the member that sent the call
}

// newInbound is the chunked message of type typ for call id, of total
// bytes, whose head has come; drop makes no room and drops its bytes.
func newInbound(id uint64, typ byte, total int64, drop bool) *inbound {
	in := &inbound{id: id, typ: typ, total: total}
	if !drop {
		in.buf = make([]byte, total)
	}
	return in
}

// dropped reports whether the message's bytes are dropped as they come.
func (in *inbound) dropped() bool { return in.buf == nil }

// drop drops the message: what came of it, and what is still to come.
func (in *inbound) drop() { in.buf = nil }

// read reads data frame h, of this message, into its buffer, or drops it
// when the message is dropped; done says it was the last. A frame that
// is empty or goes past the message's length breaks the protocol.
func (in *inbound) read(r *bufio.Reader, h frameHeader) (done bool, err error) {
	n := int64(h.length)
	if n == 0 {
		return false, fmt.Errorf("%w: an empty data frame for call %d", errFrame, h.id)
	}
	if in.got+n > in.total {
		return false, fmt.Errorf("%w: data past the end of call %d's message of %d bytes (%d so far, %d more)", errFrame, h.id, in.total, in.got, n)
	}
	if in.dropped() {
		_, err = r.Discard(int(n))
	} else {
		_, err = io.ReadFull(r, in.buf[in.got:in.got+n])
	}
	if err != nil {
		return false, err
	}
	in.got += n
	return in.got == in.total, nil
}

// outMessage is a message encoded for writing: one frame when it is at
// most chunk bytes long, else a head frame and data frames of at most
// chunk bytes, one write each (next).
type outMessage struct {
	b       []byte // room for the headers, then the message
	typ     byte
	n       int // the message's length
	chunk   int
	pos     int // where in b the data of the next write begins
	started bool
}

// encodeMessage returns m (nil: empty) encoded as a message of type typ
// sent chunk bytes to a frame; a message longer than limit bytes is an
// error.
func encodeMessage(typ byte, m proto.Message, limit, chunk int) (*outMessage, error) {
	n := 0
	if m != nil {
		n = proto.Size(m)
	}
	if n > limit {
		return nil, fmt.Errorf("a message of %d bytes, more than the %d bytes allowed", n, limit)
	}
	room := frameHeaderLen
	if n > chunk {
		room = 2*frameHeaderLen + headLen // the head frame, then the first data frame's header
	}
	b := make([]byte, room, room+n)
	if m != nil {
		var err error
		if b, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, m); err != nil {
			return nil, err
		}
	}
	if len(b) != room+n {
		return nil, fmt.Errorf("a message of %d bytes encoded to %d", n, len(b)-room)
	}
	return &outMessage{b: b, typ: typ, n: n, chunk: chunk, pos: room}, nil
}

// chunked reports whether the message travels as a head and data frames.
func (o *outMessage) chunked() bool { return o.n > o.chunk }

// next returns the bytes of the next write of the message for call id:
// the whole frame; or the head frame with the first data frame, then
// each next data frame; nil when all are written. A data frame's header
// is put over the end of the chunk before it, which was written already.
func (o *outMessage) next(id uint64) []byte {
	if !o.chunked() {
		if o.started {
			return nil
		}
		o.started = true
		putFrameHeader(o.b, frameHeader{length: uint32(o.n), typ: o.typ, id: id})
		return o.b
	}
	if o.pos == len(o.b) {
		return nil
	}
	from := o.pos - frameHeaderLen
	if !o.started {
		o.started = true
		putFrameHeader(o.b, frameHeader{length: headLen, typ: o.typ | frameChunked, id: id})
		binary.BigEndian.PutUint64(o.b[frameHeaderLen:], uint64(o.n))
		from = 0
	}
	k := min(o.chunk, len(o.b)-o.pos)
	putFrameHeader(o.b[o.pos-frameHeaderLen:], frameHeader{length: uint32(k), typ: frameData, id: id})
	w := o.b[from : o.pos+k]
	o.pos += k
	return w
}

// done reports whether every write of the message was returned by next.
func (o *outMessage) done() bool {
	if !o.chunked() {
		return o.started
	}
	return o.pos == len(o.b)
}

// emptyFrame is the frame of type typ and call id with no payload.
func emptyFrame(typ byte, id uint64) []byte {
	b := make([]byte, frameHeaderLen)
	putFrameHeader(b, frameHeader{typ: typ, id: id})
	return b
}

// putFrameHeader writes h at the start of b.
func putFrameHeader(b []byte, h frameHeader) {
	binary.BigEndian.PutUint32(b[:4], h.length)
	b[4] = h.typ
	binary.BigEndian.PutUint64(b[5:frameHeaderLen], h.id)
}

// frameWriter is the writing side of a connection: one write at a time,
// in the order the writers asked for their turn (a channel's waiting
// receivers are served first come, first served), so that a writer that
// writes a chunked message frame by frame lets each writer waiting behind
// it go between two of its frames. A chunked message also holds the bulk
// turn from its head to its last data frame: one at a time.
type frameWriter struct {
	turn chan struct{} // holds a token when nobody writes
	bulk chan struct{} // holds a token when no chunked message is being written
}

func newFrameWriter() frameWriter {
	w := frameWriter{turn: make(chan struct{}, 1), bulk: make(chan struct{}, 1)}
	w.turn <- struct{}{}
	w.bulk <- struct{}{}
	return w
}
