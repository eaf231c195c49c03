package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawGRPCClient is one closed-loop client's HTTP/2 connection (cleartext,
// prior knowledge, as gRPC clients connect) carrying one unary call at a
// time: it writes a prebuilt, length-prefixed message and reads the answer
// in the calling goroutine, like h2load. grpc-go's client marshals every
// request, hands it to the connection's writer goroutine and gets the
// answer back from the connection's reader goroutine: two goroutine
// wake-ups per call in the load generator, which at concurrency 1 are added
// to the measured latency and under load take CPU from the server on this
// 2-CPU machine. This is rawClient's reasoning for HTTP/1.1, for gRPC.
//
// It keeps to HTTP/2's rules for what it sends: the peer's maximum frame
// size and both flow-control windows (waiting for WINDOW_UPDATE when they
// are spent), SETTINGS and PING acknowledged, and the connection's receive
// window given back as answers arrive.
type rawGRPCClient struct {
	addr    string
	path    string // "/package.Service/Method"
	msg     []byte // the gRPC message: 5-byte prefix, then the protobuf
	timeout time.Duration

	clientConn
	bw         *bufio.Writer
	fr         *http2.Framer
	hbuf       bytes.Buffer
	henc       *hpack.Encoder
	stream     uint32 // the last stream id used
	maxFrame   int    // the peer's SETTINGS_MAX_FRAME_SIZE
	initWindow int64  // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	connWindow int64  // bytes this client may still send on the connection
	unacked    int64  // DATA bytes received and not yet given back
	goingAway  bool   // the server sent GOAWAY: close after this call
	stop       func() bool

	// The last call's answer, valid until the next call.
	body       []byte
	httpStatus string
	grpcStatus string
	grpcMsg    string
}

// rawRecvWindow is the receive window this client gives each stream and the
// connection: answers never wait for a WINDOW_UPDATE from it.
const rawRecvWindow = 1 << 24

// newRawGRPCClient returns a client that calls method ("/pkg.Service/Name")
// at addr (host:port) with the serialized protobuf message msg; each call
// must finish within timeout.
func newRawGRPCClient(addr, method string, msg []byte, timeout time.Duration) *rawGRPCClient {
	return &rawGRPCClient{addr: addr, path: method, msg: grpcFrame(msg), timeout: timeout}
}

// grpcFrame is msg with gRPC's 5-byte prefix (not compressed, length).
func grpcFrame(msg []byte) []byte {
	framed := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(framed[1:], uint32(len(msg)))
	return append(framed, msg...)
}

// do makes one call and returns the answer's message (without its 5-byte
// prefix; valid until the next call). A call the server answered with a
// gRPC status other than OK is an error carrying that status and message.
// Any other failure closes the connection; the next call dials a new one.
// When ctx ends, a call in flight fails at once.
func (c *rawGRPCClient) do(ctx context.Context) ([]byte, error) {
	if c.conn == nil {
		if err := c.open(ctx); err != nil {
			c.close()
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, err
		}
	}
	msg, err := c.roundTrip()
	var st *grpcStatusError
	if (err != nil && !errors.As(err, &st)) || c.goingAway {
		c.close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
	}
	return msg, err
}

// open connects and sends the client preface and SETTINGS.
func (c *rawGRPCClient) open(ctx context.Context) error {
	if err := c.dial(ctx, c.addr, c.timeout); err != nil {
		return err
	}
	conn := c.conn
	c.bw = bufio.NewWriterSize(conn, 64<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(conn, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.fr.SetReuseFrames()
	c.hbuf.Reset()
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.stream, c.maxFrame, c.initWindow, c.connWindow, c.unacked, c.goingAway = 0, 16384, 65535, 65535, 0, false
	if err := conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		return fmt.Errorf("writing the HTTP/2 preface: %w", err)
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: rawRecvWindow},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0}); err != nil {
		return err
	}
	if err := c.fr.WriteWindowUpdate(0, rawRecvWindow-65535); err != nil {
		return err
	}
	return nil // flushed with the first call
}

// grpcStatusError is a call the server answered with a status other than OK.
type grpcStatusError struct {
	code int
	msg  string
}

func (e *grpcStatusError) Error() string {
	return fmt.Sprintf("gRPC status %d: %s", e.code, e.msg)
}

// roundTrip sends the call on a new stream and reads frames until the
// answer's trailers end it.
func (c *rawGRPCClient) roundTrip() ([]byte, error) {
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	if c.stream >= 1<<31-2 {
		return nil, errors.New("stream ids used up; reconnecting")
	}
	if c.stream == 0 {
		c.stream = 1 // client streams are odd
	} else {
		c.stream += 2
	}
	c.body, c.httpStatus, c.grpcStatus, c.grpcMsg = c.body[:0], "", "", ""
	c.hbuf.Reset()
	for _, f := range [...]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: c.path}, {Name: ":authority", Value: c.addr},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		if err := c.henc.WriteField(f); err != nil {
			return nil, err
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: c.stream, BlockFragment: c.hbuf.Bytes(),
		EndHeaders: true}); err != nil {
		return nil, fmt.Errorf("writing the headers: %w", err)
	}
	streamWindow := c.initWindow
	for rest := c.msg; ; {
		n := min(int64(len(rest)), int64(c.maxFrame), c.connWindow, streamWindow)
		if n <= 0 && len(rest) > 0 {
			// A window is spent: send what is buffered and read frames
			// until the server gives some back.
			if err := c.bw.Flush(); err != nil {
				return nil, fmt.Errorf("writing the request: %w", err)
			}
			inc, done, err := c.readFrame()
			if err != nil {
				return nil, err
			}
			if done {
				return nil, errors.New("the server ended the call before the request was sent")
			}
			streamWindow += inc
			continue
		}
		end := int(n) == len(rest)
		if err := c.fr.WriteData(c.stream, end, rest[:n]); err != nil {
			return nil, fmt.Errorf("writing the request: %w", err)
		}
		c.connWindow -= n
		streamWindow -= n
		rest = rest[n:]
		if end {
			break
		}
	}
	if err := c.bw.Flush(); err != nil {
		return nil, fmt.Errorf("writing the request: %w", err)
	}
	for {
		_, done, err := c.readFrame()
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	if c.unacked >= rawRecvWindow/2 {
		if err := c.fr.WriteWindowUpdate(0, uint32(c.unacked)); err != nil {
			return nil, err
		}
		c.unacked = 0 // sent with the next call
	}
	return c.answer()
}

// answer checks the ended call's status and unwraps its message.
func (c *rawGRPCClient) answer() ([]byte, error) {
	if c.httpStatus != "200" {
		return nil, fmt.Errorf("HTTP status %q, want 200", c.httpStatus)
	}
	if c.grpcStatus != "0" {
		code, err := strconv.Atoi(c.grpcStatus)
		if err != nil {
			return nil, fmt.Errorf("no valid grpc-status in the trailers (%q)", c.grpcStatus)
		}
		return nil, &grpcStatusError{code: code, msg: c.grpcMsg}
	}
	if len(c.body) < 5 {
		return nil, fmt.Errorf("answer of %d bytes, shorter than gRPC's 5-byte prefix", len(c.body))
	}
	if c.body[0] != 0 {
		return nil, errors.New("compressed answer, but the call asked for none")
	}
	if n := binary.BigEndian.Uint32(c.body[1:]); int64(n) != int64(len(c.body)-5) {
		return nil, fmt.Errorf("answer prefix says %d bytes, %d arrived", n, len(c.body)-5)
	}
	return c.body[5:], nil
}

// readFrame reads and handles one frame. inc is what a WINDOW_UPDATE adds
// to the current stream's send window; done reports that the current
// stream has ended (its trailers arrived).
func (c *rawGRPCClient) readFrame() (inc int64, done bool, err error) {
	f, err := c.fr.ReadFrame()
	if err != nil {
		return 0, false, fmt.Errorf("reading the answer: %w", err)
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if f.StreamID != c.stream {
			return 0, false, fmt.Errorf("headers on stream %d, the call is on %d", f.StreamID, c.stream)
		}
		for _, h := range f.Fields {
			switch h.Name {
			case ":status":
				c.httpStatus = h.Value
			case "grpc-status":
				c.grpcStatus = h.Value
			case "grpc-message":
				c.grpcMsg = h.Value
			}
		}
		return 0, f.StreamEnded(), nil
	case *http2.DataFrame:
		c.unacked += int64(f.Length)
		if f.StreamID != c.stream {
			return 0, false, fmt.Errorf("data on stream %d, the call is on %d", f.StreamID, c.stream)
		}
		c.body = append(c.body, f.Data()...)
		if f.StreamEnded() {
			return 0, false, errors.New("the answer ended without trailers")
		}
	case *http2.SettingsFrame:
		if f.IsAck() {
			return 0, false, nil
		}
		err := f.ForeachSetting(func(s http2.Setting) error {
			switch s.ID {
			case http2.SettingMaxFrameSize:
				c.maxFrame = int(s.Val)
			case http2.SettingInitialWindowSize:
				inc = int64(s.Val) - c.initWindow // applies to the open stream too (RFC 9113 §6.9.2)
				c.initWindow = int64(s.Val)
			}
			return nil
		})
		if err != nil {
			return 0, false, err
		}
		if err := c.fr.WriteSettingsAck(); err != nil {
			return 0, false, err
		}
		return inc, false, c.bw.Flush()
	case *http2.PingFrame:
		if !f.IsAck() {
			if err := c.fr.WritePing(true, f.Data); err != nil {
				return 0, false, err
			}
			return 0, false, c.bw.Flush()
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.connWindow += int64(f.Increment)
		} else if f.StreamID == c.stream {
			return int64(f.Increment), false, nil
		}
	case *http2.RSTStreamFrame:
		if f.StreamID == c.stream {
			return 0, false, fmt.Errorf("the server reset the call's stream: %v", f.ErrCode)
		}
	case *http2.GoAwayFrame:
		// A graceful GOAWAY still finishes the streams up to LastStreamID.
		if f.ErrCode != http2.ErrCodeNo || f.LastStreamID < c.stream {
			return 0, false, fmt.Errorf("the server sent GOAWAY (%v, %q)", f.ErrCode, f.DebugData())
		}
		c.goingAway = true
	}
	return 0, false, nil
}
