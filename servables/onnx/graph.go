package onnx

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// dim is one dimension of a graph input or output as the model declares
// it: a fixed size, or the name of a symbolic one ("batch"), or neither.
type dim struct {
	value int64  // > 0 when fixed
	param string // the symbolic name, if any
}

// graphDims reads the declared dimensions of a model's graph inputs and
// outputs, by name, from the ONNX ModelProto in data. ONNX Runtime reports
// symbolic dimensions as -1; their names tell which output dimensions are
// the same as which input ones. Only the fields on the way are decoded
// (ModelProto.graph, GraphProto.input and output, ValueInfoProto.name and
// type, TypeProto.tensor_type, its shape and the dims' dim_value and
// dim_param); every other field is skipped.
func graphDims(data []byte) (inputs, outputs map[string][]dim, err error) {
	inputs, outputs = map[string][]dim{}, map[string][]dim{}
	err = each(data, 7, func(graph []byte) error { // ModelProto.graph
		for num, into := range map[protowire.Number]map[string][]dim{11: inputs, 12: outputs} { // GraphProto.input, output
			if err := each(graph, num, func(vi []byte) error {
				name, dims, err := valueInfo(vi)
				into[name] = dims
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return inputs, outputs, err
}

// valueInfo reads a ValueInfoProto's name and, for a tensor with a shape,
// its dimensions (nil without a shape).
func valueInfo(vi []byte) (name string, dims []dim, err error) {
	err = each(vi, 1, func(v []byte) error { name = string(v); return nil })
	if err != nil {
		return "", nil, err
	}
	err = each(vi, 2, func(typ []byte) error { // TypeProto
		return each(typ, 1, func(tensor []byte) error { // tensor_type
			return each(tensor, 2, func(shape []byte) error { // TensorShapeProto
				dims = []dim{}
				return each(shape, 1, func(dp []byte) error { // dim
					var d dim
					err := fields(dp, func(num protowire.Number, typ protowire.Type, v []byte) error {
						switch {
						case num == 1 && typ == protowire.VarintType: // dim_value
							x, _ := protowire.ConsumeVarint(v)
							d.value = int64(x)
						case num == 2 && typ == protowire.BytesType: // dim_param
							d.param = string(v)
						}
						return nil
					})
					dims = append(dims, d)
					return err
				})
			})
		})
	})
	return name, dims, err
}

// each calls f with the value of every length-delimited field num of the
// message b.
func each(b []byte, num protowire.Number, f func(v []byte) error) error {
	return fields(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
		if n != num || typ != protowire.BytesType {
			return nil
		}
		return f(v)
	})
}

var errProto = errors.New("not a valid ONNX model (protobuf)")

// fields calls f with each field of the protobuf message b: its number,
// wire type, and its value (a length-delimited field's bytes, or the
// varint's or fixed value's encoding).
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			val, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(m))
			}
			v, n = val, m
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: %v", errProto, protowire.ParseError(n))
			}
			v = b[:n]
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
