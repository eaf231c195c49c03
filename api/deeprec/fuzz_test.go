package deeprec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/servables"
)

// fuzzSeeds start FuzzDecode: requests of every type, good and bad. The
// same bodies are checked in under testdata/fuzz/FuzzDecode, written by
// DEEPREC_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus.
func fuzzSeeds() [][]byte {
	arr := func(dt deeprecpb.ArrayDataType, dims []int64, edit func(a *deeprecpb.ArrayProto)) *deeprecpb.ArrayProto {
		a := &deeprecpb.ArrayProto{Dtype: dt, ArrayShape: &deeprecpb.ArrayShape{Dim: dims}}
		edit(a)
		return a
	}
	reqs := []*deeprecpb.PredictRequest{
		{SignatureName: "serving_default", OutputFilter: []string{"y"}, Inputs: map[string]*deeprecpb.ArrayProto{
			"x": arr(deeprecpb.ArrayDataType_DT_FLOAT, []int64{1, 1}, func(a *deeprecpb.ArrayProto) { a.FloatVal = []float32{1} })}},
		{Inputs: map[string]*deeprecpb.ArrayProto{
			"d":   arr(deeprecpb.ArrayDataType_DT_DOUBLE, []int64{2}, func(a *deeprecpb.ArrayProto) { a.DoubleVal = []float64{1, -2} }),
			"i":   arr(deeprecpb.ArrayDataType_DT_INT32, []int64{1, 2}, func(a *deeprecpb.ArrayProto) { a.IntVal = []int32{-1, 7} }),
			"u8":  arr(deeprecpb.ArrayDataType_DT_UINT8, []int64{2}, func(a *deeprecpb.ArrayProto) { a.IntVal = []int32{0, 255} }),
			"i16": arr(deeprecpb.ArrayDataType_DT_INT16, []int64{1}, func(a *deeprecpb.ArrayProto) { a.IntVal = []int32{-300} }),
			"i8":  arr(deeprecpb.ArrayDataType_DT_INT8, []int64{1}, func(a *deeprecpb.ArrayProto) { a.IntVal = []int32{-128} }),
			"s":   arr(deeprecpb.ArrayDataType_DT_STRING, []int64{2}, func(a *deeprecpb.ArrayProto) { a.StringVal = [][]byte{[]byte("elf"), nil} }),
			"l":   arr(deeprecpb.ArrayDataType_DT_INT64, []int64{1}, func(a *deeprecpb.ArrayProto) { a.Int64Val = []int64{1 << 62} }),
			"b":   arr(deeprecpb.ArrayDataType_DT_BOOL, []int64{3}, func(a *deeprecpb.ArrayProto) { a.BoolVal = []bool{true, false, true} }),
			"h":   arr(deeprecpb.ArrayDataType_DT_HALF, []int64{1}, func(a *deeprecpb.ArrayProto) { a.FloatVal = []float32{0.1} }),
			"bf":  arr(deeprecpb.ArrayDataType_DT_BFLOAT16, []int64{1}, func(a *deeprecpb.ArrayProto) { a.FloatVal = []float32{-3e38} }),
		}},
		{Inputs: map[string]*deeprecpb.ArrayProto{
			"c": arr(deeprecpb.ArrayDataType_DT_COMPLEX64, []int64{1}, func(a *deeprecpb.ArrayProto) { a.FloatVal = []float32{1, 2} })}},
		{Inputs: map[string]*deeprecpb.ArrayProto{
			"x": arr(deeprecpb.ArrayDataType_DT_FLOAT, []int64{65536, 65536}, func(a *deeprecpb.ArrayProto) { a.FloatVal = []float32{1} })}},
		{Inputs: map[string]*deeprecpb.ArrayProto{
			"x": arr(deeprecpb.ArrayDataType_DT_INT8, []int64{1}, func(a *deeprecpb.ArrayProto) { a.IntVal = []int32{1000} })}},
		{Inputs: map[string]*deeprecpb.ArrayProto{"x:0": {}}},
		{},
	}
	out := make([][]byte, 0, len(reqs)+2)
	for _, r := range reqs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out, []byte{0xff, 0xff, 0xff}, []byte("\x12\x05\x0a\x01x\x12\x00"))
}

// FuzzDecode feeds bodies to the request decoder: it must never panic;
// a body it refuses is the caller's mistake (InvalidInput); the tensors
// it accepts are valid (their data fills their shapes) and convert back to
// arrays that convert to the same tensors.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			if !errors.Is(err, servables.ErrInvalidInput) {
				t.Fatalf("refusal %v is not InvalidInput", err)
			}
			return
		}
		inputs, err := Inputs(req, nil)
		if err != nil {
			if !errors.Is(err, servables.ErrInvalidInput) {
				t.Fatalf("refusal %v is not InvalidInput", err)
			}
			return
		}
		if len(inputs) != len(req.GetInputs()) || !slices.IsSortedFunc(inputs, func(a, b servables.Tensor) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatalf("%d inputs of %d, or not in name order", len(inputs), len(req.GetInputs()))
		}
		for _, in := range inputs {
			if err := in.Validate(); err != nil {
				t.Fatalf("input %q accepted but invalid: %v", in.Name, err)
			}
			a, err := ToArray(in)
			if err != nil {
				t.Fatalf("input %q does not convert back: %v", in.Name, err)
			}
			again, err := FromArray(in.Name, a)
			if err != nil {
				t.Fatalf("input %q converted back is refused: %v", in.Name, err)
			}
			if again.DType != in.DType || !slices.Equal(again.Shape, in.Shape) || string(again.Data) != string(in.Data) {
				t.Fatalf("input %q changed in a round trip: %v %v, %v %v", in.Name, in.DType, in.Shape, again.DType, again.Shape)
			}
		}
	})
}

// TestWriteFuzzCorpus writes fuzzSeeds to testdata/fuzz/FuzzDecode when
// DEEPREC_WRITE_CORPUS=1, and otherwise checks the checked-in corpus has
// them all.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for i, s := range fuzzSeeds() {
		name := filepath.Join(dir, fmt.Sprintf("seed%02d", i))
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if os.Getenv("DEEPREC_WRITE_CORPUS") == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if b, err := os.ReadFile(name); err != nil || string(b) != content {
			t.Errorf("%s is not seed %d (%v): run DEEPREC_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus", name, i, err)
		}
	}
}
