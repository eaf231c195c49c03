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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/grpcserver"
)

// poolOf is c's pool of connections to addr; the test fails if it has none.
func poolOf(t testing.TB, c *Client, addr string) *pool {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	pl := c.pools[addr]
	if pl == nil {
		t.Fatalf("the Client has no connections to %s", addr)
	}
	return pl
}

// framedConns is the number of framed connections s serves now.
func framedConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// startGRPCOnly serves node name on gRPC alone: its Server's Forward
// service registered on a plain grpcserver, served on its own listener,
// not through Server.Serve's mux. tlsc nil serves plaintext to
// unauthenticated peers; otherwise mTLS, the Server's tap admitting
// members.
func startGRPCOnly(t *testing.T, name string, fn func(context.Context, ForwardedRequest) (Answer, error), tlsc *tls.Config) *started {
	t.Helper()
	n := &node{name: name, fn: fn}
	srv, err := NewServer(n, ServerOptions{Node: name, TLS: tlsc, AllowUnauthenticatedPeers: tlsc == nil})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpcserver.New(grpcserver.Options{TLS: tlsc, RequireClientCert: tlsc != nil, InTapHandle: srv.tap})
	forwardpb.RegisterForwardServer(gs, srv)
	return serveLoopback(t, n, srv, gs.Serve, gs.Stop)
}

// TestNoGRPCFallback: a Client speaks the framed transport only: a peer
// that serves gRPC alone fails every call Unavailable, saying why, and
// runs nothing.
func TestNoGRPCFallback(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name   string
		server *tls.Config
		client *Client
		want   string
	}{
		{"plaintext", nil, nil, "does not speak the framed transport"},
		{"mTLS", p.serverTLS(t, "old"), p.client(t, "a", ClientOptions{}), "no application protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := startGRPCOnly(t, "old", compute, tc.server)
			c := tc.client
			if c == nil {
				c = NewClient(ClientOptions{})
				defer c.Close()
			}
			_, err := c.Forward(testCtx(t), []Peer{old.peer}, sumRequest(t))
			if k := servables.KindOf(err); k != servables.Unavailable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("a call to a gRPC-only peer: %v (kind %v), want unavailable saying %q", err, k, tc.want)
			}
			if n := old.node.calls.Load(); n != 0 {
				t.Fatalf("the gRPC-only node ran %d requests", n)
			}
		})
	}
}

// TestDroppedConnection: a peer that drops a new connection after the
// client's preface (a node stopping or dying) fails the call
// Unavailable, so that the router tries another replica.
func TestDroppedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() { _ = ln.Close() }()
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.ReadFull(nc, make([]byte, prefaceLen))
			_ = nc.Close()
		}
	})
	c := NewClient(ClientOptions{})
	defer c.Close()
	peer := Peer{Name: "dying", Addr: ln.Addr().String()}
	_, err = c.Forward(testCtx(t), []Peer{peer}, sumRequest(t))
	if k := servables.KindOf(err); k != servables.Unavailable || !strings.Contains(err.Error(), "opening the framed transport") {
		t.Fatalf("a peer that drops the connection: %v (kind %v), want unavailable", err, k)
	}
}

// holder is a Local that computes, except for requests whose configs
// name a "hold" key: those are announced on entered, then wait for
// release(key) (or their context) before computing.
type holder struct {
	entered chan string
	mu      sync.Mutex
	gates   map[string]chan struct{}
}

func newHolder() *holder {
	return &holder{entered: make(chan string), gates: map[string]chan struct{}{}}
}

func (h *holder) gate(key string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[key]
	if g == nil {
		g = make(chan struct{})
		h.gates[key] = g
	}
	return g
}

func (h *holder) local(ctx context.Context, req ForwardedRequest) (Answer, error) {
	if key := req.Configs["hold"]; key != "" {
		g := h.gate(key)
		h.entered <- key
		select {
		case <-g:
		case <-ctx.Done():
			return Answer{}, ctx.Err()
		}
	}
	return compute(ctx, req)
}

// release lets the request held as key go on.
func (h *holder) release(key string) { close(h.gate(key)) }

// held waits until the request held as key has reached the Local.
func (h *holder) held(t testing.TB, ctx context.Context, key string) {
	t.Helper()
	if got := await(t, ctx, h.entered, "request "+key+" to reach the Local"); got != key {
		t.Fatalf("request %s reached the Local, want %s", got, key)
	}
}

// heldRequest is sumRequest held by a holder as key.
func heldRequest(t testing.TB, key string) Request {
	r := sumRequest(t)
	r.Configs = map[string]string{"hold": key}
	return r
}

// result is the outcome of a Forward run on a goroutine.
type result struct {
	a   Answer
	err error
}

// forwardAsync runs c.Forward on a goroutine; its outcome arrives on the
// channel returned.
func forwardAsync(ctx context.Context, c *Client, peers []Peer, req Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		a, err := c.Forward(ctx, peers, req)
		ch <- result{a, err}
	}()
	return ch
}

// await receives from ch, failing the test when ctx ends first.
func await[T any](t testing.TB, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestBothTransportsOnePort: the peer port serves gRPC (grpcurl, a
// probe) and the framed transport side by side.
func TestBothTransportsOnePort(t *testing.T) {
	p := newPKI(t)
	h := newHolder()
	b := p.start(t, "b", h.local, "a", "b")
	ctx := testCtx(t)

	cc, err := grpc.NewClient(b.peer.Addr, grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t, "a"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	req := sumRequest(t)
	resp, err := forwardpb.NewForwardClient(cc).Predict(ctx, encodeRequest(&req))
	if err != nil {
		t.Fatalf("gRPC Predict on the peer port: %v", err)
	}
	a, err := decodeAnswer(resp)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "b")
	b.node.mu.Lock()
	if b.node.last.Peer != "a" {
		t.Errorf("gRPC call from peer %q, want a", b.node.last.Peer)
	}
	b.node.mu.Unlock()
	hc, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health on the peer port: %v, %v", hc, err)
	}
	if n := framedConns(b.srv); n != 0 {
		t.Fatalf("%d framed connections after gRPC calls only", n)
	}

	// A Client's call on the same port goes over the framed transport:
	// while it is held, the server has a framed connection.
	c := p.client(t, "a", ClientOptions{})
	res := forwardAsync(ctx, c, []Peer{b.peer}, heldRequest(t, "framed"))
	h.held(t, ctx, "framed")
	if n := framedConns(b.srv); n != 1 {
		t.Fatalf("%d framed connections during a Client's call, want 1", n)
	}
	h.release("framed")
	r := await(t, ctx, res, "the framed call's answer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkSums(t, r.a, "b")
	// gRPC still answers beside the framed connection.
	if _, err := forwardpb.NewForwardClient(cc).Predict(ctx, encodeRequest(&req)); err != nil {
		t.Fatalf("gRPC Predict beside a framed connection: %v", err)
	}
}

// goawayWatch is a listener whose connections report, on goaway, when a
// goaway frame has been written to them (plaintext only).
type goawayWatch struct {
	net.Listener
	goaway chan struct{}
	once   sync.Once
}

func (l *goawayWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &goawayConn{Conn: c, l: l}, nil
}

type goawayConn struct {
	net.Conn
	l *goawayWatch
}

func (c *goawayConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if len(b) == frameHeaderLen && b[4] == frameGoaway && err == nil {
		c.l.once.Do(func() { close(c.l.goaway) })
	}
	return n, err
}

// TestGracefulStop: a server stopping gracefully answers the calls in
// flight, tells its clients goaway so that their new calls go elsewhere,
// and returns once the calls are answered.
func TestGracefulStop(t *testing.T) {
	ctx := testCtx(t)
	h := newHolder()
	n := &node{name: "b", fn: h.local}
	srv, err := NewServer(n, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	watch := &goawayWatch{Listener: ln, goaway: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(watch) }()
	t.Cleanup(srv.Stop)
	b := Peer{Name: "b", Addr: ln.Addr().String()}
	hd := newHolder()
	d := start(t, "d", hd.local, ServerOptions{AllowUnauthenticatedPeers: true})

	// Rand 0: of b and d, b is drawn first and taken unless d has fewer
	// requests in flight (Pick).
	c := NewClient(ClientOptions{Rand: func(int) int { return 0 }})
	defer c.Close()
	first := forwardAsync(ctx, c, []Peer{b}, heldRequest(t, "first"))
	h.held(t, ctx, "first")
	second := forwardAsync(ctx, c, []Peer{b}, heldRequest(t, "second"))
	h.held(t, ctx, "second")

	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	await(t, ctx, watch.goaway, "b to write goaway")
	// The second call's answer follows the goaway on the connection: once
	// the Client has it, it has read the goaway.
	h.release("second")
	r := await(t, ctx, second, "the second call's answer")
	if r.err != nil {
		t.Fatalf("a call in flight when GracefulStop began: %v", r.err)
	}
	checkSums(t, r.a, "b")

	// New calls do not reach b: alone, b is Unavailable; with d, d
	// answers (d holding a request too, b and d tie and b is tried first).
	_, err = c.Forward(ctx, []Peer{b}, sumRequest(t))
	if k := servables.KindOf(err); k != servables.Unavailable {
		t.Fatalf("a call to b after its goaway: %v (kind %v), want unavailable", err, k)
	}
	onD := forwardAsync(ctx, c, []Peer{d.peer}, heldRequest(t, "on d"))
	hd.held(t, ctx, "on d")
	if lb, ld := c.InFlight(b.Addr), c.InFlight(d.peer.Addr); lb != ld {
		t.Fatalf("in flight: %d to b, %d to d, want a tie", lb, ld)
	}
	a, err := c.Forward(ctx, []Peer{b, d.peer}, sumRequest(t))
	if err != nil {
		t.Fatalf("a call to b or d after b's goaway: %v", err)
	}
	checkSums(t, a, "d")
	hd.release("on d")
	if r := await(t, ctx, onD, "d's held call"); r.err != nil {
		t.Fatal(r.err)
	}
	if got := n.calls.Load(); got != 2 {
		t.Fatalf("b ran %d calls, want the 2 sent before its goaway", got)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}

	h.release("first")
	r = await(t, ctx, first, "the first call's answer")
	if r.err != nil {
		t.Fatalf("a call in flight when GracefulStop began: %v", r.err)
	}
	checkSums(t, r.a, "b")
	await(t, ctx, stopped, "GracefulStop to return after the last call was answered")
	if err := await(t, ctx, served, "Serve to return"); err != nil {
		t.Fatalf("Serve returned %v after GracefulStop, want nil", err)
	}
}

// TestCancel: a caller that gives up cancels the call on the serving
// node, and gets a Canceled error at once.
func TestCancel(t *testing.T) {
	p := newPKI(t)
	entered := make(chan struct{})
	ended := make(chan error, 1)
	b := p.start(t, "b", func(ctx context.Context, _ ForwardedRequest) (Answer, error) {
		close(entered)
		<-ctx.Done()
		ended <- ctx.Err()
		return Answer{}, ctx.Err()
	})
	c := p.client(t, "a", ClientOptions{})
	bound := testCtx(t)
	// The call's own deadline is far beyond the test's bound: only the
	// cancellation can end the server's context in time.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := forwardAsync(ctx, c, []Peer{b.peer}, sumRequest(t))
	await(t, bound, entered, "the call to reach b")
	cancel()
	cancelled := time.Now()
	r := await(t, bound, res, "the cancelled call to return")
	if el := time.Since(cancelled); el > time.Second {
		t.Errorf("the cancelled call returned %v after its cancellation", el)
	}
	if k := servables.KindOf(r.err); k != servables.Canceled {
		t.Fatalf("a cancelled call: %v (kind %v), want canceled", r.err, k)
	}
	if err := await(t, bound, ended, "the server's context to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the server's context ended with %v, want context.Canceled", err)
	}
}

// rawConn is a plaintext framed connection the test writes frame by
// frame and reads message by message (m, over r); every read and write is
// bounded by a 10 s deadline.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
	m  *messageReader
}

// newRawConn is a rawConn on nc, its preface not yet exchanged.
func newRawConn(t testing.TB, nc net.Conn) *rawConn {
	r := bufio.NewReader(nc)
	return &rawConn{t: t, nc: nc, r: r, m: &messageReader{r: r}}
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	return dialRawTLS(t, addr, nil)
}

// dialRawTLS is dialRaw over TLS with cfg (offering the framed
// transport's ALPN); nil: plaintext.
func dialRawTLS(t testing.TB, addr string, cfg *tls.Config) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{ALPN}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != ALPN {
			t.Fatalf("TLS handshake: %v, protocol %q", err, tc.ConnectionState().NegotiatedProtocol)
		}
		nc = tc
	}
	c := newRawConn(t, nc)
	c.write(prefaceOf(protocolVersion))
	got := make([]byte, prefaceLen)
	if _, err := io.ReadFull(c.r, got); err != nil || !bytes.Equal(got, prefaceOf(protocolVersion)) {
		t.Fatalf("the server's preface: %q, %v", got, err)
	}
	return c
}

// write writes b; a failure is reported (Errorf: fake peers write from
// goroutines of their own) and the reads that follow fail.
func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Errorf("writing to the peer: %v", err)
	}
}

// frame is a frame's bytes: a header of type typ, call id and payload's
// length, then payload.
func frame(typ byte, id uint64, payload []byte) []byte {
	b := make([]byte, frameHeaderLen, frameHeaderLen+len(payload))
	putFrameHeader(b, frameHeader{length: uint32(len(payload)), typ: typ, id: id})
	return append(b, payload...)
}

// chunkHead is the head frame of a chunked message of type typ for call
// id saying n bytes.
func chunkHead(typ byte, id uint64, n uint64) []byte {
	var b [headLen]byte
	binary.BigEndian.PutUint64(b[:], n)
	return frame(typ|frameChunked, id, b[:])
}

// chunked is payload as a chunked message of type typ for call id: its
// head frame, then data frames of at most chunk bytes.
func chunked(typ byte, id uint64, payload []byte, chunk int) []byte {
	b := chunkHead(typ, id, uint64(len(payload)))
	for len(payload) > 0 {
		k := min(chunk, len(payload))
		b = append(b, frame(frameData, id, payload[:k])...)
		payload = payload[k:]
	}
	return b
}

// message is payload as a message of type typ for call id, as a node
// writes it: one frame, or chunked when longer than maxFrameLen.
func message(typ byte, id uint64, payload []byte) []byte {
	if len(payload) > maxFrameLen {
		return chunked(typ, id, payload, maxFrameLen)
	}
	return frame(typ, id, payload)
}

// callPayload is the payload of a Call frame carrying req, with a 10 s
// timeout.
func callPayload(t testing.TB, req Request) []byte {
	t.Helper()
	b, err := proto.Marshal(&forwardpb.Call{Request: encodeRequest(&req), TimeoutNanos: int64(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// next reads the next message, whole or chunked.
func (c *rawConn) next() (frameHeader, []byte) {
	c.t.Helper()
	h, b, err := c.m.next()
	if err != nil {
		c.t.Fatalf("reading a message: %v", err)
	}
	return h, b
}

// answer reads the answer of call id.
func (c *rawConn) answer(id uint64) Answer {
	c.t.Helper()
	h, b := c.next()
	if h.typ != frameAnswer || h.id != id {
		c.t.Fatalf("frame type %d for call %d, want an answer (%d) for call %d: %q", h.typ, h.id, frameAnswer, id, b)
	}
	var m forwardpb.PredictResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		c.t.Fatal(err)
	}
	a, err := decodeAnswer(&m)
	if err != nil {
		c.t.Fatal(err)
	}
	return a
}

// failure reads the Failure of call id.
func (c *rawConn) failure(id uint64) *forwardpb.Failure {
	c.t.Helper()
	h, b := c.next()
	if h.typ != frameFailure || h.id != id {
		c.t.Fatalf("frame type %d for call %d, want a failure (%d) for call %d", h.typ, h.id, frameFailure, id)
	}
	var f forwardpb.Failure
	if err := proto.Unmarshal(b, &f); err != nil {
		c.t.Fatal(err)
	}
	return &f
}

// closedByServer checks that the server closes the connection, sending
// nothing more.
func (c *rawConn) closedByServer() {
	c.t.Helper()
	b, err := io.ReadAll(c.r)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		c.t.Fatalf("the server did not close the connection: %v", err)
	}
	if len(b) != 0 {
		c.t.Fatalf("the server sent %q before closing", b)
	}
}

// checkFailure checks that f is a failure of kind with code, its message
// containing msg, from node.
func checkFailure(t testing.TB, f *forwardpb.Failure, kind servables.Kind, code codes.Code, msg, node string) {
	t.Helper()
	if f.GetKind() != kind.String() || codes.Code(f.GetCode()) != code || !strings.Contains(f.GetMessage(), msg) || f.GetNode() != node {
		t.Fatalf("failure %v, want kind %v, code %v, node %s, a message containing %q", f, kind, code, node, msg)
	}
}

// TestServerProtocolAbuse feeds a framed server's connections with what
// a broken or hostile peer could send: the server answers what it can
// attribute to a call, closes connections it cannot trust, and keeps
// serving every other connection.
func TestServerProtocolAbuse(t *testing.T) {
	const maxMsg = 64 << 10
	h := newHolder()
	s := start(t, "b", h.local, ServerOptions{AllowUnauthenticatedPeers: true, MaxMessageBytes: maxMsg})
	// other is a connection opened before the abuse, checked after each case.
	other := dialRaw(t, s.peer.Addr)
	var otherID atomic.Uint64
	stillServes := func(t *testing.T) {
		t.Helper()
		other.t = t
		id := otherID.Add(1)
		other.write(frame(frameCall, id, callPayload(t, sumRequest(t))))
		checkSums(t, other.answer(id), "b")
	}
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, c *rawConn)
	}{
		{"garbage after the preface", func(t *testing.T, c *rawConn) {
			c.write([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"))
			c.closedByServer()
		}},
		{"unknown frame type", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(1), "b")
			c.write(frame(42, 2, []byte("x")))
			c.closedByServer()
		}},
		{"an answer frame from the client", func(t *testing.T, c *rawConn) {
			c.write(frame(frameAnswer, 1, nil))
			c.closedByServer()
		}},
		{"a call over MaxMessageBytes", func(t *testing.T, c *rawConn) {
			// Refused at its head: the failure comes before its data is
			// sent, which the server then skips.
			c.write(chunkHead(frameCall, 1, maxMsg+callOverhead+1))
			checkFailure(t, c.failure(1), servables.InvalidInput, codes.ResourceExhausted, "max_body_bytes", "b")
			c.write(chunked(frameCall, 1, make([]byte, maxMsg+callOverhead+1), maxFrameLen)[frameHeaderLen+headLen:])
			c.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(2), "b")
		}},
		{"a request just over MaxMessageBytes", func(t *testing.T, c *rawConn) {
			// The Call's own fields are few bytes: its length is within
			// what the server reads before deciding, its request is not.
			req := sumRequest(t)
			req.Inputs = []servables.Tensor{f32(t, "x", []int64{1, maxMsg / 4}, make([]float32, maxMsg/4)...)}
			b := callPayload(t, req)
			if n := proto.Size(encodeRequest(&req)); n <= maxMsg || len(b) > maxMsg+callOverhead {
				t.Fatalf("a request of %d bytes in a call of %d: not just over %d", n, len(b), maxMsg)
			}
			before := s.node.calls.Load()
			c.write(message(frameCall, 1, b))
			checkFailure(t, c.failure(1), servables.InvalidInput, codes.ResourceExhausted, "max_body_bytes", "b")
			if n := s.node.calls.Load() - before; n != 0 {
				t.Fatalf("the Local ran a request over MaxMessageBytes")
			}
			c.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(2), "b")
		}},
		{"a frame over maxFrameLen", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCall, 1, make([]byte, maxFrameLen+1)))
			c.closedByServer()
		}},
		{"a data frame with no chunked call arriving", func(t *testing.T, c *rawConn) {
			c.write(frame(frameData, 1, []byte("x")))
			c.closedByServer()
		}},
		{"a data frame for another call than the one arriving", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen+100))
			c.write(frame(frameData, 2, []byte("x")))
			c.closedByServer()
		}},
		{"a chunked call beginning while another arrives", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen+100))
			c.write(frame(frameData, 1, make([]byte, 10)))
			c.write(chunkHead(frameCall, 2, maxFrameLen+100))
			c.closedByServer()
		}},
		{"a whole call with the id of the chunked one arriving", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen+100))
			c.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			c.closedByServer()
		}},
		{"data past the end of the message", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen+1))
			c.write(frame(frameData, 1, make([]byte, maxFrameLen)))
			c.write(frame(frameData, 1, make([]byte, 2)))
			c.closedByServer()
		}},
		{"an empty data frame", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen+100))
			c.write(frame(frameData, 1, nil))
			c.closedByServer()
		}},
		{"a head of the wrong length", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCall|frameChunked, 1, []byte{0, 0, 0, 1}))
			c.closedByServer()
		}},
		{"a head of a message that fits a frame", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, maxFrameLen))
			c.closedByServer()
		}},
		{"a head claiming 2^63 bytes", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameCall, 1, 1<<63))
			c.closedByServer()
		}},
		{"a chunked answer from the client", func(t *testing.T, c *rawConn) {
			c.write(chunkHead(frameAnswer, 1, maxFrameLen+100))
			c.closedByServer()
		}},
		{"a truncated frame, then EOF", func(t *testing.T, c *rawConn) {
			b := frame(frameCall, 1, callPayload(t, sumRequest(t)))
			c.write(b[:len(b)-5])
			_ = c.nc.(*net.TCPConn).CloseWrite()
			c.closedByServer()
		}},
		{"a truncated header, then EOF", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCall, 1, nil)[:7])
			_ = c.nc.(*net.TCPConn).CloseWrite()
			c.closedByServer()
		}},
		{"a malformed call", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCall, 1, []byte{0xff, 0xff, 0xff, 0xff}))
			checkFailure(t, c.failure(1), servables.InvalidInput, codes.InvalidArgument, "malformed call", "b")
			c.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(2), "b")
		}},
		{"a call whose request is invalid", func(t *testing.T, c *rawConn) {
			req := sumRequest(t)
			m := encodeRequest(&req)
			m.Inputs[0].Shape = []int64{7, 7} // 49 floats, 6 sent
			b, err := proto.Marshal(&forwardpb.Call{Request: m, TimeoutNanos: int64(10 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			c.write(frame(frameCall, 1, b))
			checkFailure(t, c.failure(1), servables.InvalidInput, codes.InvalidArgument, `input 0 ("x")`, "b")
		}},
		{"a duplicate call id in flight", func(t *testing.T, c *rawConn) {
			ctx := testCtx(t)
			before := s.node.calls.Load()
			c.write(frame(frameCall, 7, callPayload(t, heldRequest(t, "7"))))
			h.held(t, ctx, "7")
			c.write(frame(frameCall, 7, callPayload(t, sumRequest(t))))
			checkFailure(t, c.failure(7), servables.InvalidInput, codes.InvalidArgument, "already in flight", "b")
			h.release("7")
			checkSums(t, c.answer(7), "b")
			if n := s.node.calls.Load() - before; n != 1 {
				t.Fatalf("the Local ran %d calls, want the first call 7 only", n)
			}
			// Its id free again, 7 can be used anew.
			c.write(frame(frameCall, 7, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(7), "b")
		}},
		{"a cancel for no call", func(t *testing.T, c *rawConn) {
			c.write(frame(frameCancel, 99, []byte("ignored")))
			c.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			checkSums(t, c.answer(1), "b")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do(t, dialRaw(t, s.peer.Addr))
			stillServes(t)
		})
	}
	// No connection is left hanging: a graceful stop ends them all.
	stopped := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(stopped)
	}()
	await(t, testCtx(t), stopped, "GracefulStop")
}

// TestAdmittedBeforeTheMessage: as over gRPC (grpcserver's tap), a
// peer's certificate is checked before its call's message is read: a
// node that is no member is refused on the frame's header (a chunked
// call's head), its payload skipped unread, so it cannot make the server
// buffer large messages.
func TestAdmittedBeforeTheMessage(t *testing.T) {
	p := newPKI(t)
	b := p.start(t, "b", compute, "a", "b")
	c := dialRawTLS(t, b.peer.Addr, p.clientTLS(t, "mallory"))
	payload := callPayload(t, sumRequest(t))
	hdr := frame(frameCall, 1, payload)[:frameHeaderLen]
	c.write(hdr) // the header alone: the payload is not sent yet
	checkFailure(t, c.failure(1), servables.Unavailable, codes.PermissionDenied, `"mallory" names no member`, "b")
	c.write(payload)
	c.write(frame(frameCall, 2, payload))
	checkFailure(t, c.failure(2), servables.Unavailable, codes.PermissionDenied, `"mallory" names no member`, "b")
	long := chunked(frameCall, 3, callPayload(t, bigRequest(t, 4<<20)), maxFrameLen)
	c.write(long[:frameHeaderLen+headLen]) // the head alone
	checkFailure(t, c.failure(3), servables.Unavailable, codes.PermissionDenied, `"mallory" names no member`, "b")
	c.write(long[frameHeaderLen+headLen:])
	c.write(frame(frameCall, 4, payload))
	checkFailure(t, c.failure(4), servables.Unavailable, codes.PermissionDenied, `"mallory" names no member`, "b")
	if n := b.node.calls.Load(); n != 0 {
		t.Fatalf("the Local ran %d calls of a non-member", n)
	}
	// A member on the same port is served.
	a := dialRawTLS(t, b.peer.Addr, p.clientTLS(t, "a"))
	a.write(frame(frameCall, 1, payload))
	checkSums(t, a.answer(1), "b")
}

// fakePeer is a framed server the test writes byte by byte: each
// connection it accepts gets the preface exchange, then handle, given
// the connection's number (from 0).
func fakePeer(t *testing.T, handle func(t *testing.T, n int, c *rawConn)) Peer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer func() { _ = nc.Close() }()
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				c := newRawConn(t, nc)
				got := make([]byte, prefaceLen)
				if _, err := io.ReadFull(c.r, got); err != nil || !bytes.Equal(got, prefaceOf(protocolVersion)) {
					t.Errorf("the client's preface: %q, %v", got, err)
					return
				}
				if _, err := nc.Write(prefaceOf(protocolVersion)); err != nil {
					t.Error(err)
					return
				}
				handle(t, n, c)
			})
		}
	})
	return Peer{Name: "fake", Addr: ln.Addr().String()}
}

// readCall reads the next message, which must be a Call, whole or
// chunked, and returns its id and request; false at EOF (the client
// closed the connection) or after reporting what was wrong.
func (c *rawConn) readCall() (uint64, *forwardpb.Call, bool) {
	h, b, err := c.m.next()
	if err == io.EOF {
		return 0, nil, false
	}
	if err != nil || h.typ != frameCall {
		c.t.Errorf("frame type %d (%v), want a call", h.typ, err)
		return 0, nil, false
	}
	var m forwardpb.Call
	if err := proto.Unmarshal(b, &m); err != nil {
		c.t.Error(err)
		return 0, nil, false
	}
	return h.id, &m, true
}

// answerBytes is the answer to call: compute of its request, or checksum
// "wrong" when wrong, from node "fake".
func answerBytes(t testing.TB, call *forwardpb.Call, wrong bool) []byte {
	req, err := decodeRequest(call.GetRequest(), time.Now())
	if err != nil {
		t.Error(err)
	}
	a, err := compute(context.Background(), ForwardedRequest{Request: req})
	if err != nil {
		t.Error(err)
	}
	if wrong {
		a.Checksum = "wrong"
	}
	b, err := proto.Marshal(encodeAnswer(&a, "fake"))
	if err != nil {
		t.Error(err)
	}
	return b
}

// answerFrame is answerBytes as the frames of call id's answer (chunked
// when long).
func answerFrame(t testing.TB, id uint64, call *forwardpb.Call, wrong bool) []byte {
	return message(frameAnswer, id, answerBytes(t, call, wrong))
}

// TestClientRobustness: a Client facing a server that breaks the framed
// protocol fails the calls concerned with a clear kind, never panics or
// hangs.
func TestClientRobustness(t *testing.T) {
	// failsWith checks a failure of kind saying what.
	failsWith := func(kind servables.Kind, what string) func(*testing.T, Answer, error) {
		return func(t *testing.T, _ Answer, err error) {
			t.Helper()
			if k := servables.KindOf(err); err == nil || k != kind || !strings.Contains(err.Error(), what) {
				t.Fatalf("%v (kind %v), want %v saying %q", err, k, kind, what)
			}
		}
	}
	for _, tc := range []struct {
		name string
		// reply is what the fake peer writes after the call (id); nil: it
		// closes the connection.
		reply func(t *testing.T, id uint64, call *forwardpb.Call) []byte
		check func(t *testing.T, a Answer, err error)
	}{
		{"an answer for an unknown call", func(t *testing.T, id uint64, call *forwardpb.Call) []byte {
			return concat(answerFrame(t, id+100, call, true), answerFrame(t, id, call, false))
		}, func(t *testing.T, a Answer, err error) {
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, a, "fake")
		}},
		{"a malformed answer", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return frame(frameAnswer, id, []byte{0x1a, 0xff, 0xff}) // outputs: a length past the end
		}, failsWith(servables.Execution, "malformed answer")},
		{"a malformed failure", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return frame(frameFailure, id, []byte{0x0a, 0x05, 'x'})
		}, failsWith(servables.Execution, "malformed failure")},
		{"a failure without kind or code", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return frame(frameFailure, id, nil)
		}, failsWith(servables.Execution, "malformed failure")},
		{"an unknown frame type", func(_ *testing.T, _ uint64, _ *forwardpb.Call) []byte {
			return frame(42, 0, nil)
		}, failsWith(servables.Unavailable, "frame type 42")},
		{"a frame over maxFrameLen", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			b := make([]byte, frameHeaderLen)
			putFrameHeader(b, frameHeader{length: maxFrameLen + 1, typ: frameAnswer, id: id})
			return b
		}, failsWith(servables.Unavailable, "more than the 65536 bytes a frame carries")},
		{"an answer over the limit", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return chunkHead(frameAnswer, id, maxAnswerBytes+1)
		}, failsWith(servables.Unavailable, "more than the 2147483647 bytes allowed")},
		{"a chunked failure", func(t *testing.T, id uint64, _ *forwardpb.Call) []byte {
			f := mustMarshal(t, &forwardpb.Failure{Kind: servables.NotFound.String(), Code: uint32(codes.NotFound), Node: "fake", Message: "no model " + strings.Repeat("m", 2*maxFrameLen)})
			return chunked(frameFailure, id, f, maxFrameLen)
		}, failsWith(servables.NotFound, "no model mmm")},
		{"a data frame with no chunked answer arriving", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return frame(frameData, id, []byte("x"))
		}, failsWith(servables.Unavailable, "no chunked answer arriving")},
		{"a chunked answer beginning while another arrives", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return concat(chunkHead(frameAnswer, id+1, maxFrameLen+1), frame(frameData, id+1, []byte("x")), chunkHead(frameAnswer, id, maxFrameLen+1))
		}, failsWith(servables.Unavailable, "begins while")},
		{"data past the end of the answer", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return concat(chunkHead(frameAnswer, id, maxFrameLen+1), frame(frameData, id, make([]byte, maxFrameLen+1)))
		}, failsWith(servables.Unavailable, "more than the 65536 bytes")},
		{"data past the end of the answer, in two frames", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return concat(chunkHead(frameAnswer, id, maxFrameLen+1), frame(frameData, id, make([]byte, maxFrameLen)), frame(frameData, id, make([]byte, 2)))
		}, failsWith(servables.Unavailable, "data past the end")},
		{"an empty data frame", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return concat(chunkHead(frameAnswer, id, maxFrameLen+1), frame(frameData, id, nil))
		}, failsWith(servables.Unavailable, "an empty data frame")},
		{"a whole answer for the call whose chunked answer arrives", func(t *testing.T, id uint64, call *forwardpb.Call) []byte {
			return concat(chunkHead(frameAnswer, id, maxFrameLen+1), answerFrame(t, id, call, false))
		}, failsWith(servables.Unavailable, "whose chunked answer is arriving")},
		{"a head of a message that fits a frame", func(_ *testing.T, id uint64, _ *forwardpb.Call) []byte {
			return chunkHead(frameAnswer, id, maxFrameLen)
		}, failsWith(servables.Unavailable, "want more than a frame's 65536")},
		{"the connection ends", nil, failsWith(servables.Unavailable, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
				id, call, ok := c.readCall()
				if !ok || tc.reply == nil {
					return
				}
				c.write(tc.reply(t, id, call))
				_, _ = io.Copy(io.Discard, c.r) // until the Client closes
			})
			c := NewClient(ClientOptions{})
			defer c.Close()
			a, err := c.Forward(testCtx(t), []Peer{fake}, sumRequest(t))
			tc.check(t, a, err)
		})
	}
	// Chunked answers in data frames of any size a frame takes, with other
	// frames between them, are put together.
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T, id uint64, call *forwardpb.Call) []byte
	}{
		{"a chunked answer in data frames of 1000 bytes", func(t *testing.T, id uint64, call *forwardpb.Call) []byte {
			return chunked(frameAnswer, id, answerBytes(t, call, false), 1000)
		}},
		{"a chunked answer with other frames between its chunks", func(t *testing.T, id uint64, call *forwardpb.Call) []byte {
			frames := chunked(frameAnswer, id, answerBytes(t, call, false), maxFrameLen)
			cut := frameHeaderLen + headLen + frameHeaderLen + maxFrameLen
			other := chunked(frameAnswer, id+100, answerBytes(t, call, true), maxFrameLen)
			return concat(frames[:cut], frame(frameAnswer, id+50, mustMarshal(t, encodeAnswer(&Answer{Checksum: "other"}, "fake"))), frame(frameGoaway, 0, nil), frames[cut:], other)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
				id, call, ok := c.readCall()
				if !ok {
					return
				}
				c.write(tc.reply(t, id, call))
				_, _ = io.Copy(io.Discard, c.r)
			})
			c := NewClient(ClientOptions{})
			defer c.Close()
			a, err := c.Forward(testCtx(t), []Peer{fake}, bigRequest(t, 200<<10))
			if err != nil {
				t.Fatal(err)
			}
			checkBig(t, a, 200<<10)
		})
	}
	t.Run("goaway", func(t *testing.T) {
		var calls [2]atomic.Int64 // by connection
		closed := make(chan struct{})
		fake := fakePeer(t, func(t *testing.T, n int, c *rawConn) {
			for {
				id, call, ok := c.readCall()
				if !ok {
					return
				}
				calls[min(n, 1)].Add(1)
				if n == 0 {
					// goaway before the answer: the Client has read it once
					// it has the answer.
					c.write(frame(frameGoaway, 0, nil))
					c.write(answerFrame(t, id, call, false))
					// Its last call answered, the Client closes the connection.
					if _, err := c.r.ReadByte(); err != io.EOF {
						t.Errorf("after goaway and the last answer, the client's connection gave %v, want EOF", err)
					}
					close(closed)
					return
				}
				c.write(answerFrame(t, id, call, false))
			}
		})
		c := NewClient(ClientOptions{})
		defer c.Close()
		ctx := testCtx(t)
		for i := range 3 {
			a, err := c.Forward(ctx, []Peer{fake}, sumRequest(t))
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			checkSums(t, a, "fake")
		}
		if c0, c1 := calls[0].Load(), calls[1].Load(); c0 != 1 || c1 != 2 {
			t.Fatalf("calls by connection: %d then %d, want 1 on the first (which said goaway) and 2 on a new one", c0, c1)
		}
		await(t, ctx, closed, "the Client to close the connection that said goaway")
	})
}

// TestFramedTrace: a framed call continues the forwarding node's trace,
// in a server span named as the gRPC method's, with the request id.
func TestFramedTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var local atomic.Value // the span context the Local's ctx carries
	b := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		local.Store(trace.SpanContextFromContext(ctx))
		return compute(ctx, req)
	}, ServerOptions{AllowUnauthenticatedPeers: true, TracerProvider: tp})

	callerTP := sdktrace.NewTracerProvider()
	defer func() { _ = callerTP.Shutdown(context.Background()) }()
	ctx, caller := callerTP.Tracer("test").Start(testCtx(t), "caller")
	c := NewClient(ClientOptions{})
	defer c.Close()
	a, err := c.Forward(ctx, []Peer{b.peer}, sumRequest(t))
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "b")
	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "grove.cluster.v1.Forward/Predict" {
			spans = append(spans, s)
		}
	}
	if len(spans) != 1 {
		t.Fatalf("%d server spans named grove.cluster.v1.Forward/Predict among %d, want 1", len(spans), len(rec.Ended()))
	}
	s := spans[0]
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span kind %v, want server", s.SpanKind())
	}
	if s.Parent().SpanID() != caller.SpanContext().SpanID() || s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
		t.Errorf("the server span (trace %v, parent %v) is not a child of the caller's span (trace %v, span %v)",
			s.SpanContext().TraceID(), s.Parent().SpanID(), caller.SpanContext().TraceID(), caller.SpanContext().SpanID())
	}
	var rid string
	for _, kv := range s.Attributes() {
		if kv.Key == tracing.AttrRequestID {
			rid = kv.Value.AsString()
		}
	}
	if rid != "req-1" {
		t.Errorf("request id attribute %q, want req-1 (%v)", rid, s.Attributes())
	}
	if sc, _ := local.Load().(trace.SpanContext); sc.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("the Local's context carries span %v, want the server span %v", sc.SpanID(), s.SpanContext().SpanID())
	}
}

// TestEncodeMessage: a message is encoded whole in one frame when it fits
// one, else as a head frame and data frames of at most the chunk size,
// each write one frame (the first: the head and the first data frame),
// which put back together give the message; one longer than the limit is
// refused when it is encoded, not sent with a length its reader refuses.
func TestEncodeMessage(t *testing.T) {
	for _, tc := range []struct{ data, chunk int }{
		{0, 16}, {13, 16}, {14, 16}, {15, 16}, {29, 16}, {30, 16}, {1000, 16}, {1000, headLen}, {3*maxFrameLen + 7, maxFrameLen},
	} {
		m := &forwardpb.Tensor{Data: make([]byte, tc.data)} // proto.Size: the data, and 2 or more bytes of tag and length
		for i := range m.Data {
			m.Data[i] = byte(i % 251)
		}
		want := mustMarshal(t, m)
		n := len(want)
		t.Run(fmt.Sprintf("%d bytes, chunks of %d", n, tc.chunk), func(t *testing.T) {
			out, err := encodeMessage(frameFailure, m, n, tc.chunk)
			if err != nil {
				t.Fatal(err)
			}
			var wire []byte
			writes := 0
			for b := out.next(9); b != nil; b = out.next(9) {
				wire = append(wire, b...)
				writes++
			}
			wantWrites := 1
			if n > tc.chunk {
				wantWrites = (n + tc.chunk - 1) / tc.chunk // the head goes with the first data frame
			}
			if writes != wantWrites || !out.done() || out.chunked() != (n > tc.chunk) {
				t.Fatalf("%d writes (done: %v, chunked: %v), want %d", writes, out.done(), out.chunked(), wantWrites)
			}
			r := &messageReader{r: bufio.NewReader(bytes.NewReader(wire)), chunk: tc.chunk}
			h, got, err := r.next()
			if err != nil || h.typ != frameFailure || h.id != 9 || !bytes.Equal(got, want) {
				t.Fatalf("read back as type %d, call %d, %d bytes (%v); want type %d, call 9, the message's %d bytes", h.typ, h.id, len(got), err, frameFailure, n)
			}
			if _, _, err := r.next(); err != io.EOF {
				t.Fatalf("after the message: %v, want EOF", err)
			}
			if _, err := encodeMessage(frameFailure, m, n-1, tc.chunk); n > 0 && (err == nil || !strings.Contains(err.Error(), "more than")) {
				t.Fatalf("a message of %d bytes at a limit of %d: %v", n, n-1, err)
			}
		})
	}
}

// TestExpiredCallKeepsTheConnection: a call whose context ended before it
// was written (its deadline passed while it waited for its turn to write,
// or before it was made) fails with its context's error without writing,
// and the connection goes on serving the other calls: its deadline, set
// as the write's, no longer fails the write and ends the connection.
func TestExpiredCallKeepsTheConnection(t *testing.T) {
	var conns atomic.Int64
	fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
		conns.Add(1)
		for {
			id, call, ok := c.readCall()
			if !ok {
				return
			}
			c.write(answerFrame(t, id, call, false))
		}
	})
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	a, err := c.Forward(ctx, []Peer{fake}, sumRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "fake")
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Forward(expired, []Peer{fake}, sumRequest(t)); servables.KindOf(err) != servables.DeadlineExceeded {
		t.Fatalf("a call past its deadline: %v, want DeadlineExceeded", err)
	}
	canceled, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := c.Forward(canceled, []Peer{fake}, sumRequest(t)); servables.KindOf(err) != servables.Canceled {
		t.Fatalf("a canceled call: %v, want Canceled", err)
	}
	a, err = c.Forward(ctx, []Peer{fake}, sumRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "fake")
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections were opened, want 1: the calls that ended before they were written ended the connection", n)
	}
}

// TestStalledPeer: a peer that stops reading its connection holds the
// goroutines that write its answers (an AsyncLocal's: the model actor's,
// for answers that fit a frame; one of their own for chunked ones) for
// about writeStall, though its calls' deadlines are a minute away, and
// GracefulStop returns: the serving node then closes the connection.
func TestStalledPeer(t *testing.T) {
	const whole, long = 160, 4 // answers of 60 KiB (one frame each) and of 1 MiB: some 13 MiB in all, more than the sockets buffer
	local := &gatedAsync{calls: whole + long, all: make(chan struct{}), returned: make(chan struct{}, whole+long)}
	srv, err := NewServer(local, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
	if err != nil {
		t.Fatal(err)
	}
	b := serveOn(t, srv)
	raw := dialRaw(t, b.Addr)
	for id := range uint64(whole + long) {
		size := 60 << 10
		if id >= whole {
			size = 1 << 20
		}
		payload, err := proto.Marshal(&forwardpb.Call{Request: encodeRequest(ptr(bigRequest(t, size))), TimeoutNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		raw.write(message(frameCall, id+1, payload)) // and never read
	}
	ctx := testCtx(t)
	start := time.Now()
	for i := range whole + long {
		await(t, ctx, local.returned, fmt.Sprintf("answer %d's writer to return (%d returned)", i+1, i))
	}
	if took := time.Since(start); took > 5*writeStall {
		t.Errorf("the writers were held %v by a stalled peer, want about %v", took, writeStall)
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	await(t, ctx, stopped, "GracefulStop (the chunked answers' writers ended)")
}

// ptr is a pointer to v.
func ptr[T any](v T) *T { return &v }

// gatedAsync is an AsyncLocal that answers (compute) once calls calls
// have arrived, each on a goroutine of its own, and reports on returned
// when done has returned (the answer written, or given up).
type gatedAsync struct {
	calls    int64
	arrived  atomic.Int64
	all      chan struct{}
	returned chan struct{}
}

func (g *gatedAsync) Predict(ctx context.Context, req ForwardedRequest) (Answer, error) {
	return compute(ctx, req)
}

func (g *gatedAsync) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	if g.arrived.Add(1) == g.calls {
		close(g.all)
	}
	go func() {
		<-g.all
		done(compute(ctx, req))
		g.returned <- struct{}{}
	}()
}

// TestClosedConnectionCancelsCalls: a framed connection that its client
// closes cancels the calls in flight on it, as gRPC cancels a closed
// connection's streams.
func TestClosedConnectionCancelsCalls(t *testing.T) {
	entered := make(chan struct{})
	ended := make(chan error, 1)
	b := start(t, "b", func(ctx context.Context, _ ForwardedRequest) (Answer, error) {
		close(entered)
		<-ctx.Done()
		ended <- ctx.Err()
		return Answer{}, ctx.Err()
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	raw := dialRaw(t, b.peer.Addr)
	req := sumRequest(t)
	payload, err := proto.Marshal(&forwardpb.Call{Request: encodeRequest(&req), TimeoutNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	raw.write(frame(frameCall, 1, payload))
	ctx := testCtx(t)
	await(t, ctx, entered, "the call to reach the Local")
	_ = raw.nc.Close()
	if err := await(t, ctx, ended, "the call's context to end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the call's context ended with %v, want context.Canceled", err)
	}
}

// TestServeSurvivesTemporaryAcceptErrors: a temporary error from Accept
// (out of file descriptors) does not end Serve, as it did not end gRPC's
// Serve, which served the peer port before: both transports go on
// serving.
func TestServeSurvivesTemporaryAcceptErrors(t *testing.T) {
	n := &node{name: "b", fn: compute}
	srv, err := NewServer(n, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
	if err != nil {
		t.Fatal(err)
	}
	s := serveLoopback(t, n, srv, func(ln net.Listener) error { return srv.Serve(&flakyListener{Listener: ln, fails: 3}) }, srv.Stop)
	b := s.peer
	ctx := testCtx(t)
	c := NewClient(ClientOptions{})
	defer c.Close()
	a, err := c.Forward(ctx, []Peer{b}, sumRequest(t))
	if err != nil {
		t.Fatalf("a framed call after temporary accept errors: %v", err)
	}
	checkSums(t, a, "b")
	cc, err := grpc.NewClient(b.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	req := sumRequest(t)
	if _, err := forwardpb.NewForwardClient(cc).Predict(ctx, encodeRequest(&req)); err != nil {
		t.Fatalf("a gRPC call after temporary accept errors: %v", err)
	}
	select {
	case <-s.done:
		t.Fatal("Serve returned")
	default:
	}
}

// flakyListener fails its first fails Accepts with EMFILE, a temporary
// error.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	l.fails--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestStalledAnswerEndsAtTheDeadline: a call whose peer stalls within an
// answer (a frame cut short, the rest never sent) returns at its
// deadline, whether it reads the connection itself (an answer in one
// frame, or chunked: every frame fits the read buffer) or leaves it to a
// readLoop (a frame longer than the buffer, on a connection whose frames
// are longer).
func TestStalledAnswerEndsAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		size, chunk int
	}{{2, maxFrameLen}, {256 << 10, maxFrameLen}, {256 << 10, 1 << 20}} {
		t.Run(fmt.Sprintf("answer of %d bytes in frames of %d", tc.size, tc.chunk), func(t *testing.T) {
			fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
				c.m.chunk = tc.chunk
				id, call, ok := c.readCall()
				if !ok {
					return
				}
				b := answerFrame(t, id, call, false)
				if tc.chunk != maxFrameLen {
					b = frame(frameAnswer, id, answerBytes(t, call, false)) // whole: it fits the connection's frames
				}
				c.write(b[:len(b)-1]) // all but its last byte, then nothing
				_, _ = io.Copy(io.Discard, c.r)
			})
			c := NewClient(ClientOptions{})
			c.chunk = tc.chunk
			defer c.Close()
			req := bigRequest(t, tc.size)
			ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
			defer cancel()
			_, err := c.Forward(ctx, []Peer{fake}, req)
			late := time.Since(deadlineOf(ctx))
			if k := servables.KindOf(err); k != servables.DeadlineExceeded {
				t.Fatalf("a stalled answer: %v (kind %v), want DeadlineExceeded", err, k)
			}
			if late > time.Second {
				t.Fatalf("the call returned %v after its deadline", late)
			}
		})
	}
}

// deadlineOf is ctx's deadline.
func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}
