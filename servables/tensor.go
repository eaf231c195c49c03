package servables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// DType is a tensor element type.
type DType uint8

// The element types Grove moves between APIs and runtimes.
const (
	Unknown DType = iota
	Float32
	Float64
	Int8
	Int16
	Int32
	Int64
	Bool  // one byte per element, 0 (false) or 1 (true)
	Uint8 // unsigned 8-bit integers
	// Float16 is IEEE 754 half precision and BFloat16 the top half of a
	// Float32 (8 exponent bits, 7 of mantissa); each element is its 2-byte
	// bit pattern (see Float16Bits, BFloat16Bits, Float16At).
	Float16
	BFloat16
)

var dtypeNames = [...]string{Unknown: "UNKNOWN", Float32: "FLOAT", Float64: "DOUBLE", Int8: "INT8", Int16: "INT16", Int32: "INT32", Int64: "INT64", Bool: "BOOL", Uint8: "UINT8",
	Float16: "FLOAT16", BFloat16: "BFLOAT16"}

var dtypeSizes = [...]int{Unknown: 0, Float32: 4, Float64: 8, Int8: 1, Int16: 2, Int32: 4, Int64: 8, Bool: 1, Uint8: 1,
	Float16: 2, BFloat16: 2}

// String returns the B&A name of the type (FLOAT, DOUBLE, INT8, ...).
func (d DType) String() string {
	if d == Bytes {
		return bytesName
	}
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", d)
}

// MarshalText encodes the type by its B&A name.
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a type from its B&A name, as MarshalText writes it
// (UNKNOWN included); another name is an error that names it.
func (d *DType) UnmarshalText(b []byte) error {
	if string(b) == dtypeNames[Unknown] {
		*d = Unknown
		return nil
	}
	t, ok := ParseDType(string(b))
	if !ok {
		return fmt.Errorf("unknown tensor datatype %q", b)
	}
	*d = t
	return nil
}

// Size is the size of one element in bytes (0 for Unknown, and for Bytes,
// whose elements have no fixed size).
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// ParseDType returns the type with the given name (FLOAT, DOUBLE, INT8, ...,
// BOOL, UINT8, FLOAT16, BFLOAT16, BYTES); names are case-sensitive.
// Callers whose protocol knows fewer types (the B&A API) must check the
// result themselves.
func ParseDType(s string) (DType, bool) {
	if s == bytesName {
		return Bytes, true
	}
	for i, n := range dtypeNames {
		if n == s && DType(i) != Unknown {
			return DType(i), true
		}
	}
	return Unknown, false
}

// MaxElements bounds the element count of any one tensor (2^31), so that a
// shape can never ask for more memory than a request body could fill.
const MaxElements = 1 << 31

// ErrShape marks an invalid tensor shape.
var ErrShape = errors.New("invalid tensor shape")

// NumElements returns the product of shape, checking every dimension is
// positive and the product stays within MaxElements. An empty shape is a
// scalar with one element.
func NumElements(shape []int64) (int, error) {
	n := int64(1)
	for i, d := range shape {
		if d < 1 {
			return 0, fmt.Errorf("%w: dimension %d is %d, it has to be greater than 0", ErrShape, i, d)
		}
		if d > MaxElements || n > MaxElements/d {
			return 0, fmt.Errorf("%w: the product of dimensions exceeds %d elements", ErrShape, int64(MaxElements))
		}
		n *= d
	}
	return int(n), nil
}

// Tensor is a dense row-major tensor. Data holds NumElements(Shape) elements
// of DType in host byte order; it is 8-byte aligned when made by NewTensor.
// A Bytes tensor's Data holds its elements in their binary form instead
// (see Bytes).
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// NewTensor allocates a zeroed tensor of the given type and shape; a Bytes
// tensor's elements are empty.
func NewTensor(name string, dt DType, shape []int64) (Tensor, error) {
	n, err := NumElements(shape)
	if err != nil {
		return Tensor{}, err
	}
	if dt == Bytes {
		return Tensor{Name: name, DType: Bytes, Shape: append([]int64(nil), shape...), Data: make([]byte, n*BytesLenSize)}, nil
	}
	if dt.Size() == 0 {
		return Tensor{}, fmt.Errorf("unsupported data type %v", dt)
	}
	shapeCopy, data := shapeAndData(shape, n*dt.Size())
	return Tensor{Name: name, DType: dt, Shape: shapeCopy, Data: data}, nil
}

// shapeAndData returns a copy of shape and n zeroed bytes whose first is
// 8-byte aligned. For a small tensor (a request's row) both are one
// allocation: the copy comes first, its capacity its length, so that an
// append to it copies it rather than write over the data. A larger one's
// data is allocated alone, in its own size class.
func shapeAndData(shape []int64, n int) ([]int64, []byte) {
	if n == 0 || n > 1024 || len(shape) == 0 { // a scalar's shape stays nil
		return append([]int64(nil), shape...), alignedBytes(n)
	}
	words := make([]int64, len(shape)+(n+7)/8)
	s := words[:len(shape):len(shape)]
	copy(s, shape)
	return s, unsafe.Slice((*byte)(unsafe.Pointer(&words[len(shape)])), n)
}

// alignedBytes returns a byte slice of length n whose first byte is 8-byte aligned.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// Len is the number of elements, computed from Data (for Bytes, by walking
// it: the count of whole elements).
func (t Tensor) Len() int {
	if s := t.DType.Size(); s > 0 {
		return len(t.Data) / s
	}
	if t.DType == Bytes {
		return countBytesElements(t.Data)
	}
	return 0
}

// Validate checks that Data's length matches DType and Shape.
func (t Tensor) Validate() error {
	n, err := NumElements(t.Shape)
	if err != nil {
		return err
	}
	if t.DType == Bytes {
		if err := CheckBytes(t.Data, n); err != nil {
			return fmt.Errorf("%w: %w", ErrShape, err)
		}
		return nil
	}
	if t.DType.Size() == 0 {
		return fmt.Errorf("unsupported data type %v", t.DType)
	}
	if len(t.Data) != n*t.DType.Size() {
		return fmt.Errorf("%w: %d bytes of %v do not fill shape %v (%d elements)", ErrShape, len(t.Data), t.DType, t.Shape, n)
	}
	return nil
}

func view[T any](b []byte) []T {
	var zero T
	sz := int(unsafe.Sizeof(zero))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

// Float32s views Data as float32 values; the tensor must be Float32.
func (t Tensor) Float32s() []float32 { return view[float32](t.Data) }

// Float64s views Data as float64 values; the tensor must be Float64.
func (t Tensor) Float64s() []float64 { return view[float64](t.Data) }

// Int8s views Data as int8 values; the tensor must be Int8.
func (t Tensor) Int8s() []int8 { return view[int8](t.Data) }

// Int16s views Data as int16 values; the tensor must be Int16.
func (t Tensor) Int16s() []int16 { return view[int16](t.Data) }

// Int32s views Data as int32 values; the tensor must be Int32.
func (t Tensor) Int32s() []int32 { return view[int32](t.Data) }

// Int64s views Data as int64 values; the tensor must be Int64.
func (t Tensor) Int64s() []int64 { return view[int64](t.Data) }

// Bools views Data as bool values; the tensor must be Bool. Every byte must
// be 0 or 1 (the runtimes and the API decoders guarantee it).
func (t Tensor) Bools() []bool { return view[bool](t.Data) }

// Uint8s views Data as uint8 values; the tensor must be Uint8 (or Bool, to
// see its raw bytes).
func (t Tensor) Uint8s() []uint8 { return t.Data }

// CheckBools checks the bytes of a Bool tensor: each must be 0 (false) or
// 1 (true). The error names the first other byte.
func CheckBools(b []byte) error {
	for i, c := range b {
		if c > 1 {
			return fmt.Errorf("byte %d is %d; BOOL data must be bytes 0 (false) or 1 (true)", i, c)
		}
	}
	return nil
}

// Float64At returns element i widened to float64, whatever the DType.
func (t Tensor) Float64At(i int) float64 {
	switch t.DType {
	case Float32:
		return float64(t.Float32s()[i])
	case Float64:
		return t.Float64s()[i]
	case Int8:
		return float64(t.Int8s()[i])
	case Int16:
		return float64(t.Int16s()[i])
	case Int32:
		return float64(t.Int32s()[i])
	case Int64:
		return float64(t.Int64s()[i])
	case Bool:
		if t.Data[i] != 0 {
			return 1
		}
		return 0
	case Uint8:
		return float64(t.Data[i])
	case Float16, BFloat16:
		return t.HalfAt(i)
	}
	return math.NaN()
}

// ---- Bytes tensors ----------------------------------------------------
//
// Everything about variable-length elements is here, so that the numeric
// types' code above stays as it was: their Data is fixed-size elements,
// sliced and viewed without a look at the bytes.

// Bytes is the type of byte-string elements of any length: OIP BYTES, ONNX
// STRING, ForestFlow String and Bytes, GraphPipe strings. Data holds the
// elements in row-major order in the Open Inference Protocol's binary form:
// each is a 4-byte little-endian length followed by that many bytes, with
// nothing between or after them. That is the very form of OIP's binary
// extension and gRPC raw_input_contents (which Grove then hands on without
// a copy), and it concatenates: the Data of tensors joined along the first
// dimension is their Data one after another. Elements are not required to
// be UTF-8; the encoders that need text say so. Size is 0, so code that
// sizes Data from a shape must handle Bytes first.
const Bytes DType = 32

const bytesName = "BYTES"

// BytesLenSize is the size of the length before each element of Bytes Data.
const BytesLenSize = 4

// MaxBytesElement is the longest element Bytes Data can frame (2^32-1 bytes).
const MaxBytesElement = math.MaxUint32

// AppendBytesElement appends e in the binary form of Bytes Data. e must be
// at most MaxBytesElement bytes long.
func AppendBytesElement(dst, e []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e)))
	return append(dst, e...)
}

// AppendStringElement is AppendBytesElement for a string.
func AppendStringElement(dst []byte, e string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e)))
	return append(dst, e...)
}

// NewStringTensor makes a Bytes tensor of shape holding elems in row-major
// order; their count must match the shape.
func NewStringTensor(name string, shape []int64, elems []string) (Tensor, error) {
	n, err := NumElements(shape)
	if err != nil {
		return Tensor{}, err
	}
	if len(elems) != n {
		return Tensor{}, fmt.Errorf("%w: %d elements do not fill shape %v (%d elements)", ErrShape, len(elems), shape, n)
	}
	size := n * BytesLenSize
	for _, e := range elems {
		if len(e) > MaxBytesElement {
			return Tensor{}, fmt.Errorf("an element of %d bytes is longer than BYTES elements can be (%d)", len(e), int64(MaxBytesElement))
		}
		size += len(e)
	}
	data := make([]byte, 0, size)
	for _, e := range elems {
		data = AppendStringElement(data, e)
	}
	return Tensor{Name: name, DType: Bytes, Shape: append([]int64(nil), shape...), Data: data}, nil
}

// NextBytesElement splits the first element off Bytes data: it returns the
// element (a view of data) and the rest. ok is false when data does not
// start with a whole element (fewer than 4 bytes, or a length past its end).
func NextBytesElement(data []byte) (elem, rest []byte, ok bool) {
	if len(data) < BytesLenSize {
		return nil, data, false
	}
	n := uint64(binary.LittleEndian.Uint32(data))
	if n > uint64(len(data)-BytesLenSize) {
		return nil, data, false
	}
	end := BytesLenSize + int(n)
	return data[BytesLenSize:end:end], data[end:], true
}

// CheckBytes checks that data is exactly n elements in the binary form of
// Bytes Data. The error says where it goes wrong: a length that runs past
// the end, a partial length, too few elements or bytes left over. (Validate
// wraps it in ErrShape.)
func CheckBytes(data []byte, n int) error {
	off := 0
	for k := 0; k < n; k++ {
		rest := data[off:]
		if len(rest) == 0 {
			return fmt.Errorf("BYTES data holds %d element(s), the shape needs %d", k, n)
		}
		if len(rest) < BytesLenSize {
			return fmt.Errorf("BYTES element %d at byte %d: %d bytes left, too few for its 4-byte length", k, off, len(rest))
		}
		e, _, ok := NextBytesElement(rest)
		if !ok {
			return fmt.Errorf("BYTES element %d at byte %d has length %d, but only %d bytes follow it", k, off,
				binary.LittleEndian.Uint32(rest), len(rest)-BytesLenSize)
		}
		off += BytesLenSize + len(e)
	}
	if off != len(data) {
		return fmt.Errorf("BYTES data has %d bytes after its %d elements", len(data)-off, n)
	}
	return nil
}

// countBytesElements counts the whole elements at the start of data.
func countBytesElements(data []byte) int {
	n := 0
	for {
		_, rest, ok := NextBytesElement(data)
		if !ok {
			return n
		}
		data = rest
		n++
	}
}

// BytesElements returns the elements of a valid Bytes tensor, as views of
// its Data, in row-major order.
func (t Tensor) BytesElements() ([][]byte, error) {
	if t.DType != Bytes {
		return nil, fmt.Errorf("a %v tensor has no BYTES elements", t.DType)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	n, _ := NumElements(t.Shape)
	out := make([][]byte, n)
	data := t.Data
	for k := range out {
		out[k], data, _ = NextBytesElement(data)
	}
	return out, nil
}

// Strings is BytesElements as strings (copies).
func (t Tensor) Strings() ([]string, error) {
	elems, err := t.BytesElements()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(elems))
	for k, e := range elems {
		out[k] = string(e)
	}
	return out, nil
}

// RowOffsets returns where each of rows equal rows of t (its first
// dimension, usually) starts in Data, and len(Data) last: rows+1 offsets.
// For fixed-size types that is arithmetic; Bytes Data is walked. It fails
// when Data does not divide into rows rows.
func (t Tensor) RowOffsets(rows int) ([]int, error) {
	if rows <= 0 {
		return nil, fmt.Errorf("%w: %d rows", ErrShape, rows)
	}
	offs := make([]int, rows+1)
	if t.DType != Bytes {
		if len(t.Data)%rows != 0 {
			return nil, fmt.Errorf("%w: %d bytes do not divide into %d rows", ErrShape, len(t.Data), rows)
		}
		for i := range offs {
			offs[i] = i * (len(t.Data) / rows)
		}
		return offs, nil
	}
	n, err := NumElements(t.Shape)
	if err != nil {
		return nil, err
	}
	if n%rows != 0 {
		return nil, fmt.Errorf("%w: %d elements do not divide into %d rows", ErrShape, n, rows)
	}
	per := n / rows
	data, off := t.Data, 0
	for i := 1; i <= rows; i++ {
		for range per {
			e, rest, ok := NextBytesElement(data)
			if !ok {
				return nil, fmt.Errorf("%w: BYTES data ends inside row %d", ErrShape, i-1)
			}
			off += BytesLenSize + len(e)
			data = rest
		}
		offs[i] = off
	}
	if off != len(t.Data) {
		return nil, fmt.Errorf("%w: BYTES data has %d bytes after its %d elements", ErrShape, len(t.Data)-off, n)
	}
	return offs, nil
}
