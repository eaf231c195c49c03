package deeprec

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/servables"
)

func shape(d ...int64) *deeprecpb.ArrayShape { return &deeprecpb.ArrayShape{Dim: d} }

// TestArrayRoundTrip converts an array of every type Grove takes to a
// tensor, checks the tensor's type and elements, and converts it back.
func TestArrayRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		in    *deeprecpb.ArrayProto
		dtype servables.DType
		want  []float64 // the elements, widened (Float64At); nil for strings
		// back is what ToArray gives for the tensor; nil means in itself.
		back *deeprecpb.ArrayProto
	}{
		{"float", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(2, 2), FloatVal: []float32{1.5, -2, 0.1, float32(math.Inf(1))}},
			servables.Float32, []float64{1.5, -2, float64(float32(0.1)), math.Inf(1)}, nil},
		{"double", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_DOUBLE, ArrayShape: shape(3), DoubleVal: []float64{0.1, -1e300, 5}},
			servables.Float64, []float64{0.1, -1e300, 5}, nil},
		{"int32", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT32, ArrayShape: shape(1, 3), IntVal: []int32{math.MinInt32, 0, math.MaxInt32}},
			servables.Int32, []float64{math.MinInt32, 0, math.MaxInt32}, nil},
		{"uint8", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_UINT8, ArrayShape: shape(3), IntVal: []int32{0, 128, 255}},
			servables.Uint8, []float64{0, 128, 255}, nil},
		{"int16", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT16, ArrayShape: shape(2), IntVal: []int32{-32768, 32767}},
			servables.Int16, []float64{-32768, 32767}, nil},
		{"int8", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT8, ArrayShape: shape(2), IntVal: []int32{-128, 127}},
			servables.Int8, []float64{-128, 127}, nil},
		{"int64", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT64, ArrayShape: shape(2), Int64Val: []int64{math.MinInt64, 1 << 60}},
			servables.Int64, []float64{math.MinInt64, 1 << 60}, nil},
		{"bool", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_BOOL, ArrayShape: shape(3), BoolVal: []bool{true, false, true}},
			servables.Bool, []float64{1, 0, 1}, nil},
		{"half", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_HALF, ArrayShape: shape(3), FloatVal: []float32{1, 0.1, 65504}},
			servables.Float16, []float64{1, 0.0999755859375, 65504},
			&deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_HALF, ArrayShape: shape(3), FloatVal: []float32{1, 0.0999755859375, 65504}}},
		{"bfloat16", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_BFLOAT16, ArrayShape: shape(2), FloatVal: []float32{1, 0.1}},
			servables.BFloat16, []float64{1, 0.10009765625},
			&deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_BFLOAT16, ArrayShape: shape(2), FloatVal: []float32{1, 0.10009765625}}},
		{"scalar", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, FloatVal: []float32{7}},
			servables.Float32, []float64{7},
			&deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(), FloatVal: []float32{7}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn, err := FromArray("x", c.in)
			if err != nil {
				t.Fatal(err)
			}
			if tn.Name != "x" || tn.DType != c.dtype {
				t.Fatalf("got %q %v, want x %v", tn.Name, tn.DType, c.dtype)
			}
			if err := tn.Validate(); err != nil {
				t.Fatal(err)
			}
			for i, w := range c.want {
				if g := tn.Float64At(i); g != w {
					t.Errorf("element %d is %v, want %v", i, g, w)
				}
			}
			back, err := ToArray(tn)
			if err != nil {
				t.Fatal(err)
			}
			want := c.back
			if want == nil {
				want = c.in
			}
			if !proto.Equal(back, want) {
				t.Errorf("back to an array: %v, want %v", back, want)
			}
		})
	}
}

func TestStringArray(t *testing.T) {
	in := &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_STRING, ArrayShape: shape(1, 3), StringVal: [][]byte{[]byte("elf"), {}, {0xff, 0}}}
	tn, err := FromArray("s", in)
	if err != nil {
		t.Fatal(err)
	}
	if tn.DType != servables.Bytes || !slices.Equal(tn.Shape, []int64{1, 3}) {
		t.Fatalf("got %v %v", tn.DType, tn.Shape)
	}
	elems, err := tn.BytesElements()
	if err != nil {
		t.Fatal(err)
	}
	if len(elems) != 3 || string(elems[0]) != "elf" || len(elems[1]) != 0 || string(elems[2]) != "\xff\x00" {
		t.Fatalf("elements %q", elems)
	}
	back, err := ToArray(tn)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(back, in) {
		t.Errorf("back: %v, want %v", back, in)
	}
}

// TestArrayRefused checks each refusal names the input and the problem,
// and is the caller's mistake.
func TestArrayRefused(t *testing.T) {
	cases := []struct {
		name string
		in   *deeprecpb.ArrayProto
		want string
	}{
		{"invalid", &deeprecpb.ArrayProto{ArrayShape: shape(1), FloatVal: []float32{1}}, `input "x": data type DT_INVALID is not supported; Grove takes DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING, DT_INT64, DT_BOOL, DT_BFLOAT16, DT_HALF`},
		{"complex64", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_COMPLEX64, ArrayShape: shape(1), FloatVal: []float32{1, 2}}, "data type DT_COMPLEX64 is not supported"},
		{"complex128", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_COMPLEX128, ArrayShape: shape(1), DoubleVal: []float64{1, 2}}, "data type DT_COMPLEX128 is not supported"},
		{"qint8", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_QINT8, ArrayShape: shape(1), IntVal: []int32{1}}, "data type DT_QINT8 is not supported"},
		{"quint8", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_QUINT8}, "data type DT_QUINT8 is not supported"},
		{"qint16", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_QINT16}, "data type DT_QINT16 is not supported"},
		{"quint16", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_QUINT16}, "data type DT_QUINT16 is not supported"},
		{"qint32", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_QINT32}, "data type DT_QINT32 is not supported"},
		{"uint16", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_UINT16, ArrayShape: shape(1), IntVal: []int32{1}}, "data type DT_UINT16 is not supported"},
		{"resource", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_RESOURCE}, "data type DT_RESOURCE is not supported"},
		{"variant", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_VARIANT}, "data type DT_VARIANT is not supported"},
		{"unknown number", &deeprecpb.ArrayProto{Dtype: 99}, "data type 99 is not supported"},
		{"too few", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(2, 3), FloatVal: []float32{1, 2, 3, 4, 5}}, `input "x": array_shape [2 3] holds 6 elements, float_val has 5`},
		{"too many", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT64, ArrayShape: shape(1), Int64Val: []int64{1, 2}}, "array_shape [1] holds 1 elements, int64_val has 2"},
		{"scalar empty", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT}, "array_shape [] holds 1 elements, float_val has 0"},
		{"zero dim", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(0)}, "array_shape [0]: invalid tensor shape: dimension 0 is 0"},
		{"negative dim", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(-1, 2)}, "dimension 0 is -1"},
		{"huge", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(1<<20, 1<<20)}, "exceeds"},
		{"wrong list", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_FLOAT, ArrayShape: shape(1), IntVal: []int32{1}}, "DT_FLOAT values go in float_val, but int_val has 1"},
		{"stray list", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_STRING, ArrayShape: shape(1), StringVal: [][]byte{nil}, BoolVal: []bool{true}}, "DT_STRING values go in string_val, but bool_val has 1"},
		{"int8 range", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT8, ArrayShape: shape(2), IntVal: []int32{1, 128}}, "int_val[1] is 128, out of the range of DT_INT8 (-128 to 127)"},
		{"int16 range", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_INT16, ArrayShape: shape(1), IntVal: []int32{-32769}}, "int_val[0] is -32769, out of the range of DT_INT16"},
		{"uint8 range", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_UINT8, ArrayShape: shape(1), IntVal: []int32{-1}}, "int_val[0] is -1, out of the range of DT_UINT8 (0 to 255)"},
		{"half range", &deeprecpb.ArrayProto{Dtype: deeprecpb.ArrayDataType_DT_HALF, ArrayShape: shape(1), FloatVal: []float32{70000}}, "float_val[0] is 70000, beyond the range of DT_HALF"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromArray("x", c.in)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `input "x"`) {
				t.Errorf("error %q, want it to contain %q and name the input", err, c.want)
			}
			if !errors.Is(err, servables.ErrInvalidInput) {
				t.Errorf("error %v is not InvalidInput", err)
			}
		})
	}
}

// TestTypeTables checks ArrayType and DTypeOf are inverses, and that
// every Grove DType has a DeepRec type.
func TestTypeTables(t *testing.T) {
	all := []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64,
		servables.Bool, servables.Uint8, servables.Float16, servables.BFloat16, servables.Bytes}
	for _, d := range all {
		a, ok := ArrayType(d)
		if !ok {
			t.Errorf("%v has no ArrayDataType", d)
			continue
		}
		if back, ok := DTypeOf(a); !ok || back != d {
			t.Errorf("%v -> %v -> %v, %v", d, a, back, ok)
		}
	}
	for v := range deeprecpb.ArrayDataType_name {
		a := deeprecpb.ArrayDataType(v)
		if d, ok := DTypeOf(a); ok {
			if back, _ := ArrayType(d); back != a {
				t.Errorf("%v -> %v -> %v", a, d, back)
			}
		}
	}
	if _, ok := ArrayType(servables.Unknown); ok {
		t.Error("Unknown has an ArrayDataType")
	}
}

func TestToArrayRefusesBadTensor(t *testing.T) {
	_, err := ToArray(servables.Tensor{Name: "y", DType: servables.Float32, Shape: []int64{2}, Data: make([]byte, 4)})
	if !errors.Is(err, servables.ErrOutput) || !strings.Contains(err.Error(), `output "y"`) {
		t.Errorf("got %v", err)
	}
	_, err = ToArray(servables.Tensor{Name: "y", DType: servables.Unknown, Shape: []int64{1}})
	if !errors.Is(err, servables.ErrOutput) {
		t.Errorf("got %v", err)
	}
}
