package onnx

import (
	"errors"
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
	ins, outs, err := graphDims(data)
	if err != nil {
		t.Fatal(err)
	}
	batch4 := []dim{{param: "batch"}, {value: 4}}
	if !reflect.DeepEqual(ins, map[string][]dim{"h": batch4, "x": batch4}) ||
		!reflect.DeepEqual(outs, map[string][]dim{"same": batch4, "wide": batch4, "narrow": batch4}) {
		t.Errorf("inputs %v, outputs %v", ins, outs)
	}
	if _, _, err := graphDims(data[:len(data)-3]); !errors.Is(err, errProto) {
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
		ins, outs, err := graphDims(data)
		if err != nil {
			return
		}
		// An unknown varint field 99 before the model changes nothing.
		ins2, outs2, err := graphDims(append([]byte{0x98, 0x06, 0x01}, data...))
		if err != nil || !reflect.DeepEqual(ins, ins2) || !reflect.DeepEqual(outs, outs2) {
			t.Fatalf("with an unknown field: %v %v %v, without %v %v", ins2, outs2, err, ins, outs)
		}
	})
}
