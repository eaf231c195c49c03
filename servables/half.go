package servables

import "math"

// This file converts the 2-byte float types, Float16 (IEEE 754 binary16)
// and BFloat16, to and from float64.

// Uint16s views Data as the 2-byte bit patterns of a Float16 or BFloat16
// tensor.
func (t Tensor) Uint16s() []uint16 { return view[uint16](t.Data) }

// HalfAt returns element i of a Float16 or BFloat16 tensor, exactly, as a
// float64.
func (t Tensor) HalfAt(i int) float64 {
	b := t.Uint16s()[i]
	if t.DType == BFloat16 {
		return float64(math.Float32frombits(uint32(b) << 16))
	}
	return Float16Value(b)
}

// Float16Value returns the value of the Float16 bit pattern b.
func Float16Value(b uint16) float64 {
	sign := 1.0
	if b&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(b>>10&0x1f), float64(b&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// Float16Bits rounds f to the nearest Float16, ties to even, and returns
// its bit pattern; inRange is false when a finite f rounds beyond the
// largest Float16 (65504), to ±Inf. NaN stays NaN (quiet) and ±Inf stays
// ±Inf.
func Float16Bits(f float64) (bits uint16, inRange bool) {
	return roundHalf(f, 10, 15)
}

// BFloat16Bits rounds f to the nearest BFloat16, ties to even, and returns
// its bit pattern; inRange is false when a finite f rounds beyond the
// largest BFloat16 (about 3.39e38), to ±Inf.
func BFloat16Bits(f float64) (bits uint16, inRange bool) {
	return roundHalf(f, 7, 127)
}

// roundHalf rounds f, correctly and ties to even, to the 16-bit binary
// float with mant mantissa bits and exponent bias (so 15-mant exponent
// bits); it works from the float64 itself, so there is no double rounding.
func roundHalf(f float64, mant, bias int) (uint16, bool) {
	b := math.Float64bits(f)
	sign := uint16(b>>63) << 15
	exp := int(b >> 52 & 0x7ff)
	infBits := uint16(2*bias+1) << mant
	switch {
	case math.IsNaN(f):
		return sign | infBits | 1<<(mant-1), true
	case math.IsInf(f, 0):
		return sign | infBits, true
	case exp == 0:
		return sign, true // float64 subnormals are far below any 16-bit float's
	}
	m := b&(1<<52-1) | 1<<52
	e := exp - 1023
	minE := 1 - bias
	if e < minE {
		// A subnormal: units of 2^(minE-mant). A carry into the exponent
		// field makes the smallest normal number, as it should.
		shift := 52 + minE - mant - e
		if shift >= 54 {
			return sign, true // below half the smallest subnormal
		}
		return sign | uint16(roundShift(m, uint(shift))), true
	}
	r := roundShift(m, uint(52-mant))
	if r == 1<<(mant+1) {
		r >>= 1
		e++
	}
	if e > bias {
		return sign | infBits, false
	}
	return sign | uint16(e+bias)<<mant | uint16(r)&(1<<mant-1), true
}

// roundShift returns m >> s rounded to the nearest, ties to even (s ≥ 1).
func roundShift(m uint64, s uint) uint64 {
	q, rem, half := m>>s, m&(1<<s-1), uint64(1)<<(s-1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}
