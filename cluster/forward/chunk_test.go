package forward

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// bigRequest is a request for compute whose one input is BYTES ["abc…"]
// of n bytes, a to z over and over: compute's answer is as long, in upper
// case (checkBig).
func bigRequest(t testing.TB, n int) Request {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	s, err := servables.NewStringTensor("s", []int64{1}, []string{string(b)})
	if err != nil {
		t.Fatal(err)
	}
	return Request{ModelPath: "sum/", Priority: User, RequestID: "big", Inputs: []servables.Tensor{s}}
}

// checkBig checks compute's answer to bigRequest(n).
func checkBig(t testing.TB, a Answer, n int) {
	t.Helper()
	if len(a.Outputs) != 1 {
		t.Fatalf("%d outputs, want 1", len(a.Outputs))
	}
	ss, err := a.Outputs[0].Strings()
	if err != nil || len(ss) != 1 || len(ss[0]) != n {
		t.Fatalf("output %q: %d strings (%v), want one of %d bytes", a.Outputs[0].Name, len(ss), err, n)
	}
	for i := range n {
		if ss[0][i] != 'A'+byte(i%26) {
			t.Fatalf("output byte %d is %q, want %q", i, ss[0][i], 'A'+byte(i%26))
		}
	}
}

// floatRequest is sumRequest with its FLOAT input [rows, 1024], rows
// times 1..1024: n MiB of tensor data for n×256 rows; compute answers
// each row's sum, 524800.
func floatRequest(t testing.TB, rows int) Request {
	t.Helper()
	x, err := servables.NewTensor("x", servables.Float32, []int64{int64(rows), 1024})
	if err != nil {
		t.Fatal(err)
	}
	v := x.Float32s()
	for i := range v {
		v[i] = float32(i%1024 + 1)
	}
	return Request{ModelPath: "sum/", Priority: User, RequestID: "float", Inputs: []servables.Tensor{x}}
}

// checkFloat checks compute's answer to floatRequest(rows).
func checkFloat(t testing.TB, a Answer, rows int) {
	t.Helper()
	if len(a.Outputs) != 1 || len(a.Outputs[0].Float32s()) != rows {
		t.Fatalf("outputs %+v, want x_sum of %d rows", a.Outputs, rows)
	}
	for i, v := range a.Outputs[0].Float32s() {
		if v != 524800 {
			t.Fatalf("row %d sums to %v, want 524800", i, v)
		}
	}
}

// TestLargeRequestsAndAnswers: requests and answers of several MiB travel
// chunked, on TLS and in plaintext, and come back whole and right, with
// small calls on the same connection answered meanwhile.
func TestLargeRequestsAndAnswers(t *testing.T) {
	p := newPKI(t)
	for _, mtls := range []bool{false, true} {
		t.Run(fmt.Sprintf("mtls=%v", mtls), func(t *testing.T) {
			var b *started
			var c *Client
			if mtls {
				b, c = p.start(t, "b", compute), p.client(t, "a", ClientOptions{})
			} else {
				b, c = start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true}), NewClient(ClientOptions{})
				defer c.Close()
			}
			ctx := testCtx(t)
			peers := []Peer{b.peer}
			stop := make(chan struct{})
			var small atomic.Int64
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						a, err := c.Forward(ctx, peers, sumRequest(t))
						if err != nil {
							t.Errorf("a small call beside the large ones: %v", err)
							return
						}
						checkSums(t, a, "b")
						small.Add(1)
					}
				})
			}
			// 6 MiB of BYTES in, 6 MiB out; 8 MiB of FLOAT in, 8 KiB out.
			big := forwardAsync(ctx, c, peers, bigRequest(t, 6<<20))
			floats := forwardAsync(ctx, c, peers, floatRequest(t, 2048))
			r := await(t, ctx, big, "the 6 MiB call")
			if r.err != nil {
				t.Fatal(r.err)
			}
			checkBig(t, r.a, 6<<20)
			r = await(t, ctx, floats, "the 8 MiB call")
			if r.err != nil {
				t.Fatal(r.err)
			}
			checkFloat(t, r.a, 2048)
			close(stop)
			wg.Wait()
			if n := framedConns(b.srv); n != 1 {
				t.Errorf("%d framed connections, want 1", n)
			}
			t.Logf("%d small calls answered beside the large ones", small.Load())
		})
	}
}

// TestChunkedCallsOnTheServer: the serving node reads the whole calls
// that come between a chunked call's data frames (and answers them before
// the chunked call has come whole), and a chunked call cancelled before
// its end ends there: the connection reads the next chunked call afresh.
func TestChunkedCallsOnTheServer(t *testing.T) {
	s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true})
	c := dialRaw(t, s.peer.Addr)
	payload := callPayload(t, bigRequest(t, 3*maxFrameLen))
	frames := chunked(frameCall, 1, payload, maxFrameLen)
	cut := frameHeaderLen + headLen + frameHeaderLen + maxFrameLen // the head and the first data frame

	c.write(frames[:cut])
	c.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
	checkSums(t, c.answer(2), "b") // before call 1 has come whole
	c.write(frames[cut:])
	checkBig(t, c.answer(1), 3*maxFrameLen)

	before := s.node.calls.Load()
	c.write(frames[:cut])
	c.write(frame(frameCancel, 1, nil))
	c.write(chunked(frameCall, 3, payload, maxFrameLen))
	checkBig(t, c.answer(3), 3*maxFrameLen)
	if n := s.node.calls.Load() - before; n != 1 {
		t.Fatalf("the Local ran %d calls, want 1: the cancelled one never came whole", n)
	}
}

// frameLog is what a fake peer read of a large call and a small one.
type frameLog struct {
	mu         sync.Mutex
	total      int64 // the large call's length
	smallSeen  bool  // the small call was read
	dataBefore int64 // of the large call's bytes, those read before it
}

// TestSmallCallsPassALargeRequest: on one connection, a small call made
// while a large request is being written goes between its chunks: the
// peer reads it, and answers it, long before the large request's end. The
// peer reads nothing for a while after the large call's head, so that the
// sockets' buffers fill and its writer waits (its small neighbour then
// waits for the next turn, not for the whole message).
func TestSmallCallsPassALargeRequest(t *testing.T) {
	headSeen, resume := make(chan struct{}), make(chan struct{})
	var log frameLog
	fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
		h, err := readFrameHeader(c.r)
		if err != nil || h.typ != frameCall|frameChunked {
			t.Errorf("the first frame: type %d (%v), want a chunked call's head", h.typ, err)
			return
		}
		n, err := readHead(c.r, h, maxFrameLen)
		if err != nil {
			t.Error(err)
			return
		}
		in := newInbound(h.id, frameCall, n, false)
		log.mu.Lock()
		log.total = n
		log.mu.Unlock()
		close(headSeen)
		<-resume
		for {
			f, err := readFrameHeader(c.r)
			if err != nil {
				if err != io.EOF {
					t.Error(err)
				}
				return
			}
			switch f.typ {
			case frameData:
				done, err := in.read(c.r, f)
				if err != nil {
					t.Error(err)
					return
				}
				if done {
					var call forwardpb.Call
					if err := proto.Unmarshal(in.buf, &call); err != nil {
						t.Error(err)
						return
					}
					c.write(answerFrame(t, in.id, &call, false))
				}
			case frameCall:
				b, err := readPayload(c.r, f, maxFrameLen)
				if err != nil {
					t.Error(err)
					return
				}
				log.mu.Lock()
				if !log.smallSeen {
					log.smallSeen, log.dataBefore = true, in.got
				}
				log.mu.Unlock()
				var call forwardpb.Call
				if err := proto.Unmarshal(b, &call); err != nil {
					t.Error(err)
					return
				}
				c.write(answerFrame(t, f.id, &call, false))
			default:
				t.Errorf("frame type %d", f.typ)
				return
			}
		}
	})
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	const rows = 32 * 256 // 32 MiB: far more than the sockets buffer
	large := forwardAsync(ctx, c, []Peer{fake}, floatRequest(t, rows))
	await(t, ctx, headSeen, "the large call's head")
	small := forwardAsync(ctx, c, []Peer{fake}, sumRequest(t))
	conn := poolOf(t, c, fake.Addr).slots[0].conn
	waitFor(t, func() bool {
		conn.mu.Lock()
		defer conn.mu.Unlock()
		return len(conn.waiting) == 2
	}, "the small call to be made")
	time.Sleep(20 * time.Millisecond) // for it to wait for its turn to write (not needed for the check to be right, only for it to be strict)
	close(resume)
	r := await(t, ctx, small, "the small call's answer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkSums(t, r.a, "fake")
	select {
	case <-large:
		t.Fatal("the large call was answered before the small one")
	default:
	}
	r = await(t, ctx, large, "the large call's answer")
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkFloat(t, r.a, rows)
	log.mu.Lock()
	defer log.mu.Unlock()
	if !log.smallSeen || log.dataBefore >= log.total {
		t.Fatalf("the small call came after %d of the large call's %d bytes, want before its end", log.dataBefore, log.total)
	}
	t.Logf("the small call came after %d of the large call's %d bytes", log.dataBefore, log.total)
}

// TestSmallAnswersPassALargeAnswer: on one connection, the answer of a
// small call goes between the chunks of a large answer being written: the
// client reads it long before the large answer's end. The client reads
// nothing for a while after the large answer's head, so that the sockets'
// buffers fill and its writer waits.
func TestSmallAnswersPassALargeAnswer(t *testing.T) {
	const size = 32 << 20
	returned := make(chan struct{}, 1)
	s := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		if req.Configs["big"] == "" {
			defer func() { returned <- struct{}{} }()
			return compute(ctx, req)
		}
		out, err := servables.NewTensor("y", servables.Uint8, []int64{size})
		if err != nil {
			return Answer{}, err
		}
		return Answer{Checksum: "big", Outputs: []servables.Tensor{out}}, nil
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := dialRaw(t, s.peer.Addr)
	req := sumRequest(t)
	req.Configs = map[string]string{"big": "yes"}
	c.write(frame(frameCall, 1, callPayload(t, req)))
	h, err := readFrameHeader(c.r)
	if err != nil || h.typ != frameAnswer|frameChunked || h.id != 1 {
		t.Fatalf("the first frame: type %d for call %d (%v), want the head of call 1's chunked answer", h.typ, h.id, err)
	}
	n, err := readHead(c.r, h, maxFrameLen)
	if err != nil {
		t.Fatal(err)
	}
	in := newInbound(1, frameAnswer, n, true)
	c.write(frame(frameCall, 2, callPayload(t, sumRequest(t))))
	await(t, testCtx(t), returned, "the small call's answer")
	time.Sleep(20 * time.Millisecond) // for it to wait for its turn to write (not needed for the check to be right, only for it to be strict)
	var smallAt int64 = -1
	for in.got < in.total || smallAt < 0 {
		f, err := readFrameHeader(c.r)
		if err != nil {
			t.Fatalf("after %d of the large answer's %d bytes: %v", in.got, in.total, err)
		}
		switch {
		case f.typ == frameData && f.id == 1:
			if _, err := in.read(c.r, f); err != nil {
				t.Fatal(err)
			}
		case f.typ == frameAnswer && f.id == 2:
			b, err := readPayload(c.r, f, maxFrameLen)
			if err != nil {
				t.Fatal(err)
			}
			var m forwardpb.PredictResponse
			if err := proto.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			a, err := decodeAnswer(&m)
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, a, "b")
			smallAt = in.got
		default:
			t.Fatalf("frame type %d for call %d", f.typ, f.id)
		}
	}
	if smallAt >= in.total {
		t.Fatalf("the small answer came after %d of the large answer's %d bytes, want before its end", smallAt, in.total)
	}
	t.Logf("the small answer came after %d of the large answer's %d bytes", smallAt, in.total)
}

// TestCancelChunkedCall: a caller that gives up a large call while it is
// being written returns at once, though a write of its is stuck (its peer
// reads nothing); its writer ends it on the wire with a cancel frame
// after the chunks it wrote, and writes no more of it; the connection
// goes on serving.
func TestCancelChunkedCall(t *testing.T) {
	headSeen, resume := make(chan struct{}), make(chan struct{})
	cancelled := make(chan string, 1)
	var conns atomic.Int64
	fake := fakePeer(t, func(t *testing.T, _ int, c *rawConn) {
		conns.Add(1)
		h, err := readFrameHeader(c.r)
		if err != nil || h.typ != frameCall|frameChunked {
			t.Errorf("the first frame: type %d (%v), want a chunked call's head", h.typ, err)
			return
		}
		n, err := readHead(c.r, h, maxFrameLen)
		if err != nil {
			t.Error(err)
			return
		}
		in := newInbound(h.id, frameCall, n, true)
		close(headSeen)
		<-resume
		ended := false
		for {
			f, err := readFrameHeader(c.r)
			if err != nil {
				if err != io.EOF {
					t.Error(err)
				}
				return
			}
			switch {
			case f.typ == frameData && f.id == in.id:
				if ended {
					t.Errorf("data of the cancelled call after its cancel frame")
				}
				if _, err := in.read(c.r, f); err != nil {
					t.Error(err)
					return
				}
			case f.typ == frameCancel && f.id == in.id:
				ended = true
				cancelled <- fmt.Sprintf("%d of %d bytes", in.got, in.total)
			case f.typ == frameCall:
				b, err := readPayload(c.r, f, maxFrameLen)
				if err != nil {
					t.Error(err)
					return
				}
				var call forwardpb.Call
				if err := proto.Unmarshal(b, &call); err != nil {
					t.Error(err)
					return
				}
				c.write(answerFrame(t, f.id, &call, false))
			default:
				t.Errorf("frame type %d for call %d", f.typ, f.id)
				return
			}
		}
	})
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	lctx, cancel := context.WithCancel(ctx)
	large := forwardAsync(lctx, c, []Peer{fake}, floatRequest(t, 32*256))
	await(t, ctx, headSeen, "the large call's head")
	time.Sleep(20 * time.Millisecond) // for its writer to be stuck (not needed for the check to be right)
	cancel()
	at := time.Now()
	r := await(t, ctx, large, "the cancelled call to return")
	if took := time.Since(at); took > time.Second {
		t.Errorf("the cancelled call returned %v after its cancellation", took)
	}
	if k := servables.KindOf(r.err); k != servables.Canceled {
		t.Fatalf("a cancelled large call: %v (kind %v), want Canceled", r.err, k)
	}
	close(resume)
	t.Logf("the cancel frame came after %s", await(t, ctx, cancelled, "the cancel frame"))
	a, err := c.Forward(ctx, []Peer{fake}, sumRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, a, "fake")
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// TestChunkedCallRefusedAtItsHead: a large call that the serving node
// refuses at its head (over its MaxMessageBytes) fails InvalidInput; its
// writer then stops and ends it with a cancel frame, so that the next
// chunked calls on the connection are read afresh.
func TestChunkedCallRefusedAtItsHead(t *testing.T) {
	s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true, MaxMessageBytes: 1 << 20})
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	for range 2 {
		_, err := c.Forward(ctx, []Peer{s.peer}, bigRequest(t, 4<<20))
		if k := servables.KindOf(err); k != servables.InvalidInput || !strings.Contains(err.Error(), "max_body_bytes") {
			t.Fatalf("a 4 MiB call to a node that takes 1 MiB: %v (kind %v), want InvalidInput", err, k)
		}
	}
	conn := poolOf(t, c, s.peer.Addr).slots[0].conn
	a, err := c.Forward(ctx, []Peer{s.peer}, bigRequest(t, 512<<10))
	if err != nil {
		t.Fatal(err)
	}
	checkBig(t, a, 512<<10)
	if again := poolOf(t, c, s.peer.Addr).slots[0].conn; again != conn || framedConns(s.srv) != 1 {
		t.Fatal("the connection was made again: the refused calls broke it")
	}
}

// TestVersionMismatch: a node whose peer speaks another version of the
// framed transport fails the call Unavailable (so that the router tries
// another replica), naming both versions, and the serving node answers
// an unknown version's preface with its own version and closes the
// connection, logging both.
func TestVersionMismatch(t *testing.T) {
	t.Run("the client's side", func(t *testing.T) {
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
				_, _ = nc.Write(prefaceOf(protocolVersion + 1))
				_ = nc.Close()
			}
		})
		c := NewClient(ClientOptions{})
		defer c.Close()
		_, err = c.Forward(testCtx(t), []Peer{{Name: "next", Addr: ln.Addr().String()}}, sumRequest(t))
		want := fmt.Sprintf("the peer speaks version %d of the framed transport, this node version %d", protocolVersion+1, protocolVersion)
		if k := servables.KindOf(err); k != servables.Unavailable || !strings.Contains(err.Error(), want) {
			t.Fatalf("a peer of another version: %v (kind %v), want unavailable saying %q", err, k, want)
		}
	})
	t.Run("the server's side", func(t *testing.T) {
		var logged syncBuffer
		s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		nc, err := net.Dial("tcp", s.peer.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = nc.Close() }()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(prefaceOf(protocolVersion - 1)); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(nc)
		if err != nil || !bytes.Equal(got, prefaceOf(protocolVersion)) {
			t.Fatalf("the server answered %q (%v), want its own preface, then the end of the connection", got, err)
		}
		want := fmt.Sprintf("the peer speaks version %d of the framed transport, this node version %d", protocolVersion-1, protocolVersion)
		waitFor(t, func() bool { return strings.Contains(logged.String(), want) }, "the server to log both versions")
		// A client of its own version is served.
		c := NewClient(ClientOptions{})
		defer c.Close()
		a, err := c.Forward(testCtx(t), []Peer{s.peer}, sumRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		checkSums(t, a, "b")
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGracefulStopWaitsForAChunkedCall: a chunked call whose head came
// before the server said goaway is read whole and answered, though its
// chunks come slower than the quiet wait of a connection with no call in
// flight (goawayQuiet), and GracefulStop returns after it.
func TestGracefulStopWaitsForAChunkedCall(t *testing.T) {
	s := start(t, "b", compute, ServerOptions{AllowUnauthenticatedPeers: true})
	c := dialRaw(t, s.peer.Addr)
	frames := chunked(frameCall, 1, callPayload(t, bigRequest(t, 3*maxFrameLen)), maxFrameLen)
	cut := frameHeaderLen + headLen + frameHeaderLen + maxFrameLen
	c.write(frames[:cut])
	waitFor(t, func() bool {
		c, ok := s.srv.onlyConn()
		return ok && c.arrivingNow()
	}, "the server to read the chunked call's head")
	stopped := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(stopped)
	}()
	if h, _ := c.next(); h.typ != frameGoaway {
		t.Fatalf("frame type %d, want goaway", h.typ)
	}
	time.Sleep(3 * goawayQuiet) // the chunks come slowly
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a chunked call arriving")
	default:
	}
	c.write(frames[cut:])
	checkBig(t, c.answer(1), 3*maxFrameLen)
	await(t, testCtx(t), stopped, "GracefulStop")
}

// onlyConn is the server's one framed connection.
func (s *Server) onlyConn() (*serverConn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		return c, len(s.conns) == 1
	}
	return nil, false
}

// arrivingNow reports whether a chunked call is arriving on c.
func (c *serverConn) arrivingNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arriving
}

// TestLargeAnswerOfAGivenUpCallIsDrained: the large answer of a call its
// caller gave up after sending it whole (the serving node's model answered
// anyway) is read and dropped as it comes, though no other call waits on
// the connection: the serving node's writer is not left stalled until it
// gives the connection up (writeStall), and the next call on the
// connection is answered.
func TestLargeAnswerOfAGivenUpCallIsDrained(t *testing.T) {
	const answerLen = 16 << 20 // more than loopback's socket buffers hold
	running, answered := make(chan struct{}, 1), make(chan struct{}, 1)
	b := start(t, "b", func(ctx context.Context, req ForwardedRequest) (Answer, error) {
		if req.RequestID != "given-up" {
			return compute(ctx, req)
		}
		running <- struct{}{}
		<-ctx.Done() // the caller's cancel frame came
		defer func() { answered <- struct{}{} }()
		s, err := servables.NewStringTensor("s", []int64{1}, []string{strings.Repeat("x", answerLen)})
		return Answer{Checksum: "late", Outputs: []servables.Tensor{s}}, err
	}, ServerOptions{AllowUnauthenticatedPeers: true})
	c := NewClient(ClientOptions{})
	defer c.Close()
	ctx := testCtx(t)
	peers := []Peer{b.peer}
	req := sumRequest(t)
	req.RequestID = "given-up"
	gctx, giveUp := context.WithCancel(ctx)
	given := forwardAsync(gctx, c, peers, req)
	await(t, ctx, running, "the call to run")
	giveUp()
	if r := await(t, ctx, given, "the given-up call to return"); servables.KindOf(r.err) != servables.Canceled {
		t.Fatalf("the given-up call: %v, want Canceled", r.err)
	}
	// No call waits on the connection while the answer is written: a
	// Client that stopped reading would leave the answer's writer stuck,
	// and the serving node would close the connection after writeStall.
	await(t, ctx, answered, "the late answer")
	time.Sleep(writeStall + time.Second)
	if n := framedConns(b.srv); n != 1 {
		t.Errorf("%d framed connections on the serving node, want the one still open", n)
	}
	a, err := c.Forward(ctx, peers, sumRequest(t))
	if err != nil {
		t.Fatalf("the next call: %v", err)
	}
	checkSums(t, a, "b")
	b.node.mu.Lock()
	defer b.node.mu.Unlock()
	if n := len(b.node.remotes); n != 1 {
		t.Errorf("calls came from %d client addresses, want 1 (one connection)", n)
	}
}
