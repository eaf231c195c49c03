package forward

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"google.golang.org/protobuf/proto"
)

// clientConn is one framed connection to a peer. A call writes its own
// frames (taking turns with the others: frameWriter). One goroutine at a
// time reads the connection and hands each answer to the call waiting for
// it: a call that finds nobody reading reads itself (the lead) until its
// own answer comes, then hands the reading to a goroutine of the
// connection's (readLoop) if other calls still wait, which reads until
// none does. At concurrency 1 a call so reads its own answer, with no
// goroutine hand-off. A chunked call does not lead (it would read nothing
// while it writes): a readLoop reads for it. A call whose caller gave up
// after it was written whole still waits for its answer, which the server
// sends (or for the connection's end): the reading goes on until it comes
// and is dropped, so that the server's writer is never left with a large
// answer nobody reads (writeStall would end the connection).
type clientConn struct {
	nc        net.Conn
	r         *bufio.Reader // read only by the goroutine that is reading
	maxAnswer int
	chunk     int // the most a frame carries, both ways
	w         frameWriter

	// in is the chunked answer arriving, if any: the reading goroutine's.
	in *inbound

	mu      sync.Mutex
	lastID  uint64
	waiting map[uint64]*pending
	reading bool  // a lead or readLoop is reading
	err     error // why the connection ended; no new calls once set
	goaway  bool  // the server takes no new calls here
	closed  bool

	// dmu guards the lead's interruption: interruptible names the call
	// whose lead may be woken from a read by a past read deadline (0:
	// none), interrupted says the deadline was set.
	dmu           sync.Mutex
	interruptible uint64
	interrupted   bool
}

// pending is a call waiting for its answer.
type pending struct {
	ch chan frameResult
	// gaveUp says its caller no longer waits: its answer, when it comes,
	// is dropped. Guarded by the connection's mu.
	gaveUp bool
	// sent says the call was written whole: whoever gives it up then
	// tells the server (a cancel frame). Read and written only in the
	// connection's write turn, so that exactly one cancel follows a call's
	// last frame written.
	sent bool
}

// frameResult is what a call waiting on a clientConn gets: the answer's
// frame type and payload, or the error that ended the connection.
type frameResult struct {
	typ     byte
	payload []byte
	err     error
}

// dialFramed connects to addr and opens the framed transport (TLS with
// ALPN when cfg is not nil), chunk bytes to a frame, at most unsent bytes
// left unsent in its socket (limitUnsent). A peer that answers the
// preface with another version gives a *versionError.
func dialFramed(ctx context.Context, addr string, cfg *tls.Config, maxAnswer, chunk, unsent int) (*clientConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = limitUnsent(nc, unsent) // best effort: without it, small frames can wait longer behind large ones
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	conn := nc
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{ALPN}
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != ALPN {
			_ = nc.Close()
			return nil, fmt.Errorf("%w: the peer chose application protocol %q, not the framed transport's %q", errFrame, p, ALPN)
		}
		conn = tc
	}
	if _, err := conn.Write(prefaceOf(protocolVersion)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, frameHeaderLen+min(chunk, maxFrameLen))
	got := make([]byte, prefaceLen)
	if _, err := io.ReadFull(r, got); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("opening the framed transport: %w", err)
	}
	if !bytes.HasPrefix(got, []byte(prefaceMagic)) {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: the peer answered the preface with %q: it does not speak the framed transport", errFrame, got)
	}
	if v := got[prefaceLen-1]; v != protocolVersion {
		_ = conn.Close()
		return nil, &versionError{peer: v, own: protocolVersion}
	}
	_ = nc.SetDeadline(time.Time{})
	return &clientConn{nc: conn, r: r, maxAnswer: maxAnswer, chunk: chunk, w: newFrameWriter(), waiting: map[uint64]*pending{}}, nil
}

// usable reports whether the connection takes new calls.
func (c *clientConn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && !c.goaway
}

// call sends m and waits for its answer, ctx's end, or the connection's.
// The error is a transport failure (Unavailable) or ctx's; a peer's
// answer (success or Failure) is the frame returned. A call that fits a
// frame is written by its caller; a chunked one by a goroutine of its own
// (sendChunked), so that its caller returns at ctx's end even while a
// chunk is being written, and a readLoop reads meanwhile: nothing would
// read the answers of the other calls while it writes.
func (c *clientConn) call(ctx context.Context, m *forwardpb.Call) (frameResult, error) {
	out, err := encodeMessage(frameCall, m, maxAnswerBytes, c.chunk)
	if err != nil {
		return frameResult{}, servables.NewError(servables.Execution, "encoding the forwarded request: "+err.Error())
	}
	p := &pending{ch: make(chan frameResult, 1)}
	c.mu.Lock()
	if c.err != nil || c.goaway {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = errGoaway
		}
		return frameResult{}, err
	}
	c.lastID++
	id := c.lastID
	c.waiting[id] = p
	lead := !c.reading && !out.chunked()
	if !c.reading && out.chunked() {
		go c.readLoop()
	}
	c.reading = true
	c.mu.Unlock()
	if out.chunked() {
		go c.sendChunked(ctx, id, p, out)
		return c.wait(ctx, id, p)
	}
	if err := c.send(ctx, p, out.next(id)); err != nil {
		c.forget(id)
		if lead {
			c.handOver()
		}
		return frameResult{}, err
	}
	if lead {
		return c.lead(ctx, id, p)
	}
	return c.wait(ctx, id, p)
}

// send writes frame b of call p in its turn. It returns ctx's error,
// writing nothing, when ctx ends first: its deadline, set as the write's,
// would fail the write, and a failed write ends the connection for every
// call on it. A failed write ends the connection, the call with it (its
// answer is the connection's error), and returns nil.
func (c *clientConn) send(ctx context.Context, p *pending, b []byte) error {
	select {
	case <-c.w.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		c.w.turn <- struct{}{}
		return err
	}
	dl, _ := ctx.Deadline()
	_ = c.nc.SetWriteDeadline(dl)
	_, err := c.nc.Write(b)
	p.sent = true
	c.w.turn <- struct{}{}
	if err != nil {
		c.fail(fmt.Errorf("sending to the peer: %w", err))
	}
	return nil
}

// sendChunked writes chunked call id's frames, one per turn, once no
// other chunked call is being written. It stops, writing a cancel frame
// after the frames written (none: nothing), when ctx ends or the call no
// longer waits (its caller gave up, or the server answered at its head,
// refusing it); a failed write ends the connection. Each write has ctx's
// deadline: a peer that stops reading ends the connection then.
func (c *clientConn) sendChunked(ctx context.Context, id uint64, p *pending, out *outMessage) {
	select {
	case <-c.w.bulk:
	case <-ctx.Done():
		return // nothing written; the caller returns with ctx's error
	}
	defer func() { c.w.bulk <- struct{}{} }()
	wrote := false
	for b := out.next(id); b != nil; b = out.next(id) {
		<-c.w.turn
		if ctx.Err() != nil || !c.waits(id) {
			if wrote {
				c.writeCancel(id)
			}
			c.w.turn <- struct{}{}
			return
		}
		dl, _ := ctx.Deadline()
		_ = c.nc.SetWriteDeadline(dl)
		_, err := c.nc.Write(b)
		wrote = true
		p.sent = out.done()
		c.w.turn <- struct{}{}
		if err != nil {
			c.fail(fmt.Errorf("sending to the peer: %w", err))
			return
		}
	}
}

// waits reports whether call id's caller waits for its answer.
func (c *clientConn) waits(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.waiting[id]
	return ok && !p.gaveUp
}

// wait waits for call id's answer, which someone else reads, or ctx's
// end.
func (c *clientConn) wait(ctx context.Context, id uint64, p *pending) (frameResult, error) {
	select {
	case r := <-p.ch:
		return r, r.err
	case <-ctx.Done():
		if c.giveUp(id) {
			go c.cancel(id, p)
		}
		return frameResult{}, ctx.Err()
	}
}

// lead reads the connection until call id's answer comes (to p.ch, as
// any other call's), ctx ends or the connection does; then it hands the
// reading on. It reads a frame only once it is buffered whole (Peek,
// which consumes nothing), and ctx's end wakes it from that wait by a
// past read deadline, so no frame is cut and a peer that stalls within a
// frame cannot hold it past ctx. Every frame fits the buffer (maxFrameLen);
// one longer than it (a connection whose frames are longer: chunk) it
// leaves to a readLoop, and waits for its answer as the other calls do.
func (c *clientConn) lead(ctx context.Context, id uint64, p *pending) (frameResult, error) {
	stop := context.AfterFunc(ctx, func() { c.interrupt(id) })
	defer stop()
	for {
		select {
		case r := <-p.ch:
			c.handOver()
			return r, r.err
		default:
		}
		c.dmu.Lock()
		c.interruptible = id
		c.dmu.Unlock()
		if ctx.Err() != nil {
			c.endInterruptible()
			if c.giveUp(id) {
				c.handOver() // a readLoop reads on, for its answer too
				go c.cancel(id, p)
				return frameResult{}, ctx.Err()
			}
			continue // its answer came first: it is in p.ch
		}
		whole, err := c.peekFrame()
		c.endInterruptible()
		if err == nil && !whole {
			go c.readLoop() // the reading is its now
			return c.wait(ctx, id, p)
		}
		if err == nil {
			err = c.next()
		} else if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			continue // woken by ctx's end: nothing of a frame was read
		}
		if err != nil {
			c.fail(fmt.Errorf("the connection to the peer ended: %w", err)) // ch gets it
		}
	}
}

// peekFrame waits until the next frame is buffered whole, reading
// nothing from the buffer; false (and no error) for a frame longer than
// the buffer.
func (c *clientConn) peekFrame() (bool, error) {
	b, err := c.r.Peek(frameHeaderLen)
	if err != nil {
		return false, err
	}
	n := frameHeaderLen + int64(binary.BigEndian.Uint32(b[:4]))
	if n > int64(c.r.Size()) {
		return false, nil
	}
	_, err = c.r.Peek(int(n))
	return err == nil, err
}

// interrupt wakes the lead of call id from its read, if it still waits
// for a frame.
func (c *clientConn) interrupt(id uint64) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.interruptible == id {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		c.interrupted = true
	}
}

// endInterruptible ends the lead's interruptible wait, clearing a read
// deadline interrupt set.
func (c *clientConn) endInterruptible() {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.interruptible = 0
	if c.interrupted {
		_ = c.nc.SetReadDeadline(time.Time{})
		c.interrupted = false
	}
}

// handOver ends a lead's reading: a readLoop goes on reading for the
// calls still waiting, if any.
func (c *clientConn) handOver() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) > 0 && c.err == nil {
		go c.readLoop()
		return
	}
	c.reading = false
}

// readLoop reads answers while calls wait for them, then stops reading;
// a connection that ends fails the calls still waiting.
func (c *clientConn) readLoop() {
	for {
		if err := c.next(); err != nil {
			c.fail(fmt.Errorf("the connection to the peer ended: %w", err))
			return
		}
		c.mu.Lock()
		if len(c.waiting) == 0 || c.err != nil {
			c.reading = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

// errGoaway is the error of a call on a connection the server said goaway
// on.
var errGoaway = errors.New("the peer is shutting down: it takes no new calls")

// giveUp marks call id given up by its caller: its answer, if the server
// sends one, is read and dropped (cancel decides whether it will). It
// returns false when the answer came first.
func (c *clientConn) giveUp(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.waiting[id]
	if !ok {
		return false
	}
	p.gaveUp = true
	return true
}

// forget removes call id from the waiting ones, whose answers are read;
// false when its answer came first.
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

// cancel tells the server the caller gave up call p, id (best effort),
// if it was written whole: the server still answers it, and the call
// waits, given up, until that answer comes. One not written whole is
// never answered: it waits no more (one still being written is ended by
// its writer, sendChunked). Callers run it on a goroutine of its own: the
// write turn may be held by a write to a peer that reads slowly, and a
// call that gave up returns at once.
func (c *clientConn) cancel(id uint64, p *pending) {
	<-c.w.turn
	sent := p.sent
	if sent {
		c.writeCancel(id)
	}
	c.w.turn <- struct{}{}
	if !sent {
		c.mu.Lock()
		if c.waiting[id] == p {
			delete(c.waiting, id)
			c.closeIfDone()
		}
		c.mu.Unlock()
	}
}

// writeCancel writes the cancel frame of call id; the write turn is held.
func (c *clientConn) writeCancel(id uint64) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.nc.Write(emptyFrame(frameCancel, id)); err != nil {
		c.fail(fmt.Errorf("sending to the peer: %w", err))
	}
}

// next reads one frame and acts on it: an answer goes to the call waiting
// for it (none: dropped, its caller gave up), whole or once its last
// chunk has come (the chunks of an answer nobody waits for are dropped as
// they come); a goaway marks the connection. An error ends the
// connection.
func (c *clientConn) next() error {
	h, err := readFrameHeader(c.r)
	if err != nil {
		return err
	}
	if err := checkLength(h, c.chunk); err != nil {
		return err
	}
	switch h.typ {
	case frameAnswer, frameFailure:
		if c.in != nil && c.in.id == h.id {
			return fmt.Errorf("%w: a whole answer for call %d, whose chunked answer is arriving", errFrame, h.id)
		}
		b, err := readPayload(c.r, h, c.chunk)
		if err != nil {
			return err
		}
		c.deliver(h.id, frameResult{typ: h.typ, payload: b})
		return nil
	case frameAnswer | frameChunked, frameFailure | frameChunked:
		if c.in != nil {
			return fmt.Errorf("%w: call %d's chunked answer begins while call %d's is arriving", errFrame, h.id, c.in.id)
		}
		n, err := readHead(c.r, h, c.chunk)
		if err != nil {
			return err
		}
		if n > int64(c.maxAnswer) {
			return fmt.Errorf("%w: call %d's answer of %d bytes, more than the %d bytes allowed", errFrame, h.id, n, c.maxAnswer)
		}
		c.in = newInbound(h.id, h.typ&^frameChunked, n, !c.waits(h.id))
		return nil
	case frameData:
		in := c.in
		if in == nil || in.id != h.id {
			return fmt.Errorf("%w: a data frame for call %d, which has no chunked answer arriving", errFrame, h.id)
		}
		if !in.dropped() && !c.waits(h.id) {
			in.drop() // its caller gave up
		}
		done, err := in.read(c.r, h)
		if err != nil || !done {
			return err
		}
		c.in = nil
		if !in.dropped() {
			c.deliver(h.id, frameResult{typ: in.typ, payload: in.buf})
		}
		return nil
	case frameGoaway:
		if err := skipPayload(c.r, h); err != nil {
			return err
		}
		c.mu.Lock()
		c.goaway = true
		c.closeIfDone()
		c.mu.Unlock()
		return nil
	}
	return fmt.Errorf("%w: frame type %d from the server", errFrame, h.typ)
}

// deliver hands r to call id, if its caller waits.
func (c *clientConn) deliver(id uint64, r frameResult) {
	c.mu.Lock()
	p := c.waiting[id]
	delete(c.waiting, id)
	c.closeIfDone()
	c.mu.Unlock()
	if p != nil && !p.gaveUp {
		p.ch <- r
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
	c.waiting = map[uint64]*pending{}
	c.closed = true
	c.reading = false // nobody reads an ended connection; it takes no calls
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, p := range waiting {
		p.ch <- frameResult{err: err}
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
			return Answer{}, malformed(p, "failure", err)
		}
		e := &RemoteError{Node: p.Name, Addr: p.Addr, Code: codes.Code(f.GetCode()), Message: f.GetMessage(), Kind: KindOfCode(codes.Code(f.GetCode()))}
		if k, ok := parseKind(f.GetKind()); ok {
			e.Kind = k
		}
		if f.GetNode() != "" {
			e.Node = f.GetNode()
		}
		e.RetryAfter = time.Duration(f.GetRetryAfterMs()) * time.Millisecond
		if e.Kind == servables.OK { // neither kind nor code: a failure must say what failed
			e.Kind, e.Code = servables.Execution, codes.Internal
			e.Message = fmt.Sprintf("malformed failure: no kind and code OK (message %q)", f.GetMessage())
		}
		return Answer{}, e
	}
	var m forwardpb.PredictResponse
	if err := proto.Unmarshal(r.payload, &m); err != nil {
		return Answer{}, malformed(p, "answer", err)
	}
	return answerOf(p, &m)
}
