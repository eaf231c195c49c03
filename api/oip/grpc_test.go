package oip

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/servables"
)

// allocated returns how many bytes f allocated.
func allocated(f func()) uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	f()
	runtime.ReadMemStats(&m)
	return m.TotalAlloc - before
}

func TestInferInputsDecodesRawAndTypedContents(t *testing.T) {
	raw := &oippb.ModelInferRequest{
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}},
		RawInputContents: [][]byte{le[float32](0.5, -1)},
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
		var err error
		grew := allocated(func() { _, err = inferInputs(c.req) })
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "input 'x'") {
			t.Errorf("%s: error %v, want one naming input 'x' and %q", name, err, c.want)
		}
		if grew > 1<<20 {
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
		"raw count": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1), {Name: "y", Datatype: "FP32", Shape: []int64{1}}},
			RawInputContents: [][]byte{le[float32](1)}}, "expected 2 raw_input_contents"},
		"no inputs":        {&oippb.ModelInferRequest{}, "the request has no inputs"},
		"empty name":       {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1), {Datatype: "FP32", Shape: []int64{1}}}}, "inputs[1] has an empty name"},
		"twice":            {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("FP32", 1), in("FP32", 1)}}, "input 'x' appears twice in the request (inputs[0] and inputs[1])"},
		"twice among many": {&oippb.ModelInferRequest{Inputs: manyInputs(20, 17, 3)}, "input 'i3' appears twice in the request (inputs[3] and inputs[17])"},
		"raw and typed": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1},
			Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}, RawInputContents: [][]byte{le[float32](1)}}, "contents given along with raw_input_contents"},
		"datatype":  {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("UINT16", 1)}}, `"UINT16" is not supported`},
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

func TestInferInputsBoolAndUint8(t *testing.T) {
	in := func(name, dt string, c *oippb.InferTensorContents) *oippb.ModelInferRequest_InferInputTensor {
		return &oippb.ModelInferRequest_InferInputTensor{Name: name, Datatype: dt, Shape: []int64{1, 3}, Contents: c}
	}
	check := func(what string, ts []servables.Tensor, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ts[0].DType != servables.Bool || !bytes.Equal(ts[0].Data, []byte{1, 0, 1}) ||
			ts[1].DType != servables.Uint8 || !bytes.Equal(ts[1].Data, []byte{0, 7, 255}) {
			t.Errorf("%s: %+v", what, ts)
		}
	}
	typed := &oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{
		in("m", "BOOL", &oippb.InferTensorContents{BoolContents: []bool{true, false, true}}),
		in("u", "UINT8", &oippb.InferTensorContents{UintContents: []uint32{0, 7, 255}}),
	}}
	ts, err := inferInputs(typed)
	check("typed", ts, err)
	raw := &oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("m", "BOOL", nil), in("u", "UINT8", nil)},
		RawInputContents: [][]byte{{1, 0, 1}, {0, 7, 255}}}
	ts, err = inferInputs(raw)
	check("raw", ts, err)

	for name, c := range map[string]struct {
		req  *oippb.ModelInferRequest
		want string
	}{
		"uint8 out of range": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			in("u", "UINT8", &oippb.InferTensorContents{UintContents: []uint32{0, 256, 1}})}},
			"input 'u': value 256 at 1 is out of range for UINT8 (0 to 255)"},
		"uint8 in int_contents": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			in("u", "UINT8", &oippb.InferTensorContents{IntContents: []int32{0, 1, 2}})}},
			"input 'u': 0 values in uint_contents, expected 3"},
		"bool in int_contents": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			in("m", "BOOL", &oippb.InferTensorContents{IntContents: []int32{0, 1, 1}})}},
			"input 'm': 0 values in bool_contents, expected 3"},
		"bool count": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			in("m", "BOOL", &oippb.InferTensorContents{BoolContents: []bool{true}})}},
			"input 'm': 1 values in bool_contents, expected 3"},
		"raw bool not 0 or 1": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("m", "BOOL", nil)},
			RawInputContents: [][]byte{{1, 0, 2}}},
			"input 'm': raw_input_contents: byte 2 is 2; BOOL data must be bytes 0 (false) or 1 (true)"},
		"raw uint8 length": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("u", "UINT8", nil)},
			RawInputContents: [][]byte{{1, 2}}},
			"input 'u': 2 bytes of raw_input_contents, expected 3 for shape [1 3] of UINT8"},
		"uint16": {&oippb.ModelInferRequest{Inputs: []*oippb.ModelInferRequest_InferInputTensor{in("w", "UINT16", nil)}},
			`input 'w': datatype "UINT16" is not supported by Grove`},
	} {
		if _, err := inferInputs(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", name, err, c.want)
		}
	}
}

// manyInputs returns n FP32 inputs named i0, i1, ..., but input dup is
// named as input of.
func manyInputs(n, dup, of int) []*oippb.ModelInferRequest_InferInputTensor {
	ins := make([]*oippb.ModelInferRequest_InferInputTensor, n)
	for i := range ins {
		name := i
		if i == dup {
			name = of
		}
		ins[i] = &oippb.ModelInferRequest_InferInputTensor{Name: "i" + strconv.Itoa(name), Datatype: "FP32", Shape: []int64{1},
			Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}
	}
	return ins
}

func TestModelInferRefusesOutputsRESTRefuses(t *testing.T) {
	o := &grpcService{b: &fake{}}
	x := []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1}}}}
	out := func(names ...string) []*oippb.ModelInferRequest_InferRequestedOutputTensor {
		var os []*oippb.ModelInferRequest_InferRequestedOutputTensor
		for _, n := range names {
			os = append(os, &oippb.ModelInferRequest_InferRequestedOutputTensor{Name: n})
		}
		return os
	}
	for _, c := range []struct {
		outputs []*oippb.ModelInferRequest_InferRequestedOutputTensor
		want    string
	}{
		{out("y", "y"), "output 'y' is requested twice (outputs[0] and outputs[1])"},
		{out("y", ""), "outputs[1] has an empty name"},
	} {
		_, err := o.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Inputs: x, Outputs: c.outputs})
		if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("outputs %v: %v, want InvalidArgument saying %q", c.outputs, err, c.want)
		}
	}
}

func TestModelInferReturnsBoolAndUint8AsRawBytes(t *testing.T) {
	m, _ := servables.NewTensor("m", servables.Bool, []int64{2})
	copy(m.Data, []byte{0, 1})
	u, _ := servables.NewTensor("u", servables.Uint8, []int64{3})
	copy(u.Data, []byte{0, 7, 255})
	o := &grpcService{b: &fake{outputs: []servables.Tensor{m, u}}}
	resp, err := o.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m",
		Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "BOOL", Shape: []int64{1}, Contents: &oippb.InferTensorContents{BoolContents: []bool{true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Outputs) != 2 || resp.Outputs[0].Datatype != "BOOL" || resp.Outputs[1].Datatype != "UINT8" ||
		!bytes.Equal(resp.RawOutputContents[0], []byte{0, 1}) || !bytes.Equal(resp.RawOutputContents[1], []byte{0, 7, 255}) {
		t.Errorf("response %v", resp)
	}
}

// FuzzInferInputs feeds arbitrary ModelInferRequest bytes through the gRPC
// tensor decoder: it returns tensors whose data matches their shape or an
// error, never panics and never allocates more than the request carries.
// The seed corpus is in testdata/fuzz/FuzzInferInputs.
func FuzzInferInputs(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var req oippb.ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		ts, err := inferInputs(&req)
		if err != nil {
			return
		}
		for _, x := range ts {
			if err := x.Validate(); err != nil {
				t.Fatalf("decoded tensor %v: %v", x.Shape, err)
			}
			if len(x.Data) > 8*len(b)+8 {
				t.Fatalf("%d bytes of tensor from %d bytes of request", len(x.Data), len(b))
			}
			if x.DType == servables.Bool && bytes.ContainsFunc(x.Data, func(r rune) bool { return r != 0 && r != 1 }) {
				t.Fatalf("BOOL tensor with bytes other than 0 and 1: %v", x.Data)
			}
		}
	})
}
