package servables

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"unsafe"
)

func TestNumElementsRejectsBadShapes(t *testing.T) {
	for _, tc := range []struct {
		shape []int64
		n     int
		ok    bool
	}{
		{nil, 1, true},
		{[]int64{2, 3}, 6, true},
		{[]int64{0}, 0, false},
		{[]int64{-1, 4}, 0, false},
		{[]int64{1 << 31, 2}, 0, false},
		{[]int64{1 << 40}, 0, false},
		{[]int64{1 << 32, 1 << 32, 1 << 32}, 0, false},
	} {
		n, err := NumElements(tc.shape)
		if tc.ok != (err == nil) || n != tc.n {
			t.Errorf("NumElements(%v) = %d, %v", tc.shape, n, err)
		}
		if err != nil && !errors.Is(err, ErrShape) {
			t.Errorf("NumElements(%v) error %v does not wrap ErrShape", tc.shape, err)
		}
	}
}

func TestNewTensorIsAlignedAndValid(t *testing.T) {
	for _, dt := range []DType{Float32, Float64, Int8, Int16, Int32, Int64, Bool, Uint8} {
		x, err := NewTensor("x", dt, []int64{3, 5})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Validate(); err != nil {
			t.Errorf("%v: %v", dt, err)
		}
		if x.Len() != 15 || uintptr(unsafe.Pointer(&x.Data[0]))%8 != 0 {
			t.Errorf("%v: len %d, aligned %v", dt, x.Len(), uintptr(unsafe.Pointer(&x.Data[0]))%8 == 0)
		}
		if got, ok := ParseDType(dt.String()); !ok || got != dt {
			t.Errorf("ParseDType(%q) = %v, %v", dt.String(), got, ok)
		}
	}
	if _, ok := ParseDType("float"); ok {
		t.Error("ParseDType accepts lowercase names")
	}
	if _, err := NewTensor("x", Unknown, []int64{1}); err == nil {
		t.Error("NewTensor accepts an Unknown dtype")
	}
}

func TestAppendingToANewTensorsShapeLeavesItsDataAlone(t *testing.T) {
	for _, shape := range [][]int64{{1, 3}, {2, 200}, {}} {
		x, err := NewTensor("x", Float32, shape)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x.Data {
			x.Data[i] = byte(i + 1)
		}
		if len(shape) > 0 {
			shape[0] = 99 // the caller's slice is not the tensor's
			if x.Shape[0] == 99 {
				t.Errorf("shape %v: the tensor shares the caller's shape", shape)
			}
		}
		grown := append(x.Shape, 7)
		for i := range x.Data {
			if x.Data[i] != byte(i+1) {
				t.Fatalf("shape %v: appending to the shape (%v) changed data byte %d", shape, grown, i)
			}
		}
		if n := len(x.Data); n > 0 && uintptr(unsafe.Pointer(&x.Data[0]))%8 != 0 {
			t.Errorf("shape %v: data not 8-byte aligned", shape)
		}
		if len(shape) == 0 && x.Shape != nil {
			t.Errorf("a scalar's shape is %#v, want nil (as the wire decoders give it)", x.Shape)
		}
	}
}

func TestFloat64AtWidensEveryType(t *testing.T) {
	x, _ := NewTensor("x", Int16, []int64{2})
	x.Int16s()[1] = -7
	if x.Float64At(1) != -7 {
		t.Errorf("Float64At = %v", x.Float64At(1))
	}
	b, _ := NewTensor("b", Bool, []int64{2})
	b.Bools()[1] = true
	if b.Data[1] != 1 || b.Float64At(0) != 0 || b.Float64At(1) != 1 {
		t.Errorf("Bool: data %v, Float64At %v %v", b.Data, b.Float64At(0), b.Float64At(1))
	}
	u, _ := NewTensor("u", Uint8, []int64{2})
	u.Uint8s()[0] = 255
	if u.Float64At(0) != 255 || u.Float64At(1) != 0 {
		t.Errorf("Uint8: Float64At %v %v", u.Float64At(0), u.Float64At(1))
	}
}

func TestBoolAndUint8AreOneByte(t *testing.T) {
	for _, c := range []struct {
		dt   DType
		name string
	}{{Bool, "BOOL"}, {Uint8, "UINT8"}} {
		if c.dt.String() != c.name || c.dt.Size() != 1 {
			t.Errorf("%v: name %q, size %d", c.dt, c.dt.String(), c.dt.Size())
		}
	}
	// The numeric codes are shared with the torch shim (shim.h): never renumber.
	if Int64 != 6 || Bool != 7 || Uint8 != 8 {
		t.Errorf("codes Int64 %d, Bool %d, Uint8 %d; want 6, 7, 8", Int64, Bool, Uint8)
	}
}

func TestRegistryNamesTheReasonNoRuntimeFits(t *testing.T) {
	var r Registry
	if _, err := r.Find(fstest.MapFS{}, []string{"saved_model.pb", "variables/variables.index"}); !errors.Is(err, ErrUnsupportedRuntime) || err.Error() == "" {
		t.Errorf("SavedModel: %v", err)
	}
	if _, err := r.Find(fstest.MapFS{"notes.txt": {Data: []byte("hello")}}, []string{"notes.txt"}); !errors.Is(err, ErrUnsupportedRuntime) {
		t.Errorf("text file: %v", err)
	}
}

func TestCheckBoolsNamesTheFirstByteOtherThanZeroOrOne(t *testing.T) {
	if err := CheckBools([]byte{0, 1, 1}); err != nil {
		t.Errorf("CheckBools: %v", err)
	}
	if err := CheckBools([]byte{0, 255}); err == nil || err.Error() != "byte 1 is 255; BOOL data must be bytes 0 (false) or 1 (true)" {
		t.Errorf("CheckBools(255): %v", err)
	}
}

// TestDTypeTextRoundTrips: every type's name decodes to the type, and an
// unknown name is an error naming it.
func TestDTypeTextRoundTrips(t *testing.T) {
	for _, d := range []DType{Unknown, Float32, Float64, Int8, Int16, Int32, Int64, Bool, Uint8, Float16, BFloat16, Bytes} {
		text, err := d.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back DType
		if err := back.UnmarshalText(text); err != nil || back != d {
			t.Errorf("%s: decoded %v, %v", text, back, err)
		}
	}
	var d DType
	if err := d.UnmarshalText([]byte("FP32")); err == nil || !strings.Contains(err.Error(), `"FP32"`) {
		t.Errorf("FP32 (not a B&A name): %v", err)
	}
}
