package forward

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
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
	"github.com/groveml/grove/transport/grpcserver"
)

// The benchmarks compare a forwarded request (Client.Forward to a Server
// whose Local sums the input's rows) with the floor: a plain grpc-go
// unary call of the same service carrying the same request, answered by a
// handler that returns a response built in advance. The payload is the
// pCTR model's: FLOAT [1, 64] in, FLOAT [1, 1] out.

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

	// The floor: plain grpc-go, same credentials and flow-control windows
	// (with gRPC's default dynamic windows the floor's bandwidth-probe
	// PINGs, answered while the next forwarded call runs, were billed to
	// it: ~12 µs at p50).
	sum := f32(b, "x_sum", []int64{1, 1}, 31.5)
	gopts := []grpc.ServerOption{grpc.StaticStreamWindowSize(WindowBytes), grpc.StaticConnWindowSize(grpcserver.ConnWindow(WindowBytes))}
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
		grpc.WithStaticStreamWindowSize(WindowBytes), grpc.WithStaticConnWindowSize(grpcserver.ConnWindow(WindowBytes)))
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
