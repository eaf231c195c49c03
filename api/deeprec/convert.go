package deeprec

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/servables"
)

// dtypes maps the ArrayDataTypes Grove takes to its DTypes; the others
// (DT_INVALID, the complex, quantized and unsigned 16-bit types,
// DT_RESOURCE, DT_VARIANT) have no DType and are refused by name.
var dtypes = map[deeprecpb.ArrayDataType]servables.DType{
	deeprecpb.ArrayDataType_DT_FLOAT:    servables.Float32,
	deeprecpb.ArrayDataType_DT_DOUBLE:   servables.Float64,
	deeprecpb.ArrayDataType_DT_INT32:    servables.Int32,
	deeprecpb.ArrayDataType_DT_UINT8:    servables.Uint8,
	deeprecpb.ArrayDataType_DT_INT16:    servables.Int16,
	deeprecpb.ArrayDataType_DT_INT8:     servables.Int8,
	deeprecpb.ArrayDataType_DT_STRING:   servables.Bytes,
	deeprecpb.ArrayDataType_DT_INT64:    servables.Int64,
	deeprecpb.ArrayDataType_DT_BOOL:     servables.Bool,
	deeprecpb.ArrayDataType_DT_BFLOAT16: servables.BFloat16,
	deeprecpb.ArrayDataType_DT_HALF:     servables.Float16,
}

// ArrayType returns the ArrayDataType of a Grove DType; ok is false for a
// DType DeepRec's protocol cannot carry (none today: every DType has one).
func ArrayType(d servables.DType) (deeprecpb.ArrayDataType, bool) {
	switch d {
	case servables.Float32:
		return deeprecpb.ArrayDataType_DT_FLOAT, true
	case servables.Float64:
		return deeprecpb.ArrayDataType_DT_DOUBLE, true
	case servables.Int32:
		return deeprecpb.ArrayDataType_DT_INT32, true
	case servables.Uint8:
		return deeprecpb.ArrayDataType_DT_UINT8, true
	case servables.Int16:
		return deeprecpb.ArrayDataType_DT_INT16, true
	case servables.Int8:
		return deeprecpb.ArrayDataType_DT_INT8, true
	case servables.Bytes:
		return deeprecpb.ArrayDataType_DT_STRING, true
	case servables.Int64:
		return deeprecpb.ArrayDataType_DT_INT64, true
	case servables.Bool:
		return deeprecpb.ArrayDataType_DT_BOOL, true
	case servables.BFloat16:
		return deeprecpb.ArrayDataType_DT_BFLOAT16, true
	case servables.Float16:
		return deeprecpb.ArrayDataType_DT_HALF, true
	}
	return deeprecpb.ArrayDataType_DT_INVALID, false
}

// DTypeOf returns the Grove DType of an ArrayDataType; ok is false for a
// type Grove does not take.
func DTypeOf(a deeprecpb.ArrayDataType) (servables.DType, bool) {
	d, ok := dtypes[a]
	return d, ok
}

// TypeName is the DeepRec name of a Grove DType (DT_FLOAT, DT_HALF, ...),
// which errors about DeepRec requests use (servables.RenderDTypes).
func TypeName(d servables.DType) string {
	if a, ok := ArrayType(d); ok {
		return a.String()
	}
	return d.String()
}

// supported lists the ArrayDataTypes Grove takes, in enum order, for
// error messages.
func supported() string {
	names := make([]string, 0, len(dtypes))
	for a := range dtypes {
		names = append(names, a.String())
	}
	slices.SortFunc(names, func(x, y string) int {
		return int(deeprecpb.ArrayDataType_value[x] - deeprecpb.ArrayDataType_value[y])
	})
	return strings.Join(names, ", ")
}

// valueList names the typed value field an array's elements go in, for
// errors: float_val, double_val, int_val, string_val, int64_val or
// bool_val.
func valueList(a deeprecpb.ArrayDataType) string {
	switch a {
	case deeprecpb.ArrayDataType_DT_FLOAT, deeprecpb.ArrayDataType_DT_BFLOAT16, deeprecpb.ArrayDataType_DT_HALF:
		return "float_val"
	case deeprecpb.ArrayDataType_DT_DOUBLE:
		return "double_val"
	case deeprecpb.ArrayDataType_DT_STRING:
		return "string_val"
	case deeprecpb.ArrayDataType_DT_INT64:
		return "int64_val"
	case deeprecpb.ArrayDataType_DT_BOOL:
		return "bool_val"
	}
	return "int_val"
}

// valueLists are the typed value fields of an ArrayProto.
var valueLists = [...]string{"float_val", "double_val", "int_val", "string_val", "int64_val", "bool_val"}

// count returns the number of elements in a's value field named field.
func count(a *deeprecpb.ArrayProto, field string) int {
	switch field {
	case "float_val":
		return len(a.GetFloatVal())
	case "double_val":
		return len(a.GetDoubleVal())
	case "int_val":
		return len(a.GetIntVal())
	case "string_val":
		return len(a.GetStringVal())
	case "int64_val":
		return len(a.GetInt64Val())
	}
	return len(a.GetBoolVal())
}

// invalid is an InvalidInput error about input name.
func invalid(name, format string, args ...any) error {
	return fmt.Errorf("%w: input %q: %s", servables.ErrInvalidInput, name, fmt.Sprintf(format, args...))
}

// FromArray converts input name, a DeepRec array, to a Grove tensor. The
// array's type must be one Grove takes (DTypeOf), its shape's dimensions
// each at least 1 (no dimension is a scalar: one element), its elements
// exactly as many as the shape holds, all in the value field its type
// selects (float_val for DT_FLOAT, DT_HALF and DT_BFLOAT16; int_val for
// DT_INT32, DT_INT16, DT_INT8 and DT_UINT8, each within its type's range;
// ...) and none in another. DT_HALF and DT_BFLOAT16 values are rounded to
// the nearest, ties to even; a finite value beyond the type's range is an
// error. Every error wraps servables.ErrInvalidInput and names the input.
func FromArray(name string, a *deeprecpb.ArrayProto) (servables.Tensor, error) {
	at := a.GetDtype()
	dt, ok := dtypes[at]
	if !ok {
		return servables.Tensor{}, invalid(name, "data type %v is not supported; Grove takes %s", at, supported())
	}
	shape := a.GetArrayShape().GetDim()
	if shape == nil {
		shape = []int64{}
	}
	n, err := servables.NumElements(shape)
	if err != nil {
		return servables.Tensor{}, invalid(name, "array_shape %v: %v", shape, err)
	}
	field := valueList(at)
	for _, f := range valueLists {
		if c := count(a, f); f != field && c > 0 {
			return servables.Tensor{}, invalid(name, "%v values go in %s, but %s has %d", at, field, f, c)
		}
	}
	if got := count(a, field); got != n {
		return servables.Tensor{}, invalid(name, "array_shape %v holds %d elements, %s has %d", shape, n, field, got)
	}
	if dt == servables.Bytes {
		data := make([]byte, 0, n*servables.BytesLenSize+totalLen(a.GetStringVal()))
		for _, e := range a.GetStringVal() {
			data = servables.AppendBytesElement(data, e)
		}
		return servables.Tensor{Name: name, DType: servables.Bytes, Shape: slices.Clone(shape), Data: data}, nil
	}
	t, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		return servables.Tensor{}, invalid(name, "%v", err)
	}
	switch dt {
	case servables.Float32:
		copy(t.Float32s(), a.GetFloatVal())
	case servables.Float64:
		copy(t.Float64s(), a.GetDoubleVal())
	case servables.Int32:
		copy(t.Int32s(), a.GetIntVal())
	case servables.Int64:
		copy(t.Int64s(), a.GetInt64Val())
	case servables.Bool:
		for i, v := range a.GetBoolVal() {
			if v {
				t.Data[i] = 1
			}
		}
	case servables.Int16:
		dst := t.Int16s()
		for i, v := range a.GetIntVal() {
			if v < math.MinInt16 || v > math.MaxInt16 {
				return servables.Tensor{}, invalid(name, "int_val[%d] is %d, out of the range of %v (%d to %d)", i, v, at, math.MinInt16, math.MaxInt16)
			}
			dst[i] = int16(v)
		}
	case servables.Int8:
		dst := t.Int8s()
		for i, v := range a.GetIntVal() {
			if v < math.MinInt8 || v > math.MaxInt8 {
				return servables.Tensor{}, invalid(name, "int_val[%d] is %d, out of the range of %v (%d to %d)", i, v, at, math.MinInt8, math.MaxInt8)
			}
			dst[i] = int8(v)
		}
	case servables.Uint8:
		for i, v := range a.GetIntVal() {
			if v < 0 || v > math.MaxUint8 {
				return servables.Tensor{}, invalid(name, "int_val[%d] is %d, out of the range of %v (0 to %d)", i, v, at, math.MaxUint8)
			}
			t.Data[i] = uint8(v)
		}
	case servables.Float16, servables.BFloat16:
		round := servables.Float16Bits
		if dt == servables.BFloat16 {
			round = servables.BFloat16Bits
		}
		dst := t.Uint16s()
		for i, v := range a.GetFloatVal() {
			bits, ok := round(float64(v))
			if !ok {
				return servables.Tensor{}, invalid(name, "float_val[%d] is %g, beyond the range of %v", i, v, at)
			}
			dst[i] = bits
		}
	}
	return t, nil
}

func totalLen(elems [][]byte) int {
	n := 0
	for _, e := range elems {
		n += len(e)
	}
	return n
}

// ToArray converts a Grove tensor (a model's output) to a DeepRec array,
// as DeepRec's processor writes them: DT_HALF and DT_BFLOAT16 as float32
// values in float_val, DT_INT16, DT_INT8 and DT_UINT8 in int_val. A
// tensor whose data does not fit its type and shape is an error wrapping
// servables.ErrOutput.
func ToArray(t servables.Tensor) (*deeprecpb.ArrayProto, error) {
	at, ok := ArrayType(t.DType)
	if !ok {
		return nil, fmt.Errorf("%w: output %q is %v, which DeepRec's protocol cannot carry", servables.ErrOutput, t.Name, t.DType)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, t.Name, err)
	}
	a := &deeprecpb.ArrayProto{Dtype: at, ArrayShape: &deeprecpb.ArrayShape{Dim: slices.Clone(t.Shape)}}
	switch t.DType {
	case servables.Float32:
		a.FloatVal = slices.Clone(t.Float32s())
	case servables.Float64:
		a.DoubleVal = slices.Clone(t.Float64s())
	case servables.Int32:
		a.IntVal = slices.Clone(t.Int32s())
	case servables.Int64:
		a.Int64Val = slices.Clone(t.Int64s())
	case servables.Bool:
		a.BoolVal = make([]bool, len(t.Data))
		for i, b := range t.Data {
			a.BoolVal[i] = b != 0
		}
	case servables.Int16:
		a.IntVal = widen(t.Int16s())
	case servables.Int8:
		a.IntVal = widen(t.Int8s())
	case servables.Uint8:
		a.IntVal = widen(t.Uint8s())
	case servables.Float16, servables.BFloat16:
		n := t.Len()
		a.FloatVal = make([]float32, n)
		for i := range n {
			a.FloatVal[i] = float32(t.HalfAt(i))
		}
	case servables.Bytes:
		elems, err := t.BytesElements()
		if err != nil {
			return nil, fmt.Errorf("%w: output %q: %w", servables.ErrOutput, t.Name, err)
		}
		a.StringVal = elems
	}
	return a, nil
}

func widen[T int8 | int16 | uint8](v []T) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
