package forward

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
)

// handshakeTimeout bounds a new connection's TLS handshake and preface.
const handshakeTimeout = 10 * time.Second

// goawayQuiet is how long a server that said goaway keeps reading a
// connection with no call in flight whose client has not closed it: calls
// the client sent before it read the goaway are still answered. A client
// that reads the goaway closes the connection as soon as its own calls
// are answered; an idle one reads nothing until its next call.
const goawayQuiet = 100 * time.Millisecond

// predictMethod names the framed transport's one call in spans and logs,
// as gRPC names it.
const predictMethod = "/grove.cluster.v1.Forward/Predict"

// Serve serves ln until Stop or GracefulStop: each connection speaks the
// framed transport or gRPC, as it chooses (TLS: by ALPN; plaintext: by
// its first bytes). It returns nil once stopped.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	grpcLn := newConnQueue(ln.Addr())
	grpcDone := make(chan error, 1)
	go func() { grpcDone <- s.gs.Serve(grpcLn) }()
	var err error
	var pause time.Duration
	for {
		var nc net.Conn
		if nc, err = ln.Accept(); err != nil {
			if te, ok := err.(interface{ Temporary() bool }); ok && te.Temporary() {
				// Out of file descriptors, say: wait and go on, as gRPC's
				// and net/http's Serve do.
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				s.log.Warn("forward: accepting a peer's connection failed; retrying", "err", err, "pause", pause)
				time.Sleep(pause)
				continue
			}
			break
		}
		pause = 0
		go s.classify(nc, grpcLn)
	}
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	grpcLn.Close()
	if stopping {
		return nil
	}
	s.gs.Stop()
	<-grpcDone
	return err
}

// classify finishes the handshake of a new connection and serves it on
// the transport it chose; a connection that speaks neither, or another
// version of the framed transport, is closed.
func (s *Server) classify(nc net.Conn, grpcLn *connQueue) {
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	var framed bool
	var cert *x509.Certificate
	conn := nc
	if s.tls != nil {
		tc := tls.Server(nc, s.tls)
		if err := tc.Handshake(); err != nil {
			s.log.Debug("forward: a peer's TLS handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
			_ = nc.Close()
			return
		}
		st := tc.ConnectionState()
		framed = st.NegotiatedProtocol == ALPN
		cert = verifiedLeaf(&st)
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	if s.tls == nil {
		b, err := br.Peek(len(prefaceMagic))
		if err != nil {
			_ = nc.Close()
			return
		}
		framed = string(b) == prefaceMagic
	}
	if !framed {
		_ = nc.SetDeadline(time.Time{})
		if !grpcLn.put(&peekedConn{Conn: conn, r: br}) {
			_ = conn.Close()
		}
		return
	}
	b, err := br.Peek(prefaceLen)
	if err != nil || string(b[:len(prefaceMagic)]) != prefaceMagic {
		_ = conn.Close()
		return
	}
	if v := b[prefaceLen-1]; v != protocolVersion {
		// The client learns this node's version from the reply, and says
		// both versions in its error.
		s.log.Warn("forward: a peer speaks another version of the framed transport; closing its connection",
			"remote", nc.RemoteAddr().String(), "err", &versionError{peer: v, own: protocolVersion})
		_, _ = conn.Write(prefaceOf(protocolVersion))
		_ = conn.Close()
		return
	}
	_, _ = br.Discard(prefaceLen)
	_ = limitUnsent(nc, s.unsent) // best effort: without it, small answers can wait longer behind large ones
	if _, err := conn.Write(prefaceOf(protocolVersion)); err != nil {
		_ = conn.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	sc := &serverConn{s: s, nc: conn, r: br, cert: cert, chunk: s.chunk, w: newFrameWriter(), calls: map[uint64]context.CancelFunc{},
		peer: &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr()}}
	if tc, ok := conn.(*tls.Conn); ok {
		sc.peer.AuthInfo = credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		sc.goaway() // the client sends its calls elsewhere
		_ = conn.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	defer s.connWG.Done()
	sc.serve()
	s.mu.Lock()
	delete(s.conns, sc)
	s.mu.Unlock()
}

// GracefulStop stops taking connections and calls, and returns when the
// calls in flight are answered: framed connections are told goaway (their
// clients send new calls elsewhere), gRPC ones drained.
func (s *Server) GracefulStop() {
	conns := s.stop()
	for _, c := range conns {
		c.goaway()
	}
	s.gs.Drain()
	s.gs.GracefulStop()
	s.connWG.Wait()
}

// Stop stops at once: calls in flight fail Unavailable, and their callers
// try another replica.
func (s *Server) Stop() {
	conns := s.stop()
	s.cancel()
	for _, c := range conns {
		_ = c.nc.Close()
	}
	s.gs.Stop()
	s.connWG.Wait()
}

// stop marks the server stopping, closes its listeners and returns its
// framed connections.
func (s *Server) stop() []*serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	s.lns = nil
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// serverConn is one framed connection from a peer. Its reader goroutine
// (serve) reads the calls and hands each to the Local (start): the
// goroutine that has the answer writes it, or, for an answer that travels
// chunked, a goroutine of its own.
type serverConn struct {
	s     *Server
	nc    net.Conn
	r     *bufio.Reader
	cert  *x509.Certificate // verified at the handshake; nil: none
	peer  *peer.Peer
	chunk int // the most a frame carries, both ways
	w     frameWriter
	wg    sync.WaitGroup

	// in is the chunked call arriving, if any: the reader's.
	in *inbound

	mu       sync.Mutex
	calls    map[uint64]context.CancelFunc // in flight, by call id
	arriving bool                          // a chunked call is arriving (in): the connection is not idle
	goneWay  bool
}

// serve reads frames until the connection ends, then waits for the calls
// in flight and closes it. A connection that ends otherwise than by
// goaway's grace (the client closed it or went away, broke the protocol,
// or an answer could not be written) cancels its calls, as gRPC cancels a
// closed connection's streams: nobody can take their answers. A panic
// (a bug) on the reader is logged, and ends the connection so too: its
// state may be inconsistent.
func (c *serverConn) serve() {
	var end error
	defer func() {
		if v := recover(); v != nil {
			c.logPanic("internal error: reading a peer's forwarded calls panicked; closing its connection, the other connections and the server go on",
				&panicked{v: v, stack: debug.Stack()})
			end = errPanicked
		}
		if !errors.Is(end, os.ErrDeadlineExceeded) || !c.wentAway() {
			c.cancelAll()
		}
		c.wg.Wait()
		_ = c.nc.Close()
	}()
	for {
		// Peek waits for a frame without taking any of it, so that the
		// goaway's quiet deadline can end the wait and leave no frame cut.
		if _, err := c.r.Peek(frameHeaderLen); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && c.stillBusy() {
				continue
			}
			end = err
			return
		}
		h, err := readFrameHeader(c.r)
		if end = err; err != nil {
			return
		}
		if end = c.next(h); end != nil {
			if errors.Is(end, errFrame) {
				c.s.log.Warn("forward: a peer broke the framed protocol; closing its connection", "remote", c.peer.Addr.String(), "err", end)
			}
			return
		}
	}
}

// next acts on the frame whose header is h: a call starts once it has
// come whole (a chunked one at its last data frame), a refused one is
// answered at its header and its bytes skipped; a cancel frame cancels a
// call in flight, or ends the chunked call arriving. An error ends the
// connection.
func (c *serverConn) next(h frameHeader) error {
	if err := checkLength(h, c.chunk); err != nil {
		return err
	}
	switch h.typ {
	case frameCall:
		if c.in != nil && c.in.id == h.id {
			return fmt.Errorf("%w: a whole call %d, whose chunked call is arriving", errFrame, h.id)
		}
		from, f := c.admitCall(int64(h.length))
		if f != nil {
			c.answer(h.id, nil, f)
			return skipPayload(c.r, h)
		}
		b, err := readPayload(c.r, h, c.chunk)
		if err != nil {
			return err
		}
		c.start(h.id, b, from)
	case frameCall | frameChunked:
		if c.in != nil {
			return fmt.Errorf("%w: call %d's chunked call begins while call %d's is arriving", errFrame, h.id, c.in.id)
		}
		n, err := readHead(c.r, h, c.chunk)
		if err != nil {
			return err
		}
		from, f := c.admitCall(n)
		c.in = newInbound(h.id, frameCall, n, f != nil)
		c.in.from = from
		c.setArriving(true)
		if f != nil {
			c.answer(h.id, nil, f)
		}
	case frameData:
		in := c.in
		if in == nil || in.id != h.id {
			return fmt.Errorf("%w: a data frame for call %d, which has no chunked call arriving", errFrame, h.id)
		}
		done, err := in.read(c.r, h)
		if err != nil || !done {
			return err
		}
		c.in = nil
		if !in.dropped() {
			c.start(h.id, in.buf, in.from)
		}
		c.setArriving(false)
	case frameCancel:
		if c.in != nil && c.in.id == h.id {
			c.in = nil // its caller gave up before sending it whole
			c.setArriving(false)
		} else {
			c.mu.Lock()
			cancel := c.calls[h.id]
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
		return skipPayload(c.r, h)
	default:
		return fmt.Errorf("%w: frame type %d from the client", errFrame, h.typ)
	}
	return nil
}

// admitCall admits the peer of a call of n bytes before any of the call
// is read, as gRPC's tap does (a refused one cannot make this node buffer
// it), and refuses a call longer than MaxMessageBytes allows: it returns
// the member's name, or the failure to answer. Confirming a peer Members
// does not know holds the connection's reader, at most confirmWait: the
// connection's calls are all that peer's.
func (c *serverConn) admitCall(n int64) (string, *failure) {
	from, f := c.s.admit(c.s.base, c.cert, predictMethod)
	if f == nil && n > int64(c.s.maxMsg)+callOverhead {
		f = tooLarge()
	}
	return from, f
}

// wentAway reports whether the connection was told goaway.
func (c *serverConn) wentAway() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goneWay
}

// cancelAll cancels the calls in flight.
func (c *serverConn) cancelAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.calls {
		cancel()
	}
}

// callOverhead is what a Call adds to its PredictRequest, at most: its
// own fields (deadline, trace context) and the request's tag and length.
const callOverhead = 1 << 10

// tooLarge is the failure of a call whose request is larger than
// MaxMessageBytes, as gRPC refuses it.
func tooLarge() *failure {
	return &failure{code: codes.ResourceExhausted, kind: servables.InvalidInput, msg: "the request is larger than the serving node's max_body_bytes"}
}

// start runs the call id whose payload is b, from the member named from
// ("" for a peer without a certificate): handed to the Local's
// PredictAsync when it has one, whose done writes the answer, else on a
// goroutine of its own. Either way the reader goes on reading.
func (c *serverConn) start(id uint64, b []byte, from string) {
	var call forwardpb.Call
	if err := proto.Unmarshal(b, &call); err != nil {
		c.answer(id, nil, &failure{code: codes.InvalidArgument, kind: servables.InvalidInput, msg: "malformed call: " + err.Error()})
		return
	}
	// The frame was let through up to callOverhead over the limit; the
	// request itself is bounded as gRPC bounds it (measured only when the
	// whole call is over the limit).
	if len(b) > c.s.maxMsg && proto.Size(call.GetRequest()) > c.s.maxMsg {
		c.answer(id, nil, tooLarge())
		return
	}
	ctx, cancel := context.WithTimeout(c.s.base, time.Duration(call.GetTimeoutNanos()))
	c.mu.Lock()
	if _, dup := c.calls[id]; dup {
		c.mu.Unlock()
		cancel()
		c.answer(id, nil, &failure{code: codes.InvalidArgument, kind: servables.InvalidInput, msg: "a call id already in flight"})
		return
	}
	c.calls[id] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	// Until the call is handed on (to finish, or to what calls it), a panic
	// (a bug, which ends the connection: serve) frees it here: else the
	// connection could never close.
	handed := false
	defer func() {
		if handed {
			return
		}
		// A panic (the only way here): the call fails Internal before the
		// connection closes, so that its peer need not wait for the close
		// to learn it. Freeing it comes first, and the wait's end last,
		// even if writing the failure panics too.
		defer c.wg.Done()
		defer c.answer(id, nil, takeFailed())
		cancel()
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}()
	req := call.GetRequest()
	// Until it is handed on, a panic once the call's span is started ends
	// the span too (Internal), so that tracing neither loses nor leaks it.
	var span trace.Span
	defer func() {
		if !handed && span != nil {
			tracing.EndCall(span, status.New(codes.Internal, takeFailedMsg))
		}
	}()
	ctx, span = c.s.calls.Start(peer.NewContext(ctx, c.peer), predictMethod, call.GetTraceparent(), call.GetTracestate(), req.GetRequestId())
	// finish ends the call's span, cancels its context and frees its id,
	// writes its answer, then tells the connection's quiet wait and its
	// wait for its calls. Each step is deferred, so that a panic in one (a
	// bug) skips none of those after it, each run once, and goes on to
	// finish's caller when they have run: else the connection could never
	// close.
	finish := func(resp *forwardpb.PredictResponse, f *failure) {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			c.quietIfIdle()
			c.mu.Unlock()
		}()
		defer c.answer(id, resp, f)
		// The id is free once its answer is on its way: a client may use
		// it again as soon as it has read the answer.
		defer func() {
			cancel()
			c.mu.Lock()
			delete(c.calls, id)
			c.mu.Unlock()
		}()
		if f != nil {
			tracing.EndCall(span, status.New(f.code, f.msg))
		} else {
			tracing.EndCall(span, nil)
		}
	}
	al, async := c.s.local.(AsyncLocal)
	if !async {
		// Nothing above this goroutine recovers: a panic making or
		// writing the answer is logged, and the process goes on.
		handed = true
		go func() {
			defer func() {
				if v := recover(); v != nil {
					c.logPanic(answerPanicked, &panicked{v: v, stack: debug.Stack()})
				}
			}()
			resp, f, p := makeAnswer(func() (*forwardpb.PredictResponse, *failure) { return c.s.serve(ctx, req, from) })
			if p != nil {
				c.logPanic(answerPanicked, p)
			}
			finish(resp, f)
		}()
		return
	}
	ctx, fr, f := c.s.prepare(ctx, req, from)
	handed = true
	if f != nil {
		finish(nil, f)
		return
	}
	// done finishes the call once. A PredictAsync that panics (a bug)
	// before calling it fails the call Internal here, so that the
	// connection is not left waiting for an answer that never comes, and
	// the panic goes on to the reader, which closes the connection; a
	// call of done after that, or a second one, is ignored.
	var called atomic.Bool
	defer func() {
		if v := recover(); v != nil {
			if called.CompareAndSwap(false, true) {
				finish(nil, takeFailed())
			}
			panic(v)
		}
	}()
	al.PredictAsync(ctx, fr, func(a Answer, err error) {
		if !called.CompareAndSwap(false, true) {
			return
		}
		resp, f, p := makeAnswer(func() (*forwardpb.PredictResponse, *failure) { return c.s.outcome(a, err) })
		if p != nil {
			// To done's caller once the call is answered, which recovers it
			// (the actors' System logs and counts it), with the stack where
			// it was raised; a panic answering the call goes with it.
			defer func() {
				if v := recover(); v != nil {
					panic(fmt.Sprintf("%s\nthen, finishing the call: %v\n%s", p, v, debug.Stack()))
				}
				panic(p.String())
			}()
		}
		finish(resp, f)
	})
}

// takeFailedMsg is the message of a call that failed (a bug) before the
// serving node's Local had it.
const takeFailedMsg = "internal error: the serving node failed taking the call"

// takeFailed is the failure of a call that panicked (a bug) before the
// Local had it, or in an AsyncLocal's PredictAsync before its done.
func takeFailed() *failure {
	return &failure{code: codes.Internal, kind: servables.Execution, msg: takeFailedMsg}
}

// errPanicked ends a connection whose reader panicked (a bug).
var errPanicked = errors.New("the connection's reader panicked")

// answerPanicked is what logPanic says of a panic answering a call.
const answerPanicked = "internal error: answering a forwarded call panicked; the other calls and the server go on"

// panicked is a panic (a bug) recovered making a call's answer: its value
// and the stack where it was raised.
type panicked struct {
	v     any
	stack []byte
}

// String is the panic's value, then its stack.
func (p *panicked) String() string { return fmt.Sprintf("%v\n%s", p.v, p.stack) }

// makeAnswer returns what answer returns; when it panics (a bug), the
// call fails Internal, and the panic is returned too, for the caller to
// log or to raise again once the call is answered.
func makeAnswer(answer func() (*forwardpb.PredictResponse, *failure)) (resp *forwardpb.PredictResponse, f *failure, p *panicked) {
	defer func() {
		if v := recover(); v != nil {
			resp, f = nil, &failure{code: codes.Internal, kind: servables.Execution, msg: "internal error: the serving node failed making the answer"}
			p = &panicked{v: v, stack: debug.Stack()}
		}
	}()
	resp, f = answer()
	return resp, f, nil
}

// logPanic logs p, a panic on c on a goroutine that nothing above
// recovers, at error level with msg, which says what it cost.
func (c *serverConn) logPanic(msg string, p *panicked) {
	c.s.log.Error(msg, "method", predictMethod, "remote", c.peer.Addr.String(), "panic", fmt.Sprint(p.v), "stack", string(p.stack))
}

// answer writes the answer of call id: resp, or f when it failed. A
// chunked one is written by a goroutine of its own (the connection waits
// for it before it closes), so that the goroutine with the answer (on an
// AsyncLocal the model actor's) is not held by its transfer.
func (c *serverConn) answer(id uint64, resp *forwardpb.PredictResponse, f *failure) {
	var out *outMessage
	var err error
	if f != nil {
		out, err = encodeMessage(frameFailure, &forwardpb.Failure{Kind: f.kind.String(), Code: uint32(f.code), Node: c.s.node, Message: f.msg,
			RetryAfterMs: uint32(min(f.retryAfter.Milliseconds(), math.MaxUint32))}, maxAnswerBytes, c.chunk)
	} else {
		out, err = encodeMessage(frameAnswer, resp, maxAnswerBytes, c.chunk) // a Client receives no more
	}
	if err != nil {
		out, _ = encodeMessage(frameFailure, &forwardpb.Failure{Kind: servables.Execution.String(), Code: uint32(codes.Internal), Node: c.s.node,
			Message: "encoding the answer: " + err.Error()}, maxAnswerBytes, c.chunk)
	}
	if !out.chunked() {
		_ = c.write(out.next(id))
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-c.w.bulk
		defer func() { c.w.bulk <- struct{}{} }()
		// Nothing above this goroutine recovers: a panic (a bug) is logged,
		// and closes the connection, whose answer is cut.
		defer func() {
			if v := recover(); v != nil {
				_ = c.nc.Close()
				c.logPanic("internal error: writing a forwarded call's answer panicked; closing its connection, the other connections and the server go on",
					&panicked{v: v, stack: debug.Stack()})
			}
		}()
		for b := out.next(id); b != nil; b = out.next(id) {
			if c.write(b) != nil {
				return
			}
		}
	}()
}

// writeStall is the longest a peer may leave a frame the server writes
// untaken (its connection's buffers full) before the server gives up and
// closes the connection: its calls then fail Unavailable, and its node
// connects again. Answers are written by the goroutine that has them (the
// model actor's, on an AsyncLocal), which a stalled peer must hold no
// longer than this, whatever its calls' deadlines, nor GracefulStop
// forever. A peer that reads takes megabytes in that time.
const writeStall = time.Second

// write writes b (one frame, or one chunk of a chunked message) in its
// turn, giving up after writeStall; a connection that cannot be written
// is closed, which ends its reader. A write that panics (a bug) passes
// the turn on too, and closes the connection: its frame may be cut.
func (c *serverConn) write(b []byte) error {
	<-c.w.turn
	written := false
	defer func() {
		c.w.turn <- struct{}{}
		if !written {
			_ = c.nc.Close()
		}
	}()
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeStall))
	_, err := c.nc.Write(b)
	written = err == nil
	return err
}

// goaway tells the client to send no new calls on the connection; the
// calls in flight are answered, and the connection ends goawayQuiet after
// the last of them if the client has not closed it by then. A panic (a
// bug) writing the goaway is logged, and costs that connection alone
// (write closed it): GracefulStop goes on with the others.
func (c *serverConn) goaway() {
	c.mu.Lock()
	if c.goneWay {
		c.mu.Unlock()
		return
	}
	c.goneWay = true
	c.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			_ = c.nc.Close()
			c.logPanic("internal error: telling a peer's connection goaway panicked; closing it, the other connections and the server go on",
				&panicked{v: v, stack: debug.Stack()})
		}
	}()
	if c.write(emptyFrame(frameGoaway, 0)) != nil {
		return
	}
	c.mu.Lock()
	c.quietIfIdle()
	c.mu.Unlock()
}

// quietIfIdle starts the quiet wait of a connection told goaway that has
// no call in flight or arriving; c.mu is held.
func (c *serverConn) quietIfIdle() {
	if c.goneWay && len(c.calls) == 0 && !c.arriving {
		_ = c.nc.SetReadDeadline(time.Now().Add(goawayQuiet))
	}
}

// setArriving says whether a chunked call is arriving. While one is, the
// connection is not idle: a quiet wait begun before its head is called
// off, so that its data frames, however long they take to come, are read
// whole; when it has come (or was cancelled), the connection may be idle
// again.
func (c *serverConn) setArriving(a bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arriving = a
	if a {
		if c.goneWay {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		return
	}
	c.quietIfIdle()
}

// stillBusy reports, when the quiet deadline ended a wait for a frame,
// whether calls are in flight or arriving again (they came meanwhile):
// the reader then waits on, with no deadline until the last of them
// ends.
func (c *serverConn) stillBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 && !c.arriving {
		return false
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	return true
}

// offerALPN returns c offering the framed transport's ALPN first, before
// the protocols it offers (gRPC's "h2", for tools and probes); nil for
// nil.
func offerALPN(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	c.NextProtos = withALPN(c.NextProtos)
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := get(hi)
			if err != nil || cc == nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.NextProtos = withALPN(cc.NextProtos)
			return cc, nil
		}
	}
	return c
}

// withALPN is protos with ALPN first (and "h2" when protos has nothing).
func withALPN(protos []string) []string {
	if len(protos) == 0 {
		protos = []string{"h2"}
	}
	return append([]string{ALPN}, slices.DeleteFunc(slices.Clone(protos), func(p string) bool { return p == ALPN })...)
}

// handshaken is the gRPC server's transport credentials on the peer port:
// Serve's mux has already made the TLS handshake of each connection it
// hands to gRPC, so this only reports the connection's TLS state to the
// calls (their peer's AuthInfo, which the client certificate checks read).
type handshaken struct{}

func (handshaken) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("forward: the peer port's credentials do not dial")
}

func (handshaken) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pc, ok := c.(*peekedConn)
	if !ok {
		return nil, nil, errors.New("forward: a connection that did not come through the peer port's mux")
	}
	tc, ok := pc.Conn.(*tls.Conn)
	if !ok {
		return nil, nil, errors.New("forward: a plaintext connection on a TLS peer port")
	}
	return c, credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (handshaken) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}
func (handshaken) Clone() credentials.TransportCredentials { return handshaken{} }
func (handshaken) OverrideServerName(string) error         { return nil }

// peekedConn is a connection whose first bytes were read into r (to
// choose its transport): reads start with them.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// NetConn is the connection under c, as *tls.Conn gives it: h2guard's
// lingering close shuts the TCP connection's sending side through it.
func (c *peekedConn) NetConn() net.Conn { return c.Conn }

// connQueue is the listener the gRPC server accepts from: the connections
// Serve's mux gives it.
type connQueue struct {
	addr   net.Addr
	ch     chan net.Conn
	mu     sync.Mutex
	closed bool
	done   chan struct{}
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// put hands c to the gRPC server; false when the queue is closed.
func (q *connQueue) put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }
