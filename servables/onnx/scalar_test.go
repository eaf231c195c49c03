package onnx

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/groveml/grove/internal/mallocarena"
	"github.com/groveml/grove/servables"
)

// protoBytes and protoVarint append a length-delimited or varint field.
func protoBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func protoVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// floatValue is a ValueInfoProto of a FLOAT tensor named name: dims of -1
// are the symbolic "n", an empty dims a rank-0 shape.
func floatValue(name string, dims ...int64) []byte {
	shape := []byte{}
	for _, d := range dims {
		if d < 0 {
			shape = protoBytes(shape, 1, protoBytes(nil, 2, []byte("n")))
		} else {
			shape = protoBytes(shape, 1, protoVarint(nil, 1, uint64(d)))
		}
	}
	tensor := protoBytes(protoVarint(nil, 1, 1), 2, shape) // elem_type FLOAT, shape
	return protoBytes(protoBytes(nil, 1, []byte(name)), 2, protoBytes(nil, 1, tensor))
}

// writeSumModel writes an ONNX model (opset 13) of x FLOAT [n] whose
// outputs are s, ReduceSum(x) with keepdims 0 (rank 0), then y, x itself.
func writeSumModel(t testing.TB) string {
	t.Helper()
	sum := protoBytes(nil, 1, []byte("x"))
	sum = protoBytes(sum, 2, []byte("s"))
	sum = protoBytes(sum, 4, []byte("ReduceSum"))
	keepdims := protoVarint(protoVarint(protoBytes(nil, 1, []byte("keepdims")), 3, 0), 20, 2) // INT attribute 0
	sum = protoBytes(sum, 5, keepdims)
	id := protoBytes(protoBytes(protoBytes(nil, 1, []byte("x")), 2, []byte("y")), 4, []byte("Identity"))
	g := protoBytes(nil, 1, sum)
	g = protoBytes(g, 1, id)
	g = protoBytes(g, 2, []byte("sum"))
	g = protoBytes(g, 11, floatValue("x", -1))
	g = protoBytes(g, 12, floatValue("s"))
	g = protoBytes(g, 12, floatValue("y", -1))
	model := protoVarint(nil, 1, 8)                       // ir_version
	model = protoBytes(model, 8, protoVarint(nil, 2, 13)) // opset_import: version 13
	model = protoBytes(model, 7, g)
	file := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(file, model, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// A rank-0 output comes back as a scalar, and the outputs after it come
// back too. onnxruntime_go cannot convert a rank-0 tensor ONNX Runtime
// allocated, and Run then returns without converting or releasing the
// outputs after it: every call failed and leaked y's C buffer.
func TestARankZeroOutputIsReturnedAndLeaksNoOutputAfterIt(t *testing.T) {
	m := load(t, writeSumModel(t), servables.LoadOptions{})
	const n = 1 << 16
	x, err := servables.NewTensor("x", servables.Float32, []int64{n})
	if err != nil {
		t.Fatal(err)
	}
	for i := range x.Float32s() {
		x.Float32s()[i] = 1
	}
	out := predict(t, m, x)
	if len(out) != 2 || out[0].Name != "s" || len(out[0].Shape) != 0 || out[1].Name != "y" || out[1].Len() != n {
		t.Fatalf("outputs %v", out)
	}
	closeTo(t, "s", values(out[0]), []float64{n}, 0)

	yOnly := servables.WithOutputs(context.Background(), []string{"y"})
	for range 10 {
		m.Predict(yOnly, []servables.Tensor{x})
	}
	before, ok := mallocarena.ReadStats()
	if !ok {
		t.Skip("no glibc heap accounting on this platform")
	}
	const calls = 50
	for range calls {
		out, err := m.Predict(yOnly, []servables.Tensor{x})
		if err != nil || len(out) != 1 || out[0].Name != "y" {
			t.Fatalf("asking for y only: %v %v", err, out)
		}
	}
	after, _ := mallocarena.ReadStats()
	perCall := (float64(after.InUse) - float64(before.InUse)) / calls
	t.Logf("C heap in use %d -> %d bytes over %d calls: %+.0f bytes a call", before.InUse, after.InUse, calls, perCall)
	if perCall > 1<<10 {
		t.Errorf("C heap in use grew by %.0f bytes a call (y is %d bytes), want at most 1 KiB", perCall, n*4)
	}
}
