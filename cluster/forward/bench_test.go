package forward

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// The benchmarks compare a forwarded request (Client.Forward to a Server
// whose Local sums the input's rows) with the floor: a plain grpc-go
// unary call of the same service carrying the same request, answered by a
// handler that returns a response built in advance. The payload is the
// pCTR model's: FLOAT [1, 64] in, FLOAT [1, 1] out.

// floorWindow is the floor's fixed HTTP/2 flow-control window per
// stream (four times it per connection): with gRPC's default dynamic
// windows every call would be followed by a bandwidth-probe PING and its
// answer, which the framed transport does not have.
const floorWindow = 4 << 20

// fixedAnswer is the floor's server: it answers every call with resp.
type fixedAnswer struct {
	forwardpb.UnimplementedForwardServer
	resp *forwardpb.PredictResponse
}

func (f fixedAnswer) Predict(context.Context, *forwardpb.PredictRequest) (*forwardpb.PredictResponse, error) {
	return f.resp, nil
}

// benchSetup is a floor server and a forwarding server on loopback and
// the clients of both.
type benchSetup struct {
	req      Request
	floorReq *forwardpb.PredictRequest
	floor    forwardpb.ForwardClient
	client   *Client
	peers    []Peer
}

func newBench(b *testing.B, mtls bool, connsPerPeer int) *benchSetup {
	b.Helper()
	vals := make([]float32, 64)
	for i := range vals {
		vals[i] = float32(i) / 64
	}
	s := &benchSetup{req: Request{ModelPath: "pctr_v1/", Priority: User, RequestID: "bench", Inputs: []servables.Tensor{f32(b, "x", []int64{1, 64}, vals...)}}}
	s.floorReq = encodeRequest(&s.req)

	var srvTLS, cliTLS *tls.Config
	fwdOpts := ServerOptions{AllowUnauthenticatedPeers: true}
	if mtls {
		p := newPKI(b)
		srvTLS, cliTLS = p.serverTLS(b, "b"), p.clientTLS(b, "a")
		fwdOpts = ServerOptions{TLS: srvTLS}
	}

	// The floor: plain grpc-go, same credentials, fixed flow-control
	// windows (with gRPC's default dynamic windows the floor's
	// bandwidth-probe PINGs, answered while the next forwarded call runs,
	// were billed to it: ~12 µs at p50).
	sum := f32(b, "x_sum", []int64{1, 1}, 31.5)
	gopts := []grpc.ServerOption{grpc.StaticStreamWindowSize(floorWindow), grpc.StaticConnWindowSize(4 * floorWindow)}
	dial := grpc.WithTransportCredentials(insecure.NewCredentials())
	if mtls {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(srvTLS)))
		dial = grpc.WithTransportCredentials(credentials.NewTLS(cliTLS))
	}
	gs := grpc.NewServer(gopts...)
	forwardpb.RegisterForwardServer(gs, fixedAnswer{resp: encodeAnswer(&Answer{Checksum: "sum-pctr_v1/", Outputs: []servables.Tensor{sum}}, "floor")})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	b.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), dial,
		grpc.WithStaticStreamWindowSize(floorWindow), grpc.WithStaticConnWindowSize(4*floorWindow))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cc.Close() })
	s.floor = forwardpb.NewForwardClient(cc)

	// Forwarding: this package's Server and Client.
	fwd := start(b, "b", compute, fwdOpts)
	s.peers = []Peer{fwd.peer}
	s.client = NewClient(ClientOptions{TLS: cliTLS, ConnsPerPeer: connsPerPeer})
	b.Cleanup(s.client.Close)

	// Warm both up and check the answers.
	for range 100 {
		s.callFloor(b)
		s.callForward(b)
	}
	return s
}

func (s *benchSetup) callFloor(b *testing.B) {
	resp, err := s.floor.Predict(context.Background(), s.floorReq)
	if err != nil || len(resp.GetOutputs()) != 1 {
		b.Fatalf("floor: %v %v", resp, err)
	}
}

// callFloorDeadline is callFloor with a deadline, as callForward has.
func (s *benchSetup) callFloorDeadline(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.floor.Predict(ctx, s.floorReq)
	if err != nil || len(resp.GetOutputs()) != 1 {
		b.Fatalf("floor: %v %v", resp, err)
	}
}

func (s *benchSetup) callForward(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := s.client.Forward(ctx, s.peers, s.req)
	if err != nil {
		b.Fatal(err)
	}
	if got := a.Outputs[0].Float32s()[0]; got != 31.5 {
		b.Fatalf("forwarded sum %v, want 31.5", got)
	}
}

// BenchmarkAddedLatency runs, at concurrency 1, a floor call and a
// forwarded request in turn in each iteration and reports both medians
// and the difference (the target: added-p50 at most 50 µs).
func BenchmarkAddedLatency(b *testing.B) {
	for _, mtls := range []bool{false, true} {
		b.Run(fmt.Sprintf("mtls=%v", mtls), func(b *testing.B) {
			s := newBench(b, mtls, 1)
			floor := make([]time.Duration, 0, b.N)
			fwd := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				s.callFloor(b)
				t1 := time.Now()
				s.callForward(b)
				t2 := time.Now()
				floor, fwd = append(floor, t1.Sub(t0)), append(fwd, t2.Sub(t1))
			}
			b.StopTimer()
			fp50, fp99 := quantiles(floor)
			wp50, wp99 := quantiles(fwd)
			b.ReportMetric(us(fp50), "floor-p50-µs")
			b.ReportMetric(us(fp99), "floor-p99-µs")
			b.ReportMetric(us(wp50), "fwd-p50-µs")
			b.ReportMetric(us(wp99), "fwd-p99-µs")
			b.ReportMetric(us(wp50-fp50), "added-p50-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkThroughput reports requests per second at batch 1 with 32
// concurrent callers, for the floor, the floor with a deadline (which
// every forwarded request carries: a timer on each side and the
// grpc-timeout header), and forwarding over one and two connections to
// the peer. The machine is shared, so the variants take
// turns: each iteration runs every variant for a window of 100 ms, and
// each rate is its completed requests over its windows' total time.
func BenchmarkThroughput(b *testing.B) {
	const callers, window = 32, 100 * time.Millisecond
	one, two := newBench(b, false, 1), newBench(b, false, 2)
	variants := []struct {
		name string
		call func()
		done int64
		took time.Duration
	}{
		{name: "floor", call: func() { one.callFloor(b) }},
		{name: "floor-deadline", call: func() { one.callFloorDeadline(b) }},
		{name: "fwd-1conn", call: func() { one.callForward(b) }},
		{name: "fwd-2conns", call: func() { two.callForward(b) }},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := &variants[(i+k)%len(variants)] // a different one first each round
			var n atomic.Int64
			start, stop := time.Now(), make(chan struct{})
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						v.call()
						n.Add(1)
					}
				})
			}
			time.Sleep(window)
			close(stop)
			wg.Wait()
			v.done += n.Load()
			v.took += time.Since(start)
		}
	}
	b.StopTimer()
	for _, v := range variants {
		b.ReportMetric(float64(v.done)/v.took.Seconds(), v.name+"-req/s")
	}
	b.ReportMetric(0, "ns/op")
}

// quantiles returns the median and the 99th percentile of ds.
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkSmallBesideLarge measures what a large request costs the small
// requests on the same connection: in each round one caller forwards an
// 8 MiB request (FLOAT [2048, 1024], answered by its 2048 row sums) while
// another forwards small ones (the pCTR payload) back to back until the
// large one is answered, on one connection to one peer: on loopback, and
// through a link of 100 MB/s (slowLink, about a gigabit network; the
// 8 MiB take some 85 ms on it). The variants take turns, a different one
// first each round:
//
//   - alone: the small requests with no large one (20 a round);
//   - chunked: the framed transport as it is (frames of maxFrameLen, at
//     most maxUnsent bytes unsent in a socket);
//   - chunks=N: frames of N bytes instead (the chunk size's trade-off);
//   - unsent=any: chunked, but as much left unsent in the sockets as
//     their send buffers hold (the system's default);
//   - whole: frames as long as the message, as much unsent as the
//     sockets hold (the head-of-line blocking the two remove).
//
// It reports, per variant, the small requests' p50 and the median over
// the rounds of each round's slowest small request (small-worst: what a
// small request issued while the large one travels waits, at most), and
// the large request's median time, beside the small ones and alone (each
// round also forwards it once with nothing beside it).
func BenchmarkSmallBesideLarge(b *testing.B) {
	for _, link := range []int{0, 100e6} {
		name := "loopback"
		if link > 0 {
			name = fmt.Sprintf("link=%dMB/s", link/1e6)
		}
		b.Run(name, func(b *testing.B) { smallBesideLarge(b, link) })
	}
}

func smallBesideLarge(b *testing.B, link int) {
	const rows = 2048 // 8 MiB
	type variant struct {
		name          string
		chunk, unsent int
		large         bool
		small, worst  []time.Duration
		big, alone    []time.Duration
	}
	variants := []*variant{
		{name: "alone", chunk: maxFrameLen, unsent: maxUnsent},
		{name: "chunked", chunk: maxFrameLen, unsent: maxUnsent, large: true},
		{name: "chunks=16KiB", chunk: 16 << 10, unsent: maxUnsent, large: true},
		{name: "chunks=256KiB", chunk: 256 << 10, unsent: maxUnsent, large: true},
		{name: "unsent=any", chunk: maxFrameLen, large: true},
		{name: "whole", chunk: 1 << 30, large: true},
	}
	type setup struct {
		c     *Client
		peers []Peer
	}
	setups := map[*variant]setup{}
	for _, v := range variants {
		n := &node{name: "b", fn: compute}
		srv, err := NewServer(asyncFunc{LocalFunc(n.Predict)}, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true})
		if err != nil {
			b.Fatal(err)
		}
		srv.chunk, srv.unsent = v.chunk, v.unsent
		s := serveLoopback(b, n, srv, srv.Serve, srv.Stop)
		c := NewClient(ClientOptions{})
		c.chunk, c.unsent = v.chunk, v.unsent
		b.Cleanup(c.Close)
		p := s.peer
		if link > 0 {
			p.Addr = slowLink(b, p.Addr, link)
		}
		setups[v] = setup{c: c, peers: []Peer{p}}
	}
	vals := make([]float32, 64)
	small := Request{ModelPath: "pctr_v1/", Priority: User, RequestID: "small", Inputs: []servables.Tensor{f32(b, "x", []int64{1, 64}, vals...)}}
	large := floatRequest(b, rows)
	ctx := context.Background()
	call := func(s setup, req Request) time.Duration {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := s.c.Forward(ctx, s.peers, req); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for _, v := range variants { // connect and warm up
		for range 20 {
			call(setups[v], small)
		}
		if v.large {
			call(setups[v], large)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range variants {
			v := variants[(i+k)%len(variants)]
			s := setups[v]
			if !v.large {
				for range 20 {
					v.small = append(v.small, call(s, small))
				}
				continue
			}
			v.alone = append(v.alone, call(s, large))
			done := make(chan time.Duration, 1)
			conn := s.c.pools[s.peers[0].Addr].slots[0].conn
			go func() { done <- call(s, large) }()
			for { // until the large call is made (its writer starts at once)
				conn.mu.Lock()
				n := len(conn.waiting)
				conn.mu.Unlock()
				if n > 0 {
					break
				}
				runtime.Gosched()
			}
			var worst time.Duration
		round:
			for {
				select {
				case d := <-done:
					v.big = append(v.big, d)
					break round
				default:
				}
				d := call(s, small)
				v.small, worst = append(v.small, d), max(worst, d)
			}
			v.worst = append(v.worst, worst)
		}
	}
	b.StopTimer()
	for _, v := range variants {
		p50, _ := quantiles(v.small)
		b.ReportMetric(us(p50), v.name+"-small-p50-µs")
		if v.large {
			worst, _ := quantiles(v.worst)
			big, _ := quantiles(v.big)
			alone, _ := quantiles(v.alone)
			b.ReportMetric(us(worst), v.name+"-small-worst-µs")
			b.ReportMetric(us(big), v.name+"-large-p50-µs")
			b.ReportMetric(us(alone), v.name+"-large-alone-p50-µs")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// slowLink relays the connections made to the address it returns to
// target at most rate bytes a second each way, as a network link of that
// bandwidth would: it reads 16 KiB at a time, on sockets whose receive
// buffers are small (64 KiB), so that little is in flight on it and what
// a sender writes waits in the sender's socket, as behind a real link.
// The benchmark's end closes it.
func slowLink(tb testing.TB, target string, rate int) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	pass := func(dst, src *net.TCPConn) {
		defer func() { _ = dst.CloseWrite() }()
		buf := make([]byte, 16<<10)
		start, sent := time.Now(), 0
		for {
			n, err := src.Read(buf)
			if n > 0 {
				sent += n
				if wait := time.Until(start.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))); wait > 0 {
					time.Sleep(wait)
				} else if wait < -10*time.Millisecond {
					start, sent = time.Now(), 0 // an idle link does not bank its bandwidth
				}
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			cc, sc := c.(*net.TCPConn), s.(*net.TCPConn)
			_ = cc.SetReadBuffer(64 << 10)
			_ = sc.SetReadBuffer(64 << 10)
			_ = cc.SetNoDelay(true)
			_ = sc.SetNoDelay(true)
			wg.Go(func() { pass(sc, cc) })
			wg.Go(func() { pass(cc, sc) })
			tb.Cleanup(func() {
				_ = cc.Close()
				_ = sc.Close()
			})
		}
	})
	return ln.Addr().String()
}
