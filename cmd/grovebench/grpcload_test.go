package main

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// sumServer answers ModelInfer with the sum of each row (and one value too
// few when short is set).
type sumServer struct {
	oippb.UnimplementedGRPCInferenceServiceServer
	short bool
	block chan struct{} // if set, ModelInfer waits for it to close
}

func (s *sumServer) ModelMetadata(_ context.Context, r *oippb.ModelMetadataRequest) (*oippb.ModelMetadataResponse, error) {
	return &oippb.ModelMetadataResponse{Name: r.Name, Inputs: []*oippb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 3}}}}, nil
}

func (s *sumServer) ModelInfer(ctx context.Context, r *oippb.ModelInferRequest) (*oippb.ModelInferResponse, error) {
	if r.ModelName == "missing" {
		return nil, status.Errorf(codes.NotFound, "no model %q", r.ModelName)
	}
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	in := r.Inputs[0]
	raw := r.RawInputContents[0]
	rows, width := int(in.Shape[0]), int(in.Shape[1])
	if s.short {
		rows--
	}
	var out []byte
	for i := range rows {
		var sum float32
		for j := range width {
			sum += math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*width+j):]))
		}
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(sum))
	}
	return &oippb.ModelInferResponse{ModelName: r.ModelName,
		Outputs:           []*oippb.ModelInferResponse_InferOutputTensor{{Name: "y", Datatype: "FP32", Shape: []int64{int64(rows), 1}}},
		RawOutputContents: [][]byte{out}}, nil
}

func startSumServer(t *testing.T, s *sumServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	oippb.RegisterGRPCInferenceServiceServer(g, s)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// TestGRPCLoad checks the gRPC target: the check request's outputs, a
// load run's counting, and that a wrong answer counts as an error.
func TestGRPCLoad(t *testing.T) {
	ctx := context.Background()
	rows := [][]float64{{1, 2, 3}, {0.5, 0.25, -1}}
	addr := startSumServer(t, &sumServer{})
	if _, err := newGRPCTarget(ctx, addr, rows, []float64{6, 0}, time.Second); err == nil || !strings.Contains(err.Error(), "output 1") {
		t.Errorf("wrong expected outputs accepted: %v", err)
	}
	gt, err := newGRPCTarget(ctx, addr, rows, []float64{6, -0.25}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bad := &grpcTarget{addr: startSumServer(t, &sumServer{short: true}), input: "x", width: 3}
	for _, grpcGo := range []bool{false, true} {
		spec := loadSpec{newCall: gt.caller(rows[0], 4, time.Second, grpcGo), batch: 4, conc: 3,
			warmup: 50 * time.Millisecond, duration: 200 * time.Millisecond, timeout: time.Second}
		r := runLoad(ctx, spec)
		if r.Errors != 0 || r.Requests == 0 || r.RowsPerSec != 4*r.ReqPerSec {
			t.Errorf("grpcGo=%v: ok run: %+v", grpcGo, r.summary())
		}
		spec.newCall = bad.caller(rows[0], 4, time.Second, grpcGo)
		if r := runLoad(ctx, spec); r.Errors == 0 || !strings.Contains(r.FirstError, "want one of 16 bytes") {
			t.Errorf("grpcGo=%v: short answers: %+v", grpcGo, r.summary())
		}
	}
}
