package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/oip/oippb"
)

// grpcModel is the OIP model name of modelPath (pctr_v1/ → pctr_v1).
const grpcModel = "pctr_v1"

// grpcTarget drives grove's OIP gRPC service: ModelInfer with the input in
// raw_input_contents (little-endian FP32), the fastest form a Triton or
// KServe client sends.
type grpcTarget struct {
	addr  string
	input string // the model's input name, from ModelMetadata
	width int    // features per row
}

// newGRPCTarget asks grove at addr for grpcModel's input and checks one
// answer against want for rows.
func newGRPCTarget(ctx context.Context, addr string, rows [][]float64, want []float64, timeout time.Duration) (*grpcTarget, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := oippb.NewGRPCInferenceServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: grpcModel})
	if err != nil {
		return nil, fmt.Errorf("ModelMetadata(%s): %w", grpcModel, err)
	}
	// TorchScript does not declare input dtypes: an empty one is fine.
	if len(md.Inputs) != 1 || (md.Inputs[0].Datatype != "FP32" && md.Inputs[0].Datatype != "") {
		return nil, fmt.Errorf("ModelMetadata(%s): want one FP32 input, got %v", grpcModel, md.Inputs)
	}
	t := &grpcTarget{addr: addr, input: md.Inputs[0].Name, width: len(rows[0])}
	resp, err := c.ModelInfer(ctx, t.request(rows))
	if err != nil {
		return nil, fmt.Errorf("ModelInfer: %w", err)
	}
	got, err := rawOutputs(resp)
	if err != nil {
		return nil, err
	}
	if len(got) != len(want) {
		return nil, fmt.Errorf("ModelInfer: %d outputs, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-4 {
			return nil, fmt.Errorf("ModelInfer: output %d = %v, want %v (±1e-4)", i, got[i], want[i])
		}
	}
	return t, nil
}

// request is a ModelInfer request for rows, the input in raw_input_contents.
func (t *grpcTarget) request(rows [][]float64) *oippb.ModelInferRequest {
	raw := make([]byte, 0, 4*len(rows)*t.width)
	for _, r := range rows {
		for _, v := range r {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(v)))
		}
	}
	return &oippb.ModelInferRequest{ModelName: grpcModel,
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: t.input, Datatype: "FP32", Shape: []int64{int64(len(rows)), int64(t.width)}}},
		RawInputContents: [][]byte{raw}}
}

// rawOutputs decodes the first output of resp from raw_output_contents.
func rawOutputs(resp *oippb.ModelInferResponse) ([]float64, error) {
	if len(resp.Outputs) == 0 || len(resp.RawOutputContents) == 0 {
		return nil, fmt.Errorf("ModelInfer: no raw output in the answer")
	}
	if dt := resp.Outputs[0].Datatype; dt != "FP32" {
		return nil, fmt.Errorf("ModelInfer: output datatype %s, want FP32", dt)
	}
	raw := resp.RawOutputContents[0]
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("ModelInfer: %d bytes of FP32 output", len(raw))
	}
	out := make([]float64, len(raw)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out, nil
}

// modelInferMethod is ModelInfer's HTTP/2 path.
const modelInferMethod = "/inference.GRPCInferenceService/ModelInfer"

// caller returns a newCall for loadSpec: each closed-loop client gets its
// own connection (as each HTTP client has its own keep-alive connection)
// and sends the same request of batch copies of row, checking that the
// answer has one output per row. The connection is a rawGRPCClient, or
// grpc-go's client when grpcGo is set.
func (t *grpcTarget) caller(row []float64, batch int, timeout time.Duration, grpcGo bool) func() (func(context.Context) error, func(), error) {
	req := t.request(repeat(row, batch))
	if grpcGo {
		return t.grpcGoCaller(req, batch, timeout)
	}
	msg, err := proto.Marshal(req)
	return func() (func(context.Context) error, func(), error) {
		if err != nil {
			return nil, nil, err
		}
		c := newRawGRPCClient(t.addr, modelInferMethod, msg, timeout)
		call := func(ctx context.Context) error {
			resp, err := c.do(ctx)
			if err != nil {
				return err
			}
			return checkRawOutputs(resp, batch)
		}
		return call, c.close, nil
	}
}

// grpcGoCaller is caller with grpc-go's client.
func (t *grpcTarget) grpcGoCaller(req *oippb.ModelInferRequest, batch int, timeout time.Duration) func() (func(context.Context) error, func(), error) {
	return func() (func(context.Context) error, func(), error) {
		conn, err := grpc.NewClient(t.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		c := oippb.NewGRPCInferenceServiceClient(conn)
		call := func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			resp, err := c.ModelInfer(ctx, req)
			if err != nil {
				return err
			}
			if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 4*batch {
				return fmt.Errorf("ModelInfer: %d raw outputs, want one of %d bytes", len(resp.RawOutputContents), 4*batch)
			}
			return nil
		}
		return call, func() { conn.Close() }, nil
	}
}

// checkRawOutputs checks that the serialized ModelInferResponse resp has
// exactly one raw_output_contents (field 6) of 4*batch bytes, reading the
// wire format in place rather than unmarshalling a message per call.
func checkRawOutputs(resp []byte, batch int) error {
	n, size := 0, -1
	for len(resp) > 0 {
		num, typ, tl := protowire.ConsumeTag(resp)
		if tl < 0 {
			return fmt.Errorf("ModelInfer: bad answer: %v", protowire.ParseError(tl))
		}
		vl := protowire.ConsumeFieldValue(num, typ, resp[tl:])
		if vl < 0 {
			return fmt.Errorf("ModelInfer: bad answer: %v", protowire.ParseError(vl))
		}
		if num == 6 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(resp[tl:])
			n, size = n+1, len(v)
		}
		resp = resp[tl+vl:]
	}
	if n != 1 || size != 4*batch {
		return fmt.Errorf("ModelInfer: %d raw outputs, want one of %d bytes", n, 4*batch)
	}
	return nil
}
