package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/groveml/grove/api/oip/oippb"
)

// The transport floor: a server with no model and no decoding that
// answers every request with a fixed answer of the shape grove gives, on
// the same libraries grove serves with (net/http and grpc-go) and with the
// same GOMAXPROCS. Its latency at concurrency 1 is what loopback TCP, the
// HTTP or gRPC stack and the load generator cost on this machine before
// any work is done; grove's overhead target is judged against it.
//
// grovebench runs it as a child: its own binary with floorEnv set to
// "HTTPADDR,GRPCADDR".
const floorEnv = "GROVEBENCH_FLOOR_SERVER"

// floorAnswer is the floor's HTTP answer: grove's answer to a batch-1
// pctr_v1/ request, byte for byte in shape.
var floorAnswer = []byte(`{"response":[{"model_path":"pctr_v1/","tensors":[{"tensor_shape":[1,1],"data_type":"FLOAT","tensor_content":["0.41469395"]}]}]}`)

// serveFloor runs the floor servers on the addresses in spec until the
// process is killed; it returns only on a start-up error.
func serveFloor(spec string) error {
	httpAddr, grpcAddr, ok := strings.Cut(spec, ",")
	if !ok {
		return fmt.Errorf("%s=%q: want HTTPADDR,GRPCADDR", floorEnv, spec)
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0)))) // as grove serves it
	oippb.RegisterGRPCInferenceServiceServer(gs, floorGRPC{})
	errc := make(chan error, 2)
	go func() { errc <- gs.Serve(gl) }()
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bufs.Get().(*bytes.Buffer)
		b.Reset()
		_, err := b.ReadFrom(r.Body)
		bufs.Put(b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(floorAnswer)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { errc <- hs.Serve(hl) }()
	return <-errc
}

// floorGRPC answers ModelInfer with one FP32 output of zeros per row of the
// first input, in raw_output_contents, as grove does.
type floorGRPC struct {
	oippb.UnimplementedGRPCInferenceServiceServer
}

// ModelInfer is the floor's fixed-work inference call.
func (floorGRPC) ModelInfer(_ context.Context, req *oippb.ModelInferRequest) (*oippb.ModelInferResponse, error) {
	if len(req.Inputs) == 0 || len(req.Inputs[0].Shape) == 0 || req.Inputs[0].Shape[0] < 0 || req.Inputs[0].Shape[0] > 1<<20 {
		return nil, errors.New("want an input with a batch dimension")
	}
	rows := req.Inputs[0].Shape[0]
	return &oippb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: "1", Id: req.Id,
		Outputs:           []*oippb.ModelInferResponse_InferOutputTensor{{Name: "output", Datatype: "FP32", Shape: []int64{rows, 1}}},
		RawOutputContents: [][]byte{make([]byte, 4*rows)}}, nil
}

// startFloor starts the floor servers as a child process (this binary
// again) and waits until the HTTP one answers. The returned child, if not
// nil, must be stopped by the caller.
func startFloor(ctx context.Context, logPath string, width int, timeout time.Duration) (*child, *endpoint, *endpoint, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, nil, nil, err
	}
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorEnv+"="+httpAddr+","+grpcAddr)
	c, err := startChild(serverFloor, cmd, logPath)
	if err != nil {
		return nil, nil, nil, err
	}
	h := groveEndpointFor(serverFloor, "http://"+httpAddr)
	h.api = "POST (fixed answer, no model)"
	h.pid = c.cmd.Process.Pid
	if err := waitReady(ctx, c, h.url, timeout, func(code int) bool { return code == http.StatusOK }); err != nil {
		return c, nil, nil, err
	}
	g := &endpoint{server: serverFloorGRPC, api: "gRPC ModelInfer (fixed answer, no model)", url: "grpc://" + grpcAddr,
		grpc: &grpcTarget{addr: grpcAddr, input: "input", width: width}, pid: h.pid}
	return c, h, g, nil
}

// The forwarding floor (serverFloorFwd): a proxy process between the load
// generator and the floor, in the layout of grove-fwd (client -> node that
// forwards -> node that answers). It takes the floor's HTTP request, makes
// one gRPC call to the floor's gRPC server with grpc-go (fixed
// flow-control windows: floorWindowBytes), and answers the floor's fixed
// answer. Its p50 less the HTTP floor's is what one gRPC hop through a
// third process costs on this machine before any work: what grove-fwd
// would add over grove-local if its nodes called each other over gRPC.
// Grove's nodes use their framed transport (cluster/forward), which costs
// less than this.
//
// grovebench runs it as a child: its own binary with floorProxyEnv set to
// "HTTPADDR,GRPCTARGET".
const floorProxyEnv = "GROVEBENCH_FLOOR_PROXY"

// floorWindowBytes is the forwarding floor's fixed HTTP/2 flow-control
// window per call (four times it per connection): with gRPC's default
// dynamic window every answer would be followed by a bandwidth-probe PING
// and its answer, a third and fourth message a tuned gRPC hop does not
// exchange.
const floorWindowBytes = 4 << 20

// serveFloorProxy runs the forwarding floor on the addresses in spec until
// the process is killed; it returns only on a start-up error.
func serveFloorProxy(spec string) error {
	httpAddr, target, ok := strings.Cut(spec, ",")
	if !ok {
		return fmt.Errorf("%s=%q: want HTTPADDR,GRPCTARGET", floorProxyEnv, spec)
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(floorWindowBytes), grpc.WithStaticConnWindowSize(4*floorWindowBytes))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := oippb.NewGRPCInferenceServiceClient(cc)
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	bufs := sync.Pool{New: func() any { return new(bytes.Buffer) }}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(b)
		b.Reset()
		if _, err := b.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The request's bytes travel as the one input's raw content, as
		// grove's forwarded tensors do.
		req := &oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "input", Datatype: "BYTES", Shape: []int64{1}}}, RawInputContents: [][]byte{b.Bytes()}}
		if _, err := client.ModelInfer(r.Context(), req); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(floorAnswer)
	}), ReadHeaderTimeout: 10 * time.Second}
	return hs.Serve(hl)
}

// startFloorProxy starts the forwarding floor as a child process in front
// of the floor's gRPC server at grpcAddr and waits until it answers. The
// returned child, if not nil, must be stopped by the caller.
func startFloorProxy(ctx context.Context, logPath, grpcAddr string, timeout time.Duration) (*child, *endpoint, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), floorProxyEnv+"="+httpAddr+","+grpcAddr)
	c, err := startChild(serverFloorFwd, cmd, logPath)
	if err != nil {
		return nil, nil, err
	}
	ep := groveEndpointFor(serverFloorFwd, "http://"+httpAddr)
	ep.api = "POST (fixed answer, one grpc-go hop to floor-grpc)"
	ep.pid = c.cmd.Process.Pid
	if err := waitReady(ctx, c, ep.url, timeout, func(code int) bool { return code == http.StatusOK }); err != nil {
		return c, nil, err
	}
	return c, ep, nil
}
