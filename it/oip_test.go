package it

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oippb"
)

// oipBucket holds pctr_v1/ and two versions of pcvr (pcvr/2/, pcvr/3/).
func oipBucket(t *testing.T) *dirBucket {
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	b.Put(t, "pcvr/2/model.pt", exampleModel(t, "pcvr"))
	b.Put(t, "pcvr/3/model.pt", exampleModel(t, "pcvr"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pcvr/2/"}, modelEntry{Path: "pcvr/3/"})
	return b
}

// rawLE encodes values as little-endian raw contents of the datatype.
func rawLE(datatype string, vals []float64) []byte {
	var out []byte
	for _, v := range vals {
		switch datatype {
		case "FP32":
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		case "FP64":
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
		case "INT64":
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(v)))
		}
	}
	return out
}

// fromRawLE decodes little-endian raw contents.
func fromRawLE(t *testing.T, datatype string, raw []byte) []float64 {
	var out []float64
	switch datatype {
	case "FP32":
		for i := 0; i+4 <= len(raw); i += 4 {
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[i:]))))
		}
	case "FP64":
		for i := 0; i+8 <= len(raw); i += 8 {
			out = append(out, math.Float64frombits(binary.LittleEndian.Uint64(raw[i:])))
		}
	default:
		t.Fatalf("datatype %s", datatype)
	}
	return out
}

// TestOIPGRPCServesModelsByNameAndVersion checks the OIP gRPC service with
// the generated client: health, metadata, version resolution, ModelInfer
// with raw and typed contents matching Python, output filtering, errors,
// and grpcurl through reflection.
func TestOIPGRPCServesModelsByNameAndVersion(t *testing.T) {
	exp := loadExpected(t)
	g := startGrove(t, oipBucket(t).URL(), nil)
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	ctx := withTimeout(t, time.Minute)

	if r, err := c.ServerLive(ctx, &oippb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Fatalf("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &oippb.ServerReadyRequest{}); err != nil || !r.Ready {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	if r, err := c.ServerMetadata(ctx, &oippb.ServerMetadataRequest{}); err != nil || r.Name != "grove" {
		t.Fatalf("ServerMetadata: %v %v", r, err)
	}
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "pcvr"})
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "pcvr" || !slices.Equal(md.Versions, []string{"3", "2"}) || md.Platform != "pytorch_torchscript" || len(md.Inputs) != 2 {
		t.Errorf("ModelMetadata(pcvr) = %v", md)
	}
	for _, c2 := range []struct {
		name, version string
		ready         bool
	}{{"pcvr", "", true}, {"pcvr", "2", true}, {"pcvr", "4", false}, {"pctr_v1", "1", true}, {"nope", "", false}} {
		r, err := c.ModelReady(ctx, &oippb.ModelReadyRequest{Name: c2.name, Version: c2.version})
		if err != nil || r.Ready != c2.ready {
			t.Errorf("ModelReady(%s, %q) = %v, %v; want %v", c2.name, c2.version, r, err, c2.ready)
		}
	}

	// pcvr with raw contents, no version: the highest (3) answers.
	in := exp["pcvr"].Inputs
	req := &oippb.ModelInferRequest{ModelName: "pcvr", Id: "req-1",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "features", Datatype: "FP32", Shape: in[0].Shape},
			{Name: "category", Datatype: "INT64", Shape: in[1].Shape}},
		RawInputContents: [][]byte{rawLE("FP32", in[0].Data), rawLE("INT64", in[1].Data)}}
	resp, err := c.ModelInfer(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ModelVersion != "3" || resp.Id != "req-1" || len(resp.Outputs) != 2 || len(resp.RawOutputContents) != 2 {
		t.Fatalf("ModelInfer(pcvr): %v", resp)
	}
	for i, o := range resp.Outputs {
		want := exp["pcvr"].Outputs[i]
		if !slices.Equal(o.Shape, want.Shape) {
			t.Errorf("output %s shape %v, want %v", o.Name, o.Shape, want.Shape)
		}
		checkClose(t, "pcvr "+o.Name, fromRawLE(t, o.Datatype, resp.RawOutputContents[i]), want.Data, 1e-5)
	}
	// Only the requested output, at version 2.
	req.ModelVersion = "2"
	req.Outputs = []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "output_1"}}
	resp, err = c.ModelInfer(ctx, req)
	if err != nil || resp.ModelVersion != "2" || len(resp.Outputs) != 1 || resp.Outputs[0].Name != "output_1" || resp.Outputs[0].Datatype != "FP64" {
		t.Fatalf("filtered ModelInfer: %v %v", resp, err)
	}

	// pctr_v1 with typed fp32_contents.
	x := exp["pctr_v1"].Inputs[0]
	vals := make([]float32, len(x.Data))
	for i, v := range x.Data {
		vals[i] = float32(v)
	}
	resp, err = c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: x.Shape, Contents: &oippb.InferTensorContents{Fp32Contents: vals}}}})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "pctr_v1 typed", fromRawLE(t, "FP32", resp.RawOutputContents[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)

	for _, bad := range []struct {
		req  *oippb.ModelInferRequest
		code codes.Code
		has  string
	}{
		{&oippb.ModelInferRequest{ModelName: "nope"}, codes.NotFound, "unknown model: 'nope'"},
		{&oippb.ModelInferRequest{ModelName: "pcvr", ModelVersion: "9"}, codes.NotFound, "version 9"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BYTES", Shape: []int64{1}}}}, codes.InvalidArgument, "BYTES"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64}}},
			RawInputContents: [][]byte{make([]byte, 12)}}, codes.InvalidArgument, "12 bytes"},
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 3}}},
			RawInputContents: [][]byte{make([]byte, 12)}}, codes.Internal, "cannot be multiplied"}, // TorchScript records no input shapes
		{&oippb.ModelInferRequest{ModelName: "pctr_v1", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 64}}},
			RawInputContents: [][]byte{make([]byte, 256)}, Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}}, codes.InvalidArgument, "output_0"},
	} {
		_, err := c.ModelInfer(ctx, bad.req)
		if status.Code(err) != bad.code || !strings.Contains(status.Convert(err).Message(), bad.has) {
			t.Errorf("ModelInfer(%v): %v, want %v with %q", bad.req, err, bad.code, bad.has)
		}
	}

	// grpcurl, schema from reflection.
	out, err := exec.CommandContext(ctx, grpcurl(t), "-plaintext", "-d", `{"name": "pcvr"}`, g.grpc, "inference.GRPCInferenceService/ModelMetadata").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"pytorch_torchscript"`) {
		t.Errorf("grpcurl ModelMetadata: %v\n%s", err, out)
	}
}

// TestONNXModelAnswersLikeTorchScriptOnEveryProtocol serves the same pCTR
// weights as TorchScript (pctr_v1/) and ONNX (pctr_onnx/): over B&A REST
// (inputs by tensor_name for ONNX), the sidecar's Predict and OIP gRPC, both
// answer Python's expected outputs to 1e-5.
func TestONNXModelAnswersLikeTorchScriptOnEveryProtocol(t *testing.T) {
	exp := loadExpected(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	onnxModel, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "pctr_onnx/model.onnx", onnxModel)
	putConfig(t, b, modelEntry{Path: "pctr_v1/"}, modelEntry{Path: "pctr_onnx/"})
	g := startGrove(t, b.URL(), nil)
	ctx := withTimeout(t, time.Minute)
	x := exp["pctr_v1"].Inputs[0]
	named := strings.Replace(tensorJSON(x.DataType, x.Shape, x.Data), `{`, `{"tensor_name":"x",`, 1)

	// B&A REST, one batch for both runtimes; ONNX also positionally.
	_, resp, err := g.infer(batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"), itemJSON("pctr_onnx/", named), requestFor(exp, "pctr_v1", "pctr_onnx/"),
		itemJSON("pctr_onnx/", strings.Replace(named, `"x"`, `"y"`, 1))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		checkOutputs(t, exp, "pctr_v1", resp, i)
	}
	if e := resp.Response[3].Error; e == nil || e.ErrorType != "INPUT_PARSING" || !strings.Contains(e.Description, "x FLOAT [-1 64]") {
		t.Errorf("unknown input name: %+v", e)
	}

	// OIP gRPC.
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "pctr_onnx"})
	if err != nil || md.Platform != "onnx_onnxv1" || len(md.Inputs) != 1 || md.Inputs[0].Name != "x" ||
		md.Inputs[0].Datatype != "FP32" || !slices.Equal(md.Inputs[0].Shape, []int64{-1, 64}) {
		t.Errorf("ModelMetadata(pctr_onnx) = %v, %v", md, err)
	}
	for _, name := range []string{"pctr_v1", "pctr_onnx"} {
		r, err := c.ModelInfer(ctx, &oippb.ModelInferRequest{ModelName: name,
			Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: x.Shape}},
			RawInputContents: [][]byte{rawLE("FP32", x.Data)}})
		if err != nil {
			t.Fatalf("ModelInfer(%s): %v", name, err)
		}
		checkClose(t, name+" over OIP gRPC", fromRawLE(t, "FP32", r.RawOutputContents[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)
	}
}
