package servables

import (
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
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", d)
}

// MarshalText encodes the type by its B&A name.
func (d DType) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Size is the size of one element in bytes (0 for Unknown).
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// ParseDType returns the type with the given name (FLOAT, DOUBLE, INT8, ...,
// BOOL, UINT8, FLOAT16, BFLOAT16); names are case-sensitive. Callers whose protocol knows fewer
// types (the B&A API) must check the result themselves.
func ParseDType(s string) (DType, bool) {
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
type Tensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// NewTensor allocates a zeroed tensor of the given type and shape.
func NewTensor(name string, dt DType, shape []int64) (Tensor, error) {
	n, err := NumElements(shape)
	if err != nil {
		return Tensor{}, err
	}
	if dt.Size() == 0 {
		return Tensor{}, fmt.Errorf("unsupported data type %v", dt)
	}
	return Tensor{Name: name, DType: dt, Shape: append([]int64(nil), shape...), Data: alignedBytes(n * dt.Size())}, nil
}

// alignedBytes returns a byte slice of length n whose first byte is 8-byte aligned.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
}

// Len is the number of elements, computed from Data.
func (t Tensor) Len() int {
	if s := t.DType.Size(); s > 0 {
		return len(t.Data) / s
	}
	return 0
}

// Validate checks that Data's length matches DType and Shape.
func (t Tensor) Validate() error {
	n, err := NumElements(t.Shape)
	if err != nil {
		return err
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
