package onnx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"google.golang.org/protobuf/encoding/protowire"
)

// dim is one dimension of a graph input or output as the model declares
// it: a fixed size, or the name of a symbolic one ("batch"), or neither.
type dim struct {
	value int64  // > 0 when fixed
	param string // the symbolic name, if any
}

var errProto = errors.New("not a valid ONNX model (protobuf)")

// maxName is the longest name (of a graph input or output, or of a
// symbolic dimension) graphDims reads.
const maxName = 1 << 20

// graphDimsOf reads graphDims from the model file at path, seeking over
// the fields it skips.
func graphDimsOf(path string) (inputs, outputs map[string][]dim, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	return graphDims(f, fi.Size())
}

// graphDims reads the declared dimensions of a model's graph inputs and
// outputs, by name, from the ONNX ModelProto r holds, of size bytes (-1
// when unknown: to r's end). ONNX Runtime reports symbolic dimensions as
// -1; their names tell which output dimensions are the same as which
// input ones. It streams the model: only the fields on the way are
// decoded (ModelProto.graph, GraphProto.input and output,
// ValueInfoProto.name and type, TypeProto.tensor_type, its shape and the
// dims' dim_value and dim_param); every other field, the initializers
// with the weights among them, is skipped unread: seeked over when r is
// an io.Seeker at offset 0 and size is known, else read through a small
// buffer. Its memory is that of the inputs' and outputs' declarations,
// whatever the size of the model. A model that is not a valid protobuf
// message (truncated, garbage) is an error wrapping errProto.
func graphDims(r io.Reader, size int64) (inputs, outputs map[string][]dim, err error) {
	w := &wireReader{src: r, r: bufio.NewReaderSize(r, 32<<10), end: math.MaxInt64}
	if size >= 0 {
		w.end = size
		w.seeker, _ = r.(io.Seeker)
	}
	inputs, outputs = map[string][]dim{}, map[string][]dim{}
	err = w.message(-1, func(num protowire.Number, typ protowire.Type, v uint64) error {
		if num != 7 || typ != protowire.BytesType { // ModelProto.graph
			return nil
		}
		return w.message(int64(v), func(num protowire.Number, typ protowire.Type, v uint64) error {
			switch {
			case typ != protowire.BytesType:
			case num == 11: // GraphProto.input
				return w.valueInfo(int64(v), inputs)
			case num == 12: // GraphProto.output
				return w.valueInfo(int64(v), outputs)
			}
			return nil // initializer (5), node (1), ...: skipped
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return inputs, outputs, nil
}

// valueInfo reads a ValueInfoProto of n bytes into into: its name and, for
// a tensor with a shape, its dimensions (nil without a shape).
func (w *wireReader) valueInfo(n int64, into map[string][]dim) error {
	var name string
	var dims []dim
	// sub reads the length-delimited fields num of a message with f.
	sub := func(num protowire.Number, f func(n int64) error) func(protowire.Number, protowire.Type, uint64) error {
		return func(nm protowire.Number, typ protowire.Type, v uint64) error {
			if nm != num || typ != protowire.BytesType {
				return nil
			}
			return f(int64(v))
		}
	}
	err := w.message(n, func(num protowire.Number, typ protowire.Type, v uint64) (err error) {
		switch {
		case typ != protowire.BytesType:
		case num == 1: // name
			name, err = w.string(int64(v))
		case num == 2: // TypeProto
			err = w.message(int64(v), sub(1, func(n int64) error { // tensor_type
				return w.message(n, sub(2, func(n int64) error { // TensorShapeProto
					dims = []dim{}
					return w.message(n, sub(1, func(n int64) error { // dim
						d, err := w.dim(n)
						dims = append(dims, d)
						return err
					}))
				}))
			}))
		}
		return err
	})
	into[name] = dims
	return err
}

// dim reads a TensorShapeProto.Dimension of n bytes.
func (w *wireReader) dim(n int64) (d dim, err error) {
	err = w.message(n, func(num protowire.Number, typ protowire.Type, v uint64) (err error) {
		switch {
		case num == 1 && typ == protowire.VarintType: // dim_value
			d.value = int64(v)
		case num == 2 && typ == protowire.BytesType: // dim_param
			d.param, err = w.string(int64(v))
		}
		return err
	})
	return d, err
}

// wireReader reads protobuf messages from a stream, field by field.
type wireReader struct {
	src    io.Reader
	r      *bufio.Reader // over src
	seeker io.Seeker     // src's, when skipped bytes are seeked over
	off    int64         // bytes of the stream read or skipped
	end    int64         // where the message being read ends
}

// errorf returns an error wrapping errProto that says where it is.
func (w *wireReader) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", errProto, w.off, fmt.Sprintf(format, args...))
}

// tag reads a field's tag.
func (w *wireReader) tag() (protowire.Number, protowire.Type, error) {
	v, err := w.varint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, w.errorf("a field number of %d", v>>3)
	}
	return num, typ, nil
}

// message reads the fields of the message of n bytes at the reader's
// offset (n < 0: to the end of the stream), calling f with the number,
// type and value of each varint field and the number, type and length of
// each length-delimited one: f reads that one's value through w or
// leaves it, and message skips whatever f left. Fixed-size fields and
// groups are skipped.
func (w *wireReader) message(n int64, f func(num protowire.Number, typ protowire.Type, v uint64) error) error {
	outer := w.end
	if n >= 0 {
		w.end = w.off + n
	}
	defer func() { w.end = outer }()
	for w.off < w.end {
		if n < 0 && w.end == math.MaxInt64 { // a stream of unknown size
			if _, err := w.r.Peek(1); err == io.EOF {
				return nil
			}
		}
		num, typ, err := w.tag()
		if err != nil {
			return err
		}
		switch typ {
		case protowire.VarintType:
			var v uint64
			if v, err = w.varint(); err == nil {
				err = f(num, typ, v)
			}
		case protowire.BytesType:
			var l uint64
			if l, err = w.varint(); err != nil {
				break
			}
			if l > uint64(w.end-w.off) {
				return w.errorf("field %d of %d bytes runs past the end", num, l)
			}
			start := w.off
			if err = f(num, typ, l); err == nil {
				err = w.skip(int64(l) - (w.off - start))
			}
		default:
			err = w.skipValue(num, typ, 0)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// skipValue skips the value of a field other than a length-delimited
// one, depth groups deep.
func (w *wireReader) skipValue(num protowire.Number, typ protowire.Type, depth int) error {
	switch typ {
	case protowire.VarintType:
		_, err := w.varint()
		return err
	case protowire.Fixed32Type:
		return w.skip(4)
	case protowire.Fixed64Type:
		return w.skip(8)
	case protowire.StartGroupType:
		return w.skipGroup(num, depth)
	}
	return w.errorf("field %d has wire type %d", num, typ)
}

// skipGroup skips the fields of group num up to its end, the depth-th
// group within groups.
func (w *wireReader) skipGroup(num protowire.Number, depth int) error {
	if depth >= protowire.DefaultRecursionLimit {
		return w.errorf("groups nested more than %d deep", protowire.DefaultRecursionLimit)
	}
	for {
		n, typ, err := w.tag()
		if err != nil {
			return err
		}
		switch typ {
		case protowire.EndGroupType:
			if n != num {
				return w.errorf("group %d ends as group %d", num, n)
			}
			return nil
		case protowire.BytesType:
			var l uint64
			if l, err = w.varint(); err == nil {
				if l > uint64(w.end-w.off) {
					return w.errorf("field %d of %d bytes runs past the end", n, l)
				}
				err = w.skip(int64(l))
			}
		default:
			err = w.skipValue(n, typ, depth+1)
		}
		if err != nil {
			return err
		}
	}
}

// varint reads a varint of the message being read.
func (w *wireReader) varint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		if w.off >= w.end {
			return 0, w.errorf("a varint runs past the end")
		}
		b, err := w.r.ReadByte()
		if err != nil {
			return 0, w.readError(err)
		}
		w.off++
		if i == 9 && b > 1 {
			return 0, w.errorf("a varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
}

// string reads a length-delimited value of n bytes as a string, a name of
// at most maxName bytes.
func (w *wireReader) string(n int64) (string, error) {
	if n > maxName {
		return "", w.errorf("a name of %d bytes, more than %d", n, maxName)
	}
	b := make([]byte, n)
	m, err := io.ReadFull(w.r, b)
	w.off += int64(m)
	if err != nil {
		return "", w.readError(err)
	}
	return string(b), nil
}

// skip skips n bytes of the message being read: seeked over when they
// are more than the buffered ones and the stream can seek, else read and
// discarded.
func (w *wireReader) skip(n int64) error {
	if n > w.end-w.off {
		return w.errorf("%d bytes run past the end", n)
	}
	if w.seeker != nil && n > int64(w.r.Buffered()) {
		if _, err := w.seeker.Seek(w.off+n, io.SeekStart); err != nil {
			return err
		}
		w.r.Reset(w.src)
		w.off += n
		return nil
	}
	for n > 0 {
		d, err := w.r.Discard(int(min(n, 1<<30)))
		w.off += int64(d)
		n -= int64(d)
		if err != nil {
			return w.readError(err)
		}
	}
	return nil
}

// readError is the error of a read that failed: the stream ended within
// a field (an error wrapping errProto) or it could not be read.
func (w *wireReader) readError(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return w.errorf("the model ends within a field")
	}
	return err
}
