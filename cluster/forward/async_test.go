package forward

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// asyncNode is a node whose Local is also an AsyncLocal: PredictAsync
// runs the node's function on a goroutine of its own (or, with inline, on
// the caller's) and counts its calls.
type asyncNode struct {
	*node
	inline bool
	async  atomic.Int64
}

func (n *asyncNode) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	n.async.Add(1)
	if n.inline {
		done(n.node.Predict(ctx, req))
		return
	}
	go func() { done(n.node.Predict(ctx, req)) }()
}

// TestAsyncLocal: on the framed transport a Local that is an AsyncLocal
// gets every call through PredictAsync, whether done runs on another
// goroutine or inside PredictAsync; answers, failures and concurrent
// calls on one connection come back to their own callers.
func TestAsyncLocal(t *testing.T) {
	for _, inline := range []bool{false, true} {
		n := &asyncNode{node: &node{name: "b", fn: compute}, inline: inline}
		srv, err := NewServer(n, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
		if err != nil {
			t.Fatal(err)
		}
		s := serveOn(t, srv)
		c := NewClient(ClientOptions{})
		t.Cleanup(c.Close)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				req := sumRequest(t)
				if i%4 == 3 {
					req.Inputs = []servables.Tensor{f32(t, "x", []int64{2}, 1, 2)} // not [rows, cols]: compute refuses it
					if _, err := c.Forward(testCtx(t), []Peer{s}, req); servables.KindOf(err) != servables.InvalidInput {
						t.Errorf("inline=%v: a refused request: %v, want InvalidInput", inline, err)
					}
					return
				}
				a, err := c.Forward(testCtx(t), []Peer{s}, req)
				if err != nil {
					t.Errorf("inline=%v: %v", inline, err)
					return
				}
				checkSums(t, a, "b")
			})
		}
		wg.Wait()
		if got := n.async.Load(); got != 16 {
			t.Errorf("inline=%v: PredictAsync ran %d of 16 calls", inline, got)
		}
	}
}

// serveOn serves srv, a node named "b", on 127.0.0.1 at a free port
// until the test ends.
func serveOn(t *testing.T, srv *Server) Peer {
	t.Helper()
	return serveLoopback(t, &node{name: "b"}, srv, srv.Serve, srv.Stop).peer
}

// TestLeadHandsOverReading: on one framed connection, the call that
// reads (the first one) hands the reading on when it leaves, so the calls
// still waiting get their answers: when it was canceled (it returns at
// once, and its late answer is dropped) and when its own answer came
// first; a call made after them all reads for itself again.
func TestLeadHandsOverReading(t *testing.T) {
	gates := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{}), "third": make(chan struct{})}
	arrived := make(chan string, 8)
	s := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		arrived <- req.RequestID
		if g := gates[req.RequestID]; g != nil {
			select {
			case <-g:
			case <-ctx.Done():
			}
		}
		return compute(ctx, req)
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	forward := func(ctx context.Context, id string) chan error {
		errc := make(chan error, 1)
		go func() {
			req := sumRequest(t)
			req.RequestID = id
			a, err := c.Forward(ctx, []Peer{s.peer}, req)
			if err == nil && (len(a.Outputs) != 2 || a.Outputs[0].Float32s()[0] != 6 || a.Node != "b") {
				err = fmt.Errorf("answer %+v", a.Outputs)
			}
			errc <- err
		}()
		return errc
	}
	wait := func(what string, errc chan error) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-testCtx(t).Done():
			t.Fatalf("%s: no answer", what)
		}
		return nil
	}

	// The lead is canceled while a second call waits.
	ctx1, cancel1 := context.WithCancel(testCtx(t))
	first := forward(ctx1, "first")
	if id := <-arrived; id != "first" {
		t.Fatalf("arrived %s", id)
	}
	second := forward(testCtx(t), "second")
	if id := <-arrived; id != "second" {
		t.Fatalf("arrived %s", id)
	}
	cancel1()
	if err := wait("the canceled lead", first); servables.KindOf(err) != servables.Canceled {
		t.Fatalf("the canceled lead: %v, want Canceled", err)
	}
	close(gates["second"])
	if err := wait("the call waiting behind the canceled lead", second); err != nil {
		t.Fatal(err)
	}
	close(gates["first"])

	// The lead's own answer comes first while a third call waits.
	third := forward(testCtx(t), "third")
	if id := <-arrived; id != "third" {
		t.Fatalf("arrived %s", id)
	}
	fourth := forward(testCtx(t), "fourth") // no gate: answered at once, by the lead if third leads
	if id := <-arrived; id != "fourth" {
		t.Fatalf("arrived %s", id)
	}
	if err := wait("fourth", fourth); err != nil {
		t.Fatal(err)
	}
	close(gates["third"])
	if err := wait("third", third); err != nil {
		t.Fatal(err)
	}
	if err := wait("a call after them all", forward(testCtx(t), "fifth")); err != nil {
		t.Fatal(err)
	}
	if got := len(c.Peers()); got != 1 {
		t.Fatalf("%d peers", got)
	}
}

// asyncFunc makes a function an AsyncLocal whose done runs on a goroutine
// of its own, as the model actor's does.
type asyncFunc struct{ LocalFunc }

func (f asyncFunc) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	go func() { done(f.LocalFunc(ctx, req)) }()
}

// TestGracefulStopIdleClient: a node that stops gracefully does not wait
// long for a peer whose connection is idle: that peer reads nothing until
// its next call (so it does not see the goaway and close), and the server
// ends the connection goawayQuiet after its last call, not at some longer
// grace (a drained node's exit waited a second per such peer).
func TestGracefulStopIdleClient(t *testing.T) {
	s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	if _, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.srv.GracefulStop()
	if took := time.Since(start); took > 5*goawayQuiet {
		t.Fatalf("GracefulStop took %v with one idle framed connection, want about %v", took, goawayQuiet)
	}
	if _, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t)); servables.KindOf(err) != servables.Unavailable {
		t.Fatalf("a call to the stopped node: %v, want Unavailable", err)
	}
}

// TestStopEndsAGracefulStop: Stop called while GracefulStop waits for a
// call that does not end (as cmd/grove does at its stop deadline) ends
// both: the call's context is canceled and its caller gets an error.
func TestStopEndsAGracefulStop(t *testing.T) {
	held := make(chan struct{})
	s := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		close(held)
		<-ctx.Done()
		return Answer{}, ctx.Err()
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t))
		errc <- err
	}()
	<-held
	graceful := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(graceful)
	}()
	select {
	case <-graceful:
		t.Fatal("GracefulStop returned with a call in flight")
	case <-time.After(50 * time.Millisecond): // GracefulStop is waiting (not a synchronisation: a check that it does)
	}
	s.srv.Stop()
	ctx := testCtx(t)
	select {
	case <-graceful:
	case <-ctx.Done():
		t.Fatal("GracefulStop did not return after Stop")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the call cut by Stop succeeded")
		}
	case <-ctx.Done():
		t.Fatal("the call cut by Stop did not end")
	}
}

// brokenError is an error whose Error panics when it is a nil pointer: a
// Local that returns a typed nil as its error (a bug) makes the making of
// its answer panic.
type brokenError struct{ msg string }

func (e *brokenError) Error() string { return e.msg }

// brokenLocal answers a request whose id is "broken" with a typed nil
// error, any other by compute.
func brokenLocal(ctx context.Context, req ForwardedRequest) (Answer, error) {
	if req.RequestID == "broken" {
		return Answer{}, (*brokenError)(nil)
	}
	return compute(ctx, req)
}

// recoveringAsync is an AsyncLocal whose done runs on a goroutine of its
// own inside a recover, as the actors' System runs it: what done panics
// with arrives on panics.
type recoveringAsync struct {
	LocalFunc
	panics chan any
}

func (l recoveringAsync) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				l.panics <- v
			}
		}()
		done(l.LocalFunc(ctx, req))
	}()
}

// logLines is a slog writer whose lines arrive on a channel (those
// written while it is full are dropped: the server never waits on it).
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// logged waits for a line of lines containing all of want.
func (l logLines) logged(t testing.TB, ctx context.Context, want ...string) {
	t.Helper()
	for {
		line := await(t, ctx, (<-chan string)(l), fmt.Sprintf("a log line saying %q", want))
		if all(line, want) {
			return
		}
	}
}

// all reports whether s contains each of subs.
func all(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// localOf is fn as an AsyncLocal whose recovered panics arrive on panics
// when async, else as a plain Local.
func localOf(fn LocalFunc, async bool, panics chan any) Local {
	if async {
		return recoveringAsync{LocalFunc: fn, panics: panics}
	}
	return fn
}

// panicServer serves local, a node named "b" logging to log, on a framed
// server with opts at a free loopback port, wrap wrapping its listener
// (nil: none). It returns the server, its address and Serve's result.
// The test stops it, bounding the wait: a Stop that hangs fails the test
// rather than hanging it.
func panicServer(t *testing.T, local Local, log logLines, opts ServerOptions, wrap func(net.Listener) net.Listener) (*Server, string, <-chan error) {
	t.Helper()
	return panicServerWith(t, local, log, opts, wrap, nil)
}

// panicServerWith is panicServer, set (nil: none) changing the server
// before it serves.
func panicServerWith(t *testing.T, local Local, log logLines, opts ServerOptions, wrap func(net.Listener) net.Listener, set func(*Server)) (*Server, string, <-chan error) {
	t.Helper()
	opts.Node, opts.AllowUnauthenticatedPeers, opts.Logger = "b", true, slog.New(slog.NewTextHandler(log, nil))
	srv, err := NewServer(local, opts)
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { go srv.Stop() }) // a test that failed early: not waited for
	return srv, addr, served
}

// stopIdle stops srv gracefully: rc, with no call in flight, reads the
// goaway and sees the server close the connection once its quiet wait
// ends, and GracefulStop and Serve return before ctx ends.
func stopIdle(t *testing.T, ctx context.Context, srv *Server, served <-chan error, rc *rawConn) {
	t.Helper()
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	if h, _ := rc.next(); h.typ != frameGoaway {
		t.Fatalf("frame type %d, want goaway (%d)", h.typ, frameGoaway)
	}
	rc.closedByServer()
	await(t, ctx, stopped, "GracefulStop to return")
	if err := await(t, ctx, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// stopWithin runs stop, failing the test if it does not return before
// ctx ends.
func stopWithin(t *testing.T, ctx context.Context, stop func(), what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		stop()
		close(done)
	}()
	await(t, ctx, done, what)
}

// TestAnswerPanicFailsTheCall: a bug that panics making a framed call's
// answer (here a Local's typed nil error, whose Error panics) fails that
// call at once, Internal, and frees its id for the next call. On an
// AsyncLocal, done then panics on to its caller, which recovers it (as
// the actors' System does) and gets the original panic with the stack
// where it was raised; on a plain Local the server logs it, and the
// process goes on. Either way the connection, told goaway, closes once
// idle, and the server stops.
func TestAnswerPanicFailsTheCall(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			panics, log := make(chan any, 4), make(logLines, 64)
			srv, addr, served := panicServer(t, localOf(brokenLocal, async, panics), log, ServerOptions{}, nil)
			rc := dialRaw(t, addr)
			broken := sumRequest(t)
			broken.RequestID = "broken"
			// A minute to its deadline: the answer must come at once (the
			// connection's reads give up after 10 s).
			call, err := proto.Marshal(&forwardpb.Call{Request: encodeRequest(&broken), TimeoutNanos: int64(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			rc.write(frame(frameCall, 1, call))
			checkFailure(t, rc.failure(1), servables.Execution, codes.Internal, "the serving node failed making the answer", "b")
			origin := []string{"nil pointer dereference", "(*brokenError).Error"}
			if async {
				if v := fmt.Sprint(await(t, ctx, panics, "done to panic on to its caller")); !all(v, origin) {
					t.Fatalf("done panicked with %q, want the original panic and its stack, saying %q", v, origin)
				}
			} else {
				log.logged(t, ctx, append(origin, "answering a forwarded call panicked")...)
			}

			rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			checkSums(t, rc.answer(1), "b")

			stopIdle(t, ctx, srv, served, rc)
		})
	}
}

// panicOnWrite is a listener whose connections' first write of a frame
// of type typ panics with msg (a bug in the write path), once.
type panicOnWrite struct {
	net.Listener
	typ   byte
	msg   string
	armed atomic.Bool
}

// panicWrites is a panicOnWrite, armed; its wrap is panicServer's.
func panicWrites(typ byte, msg string) *panicOnWrite {
	l := &panicOnWrite{typ: typ, msg: msg}
	l.armed.Store(true)
	return l
}

// wrap makes l wrap ln.
func (l *panicOnWrite) wrap(ln net.Listener) net.Listener {
	l.Listener = ln
	return l
}

func (l *panicOnWrite) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &panicConn{Conn: c, l: l}, nil
}

type panicConn struct {
	net.Conn
	l *panicOnWrite
}

func (c *panicConn) Write(b []byte) (int, error) {
	if len(b) >= frameHeaderLen && b[4] == c.l.typ && c.l.armed.CompareAndSwap(true, false) {
		panic(c.l.msg)
	}
	return c.Conn.Write(b)
}

// TestAnswerWritePanicFreesTheConnection: a bug that panics writing a
// framed call's answer closes that connection (its frame may be cut),
// and leaves nothing that keeps it or the server from closing: the
// writer's turn is passed on and the call's bookkeeping done. On an
// AsyncLocal the panic reaches done's caller; on a plain Local the server
// logs it, and the process goes on. Other connections are served.
func TestAnswerWritePanicFreesTheConnection(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			panics, log := make(chan any, 4), make(logLines, 64)
			srv, addr, served := panicServer(t, localOf(compute, async, panics), log, ServerOptions{}, panicWrites(frameAnswer, "writing the answer").wrap)
			rc := dialRaw(t, addr)
			rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			if async {
				if v := fmt.Sprint(await(t, ctx, panics, "done to panic on to its caller")); !strings.Contains(v, "writing the answer") {
					t.Fatalf("done panicked with %q, want the write's panic", v)
				}
			} else {
				log.logged(t, ctx, "answering a forwarded call panicked", "writing the answer")
			}
			rc.closedByServer()
			servesOthersThenStops(t, ctx, srv, addr, served, srv.Stop)
		})
	}
}

// panicOnEnd is a span processor whose OnEnd panics (a bug in a tracing
// exporter), once.
type panicOnEnd struct {
	sdktrace.SpanProcessor
	armed atomic.Bool
}

func (p *panicOnEnd) OnEnd(s sdktrace.ReadOnlySpan) {
	if p.armed.CompareAndSwap(true, false) {
		panic("ending the span")
	}
	p.SpanProcessor.OnEnd(s)
}

// TestSpanEndPanicStillAnswers: a bug that panics ending a framed call's
// server span skips none of the call's answer: the peer gets it, its id
// is free for the next call, and the connection, told goaway, closes
// once idle. On an AsyncLocal the panic reaches done's caller; on a plain
// Local the server logs it, and the process goes on.
func TestSpanEndPanicStillAnswers(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			proc := &panicOnEnd{SpanProcessor: tracetest.NewSpanRecorder()}
			proc.armed.Store(true)
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			panics, log := make(chan any, 4), make(logLines, 64)
			srv, addr, served := panicServer(t, localOf(compute, async, panics), log, ServerOptions{TracerProvider: tp}, nil)
			rc := dialRaw(t, addr)
			rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			checkSums(t, rc.answer(1), "b")
			if async {
				if v := fmt.Sprint(await(t, ctx, panics, "done to panic on to its caller")); !strings.Contains(v, "ending the span") {
					t.Fatalf("done panicked with %q, want the span's panic", v)
				}
			} else {
				log.logged(t, ctx, "answering a forwarded call panicked", "ending the span")
			}
			rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			checkSums(t, rc.answer(1), "b")

			stopIdle(t, ctx, srv, served, rc)
		})
	}
}

// holding is next, but for a request whose id is "held": it says so on
// held, waits for the request's context to end, says so on ended and
// returns its error.
func holding(held, ended chan<- struct{}, next LocalFunc) LocalFunc {
	return func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		if req.RequestID != "held" {
			return next(ctx, req)
		}
		held <- struct{}{}
		<-ctx.Done()
		ended <- struct{}{}
		return Answer{}, ctx.Err()
	}
}

// holdCall sends rc's call id, the held request, and waits until the
// Local holds it.
func holdCall(t *testing.T, ctx context.Context, rc *rawConn, id uint64, held <-chan struct{}) {
	t.Helper()
	req := sumRequest(t)
	req.RequestID = "held"
	rc.write(frame(frameCall, id, callPayload(t, req)))
	await(t, ctx, held, "the held call to reach the Local")
}

// servesOthersThenStops checks that srv, at addr, answers a call on a new
// connection, and that stop (its Stop or GracefulStop) and Serve return
// before ctx ends.
func servesOthersThenStops(t *testing.T, ctx context.Context, srv *Server, addr string, served <-chan error, stop func()) {
	t.Helper()
	c := NewClient(ClientOptions{})
	t.Cleanup(c.Close)
	a, err := c.Forward(ctx, []Peer{{Name: "b", Addr: addr}}, sumRequest(t))
	if err != nil {
		t.Fatalf("a call on another connection: %v", err)
	}
	checkSums(t, a, "b")
	stopWithin(t, ctx, stop, "the server to stop")
	if err := await(t, ctx, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// bigAnswers answers a request whose Configs say "big" with an answer
// longer than a frame, which travels chunked; any other by compute.
func bigAnswers(ctx context.Context, req ForwardedRequest) (Answer, error) {
	if req.Configs["big"] == "" {
		return compute(ctx, req)
	}
	out, err := servables.NewTensor("y", servables.Uint8, []int64{2 * maxFrameLen})
	if err != nil {
		return Answer{}, err
	}
	return Answer{Checksum: "big", Outputs: []servables.Tensor{out}}, nil
}

// stackMark is in the stack a panic is logged or raised again with.
const stackMark = "runtime/debug.Stack"

// TestChunkedAnswerWritePanicClosesTheConnection: a bug that panics
// writing an answer long enough to travel chunked (on the goroutine of
// its own that writes it) closes that connection, whose calls in flight
// end as on a broken connection (their contexts are cancelled); the
// server logs the panic with its stack, serves other connections, and
// stops.
func TestChunkedAnswerWritePanicClosesTheConnection(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			held, ended := make(chan struct{}, 1), make(chan struct{}, 1)
			panics, log := make(chan any, 4), make(logLines, 64)
			writes := panicWrites(frameAnswer|frameChunked, "writing the chunked answer")
			srv, addr, served := panicServer(t, localOf(holding(held, ended, bigAnswers), async, panics), log, ServerOptions{}, writes.wrap)
			rc := dialRaw(t, addr)
			holdCall(t, ctx, rc, 1, held)
			big := sumRequest(t)
			big.Configs = map[string]string{"big": "yes"}
			rc.write(frame(frameCall, 2, callPayload(t, big)))
			log.logged(t, ctx, "panicked", "writing the chunked answer", stackMark)
			await(t, ctx, ended, "the held call's context to end")
			rc.closedByServer()
			servesOthersThenStops(t, ctx, srv, addr, served, srv.GracefulStop)
		})
	}
}

// TestReaderAnswerPanicClosesTheConnection: a bug that panics writing an
// answer the connection's reader writes itself (to a malformed call, to
// a call whose id is in flight, or, on an AsyncLocal, to a request the
// server refuses) closes that connection, whose calls in flight end as
// on a broken connection (their contexts are cancelled); the server logs
// the panic with its stack, serves other connections, and stops.
func TestReaderAnswerPanicClosesTheConnection(t *testing.T) {
	refused := sumRequest(t)
	m := encodeRequest(&refused)
	m.Hops = hopsForwarded + 1
	refusedCall, err := proto.Marshal(&forwardpb.Call{Request: m, TimeoutNanos: int64(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"malformed call", frame(frameCall, 2, []byte{0xff, 0xff, 0xff})},
		{"id in flight", frame(frameCall, 1, callPayload(t, sumRequest(t)))},
		{"refused request", frame(frameCall, 2, refusedCall)},
	} {
		for _, async := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/async=%v", tc.name, async), func(t *testing.T) {
				ctx := testCtx(t)
				held, ended := make(chan struct{}, 1), make(chan struct{}, 1)
				panics, log := make(chan any, 4), make(logLines, 64)
				writes := panicWrites(frameFailure, "writing the failure")
				srv, addr, served := panicServer(t, localOf(holding(held, ended, compute), async, panics), log, ServerOptions{}, writes.wrap)
				rc := dialRaw(t, addr)
				holdCall(t, ctx, rc, 1, held)
				rc.write(tc.frame)
				log.logged(t, ctx, "panicked", "writing the failure", stackMark)
				await(t, ctx, ended, "the held call's context to end")
				rc.closedByServer()
				servesOthersThenStops(t, ctx, srv, addr, served, srv.Stop)
			})
		}
	}
}

// panicOnStart is a span processor whose OnStart panics (a bug in a
// tracing exporter) once armed, once.
type panicOnStart struct {
	sdktrace.SpanProcessor
	armed atomic.Bool
}

func (p *panicOnStart) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if p.armed.CompareAndSwap(true, false) {
		panic("starting the span")
	}
	p.SpanProcessor.OnStart(ctx, s)
}

// TestSpanStartPanicClosesTheConnection: a bug that panics starting a
// framed call's server span, on the connection's reader once the call
// has been taken in, fails that call Internal and closes the connection
// as a broken one closes: its calls in flight are cancelled and answered,
// and the connection closes once they have ended. The server logs
// the panic with its stack, serves other connections, and stops.
func TestSpanStartPanicClosesTheConnection(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			proc := &panicOnStart{SpanProcessor: tracetest.NewSpanRecorder()}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			held, ended := make(chan struct{}, 1), make(chan struct{}, 1)
			panics, log := make(chan any, 4), make(logLines, 64)
			srv, addr, served := panicServer(t, localOf(holding(held, ended, compute), async, panics), log, ServerOptions{TracerProvider: tp}, nil)
			rc := dialRaw(t, addr)
			holdCall(t, ctx, rc, 1, held)
			proc.armed.Store(true)
			rc.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
			log.logged(t, ctx, "panicked", "starting the span", stackMark)
			await(t, ctx, ended, "the held call's context to end")
			checkFailure(t, rc.failure(2), servables.Execution, codes.Internal, takeFailedMsg, "b")
			checkFailure(t, rc.failure(1), servables.Canceled, codes.Canceled, "", "b")
			rc.closedByServer()
			servesOthersThenStops(t, ctx, srv, addr, served, srv.GracefulStop)
		})
	}
}

// TestAnswerAndWritePanicsBothReported: when making a call's answer
// panics (a bug) and writing the failure that replaces it panics too,
// neither panic is lost: on an AsyncLocal done's caller gets one panic
// carrying both, each with its stack; on a plain Local the server logs
// each. The connection closes, the server serves other connections, and
// stops.
func TestAnswerAndWritePanicsBothReported(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			panics, log := make(chan any, 4), make(logLines, 64)
			writes := panicWrites(frameFailure, "writing the failure")
			srv, addr, served := panicServer(t, localOf(brokenLocal, async, panics), log, ServerOptions{}, writes.wrap)
			rc := dialRaw(t, addr)
			broken := sumRequest(t)
			broken.RequestID = "broken"
			rc.write(frame(frameCall, 1, callPayload(t, broken)))
			first := []string{"nil pointer dereference", "(*brokenError).Error"}
			second := []string{"writing the failure", "(*panicConn).Write"}
			if async {
				if v := fmt.Sprint(await(t, ctx, panics, "done to panic on to its caller")); !all(v, append(first, second...)) {
					t.Fatalf("done panicked with %q, want both panics and their stacks, saying %q and %q", v, first, second)
				}
			} else {
				log.logged(t, ctx, append(first, "panicked")...)
				log.logged(t, ctx, append(second, "panicked")...)
			}
			rc.closedByServer()
			servesOthersThenStops(t, ctx, srv, addr, served, srv.Stop)
		})
	}
}

// TestGoawayWritePanicCostsItsConnection: a bug that panics writing the
// goaway GracefulStop tells a framed connection closes that connection
// alone: the server logs the panic with its stack, the other connection
// is told goaway and closed once idle, and GracefulStop and Serve return.
func TestGoawayWritePanicCostsItsConnection(t *testing.T) {
	ctx := testCtx(t)
	log := make(logLines, 64)
	writes := panicWrites(frameGoaway, "writing the goaway")
	srv, addr, served := panicServer(t, LocalFunc(compute), log, ServerOptions{}, writes.wrap)
	rcs := []*rawConn{dialRaw(t, addr), dialRaw(t, addr)}
	for _, rc := range rcs { // each connection is the server's once it answered
		rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
		checkSums(t, rc.answer(1), "b")
	}
	stopWithin(t, ctx, srv.GracefulStop, "GracefulStop to return")
	log.logged(t, ctx, "goaway panicked", "writing the goaway", stackMark)
	toldGoaway := 0
	for _, rc := range rcs {
		// The connection whose goaway panicked was closed at once; the
		// other reads its goaway, then is closed.
		if h, _, err := rc.m.next(); err == nil {
			if h.typ != frameGoaway {
				t.Fatalf("frame type %d, want goaway (%d)", h.typ, frameGoaway)
			}
			toldGoaway++
			rc.closedByServer()
		}
	}
	if toldGoaway != 1 {
		t.Fatalf("%d connections read a goaway, want 1 (the other's write panicked)", toldGoaway)
	}
	if err := await(t, ctx, served, "Serve to return"); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestPreparePanicEndsTheCallSpan: a bug that panics preparing a framed
// call for the Local (here prepare's clock), once the call's server span
// is started, ends that span, Internal, so that tracing neither loses nor
// leaks it, and fails the call Internal. On an AsyncLocal the panic is
// on the connection's reader, which then closes the connection.
// Either way the server logs the panic with its stack, serves other
// connections, and stops.
func TestPreparePanicEndsTheCallSpan(t *testing.T) {
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			ctx := testCtx(t)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			panics, log := make(chan any, 4), make(logLines, 64)
			var armed atomic.Bool
			srv, addr, served := panicServerWith(t, localOf(compute, async, panics), log, ServerOptions{TracerProvider: tp}, nil, func(s *Server) {
				s.now = func() time.Time {
					if armed.CompareAndSwap(true, false) {
						panic("preparing the call")
					}
					return time.Now()
				}
			})
			rc := dialRaw(t, addr)
			armed.Store(true)
			rc.write(frame(frameCall, 1, callPayload(t, sumRequest(t))))
			log.logged(t, ctx, "panicked", "preparing the call", stackMark)
			if async {
				checkFailure(t, rc.failure(1), servables.Execution, codes.Internal, takeFailedMsg, "b")
				rc.closedByServer()
			} else {
				checkFailure(t, rc.failure(1), servables.Execution, codes.Internal, "the serving node failed making the answer", "b")
			}
			servesOthersThenStops(t, ctx, srv, addr, served, srv.GracefulStop)
			var ended []sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				for _, kv := range s.Attributes() {
					if kv.Key == semconv.RPCResponseStatusCodeKey && kv.Value.AsString() == codes.Internal.String() {
						ended = append(ended, s)
					}
				}
			}
			if len(ended) != 1 {
				t.Fatalf("%d server spans ended Internal (of %d ended, %d started), want the panicking call's", len(ended), len(rec.Ended()), len(rec.Started()))
			}
		})
	}
}

// panickingAsync is an AsyncLocal whose PredictAsync panics (a bug) for a
// request whose id is "panic": before calling done, or after handing done
// to a goroutine that calls it once late is closed. Other requests are
// answered by compute on a goroutine of their own.
type panickingAsync struct {
	late   chan struct{} // nil: done is never called for "panic"
	called chan struct{} // closed once the late done has returned
}

func (l panickingAsync) Predict(ctx context.Context, req ForwardedRequest) (Answer, error) {
	return compute(ctx, req)
}

func (l panickingAsync) PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error)) {
	if req.RequestID != "panic" {
		go func() { done(compute(ctx, req)) }()
		return
	}
	if l.late != nil {
		go func() {
			<-l.late
			done(compute(ctx, req))
			close(l.called)
		}()
	}
	panic("predicting without an answer")
}

// TestPredictAsyncPanicBeforeDoneFailsTheCall: a bug that panics in an
// AsyncLocal's PredictAsync before done is called fails that call
// Internal at once, and its connection closes as on a panicking reader:
// the server logs the panic with its stack, serves other connections,
// and stops, rather than waiting for an answer that never comes. A done
// called after the panic (by a goroutine the Local started) changes
// nothing: the call is not answered twice.
func TestPredictAsyncPanicBeforeDoneFailsTheCall(t *testing.T) {
	for _, lateDone := range []bool{false, true} {
		t.Run(fmt.Sprintf("late done=%v", lateDone), func(t *testing.T) {
			ctx := testCtx(t)
			local := panickingAsync{}
			if lateDone {
				local.late, local.called = make(chan struct{}), make(chan struct{})
			}
			log := make(logLines, 64)
			srv, addr, served := panicServer(t, local, log, ServerOptions{}, nil)
			rc := dialRaw(t, addr)
			req := sumRequest(t)
			req.RequestID = "panic"
			rc.write(frame(frameCall, 1, callPayload(t, req)))
			log.logged(t, ctx, "panicked", "predicting without an answer", "panickingAsync.PredictAsync", stackMark)
			checkFailure(t, rc.failure(1), servables.Execution, codes.Internal, takeFailedMsg, "b")
			if lateDone {
				close(local.late)
				await(t, ctx, local.called, "the late done to return")
			}
			rc.closedByServer()
			servesOthersThenStops(t, ctx, srv, addr, served, srv.GracefulStop)
		})
	}
}
