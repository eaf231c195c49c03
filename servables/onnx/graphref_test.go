package onnx

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// graphDimsInMemory is the reference graphDims is checked against: it
// decodes the same fields from the ModelProto in data, read whole, as
// Grove did before graphDims streamed the file.
func graphDimsInMemory(data []byte) (inputs, outputs map[string][]dim, err error) {
	inputs, outputs = map[string][]dim{}, map[string][]dim{}
	err = refEach(data, 7, func(graph []byte) error { // ModelProto.graph
		for num, into := range map[protowire.Number]map[string][]dim{11: inputs, 12: outputs} { // GraphProto.input, output
			if err := refEach(graph, num, func(vi []byte) error {
				name, dims, err := refValueInfo(vi)
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

// refValueInfo reads a ValueInfoProto's name and, for a tensor with a shape,
// its dimensions (nil without a shape).
func refValueInfo(vi []byte) (name string, dims []dim, err error) {
	err = refEach(vi, 1, func(v []byte) error { name = string(v); return nil })
	if err != nil {
		return "", nil, err
	}
	err = refEach(vi, 2, func(typ []byte) error { // TypeProto
		return refEach(typ, 1, func(tensor []byte) error { // tensor_type
			return refEach(tensor, 2, func(shape []byte) error { // TensorShapeProto
				dims = []dim{}
				return refEach(shape, 1, func(dp []byte) error { // dim
					var d dim
					err := refFields(dp, func(num protowire.Number, typ protowire.Type, v []byte) error {
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

// refEach calls f with the value of every length-delimited field num of the
// message b.
func refEach(b []byte, num protowire.Number, f func(v []byte) error) error {
	return refFields(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
		if n != num || typ != protowire.BytesType {
			return nil
		}
		return f(v)
	})
}

// refFields calls f with each field of the protobuf message b: its number,
// wire type, and its value (a length-delimited field's bytes, or the
// varint's or fixed value's encoding).
func refFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
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
