package onnx

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/groveml/grove/servables"
)

func TestGraphDimsReadsTheDeclaredShapes(t *testing.T) {
	data, err := os.ReadFile(testdata("half"))
	if err != nil {
		t.Fatal(err)
	}
	ins, outs, err := dimsOf(data)
	if err != nil {
		t.Fatal(err)
	}
	batch4 := []dim{{param: "batch"}, {value: 4}}
	if !reflect.DeepEqual(ins, map[string][]dim{"h": batch4, "x": batch4}) ||
		!reflect.DeepEqual(outs, map[string][]dim{"same": batch4, "wide": batch4, "narrow": batch4}) {
		t.Errorf("inputs %v, outputs %v", ins, outs)
	}
	if _, _, err := dimsOf(data[:len(data)-3]); !errors.Is(err, errProto) {
		t.Errorf("a truncated model: %v", err)
	}
}

func TestHalfOutputsOfUnknownSizeAreErrOutput(t *testing.T) {
	m := &Model{
		inputs:  specs{{name: "h", tensor: true, dtype: servables.Float16, shape: []int64{-1}}},
		outputs: []spec{{name: "y", tensor: true, dtype: servables.Float16, ortType: ort.TensorElementDataTypeFloat16, shape: []int64{-1}}},
		inDims:  map[string][]dim{"h": {{param: "n"}}},
		outDims: map[string][]dim{"y": {{param: "m"}}},
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	_, _, err := m.halfOutput(0, []servables.Tensor{{Name: "h", DType: servables.Float16, Shape: []int64{3}}}, &pin)
	if !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), `output "y" is a FLOAT16 tensor whose dimension 0 ("m") no input declares`) {
		t.Errorf("halfOutput: %v", err)
	}
	m.outDims = nil
	if _, _, err := m.halfOutput(0, nil, &pin); !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), "unknown or zero rank") {
		t.Errorf("halfOutput without a declared shape: %v", err)
	}
}

// FuzzGraphDims reads arbitrary bytes as an ONNX model's graph: nothing
// panics, and what it reads from a valid model it reads from the same
// model with unknown fields added. The seed corpus is in
// testdata/fuzz/FuzzGraphDims.
func FuzzGraphDims(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ins, outs, err := dimsOf(data)
		if err != nil {
			return
		}
		// An unknown varint field 99 before the model changes nothing.
		ins2, outs2, err := dimsOf(append([]byte{0x98, 0x06, 0x01}, data...))
		if err != nil || !reflect.DeepEqual(ins, ins2) || !reflect.DeepEqual(outs, outs2) {
			t.Fatalf("with an unknown field: %v %v %v, without %v %v", ins2, outs2, err, ins, outs)
		}
	})
}

// torch.onnx.export names an output's dynamic axis as dynamic_axes says
// ("batch", as the input's): its FLOAT16 output is sized from the input.
func TestTorchExportedFloat16ModelsRun(t *testing.T) {
	out := predict(t, load(t, testdata("torch_half_out"), servables.LoadOptions{}), tensor(t, "x", servables.Float32, []int64{2, 4}, -1, 0, 0.1, 2, 3, 4, 5, 65520))
	if len(out) != 2 || out[1].Name != "half" || out[1].DType != servables.Float16 || fmt.Sprint(out[1].Shape) != "[2 4]" {
		t.Fatalf("outputs %+v", out)
	}
	closeTo(t, "half", values(out[1]), []float64{-1, 0, 0.0999755859375, 2, 3, 4, 5, math.Inf(1)}, 0)
	in := load(t, testdata("torch_half_in"), servables.LoadOptions{})
	h, _ := servables.NewTensor("h", servables.Float16, []int64{1, 4})
	for i, v := range []float64{1, 2, -0.5, 0.25} {
		h.Uint16s()[i], _ = servables.Float16Bits(v)
	}
	closeTo(t, "scaled", values(predict(t, in, h, tensor(t, "x", servables.Float32, []int64{1, 4}, 2, 2, 2, 2))[0]), []float64{2, 4, -1, 0.5}, 0)
}
