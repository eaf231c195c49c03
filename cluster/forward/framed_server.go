package forward

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"time"

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
// the transport it chose; a connection that speaks neither is closed.
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
		b, err := br.Peek(len(preface))
		if err != nil {
			_ = nc.Close()
			return
		}
		framed = bytes.Equal(b, preface)
	}
	if !framed {
		_ = nc.SetDeadline(time.Time{})
		if !grpcLn.put(&peekedConn{Conn: conn, r: br}) {
			_ = conn.Close()
		}
		return
	}
	if b, err := br.Peek(len(preface)); err != nil || !bytes.Equal(b, preface) {
		_ = conn.Close()
		return
	}
	_, _ = br.Discard(len(preface))
	if _, err := conn.Write(preface); err != nil {
		_ = conn.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	sc := &serverConn{s: s, nc: conn, r: br, cert: cert, calls: map[uint64]context.CancelFunc{},
		peer: &peer.Peer{Addr: nc.RemoteAddr(), LocalAddr: nc.LocalAddr()}}
	if tc, ok := conn.(*tls.Conn); ok {
		sc.peer.AuthInfo = credentials.TLSInfo{State: tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		sc.goaway() // the client sends its calls elsewhere (not over gRPC: it did speak this)
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
// goroutine that has the answer writes it.
type serverConn struct {
	s    *Server
	nc   net.Conn
	r    *bufio.Reader
	cert *x509.Certificate // verified at the handshake; nil: none
	peer *peer.Peer
	wmu  sync.Mutex // one frame written at a time
	wg   sync.WaitGroup

	mu      sync.Mutex
	calls   map[uint64]context.CancelFunc // in flight, by call id
	goneWay bool
}

// serve reads frames until the connection ends, then waits for the calls
// in flight and closes it. A connection that ends otherwise than by
// goaway's grace (the client closed it or went away, broke the protocol,
// or an answer could not be written) cancels its calls, as gRPC cancels a
// closed connection's streams: nobody can take their answers.
func (c *serverConn) serve() {
	var end error
	defer func() {
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
		switch h.typ {
		case frameCall:
			// The peer is admitted before its message is read, as gRPC's
			// tap does: a refused one cannot make this node buffer it.
			from, f := c.s.admit(c.cert, predictMethod)
			if f == nil && int64(h.length) > int64(c.s.maxMsg)+callOverhead {
				f = tooLarge()
			}
			if f != nil {
				c.answer(h.id, nil, f)
				if end = skipPayload(c.r, h); end != nil {
					return
				}
				continue
			}
			b, err := readPayload(c.r, h, int(h.length))
			if end = err; err != nil {
				return
			}
			c.start(h.id, b, from)
		case frameCancel:
			c.mu.Lock()
			cancel := c.calls[h.id]
			c.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			if end = skipPayload(c.r, h); end != nil {
				return
			}
		default:
			c.s.log.Warn("forward: a peer broke the framed protocol; closing its connection", "remote", c.peer.Addr.String(), "frame_type", h.typ)
			return
		}
	}
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
	return &failure{codes.ResourceExhausted, servables.InvalidInput, "the request is larger than the serving node's max_body_bytes"}
}

// start runs the call id whose payload is b, from the member named from
// ("" for a peer without a certificate): handed to the Local's
// PredictAsync when it has one, whose done writes the answer, else on a
// goroutine of its own. Either way the reader goes on reading.
func (c *serverConn) start(id uint64, b []byte, from string) {
	var call forwardpb.Call
	if err := proto.Unmarshal(b, &call); err != nil {
		c.answer(id, nil, &failure{codes.InvalidArgument, servables.InvalidInput, "malformed call: " + err.Error()})
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
		c.answer(id, nil, &failure{codes.InvalidArgument, servables.InvalidInput, "a call id already in flight"})
		return
	}
	c.calls[id] = cancel
	c.mu.Unlock()
	c.wg.Add(1)
	req := call.GetRequest()
	ctx, span := c.s.calls.Start(peer.NewContext(ctx, c.peer), predictMethod, call.GetTraceparent(), call.GetTracestate(), req.GetRequestId())
	finish := func(resp *forwardpb.PredictResponse, f *failure) {
		if f != nil {
			tracing.EndCall(span, status.New(f.code, f.msg))
		} else {
			tracing.EndCall(span, nil)
		}
		cancel()
		c.answer(id, resp, f)
		c.mu.Lock()
		delete(c.calls, id)
		c.quietIfIdle()
		c.mu.Unlock()
		c.wg.Done()
	}
	al, async := c.s.local.(AsyncLocal)
	if !async {
		go func() { finish(c.s.serve(ctx, req, from)) }()
		return
	}
	ctx, fr, f := c.s.prepare(ctx, req, from)
	if f != nil {
		finish(nil, f)
		return
	}
	al.PredictAsync(ctx, fr, func(a Answer, err error) { finish(c.s.outcome(a, err)) })
}

// answer writes the answer of call id: resp, or f when it failed, by the
// call's deadline (zero: none; see write).
func (c *serverConn) answer(id uint64, resp *forwardpb.PredictResponse, f *failure) {
	var b []byte
	var err error
	if f != nil {
		b, err = appendFrame(frameFailure, id, &forwardpb.Failure{Kind: f.kind.String(), Code: uint32(f.code), Node: c.s.node, Message: f.msg}, maxAnswerBytes)
	} else {
		b, err = appendFrame(frameAnswer, id, resp, maxAnswerBytes) // a Client receives no more
	}
	if err != nil {
		b, _ = appendFrame(frameFailure, id, &forwardpb.Failure{Kind: servables.Execution.String(), Code: uint32(codes.Internal), Node: c.s.node,
			Message: "encoding the answer: " + err.Error()}, maxAnswerBytes)
	}
	_ = c.write(b)
}

// writeStall is the longest a peer may leave a frame the server writes
// untaken (its connection's buffers full) before the server gives up and
// closes the connection: its calls then fail Unavailable, and its node
// connects again. Answers are written by the goroutine that has them (the
// model actor's, on an AsyncLocal), which a stalled peer must hold no
// longer than this, whatever its calls' deadlines, nor GracefulStop
// forever. A peer that reads takes megabytes in that time.
const writeStall = time.Second

// write writes frame b, giving up after writeStall; a connection that
// cannot be written is closed, which ends its reader.
func (c *serverConn) write(b []byte) error {
	c.wmu.Lock()
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeStall))
	_, err := c.nc.Write(b)
	c.wmu.Unlock()
	if err != nil {
		_ = c.nc.Close()
	}
	return err
}

// goaway tells the client to send no new calls on the connection; the
// calls in flight are answered, and the connection ends goawayQuiet after
// the last of them if the client has not closed it by then.
func (c *serverConn) goaway() {
	c.mu.Lock()
	if c.goneWay {
		c.mu.Unlock()
		return
	}
	c.goneWay = true
	c.mu.Unlock()
	b, _ := appendFrame(frameGoaway, 0, nil, 0)
	if c.write(b) != nil {
		return
	}
	c.mu.Lock()
	c.quietIfIdle()
	c.mu.Unlock()
}

// quietIfIdle starts the quiet wait of a connection told goaway that has
// no call in flight; c.mu is held.
func (c *serverConn) quietIfIdle() {
	if c.goneWay && len(c.calls) == 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(goawayQuiet))
	}
}

// stillBusy reports, when the quiet deadline ended a wait for a frame,
// whether calls are in flight again (they arrived meanwhile): the reader
// then waits on, with no deadline until the last of them ends.
func (c *serverConn) stillBusy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.calls) == 0 {
		return false
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	return true
}

// offerALPN returns c offering the framed transport's ALPN first, before
// the protocols it offers (gRPC's "h2"); nil for nil.
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
