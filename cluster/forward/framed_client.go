package forward

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"google.golang.org/protobuf/proto"
)

// errNotFramed is the error of dialing a peer that does not speak the
// framed transport (a Grove version before it, during a rolling upgrade):
// the pool then calls it over gRPC.
var errNotFramed = errors.New("the peer does not speak the framed transport")

// clientConn is one framed connection to a peer. A call writes its own
// frame; the connection's reader goroutine (read) hands each answer to
// the call waiting for it.
type clientConn struct {
	nc        net.Conn
	maxAnswer int
	wmu       sync.Mutex // one frame written at a time

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan frameResult
	err     error // why the connection ended; no new calls once set
	goaway  bool  // the server takes no new calls here
	closed  bool
}

// frameResult is what a call waiting on a clientConn gets: the answer's
// frame type and payload, or the error that ended the connection.
type frameResult struct {
	typ     byte
	payload []byte
	err     error
}

// dialFramed connects to addr and opens the framed transport (TLS with
// ALPN when cfg is not nil). A peer that answers with another protocol
// gives errNotFramed.
func dialFramed(ctx context.Context, addr string, cfg *tls.Config, maxAnswer int) (*clientConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	conn := nc
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{ALPN, "h2"}
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol != ALPN {
			_ = nc.Close()
			return nil, errNotFramed
		}
		conn = tc
	}
	if _, err := conn.Write(preface); err != nil {
		_ = conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 32<<10)
	got := make([]byte, len(preface))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, preface) {
		_ = conn.Close()
		if cfg == nil && err == nil {
			// A gRPC-only server answers with its HTTP/2 SETTINGS frame
			// (and waits for an HTTP/2 preface). A connection dropped
			// without an answer is a peer stopping or dying, not one
			// that does not speak the transport.
			return nil, errNotFramed
		}
		if err == nil {
			err = errFrame
		}
		return nil, fmt.Errorf("opening the framed transport: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	c := &clientConn{nc: conn, maxAnswer: maxAnswer, waiting: map[uint64]chan frameResult{}}
	go c.read(r)
	return c, nil
}

// usable reports whether the connection takes new calls.
func (c *clientConn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.goaway
}

// call sends m and waits for its answer, ctx's end, or the connection's.
// The error is a transport failure (Unavailable) or ctx's; a peer's
// answer (success or Failure) is the frame returned.
func (c *clientConn) call(ctx context.Context, m *forwardpb.Call) (frameResult, error) {
	b, err := appendFrame(frameCall, 0, m, maxFrameLen)
	if err != nil {
		return frameResult{}, servables.NewError(servables.Execution, "encoding the forwarded request: "+err.Error())
	}
	ch := make(chan frameResult, 1)
	c.mu.Lock()
	if c.err != nil || c.goaway {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = errGoaway
		}
		return frameResult{}, err
	}
	c.next++
	id := c.next
	c.waiting[id] = ch
	c.mu.Unlock()
	putFrameHeader(b, frameHeader{length: uint32(len(b) - frameHeaderLen), typ: frameCall, id: id})
	c.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetWriteDeadline(dl)
	}
	_, err = c.nc.Write(b)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("sending to the peer: %w", err))
	}
	select {
	case r := <-ch:
		return r, r.err
	case <-ctx.Done():
		if c.forget(id) {
			c.cancel(id)
		}
		return frameResult{}, ctx.Err()
	}
}

// errGoaway is the error of a call on a connection the server said goaway
// on.
var errGoaway = errors.New("the peer is shutting down: it takes no new calls")

// forget removes call id from the waiting ones; false when its answer
// came first.
func (c *clientConn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.waiting[id]; !ok {
		return false
	}
	delete(c.waiting, id)
	c.closeIfDone()
	return true
}

// cancel tells the server the caller gave up call id (best effort).
func (c *clientConn) cancel(id uint64) {
	b, _ := appendFrame(frameCancel, id, nil, 0)
	c.wmu.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.nc.Write(b)
	c.wmu.Unlock()
	if err != nil {
		c.fail(fmt.Errorf("sending to the peer: %w", err))
	}
}

// read delivers answers until the connection ends, then fails the calls
// still waiting.
func (c *clientConn) read(r *bufio.Reader) {
	for {
		h, err := readFrameHeader(r)
		if err != nil {
			c.fail(fmt.Errorf("the connection to the peer ended: %w", err))
			return
		}
		switch h.typ {
		case frameAnswer, frameFailure:
			b, err := readPayload(r, h, c.maxAnswer)
			if err != nil {
				c.fail(fmt.Errorf("reading an answer: %w", err))
				return
			}
			c.mu.Lock()
			ch := c.waiting[h.id]
			delete(c.waiting, h.id)
			c.closeIfDone()
			c.mu.Unlock()
			if ch != nil {
				ch <- frameResult{typ: h.typ, payload: b}
			}
		case frameGoaway:
			if skipPayload(r, h) != nil {
				c.fail(errors.New("the connection to the peer ended"))
				return
			}
			c.mu.Lock()
			c.goaway = true
			c.closeIfDone()
			c.mu.Unlock()
		default:
			c.fail(fmt.Errorf("%w: frame type %d from the server", errFrame, h.typ))
			return
		}
	}
}

// closeIfDone closes a connection told goaway once no call waits on it;
// c.mu is held.
func (c *clientConn) closeIfDone() {
	if c.goaway && len(c.waiting) == 0 && !c.closed {
		c.closed = true
		_ = c.nc.Close()
	}
}

// fail ends the connection with err: it is closed and every waiting call
// gets err.
func (c *clientConn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	waiting := c.waiting
	c.waiting = map[uint64]chan frameResult{}
	c.closed = true
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, ch := range waiting {
		ch <- frameResult{err: err}
	}
}

// close ends the connection; calls in flight fail.
func (c *clientConn) close() { c.fail(net.ErrClosed) }

// slot is one of a pool's framed connections: made on first use, made
// again after it ends, with a growing pause after failed attempts during
// which calls fail at once (as gRPC's TRANSIENT_FAILURE).
type slot struct {
	mu      sync.Mutex
	conn    *clientConn
	dialing chan struct{} // closed when the attempt in progress ends
	lastErr error
	retryAt time.Time
	pause   time.Duration
	closed  bool
}

// get returns the slot's connection, connecting (with dial) if it has
// none, or the error of the last attempt while its pause lasts.
func (s *slot) get(ctx context.Context, dial func() (*clientConn, error), maxPause time.Duration) (*clientConn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, net.ErrClosed
		}
		if s.conn != nil && s.conn.usable() {
			c := s.conn
			s.mu.Unlock()
			return c, nil
		}
		if s.dialing == nil {
			if s.lastErr != nil && time.Now().Before(s.retryAt) {
				err := s.lastErr
				s.mu.Unlock()
				return nil, err
			}
			ch := make(chan struct{})
			s.dialing = ch
			go func() {
				c, err := dial()
				s.mu.Lock()
				defer s.mu.Unlock()
				s.dialing = nil
				close(ch)
				if err != nil {
					s.lastErr = err
					s.pause = min(max(2*s.pause, 50*time.Millisecond), maxPause)
					s.retryAt = time.Now().Add(s.pause)
					return
				}
				s.lastErr, s.pause = nil, 0
				if s.closed {
					c.close()
					return
				}
				s.conn = c
			}()
		}
		ch := s.dialing
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
			c, err := s.conn, s.lastErr
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, net.ErrClosed
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// close closes the slot's connection; later calls fail.
func (s *slot) close() {
	s.mu.Lock()
	s.closed = true
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// decodeFramed returns the answer of a framed call, or its failure as a
// *RemoteError of peer p.
func decodeFramed(p Peer, r frameResult) (Answer, error) {
	if r.typ == frameFailure {
		var f forwardpb.Failure
		if err := proto.Unmarshal(r.payload, &f); err != nil {
			return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Execution, Code: codes.Internal, Message: "malformed failure: " + err.Error()}
		}
		e := &RemoteError{Node: p.Name, Addr: p.Addr, Code: codes.Code(f.GetCode()), Message: f.GetMessage(), Kind: KindOfCode(codes.Code(f.GetCode()))}
		if k, ok := parseKind(f.GetKind()); ok {
			e.Kind = k
		}
		if f.GetNode() != "" {
			e.Node = f.GetNode()
		}
		if e.Kind == servables.OK { // neither kind nor code: a failure must say what failed
			e.Kind, e.Code = servables.Execution, codes.Internal
			e.Message = fmt.Sprintf("malformed failure: no kind and code OK (message %q)", f.GetMessage())
		}
		return Answer{}, e
	}
	var m forwardpb.PredictResponse
	if err := proto.Unmarshal(r.payload, &m); err != nil {
		return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Execution, Code: codes.Internal, Message: "malformed answer: " + err.Error()}
	}
	ans, err := decodeAnswer(&m)
	if err != nil {
		return Answer{}, &RemoteError{Node: p.Name, Addr: p.Addr, Kind: servables.Execution, Code: codes.Internal, Message: "malformed answer: " + err.Error()}
	}
	return ans, nil
}
