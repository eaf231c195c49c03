package graphpipe

import (
	"bytes"
	"strings"
	"testing"

	gp "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

func TestFloat16TravelsBothWaysAndTypesGraphPipeLacksAreOutputErrors(t *testing.T) {
	req, err := ParseRequest(buildInfer(t, "", nil, nil, &gp.NativeTensor{Type: gpfb.TypeFloat16, Shape: []int64{2}, Data: []byte{0x00, 0x3c, 0x66, 0x2e}}))
	if err != nil || req.Inputs[0].DType != servables.Float16 || req.Inputs[0].Uint16s()[1] != 0x2e66 {
		t.Fatalf("Float16 input: %v %+v", err, req)
	}
	h := servables.Tensor{Name: "h", DType: servables.Float16, Shape: []int64{2}, Data: []byte{0x00, 0x3c, 0x66, 0x2e}}
	res := gpfb.GetRootAsInferResponse(AppendInferResponse(nil, []servables.Tensor{h}), 0)
	var ft gpfb.Tensor
	if res.OutputTensorsLength() != 1 || !res.OutputTensors(&ft, 0) || ft.Type() != gpfb.TypeFloat16 || !bytes.Equal(ft.DataBytes(), h.Data) {
		t.Fatalf("Float16 output: %d outputs, type %d", res.OutputTensorsLength(), ft.Type())
	}
	b := servables.Tensor{Name: "b", DType: servables.BFloat16, Shape: []int64{1}, Data: []byte{0x80, 0x3f}}
	res = gpfb.GetRootAsInferResponse(AppendInferResponse(nil, []servables.Tensor{h, b}), 0)
	var e gpfb.Error
	if res.OutputTensorsLength() != 0 || res.ErrorsLength() != 1 || !res.Errors(&e, 0) || e.Code() != OutputErrorCode ||
		!strings.Contains(string(e.Message()), `output 1 ("b") is BFLOAT16, which GraphPipe has no type for`) {
		t.Fatalf("BFloat16 output: %d outputs, %d errors, %q", res.OutputTensorsLength(), res.ErrorsLength(), e.Message())
	}
}

func TestUnsupportedTypeErrorListsEveryTypeThatParses(t *testing.T) {
	_, err := ParseRequest(buildInfer(t, "", nil, nil, &gp.NativeTensor{Type: gpfb.TypeUint64, Shape: []int64{1}, Data: make([]byte, 8)}))
	if err == nil {
		t.Fatal("Uint64 accepted")
	}
	msg := err.Error()
	for typ, name := range gpfb.EnumNamesType {
		// One element of 1, 2, 4 or 8 bytes, or one string.
		tensors := []*gp.NativeTensor{{Type: uint8(typ), Shape: []int64{1}, StringVals: []string{"s"}}}
		for _, size := range []int{1, 2, 4, 8} {
			tensors = append(tensors, &gp.NativeTensor{Type: uint8(typ), Shape: []int64{1}, Data: make([]byte, size)})
		}
		for _, nt := range tensors {
			if _, perr := ParseRequest(buildInfer(t, "", nil, nil, nt)); perr == nil && !strings.Contains(msg, name) {
				t.Errorf("%s parses, but the unsupported-type error does not list it: %s", name, msg)
			}
		}
	}
}
