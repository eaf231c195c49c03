package servables

import (
	"math"
	"testing"
)

func TestFloat16BitsRoundToNearestEven(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits uint16
		ok   bool
	}{
		{0, 0x0000, true},
		{math.Copysign(0, -1), 0x8000, true},
		{1, 0x3c00, true},
		{-2, 0xc000, true},
		{0.1, 0x2e66, true},
		{65504, 0x7bff, true},
		{65519.99, 0x7bff, true},
		{65520, 0x7c00, false}, // halfway to 65536: ties to even overflow
		{1e6, 0x7c00, false},
		{-1e6, 0xfc00, false},
		{math.Inf(1), 0x7c00, true},
		{math.Ldexp(1, -24), 0x0001, true},       // the smallest subnormal
		{math.Ldexp(1, -25), 0x0000, true},       // half of it: ties to even (0)
		{math.Ldexp(1.5, -25), 0x0001, true},     // over half
		{math.Ldexp(3, -25), 0x0002, true},       // 1.5 units: ties to even (2)
		{math.Ldexp(1023.5, -24), 0x0400, true},  // rounds up into the smallest normal
		{1 + math.Ldexp(1, -11), 0x3c00, true},   // halfway between 1 and the next: even (1)
		{1 + 3*math.Ldexp(1, -11), 0x3c02, true}, // halfway, odd below: up
		{1 + math.Ldexp(1, -11) + 1e-12, 0x3c01, true},
		{2049, 0x6800, true}, // 2048 and 2050 are neighbours: even
	} {
		bits, ok := Float16Bits(c.f)
		if bits != c.bits || ok != c.ok {
			t.Errorf("Float16Bits(%g) = %#04x %v, want %#04x %v", c.f, bits, ok, c.bits, c.ok)
		}
	}
	if b, _ := Float16Bits(math.NaN()); !math.IsNaN(Float16Value(b)) {
		t.Errorf("NaN became %#04x", b)
	}
}

// TestFloat16BitsMatchExactRounding checks every Float16 and the points
// halfway between neighbours against exact rounding (midpoints are exact in float64).
func TestFloat16BitsMatchExactRounding(t *testing.T) {
	for b := uint16(0); b < 0x7c00; b++ {
		v := Float16Value(b)
		if got, ok := Float16Bits(v); got != b || !ok {
			t.Fatalf("%#04x (%g) came back as %#04x", b, v, got)
		}
		if b == 0x7bff {
			break
		}
		mid := (v + Float16Value(b+1)) / 2 // exact in float64
		want := b
		if b&1 == 1 {
			want = b + 1
		}
		if got, _ := Float16Bits(mid); got != want {
			t.Fatalf("midpoint %g of %#04x: %#04x, want %#04x", mid, b, got, want)
		}
		above := math.Nextafter(mid, math.Inf(1))
		if got, _ := Float16Bits(above); got != b+1 {
			t.Fatalf("just above midpoint %g: %#04x, want %#04x", above, got, b+1)
		}
	}
}

func TestBFloat16BitsRoundToNearestEven(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits uint16
		ok   bool
	}{
		{1, 0x3f80, true},
		{-1.5, 0xbfc0, true},
		{0.1, 0x3dcd, true},
		{1 + math.Ldexp(1, -8), 0x3f80, true},   // halfway: even
		{1 + 3*math.Ldexp(1, -8), 0x3f82, true}, // halfway: up to even
		{3.3895313892515355e38, 0x7f7f, true},   // the largest
		{3.4e38, 0x7f80, false},
		{math.Ldexp(1, -133), 0x0001, true},
	} {
		bits, ok := BFloat16Bits(c.f)
		if bits != c.bits || ok != c.ok {
			t.Errorf("BFloat16Bits(%g) = %#04x %v, want %#04x %v", c.f, bits, ok, c.bits, c.ok)
		}
	}
	for b := uint16(0); b < 0x7f80; b++ {
		v := float64(math.Float32frombits(uint32(b) << 16))
		if got, ok := BFloat16Bits(v); got != b || !ok {
			t.Fatalf("%#04x (%g) came back as %#04x", b, v, got)
		}
	}
}

func TestHalfTensorsReadAsFloat64(t *testing.T) {
	h, _ := NewTensor("h", Float16, []int64{2})
	h.Uint16s()[0], h.Uint16s()[1] = 0x3c00, 0xc100
	bf, _ := NewTensor("b", BFloat16, []int64{1})
	bf.Uint16s()[0] = 0x3fc0
	if h.Float64At(0) != 1 || h.Float64At(1) != -2.5 || bf.Float64At(0) != 1.5 {
		t.Errorf("%v %v %v", h.Float64At(0), h.Float64At(1), bf.Float64At(0))
	}
	if d, ok := ParseDType("FLOAT16"); !ok || d != Float16 || d.Size() != 2 || BFloat16.String() != "BFLOAT16" {
		t.Errorf("FLOAT16: %v %v", d, ok)
	}
}
