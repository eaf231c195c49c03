package logging

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/servables"
)

// TensorsToProto converts Grove tensors to event tensors, putting the
// values in the typed field of their data type (float_data for FLOAT,
// double_data for DOUBLE, int32_data for INT8, INT16 and INT32, int64_data
// for INT64, bytes_data for BYTES, one entry per element; see the Tensor
// message); BOOL and UINT8 tensors, which have no typed field, carry their
// bytes (one per element, BOOL as 0 or 1) in raw_data. To keep the request
// path cheap, the
// result shares memory with ts (the shapes, and the values of FLOAT,
// DOUBLE, INT32, INT64, BOOL and UINT8 tensors, and the elements of BYTES
// ones): leave ts unchanged until the event has
// been passed to Producer.Log, which encodes it before it returns. A tensor
// of an unknown data type becomes a tensor with its datatype name and its
// bytes in raw_data.
func TensorsToProto(ts []servables.Tensor) []*grovepb.Tensor {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*grovepb.Tensor, len(ts))
	backing := make([]grovepb.Tensor, len(ts)) // one allocation for all
	for i, t := range ts {
		p := &backing[i]
		p.Name, p.Datatype, p.Shape = t.Name, t.DType.String(), t.Shape
		switch t.DType {
		case servables.Float32:
			p.FloatData = t.Float32s()
		case servables.Float64:
			p.DoubleData = t.Float64s()
		case servables.Int32:
			p.Int32Data = t.Int32s()
		case servables.Int64:
			p.Int64Data = t.Int64s()
		case servables.Int8:
			v := t.Int8s()
			p.Int32Data = make([]int32, len(v))
			for j, x := range v {
				p.Int32Data[j] = int32(x)
			}
		case servables.Int16:
			v := t.Int16s()
			p.Int32Data = make([]int32, len(v))
			for j, x := range v {
				p.Int32Data[j] = int32(x)
			}
		case servables.Bytes:
			if elems, err := t.BytesElements(); err == nil {
				p.BytesData = elems
			} else {
				p.RawData = t.Data // not valid BYTES: as it is, for the record
			}
		default:
			p.RawData = t.Data
		}
		out[i] = p
	}
	return out
}

// TensorsFromProto converts event tensors back to Grove tensors (for
// replay), checking that each has a known data type, a valid shape and as
// many values as the shape holds. Values are read from the typed field of
// the data type or, when that is empty, from raw_data (little-endian). The
// result does not share memory with ps.
func TensorsFromProto(ps []*grovepb.Tensor) ([]servables.Tensor, error) {
	out := make([]servables.Tensor, len(ps))
	for i, p := range ps {
		t, err := tensorFromProto(p)
		if err != nil {
			name := ""
			if p.GetName() != "" {
				name = fmt.Sprintf(" (%q)", p.GetName())
			}
			return nil, fmt.Errorf("tensor %d%s: %w", i, name, err)
		}
		out[i] = t
	}
	return out, nil
}

func tensorFromProto(p *grovepb.Tensor) (servables.Tensor, error) {
	dt, ok := servables.ParseDType(p.GetDatatype())
	if !ok {
		return servables.Tensor{}, fmt.Errorf("unsupported datatype %q", p.GetDatatype())
	}
	if dt == servables.Bytes {
		return bytesFromProto(p)
	}
	t, err := servables.NewTensor(p.GetName(), dt, p.GetShape())
	if err != nil {
		return servables.Tensor{}, err
	}
	n := t.Len()
	typed := 0
	switch dt {
	case servables.Float32:
		typed = len(p.GetFloatData())
	case servables.Float64:
		typed = len(p.GetDoubleData())
	case servables.Int8, servables.Int16, servables.Int32:
		typed = len(p.GetInt32Data())
	case servables.Int64:
		typed = len(p.GetInt64Data())
	}
	if typed == 0 && len(p.GetRawData()) > 0 {
		if len(p.GetRawData()) != len(t.Data) {
			return servables.Tensor{}, fmt.Errorf("raw_data has %d bytes, shape %v of %v needs %d", len(p.GetRawData()), t.Shape, dt, len(t.Data))
		}
		copyLittleEndian(t, p.GetRawData())
		if dt == servables.Bool {
			if err := servables.CheckBools(t.Data); err != nil {
				return servables.Tensor{}, fmt.Errorf("raw_data %w", err)
			}
		}
		return t, nil
	}
	if typed != n {
		return servables.Tensor{}, fmt.Errorf("%d values for shape %v (%d elements) of %v", typed, t.Shape, n, dt)
	}
	switch dt {
	case servables.Float32:
		copy(t.Float32s(), p.GetFloatData())
	case servables.Float64:
		copy(t.Float64s(), p.GetDoubleData())
	case servables.Int32:
		copy(t.Int32s(), p.GetInt32Data())
	case servables.Int64:
		copy(t.Int64s(), p.GetInt64Data())
	case servables.Int8:
		d := t.Int8s()
		for j, x := range p.GetInt32Data() {
			if x < math.MinInt8 || x > math.MaxInt8 {
				return servables.Tensor{}, fmt.Errorf("value %d at %d is out of the INT8 range", x, j)
			}
			d[j] = int8(x)
		}
	case servables.Int16:
		d := t.Int16s()
		for j, x := range p.GetInt32Data() {
			if x < math.MinInt16 || x > math.MaxInt16 {
				return servables.Tensor{}, fmt.Errorf("value %d at %d is out of the INT16 range", x, j)
			}
			d[j] = int16(x)
		}
	}
	return t, nil
}

// bytesFromProto reads a BYTES tensor from bytes_data or, failing that,
// from raw_data in OIP's framing (4-byte little-endian length + bytes each).
func bytesFromProto(p *grovepb.Tensor) (servables.Tensor, error) {
	n, err := servables.NumElements(p.GetShape())
	if err != nil {
		return servables.Tensor{}, err
	}
	shape := append([]int64(nil), p.GetShape()...)
	if len(p.GetBytesData()) == 0 && len(p.GetRawData()) > 0 {
		if err := servables.CheckBytes(p.GetRawData(), n); err != nil {
			return servables.Tensor{}, fmt.Errorf("raw_data: %w", err)
		}
		return servables.Tensor{Name: p.GetName(), DType: servables.Bytes, Shape: shape, Data: append([]byte(nil), p.GetRawData()...)}, nil
	}
	if len(p.GetBytesData()) != n {
		return servables.Tensor{}, fmt.Errorf("%d values for shape %v (%d elements) of BYTES", len(p.GetBytesData()), shape, n)
	}
	var data []byte
	for _, e := range p.GetBytesData() {
		data = servables.AppendBytesElement(data, e)
	}
	return servables.Tensor{Name: p.GetName(), DType: servables.Bytes, Shape: shape, Data: data}, nil
}

// hostLittleEndian is true on little-endian hosts, where Grove's host-order
// tensor bytes are already little-endian.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// copyLittleEndian fills t's host-order Data from little-endian raw bytes
// of the same length.
func copyLittleEndian(t servables.Tensor, raw []byte) {
	size := t.DType.Size()
	if hostLittleEndian || size == 1 {
		copy(t.Data, raw)
		return
	}
	for i := 0; i < len(raw); i += size {
		switch size {
		case 2:
			binary.NativeEndian.PutUint16(t.Data[i:], binary.LittleEndian.Uint16(raw[i:]))
		case 4:
			binary.NativeEndian.PutUint32(t.Data[i:], binary.LittleEndian.Uint32(raw[i:]))
		case 8:
			binary.NativeEndian.PutUint64(t.Data[i:], binary.LittleEndian.Uint64(raw[i:]))
		}
	}
}
