package join

import (
	"encoding/binary"
	"math"

	"github.com/groveml/grove/grovepb"
)

// outputValues are the predictions of ev's output named output (its first
// output when output is empty), one per row of the first dimension (a
// scalar is one row): a row's one value, or with two values the second
// (a classifier's [p(0), p(1)]). ok is false when there is no such output,
// a row has more than two values, the shape does not match the values, or
// the type is not numeric.
func outputValues(ev *grovepb.PredictionEvent, output string) (values []float64, ok bool) {
	if ev.GetError() != nil {
		return nil, false
	}
	var t *grovepb.Tensor
	for _, o := range ev.GetOutputs() {
		if output == "" || o.GetName() == output {
			t = o
			break
		}
	}
	if t == nil {
		return nil, false
	}
	shape := t.GetShape()
	n, rows := int64(1), int64(1)
	for i, d := range shape {
		if d < 0 {
			return nil, false
		}
		n *= d
		if i == 0 {
			rows = d
		}
		if n > math.MaxInt32 {
			return nil, false
		}
	}
	all, ok := tensorValues(t)
	if !ok || int64(len(all)) != n || rows == 0 {
		return nil, false
	}
	width := n / rows
	if width != 1 && width != 2 {
		return nil, false
	}
	values = make([]float64, rows)
	for r := range values {
		values[r] = all[int64(r)*width+width-1]
	}
	return values, true
}

// tensorValues are t's values as float64, from the field its datatype
// names (raw_data for the fixed-size types without one).
func tensorValues(t *grovepb.Tensor) ([]float64, bool) {
	switch t.GetDatatype() {
	case "FLOAT":
		if len(t.GetRawData()) > 0 {
			return raw(t.GetRawData(), 4, func(b []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) })
		}
		out := make([]float64, len(t.GetFloatData()))
		for i, v := range t.GetFloatData() {
			out[i] = float64(v)
		}
		return out, true
	case "DOUBLE":
		if len(t.GetRawData()) > 0 {
			return raw(t.GetRawData(), 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
		}
		return t.GetDoubleData(), true
	case "INT8", "INT16", "INT32":
		out := make([]float64, len(t.GetInt32Data()))
		for i, v := range t.GetInt32Data() {
			out[i] = float64(v)
		}
		return out, true
	case "INT64":
		out := make([]float64, len(t.GetInt64Data()))
		for i, v := range t.GetInt64Data() {
			out[i] = float64(v)
		}
		return out, true
	case "BOOL", "UINT8":
		return raw(t.GetRawData(), 1, func(b []byte) float64 { return float64(b[0]) })
	}
	return nil, false
}

// raw decodes little-endian values of size bytes each.
func raw(b []byte, size int, f func([]byte) float64) ([]float64, bool) {
	if len(b)%size != 0 {
		return nil, false
	}
	out := make([]float64, len(b)/size)
	for i := range out {
		out[i] = f(b[i*size:])
	}
	return out, true
}
