package jsonscan

import (
	"math"
	"strconv"
)

// Literals up to directMax bytes go to strconv as they are: they have
// fewer than the 800 digits strconv keeps, and an exponent that digits
// this few cannot cancel.
const directMax = 700

// keptDigits is how many significant digits ParseFloat hands strconv,
// followed by a non-zero digit when a dropped one was not zero. A value
// halfway between two float64 values has at most 768 significant digits
// ((2^54-1)·2^-1075 has exactly that many), so no rounding boundary lies
// strictly between the digits kept and the literal: both round the same
// way. keptHexDigits is the same for hexadecimal literals: 16 hex digits
// hold 64 bits, more than a float64 midpoint's 54.
const (
	keptDigits    = 768
	keptHexDigits = 16
)

// ParseFloat converts a literal that strconv.ParseFloat accepts to a
// float of bitSize 32 or 64, correctly rounded, with strconv's results
// and errors (quoting at most clipMax bytes of the literal): ±Inf and
// ErrRange beyond the type's range, ±0 below its smallest subnormal. Unlike strconv.ParseFloat it is right for decimal
// and hexadecimal literals of any length: strconv miscounts the exponent
// of one whose integer part has more than 800 digits ("1" then 1,000
// zeros then "e-1000" reads as 1e-201), and of one whose exponent part is
// cancelled by more than about 10,000 digits.
func ParseFloat(lit []byte, bitSize int) (float64, error) {
	if len(lit) > directMax {
		return parseLongFloat(lit, bitSize)
	}
	f, err := strconv.ParseFloat(View(lit), bitSize)
	if ne, ok := err.(*strconv.NumError); ok && len(lit) > clipMax {
		ne.Num = clipLiteral(lit)
	}
	return f, err
}

// parseLongFloat is ParseFloat for a literal longer than directMax: an
// optional sign, digits (hexadecimal after "0x") with at most one '.',
// and an exponent part (a power of ten after 'e', of two after 'p') are
// rewritten as their first significant digits, a sticky digit and the
// exponent that places them, which strconv reads right. Any other form
// goes to strconv as it is.
//
//go:noinline
func parseLongFloat(lit []byte, bitSize int) (float64, error) {
	var (
		digits  [keptDigits]byte
		nd      int  // digits kept
		dp      int  // the value is 0.digits × base^dp
		sticky  bool // a non-zero digit was dropped
		nonZero bool // a non-zero digit was met
		neg     bool
	)
	i := 0
	if c := at(lit, i); c == '+' || c == '-' {
		neg = c == '-'
		i++
	}
	hex := at(lit, i) == '0' && at(lit, i+1)|0x20 == 'x'
	isDigit, kept, expMark, expMin, expMax := IsDigit, keptDigits, byte('e'), -400, 400
	if hex {
		i += 2
		isDigit = func(c byte) bool { return IsDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }
		// A hexadecimal digit is four bits: 16^dp × 2^exp is 2^(4dp+exp).
		kept, expMark, expMin, expMax = keptHexDigits, 'p', -1200, 1100
	}
	keep := func(c byte) {
		switch {
		case nd < kept:
			digits[nd] = c
			nd++
		case c != '0':
			sticky = true
		}
	}
	start := i
	for ; i < len(lit) && isDigit(lit[i]); i++ {
		if !nonZero && lit[i] == '0' {
			continue
		}
		nonZero = true
		dp++
		keep(lit[i])
	}
	mantissa := i > start
	if at(lit, i) == '.' {
		i++
		frac := i
		for ; i < len(lit) && isDigit(lit[i]); i++ {
			if !nonZero {
				if lit[i] == '0' {
					dp--
					continue
				}
				nonZero = true
			}
			keep(lit[i])
		}
		mantissa = mantissa || i > frac
	}
	exp, hasExp := 0, false
	if c := at(lit, i); mantissa && c|0x20 == expMark {
		i++
		minus := false
		if c := at(lit, i); c == '+' || c == '-' {
			minus = c == '-'
			i++
		}
		first := i
		// Clamped beyond what the digits can move dp by (4 × len(lit)).
		limit := 4*len(lit) + 1e6
		for ; i < len(lit) && IsDigit(lit[i]); i++ {
			if exp < limit {
				exp = exp*10 + int(lit[i]-'0')
			}
		}
		hasExp = i > first
		if minus {
			exp = -exp
		}
	}
	if !mantissa || i != len(lit) || hex && !hasExp || !hasExp && i > 0 && lit[i-1]|0x20 == expMark {
		return strconv.ParseFloat(View(lit), bitSize)
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	e := dp + exp
	if hex {
		e = 4*dp + exp
	}
	switch {
	case nd == 0 || e < expMin: // below every subnormal
		return math.Copysign(0, sign), nil
	case e > expMax: // beyond every finite float
		return math.Inf(int(sign)), &strconv.NumError{Func: "ParseFloat", Num: clipLiteral(lit), Err: strconv.ErrRange}
	}
	buf := make([]byte, 0, keptDigits+16)
	if neg {
		buf = append(buf, '-')
	}
	if hex {
		buf = append(buf, "0x"...)
	}
	buf = append(buf, "0."...)
	buf = append(buf, digits[:nd]...)
	if sticky {
		buf = append(buf, '1')
	}
	buf = append(buf, expMark)
	buf = strconv.AppendInt(buf, int64(e), 10)
	f, err := strconv.ParseFloat(View(buf), bitSize)
	if ne, ok := err.(*strconv.NumError); ok {
		ne.Num = clipLiteral(lit)
	}
	return f, err
}

// clipMax is the longest literal an error quotes whole.
const clipMax = 40

// clipLiteral shortens a long literal for an error message.
func clipLiteral(lit []byte) string {
	if len(lit) <= clipMax {
		return string(lit)
	}
	return string(lit[:clipMax]) + "…"
}
