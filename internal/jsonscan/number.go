package jsonscan

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Number is a lexed JSON number, with its first 19 significant digits
// accumulated: its magnitude is Mant × 10^E, give or take the dropped
// digits (Trunc).
type Number struct {
	Start, End int    // the literal is Buf[Start:End]
	Mant       uint64 // the first 19 significant digits
	E          int    // decimal exponent of Mant's last digit, with an exponent part clamped beyond the digits' reach
	Neg        bool   // a leading '-'
	Trunc      bool   // non-zero digits beyond the 19th were dropped
	IsInt      bool   // no fraction and no exponent
}

// LexNumber validates the number at Pos, moves past it and describes it
// in n.
func (s *Scanner) LexNumber(n *Number) bool {
	buf := s.Buf
	i := s.Pos
	*n = Number{Start: i, IsInt: true}
	nd := 0 // significant digits in Mant
	if at(buf, i) == '-' {
		n.Neg = true
		i++
	}
	switch c := at(buf, i); {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		j := i + 1
		for j < len(buf) && IsDigit(buf[j]) {
			j++
		}
		nd, n.Mant, n.E, n.Trunc = accumulate(buf[i:j], 0, 0, false)
		i = j
	default:
		return s.fail(NumberMissDigit, i, n.Start)
	}
	if at(buf, i) == '.' {
		n.IsInt = false
		i++
		j := i
		for j < len(buf) && IsDigit(buf[j]) {
			j++
		}
		if j == i {
			return s.failNumber(NumberMissFraction, i, n)
		}
		digits := buf[i:j]
		if nd == 0 {
			// Leading zeros of the fraction only move the decimal point.
			k := 0
			for k < len(digits) && digits[k] == '0' {
				k++
			}
			n.E -= k
			digits = digits[k:]
		}
		var dropped int
		nd, n.Mant, dropped, n.Trunc = accumulate(digits, nd, n.Mant, n.Trunc)
		// Fraction digits kept in Mant lower the exponent; dropped ones do
		// not.
		n.E -= len(digits) - dropped
		i = j
	}
	if c := at(buf, i); c == 'e' || c == 'E' {
		n.IsInt = false
		i++
		minus := false
		if c := at(buf, i); c == '+' || c == '-' {
			minus = c == '-'
			i++
		}
		if !IsDigit(at(buf, i)) {
			return s.failNumber(NumberMissExponent, i, n)
		}
		// The clamp must exceed what the digits can move the exponent by
		// (len(buf)), or a clamped exponent and many digits could cancel
		// into a fast-path exponent.
		exp, limit := 0, len(buf)+1e6
		for ; i < len(buf) && IsDigit(buf[i]); i++ {
			if exp < limit {
				exp = exp*10 + int(buf[i]-'0')
			}
		}
		if minus {
			exp = -exp
		}
		n.E += exp
	}
	n.End = i
	s.Pos = i
	if s.RapidjsonNumbers {
		return s.rapidjsonLimits(n)
	}
	return true
}

// rapidjsonLimits fails the number just lexed, n, with NumberTooBig where
// RapidjsonNumbers says so.
func (s *Scanner) rapidjsonLimits(n *Number) bool {
	lit := s.Buf[n.Start:n.End]
	// Only an integer part beyond uint64 (more than 19 digits) reaches
	// rapidjson's double accumulator, and only an exponent part above 308
	// its exponent limit; n.E is that part plus the integer digits dropped
	// less the fraction digits kept, so more than 308-len(lit) then.
	if (len(lit) > 19 || n.E > 308-len(lit)) && rapidjsonTooBig(lit) {
		return s.Fail(NumberTooBig, n.Start)
	}
	return true
}

// failNumber records the syntax error k at pos in the number n, unless
// RapidjsonNumbers finds the number too big before pos, as rapidjson does
// when its integer part is.
func (s *Scanner) failNumber(k Kind, pos int, n *Number) bool {
	if s.RapidjsonNumbers && rapidjsonTooBig(s.Buf[n.Start:pos]) {
		return s.Fail(NumberTooBig, n.Start)
	}
	return s.fail(k, pos, n.Start)
}

// accumulate appends the decimal digits to a mantissa of nd significant
// digits, keeping at most 19. It returns the new count and mantissa, the
// number of digits dropped, and whether a dropped digit was not zero.
func accumulate(digits []byte, nd int, mant uint64, trunc bool) (int, uint64, int, bool) {
	keep := len(digits)
	if keep > 19-nd {
		keep = 19 - nd
	}
	for _, c := range digits[:keep] {
		mant = mant*10 + uint64(c-'0')
	}
	for _, c := range digits[keep:] {
		trunc = trunc || c != '0'
	}
	return nd + keep, mant, len(digits) - keep, trunc
}

// rapidjsonTooBig reports whether rapidjson 1.1.0's ParseNumber, with
// kParseFullPrecisionFlag, fails with kParseErrorNumberTooBig on lit, a
// valid JSON number or the start of one up to a syntax error. It repeats
// ParseNumber's arithmetic step for step: the integer part accumulates in
// an unsigned integer, then a double that must be below DBL_MAX/10 before
// each further digit; the fraction's digits raise the limit of a
// positive exponent above 308 as long as they are kept (in the uint64 up
// to 2^53, then while fewer than 17 significant digits were seen).
func rapidjsonTooBig(lit []byte) bool {
	at := func(i int) byte {
		if i < len(lit) {
			return lit[i]
		}
		return 0
	}
	pos := 0
	minus := at(pos) == '-'
	if minus {
		pos++
	}
	var (
		i64       uint64
		useDouble bool
		d         float64
		sig       int // rapidjson's significandDigit
	)
	// rapidjson moves from its uint32 to its uint64 accumulator on the way,
	// which changes nothing here: the digit that would overflow the uint64
	// (2^64-1, or 2^63 after a '-') is where the double takes over.
	c := at(pos)
	pos++
	if c != '0' { // 1 to 9
		i64 = uint64(c - '0')
		limit, last := uint64(0x1999999999999999), byte('5') // 2^64-1
		if minus {
			limit, last = 0x0CCCCCCCCCCCCCCC, '8' // 2^63
		}
		for c = at(pos); IsDigit(c); c = at(pos) {
			if i64 >= limit && (i64 != limit || c > last) {
				d, useDouble = float64(i64), true
				break
			}
			i64 = i64*10 + uint64(c-'0')
			pos++
			sig++
		}
	}
	if useDouble {
		for c = at(pos); IsDigit(c); c = at(pos) {
			if d >= 1.7976931348623157e307 { // DBL_MAX / 10
				return true
			}
			d = float64(d*10) + float64(c-'0')
			pos++
		}
	}
	expFrac := 0
	if at(pos) == '.' {
		pos++
		if !useDouble {
			for c = at(pos); IsDigit(c); c = at(pos) {
				if i64 > 0x1FFFFFFFFFFFFF { // 2^53-1
					break
				}
				i64 = i64*10 + uint64(c-'0')
				pos++
				expFrac--
				if i64 != 0 {
					sig++
				}
			}
			d = float64(i64)
		}
		for c = at(pos); IsDigit(c); c = at(pos) {
			if sig < 17 {
				d = float64(d*10) + float64(c-'0')
				expFrac--
				if d > 0 {
					sig++
				}
			}
			pos++
		}
	}
	if c = at(pos); c != 'e' && c != 'E' {
		return false
	}
	pos++
	switch at(pos) {
	case '+':
		pos++
	case '-':
		return false // a negative exponent is never too big
	}
	exp := int(at(pos) - '0')
	pos++
	maxExp := 308 - expFrac
	for c = at(pos); IsDigit(c); c = at(pos) {
		pos++
		exp = exp*10 + int(c-'0')
		if exp > maxExp {
			return true
		}
	}
	return false
}

// Exactly representable powers of ten for the fast path.
var (
	float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
		1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
	float32pow10 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
)

// Float converts n, correctly rounded, to a float of bitSize 32 or 64. ok
// is false when a finite literal is beyond the type's range (it would round
// to ±Inf); values below the smallest subnormal round to ±0, as IEEE does.
// buf is the scanned document. Most values take a fast path, ExactFloat
// or, for the longer float32 literals, Float32ViaFloat64; the others go to
// ParseFloat, which rounds correctly too.
func (n *Number) Float(buf []byte, bitSize int) (f float64, ok bool) {
	if n.Mant == 0 {
		if n.Neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if !n.Trunc {
		if f, ok := ExactFloat(n.Mant, n.E, bitSize); ok {
			if n.Neg {
				f = -f
			}
			return f, true
		}
		if bitSize == 32 {
			if f, ok := Float32ViaFloat64(n.Mant, n.E); ok {
				if n.Neg {
					f = -f
				}
				return f, true
			}
		}
	}
	f, err := ParseFloat(buf[n.Start:n.End], bitSize)
	return f, err == nil // only ErrRange: the literal was validated
}

// ExactFloat returns mant × 10^e correctly rounded to a float of bitSize
// 32 or 64 when both mant and the power of ten are exact in that type, so
// that one correctly rounded multiplication or division gives it
// (Clinger's fast path); ok is false otherwise. It is small enough to be
// inlined into a caller's loop.
func ExactFloat(mant uint64, e int, bitSize int) (f float64, ok bool) {
	if bitSize == 32 {
		if mant >= 1<<24 || e < -10 || e > 10 {
			return 0, false
		}
		if e < 0 {
			return float64(float32(mant) / float32pow10[-e]), true
		}
		return float64(float32(mant) * float32pow10[e]), true
	}
	if mant >= 1<<53 || e < -22 || e > 22 {
		return 0, false
	}
	if e < 0 {
		return float64(mant) / float64pow10[-e], true
	}
	return float64(mant) * float64pow10[e], true
}

// Float32ViaFloat64 rounds mant × 10^e to float32 through float64, for the
// many float32 literals that have more digits than the float32 fast path
// allows (shortest float32 forms have up to 9, and float32 values printed
// as doubles, as Python clients send them, 17). With e in ±22 the power of
// ten is exact, so the float64 result y is within 2 float64 ulps of the
// exact value x (one rounding of mant, one of the product), and x lies
// between 1e-22 and 1e41: no float32 subnormals. Rounding y to float32
// gives the same result as rounding x unless a float32 rounding midpoint
// lies between them; midpoints are exactly the float64 values whose 29
// mantissa bits below float32's precision are 1<<28, so y far enough from
// such a pattern proves the result. ok is false (use strconv) near a
// midpoint, beyond float32's range, or with e outside ±22.
func Float32ViaFloat64(mant uint64, e int) (float64, bool) {
	if e < -22 || e > 22 {
		return 0, false
	}
	y := float64(mant)
	if e < 0 {
		y /= float64pow10[-e]
	} else {
		y *= float64pow10[e]
	}
	if y > math.MaxFloat32 {
		return 0, false
	}
	const margin = 16 // float64 ulps, well above the error bound of 2
	low := int64(math.Float64bits(y) & (1<<29 - 1))
	if d := low - 1<<28; d > -margin && d < margin {
		return 0, false
	}
	return float64(float32(y)), true
}

// Uint returns the magnitude of an integer literal; ok is false when n has
// a fraction or an exponent, or its magnitude exceeds uint64. buf is the
// scanned document.
func (n *Number) Uint(buf []byte) (mag uint64, ok bool) {
	if !n.IsInt {
		return 0, false
	}
	if n.E == 0 {
		return n.Mant, true // at most 19 digits
	}
	digits := buf[n.Start:n.End]
	if n.Neg {
		digits = digits[1:]
	}
	v, err := strconv.ParseUint(View(digits), 10, 64)
	return v, err == nil
}

// Digits8 returns the value of the eight bytes at buf[i:] when they are
// all ASCII digits, read as one little-endian word (SWAR: the test and
// the conversion take a few instructions, not a loop of eight).
func Digits8(buf []byte, i int) (v uint64, ok bool) {
	if i < 0 || i+8 > len(buf) {
		return 0, false
	}
	v = binary.LittleEndian.Uint64(buf[i:])
	// Each byte is 0x30-0x39 when its high nibble is 3 and adding 6
	// leaves it 3 (a carry out of a byte fails that byte itself).
	if v&0xF0F0F0F0F0F0F0F0|(v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0>>4 != 0x3333333333333333 {
		return 0, false
	}
	v -= 0x3030303030303030
	v = v*10 + v>>8 // pairs of digits in each 16-bit lane
	v = ((v&0x000000FF000000FF)*(100+1000000<<32) + (v>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
	return uint64(uint32(v)), true
}
