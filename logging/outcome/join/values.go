package join

import (
	"encoding/binary"
	"math"

	"github.com/groveml/grove/grovepb"
)

// outputValues appends to values the predictions of ev's output named
// output (its first output when output is empty), one per row of the
// first dimension (a scalar is one row): a row's one value, or with two
// values the second (a classifier's [p(0), p(1)]). ok is false when there
// is no such output, a row has more than two values, the shape does not
// match the values, or the type is not numeric.
func outputValues(values []float64, ev *grovepb.PredictionEvent, output string) (_ []float64, ok bool) {
	if ev.GetError() != nil {
		return values, false
	}
	var t *grovepb.Tensor
	for _, o := range ev.GetOutputs() {
		if output == "" || o.GetName() == output {
			t = o
			break
		}
	}
	if t == nil {
		return values, false
	}
	shape := t.GetShape()
	n, rows := int64(1), int64(1)
	for i, d := range shape {
		if d < 0 {
			return values, false
		}
		n *= d
		if i == 0 {
			rows = d
		}
		if n > math.MaxInt32 {
			return values, false
		}
	}
	all, ok := tensorValuesOf(t)
	if !ok || int64(all.len()) != n || rows == 0 {
		return values, false
	}
	width := n / rows
	if width != 1 && width != 2 {
		return values, false
	}
	for r := range rows {
		values = append(values, all.at(int(r*width+width-1)))
	}
	return values, true
}

// tensorValues are a tensor's values as float64, read in place from the
// field its datatype names (raw_data for the fixed-size types without
// one, whose element size is size).
type tensorValues struct {
	t    *grovepb.Tensor
	kind valueKind
	size int
}

// valueKind is where a tensorValues reads.
type valueKind int

const (
	floatData valueKind = iota
	doubleData
	int32Data
	int64Data
	rawFloat
	rawDouble
	rawByte
)

// tensorValuesOf returns t's values, if its datatype is numeric and its
// raw_data, when it is read, holds whole values.
func tensorValuesOf(t *grovepb.Tensor) (tensorValues, bool) {
	raw := len(t.GetRawData()) > 0
	v := tensorValues{t: t}
	switch dt := t.GetDatatype(); {
	case dt == "FLOAT" && raw:
		v.kind, v.size = rawFloat, 4
	case dt == "FLOAT":
		v.kind = floatData
	case dt == "DOUBLE" && raw:
		v.kind, v.size = rawDouble, 8
	case dt == "DOUBLE":
		v.kind = doubleData
	case dt == "INT8", dt == "INT16", dt == "INT32":
		v.kind = int32Data
	case dt == "INT64":
		v.kind = int64Data
	case dt == "BOOL", dt == "UINT8":
		v.kind, v.size = rawByte, 1
	default:
		return v, false
	}
	if v.size > 0 && len(t.GetRawData())%v.size != 0 {
		return v, false
	}
	return v, true
}

// len is the number of values.
func (v tensorValues) len() int {
	switch v.kind {
	case floatData:
		return len(v.t.GetFloatData())
	case doubleData:
		return len(v.t.GetDoubleData())
	case int32Data:
		return len(v.t.GetInt32Data())
	case int64Data:
		return len(v.t.GetInt64Data())
	}
	return len(v.t.GetRawData()) / v.size
}

// at is value i.
func (v tensorValues) at(i int) float64 {
	switch v.kind {
	case floatData:
		return float64(v.t.GetFloatData()[i])
	case doubleData:
		return v.t.GetDoubleData()[i]
	case int32Data:
		return float64(v.t.GetInt32Data()[i])
	case int64Data:
		return float64(v.t.GetInt64Data()[i])
	case rawFloat:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(v.t.GetRawData()[i*4:])))
	case rawDouble:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.t.GetRawData()[i*8:]))
	}
	return float64(v.t.GetRawData()[i])
}
