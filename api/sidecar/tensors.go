package sidecar

import (
	"fmt"

	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/servables"
)

// rangeError is a value of an INT8 or INT16 tensor that does not fit its
// type: the counterpart of the JSON form's conversion errors, which the
// sidecar finds after its model lookup (ba.Item.InputErr).
type rangeError struct{ msg string }

func (e *rangeError) Error() string { return e.msg }

// tensorsFromProto converts the sidecar's TensorProtos; INT8 and INT16
// values travel in tensor_content_int32 and must fit their type (a
// *rangeError otherwise). As in the sidecar's order of checks, every
// tensor's structure is checked before a value's range: a structural error
// of any tensor wins over a range error of an earlier one.
func tensorsFromProto(in []*sidecarpb.TensorProto) ([]servables.Tensor, error) {
	out := make([]servables.Tensor, len(in))
	var late *rangeError // the first value out of range
	for i, tp := range in {
		dt, ok := servables.ParseDType(tp.GetDataType().String())
		if !ok {
			return nil, fmt.Errorf("tensor %d: unsupported data_type %v", i, tp.GetDataType())
		}
		n, err := servables.NumElements(tp.GetTensorShape())
		if err != nil {
			return nil, fmt.Errorf("tensor %d (%s): %w", i, tp.GetTensorName(), err)
		}
		c := tp.GetTensorContent()
		// The count is checked before anything is allocated: a few bytes of
		// request must not ask for gigabytes.
		var got int
		switch dt {
		case servables.Float32:
			got = len(c.GetTensorContentFloat())
		case servables.Float64:
			got = len(c.GetTensorContentDouble())
		case servables.Int64:
			got = len(c.GetTensorContentInt64())
		case servables.Int32, servables.Int8, servables.Int16:
			got = len(c.GetTensorContentInt32())
		}
		if got != n {
			return nil, fmt.Errorf("tensor %d (%s): %d values for shape %v (%d elements)", i, tp.GetTensorName(), got, tp.GetTensorShape(), n)
		}
		t, err := servables.NewTensor(tp.GetTensorName(), dt, tp.GetTensorShape())
		if err != nil {
			return nil, fmt.Errorf("tensor %d (%s): %w", i, tp.GetTensorName(), err)
		}
		switch dt {
		case servables.Float32:
			copy(t.Float32s(), c.GetTensorContentFloat())
		case servables.Float64:
			copy(t.Float64s(), c.GetTensorContentDouble())
		case servables.Int64:
			copy(t.Int64s(), c.GetTensorContentInt64())
		case servables.Int32:
			copy(t.Int32s(), c.GetTensorContentInt32())
		case servables.Int8, servables.Int16:
			vals := c.GetTensorContentInt32()
			lo, hi := int32(-128), int32(127)
			if dt == servables.Int16 {
				lo, hi = -32768, 32767
			}
			for j, v := range vals {
				if v < lo || v > hi {
					if late == nil {
						late = &rangeError{fmt.Sprintf("tensor %d (%s): value %d at %d is out of range for %v", i, tp.GetTensorName(), v, j, dt)}
					}
					break
				}
				if dt == servables.Int8 {
					t.Int8s()[j] = int8(v)
				} else {
					t.Int16s()[j] = int16(v)
				}
			}
		}
		out[i] = t
	}
	if late != nil {
		return nil, late
	}
	return out, nil
}

// tensorsToProto converts model outputs to TensorProtos.
func tensorsToProto(in []servables.Tensor) ([]*sidecarpb.TensorProto, error) {
	out := make([]*sidecarpb.TensorProto, len(in))
	for i, t := range in {
		v, ok := sidecarpb.DataTypeProto_value[t.DType.String()]
		if !ok {
			return nil, fmt.Errorf("output %d (%s) has type %v, which is not supported by the B&A API", i, t.Name, t.DType)
		}
		tp := &sidecarpb.TensorProto{DataType: sidecarpb.DataTypeProto(v), TensorShape: t.Shape, TensorName: t.Name, TensorContent: &sidecarpb.TensorContent{}}
		c := tp.TensorContent
		switch t.DType {
		case servables.Float32:
			c.TensorContentFloat = append([]float32(nil), t.Float32s()...)
		case servables.Float64:
			c.TensorContentDouble = append([]float64(nil), t.Float64s()...)
		case servables.Int64:
			c.TensorContentInt64 = append([]int64(nil), t.Int64s()...)
		case servables.Int32:
			c.TensorContentInt32 = append([]int32(nil), t.Int32s()...)
		case servables.Int8:
			for _, x := range t.Int8s() {
				c.TensorContentInt32 = append(c.TensorContentInt32, int32(x))
			}
		case servables.Int16:
			for _, x := range t.Int16s() {
				c.TensorContentInt32 = append(c.TensorContentInt32, int32(x))
			}
		}
		out[i] = tp
	}
	return out, nil
}
