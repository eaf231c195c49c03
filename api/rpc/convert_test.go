package rpc

import (
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/oippb"
	"github.com/groveml/grove/api/sidecarpb"
)

func f32Bytes(vals ...float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// testingAllocs reads how many bytes the process has allocated in all.
type testingAllocs struct{ total uint64 }

func (a *testingAllocs) read() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	a.total = m.TotalAlloc
}

func TestInferInputsDecodesRawAndTypedContents(t *testing.T) {
	raw := &oippb.ModelInferRequest{
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}},
		RawInputContents: [][]byte{f32Bytes(0.5, -1)},
	}
	typed := &oippb.ModelInferRequest{
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2},
			Contents: &oippb.InferTensorContents{Fp32Contents: []float32{0.5, -1}}}},
	}
	for name, req := range map[string]*oippb.ModelInferRequest{"raw": raw, "typed": typed} {
		ts, err := inferInputs(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := ts[0].Float32s(); len(got) != 2 || got[0] != 0.5 || got[1] != -1 {
			t.Errorf("%s: values %v, want [0.5 -1]", name, got)
		}
	}
}

// A shape far larger than the contents sent is refused before any memory
// is allocated for it: a few bytes of request must not take 16 GiB.
func TestInferInputsRefusesHugeShapesBeforeAllocating(t *testing.T) {
	huge := []int64{1 << 31}
	cases := map[string]struct {
		req  *oippb.ModelInferRequest
		want string
	}{
		"raw": {&oippb.ModelInferRequest{
			Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP64", Shape: huge}},
			RawInputContents: [][]byte{make([]byte, 8)},
		}, "8 bytes of raw_input_contents, expected 17179869184"},
		"typed": {&oippb.ModelInferRequest{
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP64", Shape: huge,
				Contents: &oippb.InferTensorContents{Fp64Contents: []float64{1}}}},
		}, "1 values in fp64_contents, expected 2147483648"},
		"no contents": {&oippb.ModelInferRequest{
			Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT8", Shape: huge}},
		}, "0 values in int_contents"},
	}
	for name, c := range cases {
		var before, after testingAllocs
		before.read()
		_, err := inferInputs(c.req)
		after.read()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "input 'x'") {
			t.Errorf("%s: error %v, want one naming input 'x' and %q", name, err, c.want)
		}
		if grew := after.total - before.total; grew > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a refused request", name, grew)
		}
	}
}

func TestInferInputsNamesWhatIsWrong(t *testing.T) {
	in := func(dt string, shape ...int64) *oippb.ModelInferRequest_InferInputTensor {
		return &oippb.ModelInferRequest_InferInputTensor{Name: "x", Datatype: dt, Shape: shape}
	}
	cases := map[string]struct {
		req  *oippb.ModelInferRequest
		want string
	}{
		"raw count": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1), in("FP32", 1)},
			RawInputContents: [][]byte{f32Bytes(1)}}, "expected 2 raw_input_contents"},
		"raw and typed": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1},
			Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}, RawInputContents: [][]byte{f32Bytes(1)}}, "contents given along with raw_input_contents"},
		"datatype":  {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP16", 1)}}, `"FP16" is not supported`},
		"zero dim":  {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1, 0)}}, "dimension 1 is 0"},
		"too large": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1<<20, 1<<20)}}, "exceeds"},
		"int8 range": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT8", Shape: []int64{1},
			Contents: &oippb.InferTensorContents{IntContents: []int32{300}}}}}, "out of range for INT8"},
	}
	for name, c := range cases {
		if _, err := inferInputs(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", name, err, c.want)
		}
	}
}

func TestSidecarTensorsRefuseHugeShapesBeforeAllocating(t *testing.T) {
	tp := &sidecarpb.TensorProto{TensorName: "x", DataType: sidecarpb.DataTypeProto_DOUBLE, TensorShape: []int64{1 << 31},
		TensorContent: &sidecarpb.TensorContent{TensorContentDouble: []float64{1}}}
	var before, after testingAllocs
	before.read()
	_, err := tensorsFromProto([]*sidecarpb.TensorProto{tp})
	after.read()
	if err == nil || !strings.Contains(err.Error(), "1 values for shape [2147483648]") {
		t.Errorf("error %v, want the value count and shape named", err)
	}
	if grew := after.total - before.total; grew > 1<<20 {
		t.Errorf("%d bytes allocated for a refused request", grew)
	}
	tp = &sidecarpb.TensorProto{TensorName: "x", DataType: sidecarpb.DataTypeProto_INT8, TensorShape: []int64{2},
		TensorContent: &sidecarpb.TensorContent{TensorContentInt32: []int32{1, -129}}}
	if _, err := tensorsFromProto([]*sidecarpb.TensorProto{tp}); err == nil || !strings.Contains(err.Error(), "value -129 at 1 is out of range") {
		t.Errorf("INT8 out of range: %v", err)
	}
	tp.TensorContent.TensorContentInt32 = []int32{1, -128}
	ts, err := tensorsFromProto([]*sidecarpb.TensorProto{tp})
	if err != nil || ts[0].Int8s()[1] != -128 {
		t.Errorf("INT8: %v %v", ts, err)
	}
}

// FuzzInferInputs feeds arbitrary ModelInferRequest and sidecar
// PredictRequest bytes through the gRPC tensor decoders: they either
// return tensors whose data matches their shape or an error, never panic
// and never allocate more than the request carries.
func FuzzInferInputs(f *testing.F) {
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}},
		RawInputContents: [][]byte{f32Bytes(1, 2)}})
	seed(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "INT16", Shape: []int64{2},
		Contents: &oippb.InferTensorContents{IntContents: []int32{1, 40000}}}}})
	seed(&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP64", Shape: []int64{1 << 31}}}})
	seed(&sidecarpb.TensorProto{TensorName: "x", DataType: sidecarpb.DataTypeProto_INT64, TensorShape: []int64{2},
		TensorContent: &sidecarpb.TensorContent{TensorContentInt64: []int64{1, 2}}})
	f.Fuzz(func(t *testing.T, b []byte) {
		var req oippb.ModelInferRequest
		if proto.Unmarshal(b, &req) == nil {
			if ts, err := inferInputs(&req); err == nil {
				for _, x := range ts {
					if err := x.Validate(); err != nil {
						t.Fatalf("decoded tensor %v: %v", x.Shape, err)
					}
					if len(x.Data) > 8*len(b)+8 {
						t.Fatalf("%d bytes of tensor from %d bytes of request", len(x.Data), len(b))
					}
				}
			}
		}
		var tp sidecarpb.TensorProto
		if proto.Unmarshal(b, &tp) == nil {
			if ts, err := tensorsFromProto([]*sidecarpb.TensorProto{&tp}); err == nil {
				if err := ts[0].Validate(); err != nil {
					t.Fatalf("decoded tensor %v: %v", ts[0].Shape, err)
				}
				if len(ts[0].Data) > 8*len(b)+8 {
					t.Fatalf("%d bytes of tensor from %d bytes of request", len(ts[0].Data), len(b))
				}
			}
		}
	})
}
