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
// halfway between two float64 values has at most 767 significant digits,
// so no rounding boundary lies strictly between the digits kept and the
// literal: both round the same way.
const keptDigits = 768

// ParseFloat converts a decimal literal (an optional sign, digits with at
// most one '.', an optional exponent part) to a float of bitSize 32 or 64,
// correctly rounded, with strconv.ParseFloat's results and errors: ±Inf
// and ErrRange beyond the type's range, ±0 below its smallest subnormal.
// Unlike strconv.ParseFloat it is right for literals of any length:
// strconv miscounts the exponent of a literal whose integer part has more
// than 800 digits ("1" then 1,000 zeros then "e-1000" reads as 1e-201),
// and of one whose exponent part is cancelled by more than about 10,000
// digits. Other forms (hexadecimal, "Inf") go to strconv unchanged.
func ParseFloat(lit []byte, bitSize int) (float64, error) {
	if len(lit) <= directMax {
		return strconv.ParseFloat(View(lit), bitSize)
	}
	var (
		digits  [keptDigits]byte
		nd      int  // digits kept
		dp      int  // the value is 0.digits × 10^dp
		sticky  bool // a non-zero digit was dropped
		nonZero bool // a non-zero digit was met
		neg     bool
	)
	i := 0
	if c := at(lit, i); c == '+' || c == '-' {
		neg = c == '-'
		i++
	}
	keep := func(c byte) {
		switch {
		case nd < keptDigits:
			digits[nd] = c
			nd++
		case c != '0':
			sticky = true
		}
	}
	start := i
	for ; i < len(lit) && IsDigit(lit[i]); i++ {
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
		for ; i < len(lit) && IsDigit(lit[i]); i++ {
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
	exp := 0
	if c := at(lit, i); mantissa && (c == 'e' || c == 'E') {
		i++
		minus := false
		if c := at(lit, i); c == '+' || c == '-' {
			minus = c == '-'
			i++
		}
		first := i
		// Clamped beyond what the digits can move dp by (len(lit)).
		limit := len(lit) + 1e6
		for ; i < len(lit) && IsDigit(lit[i]); i++ {
			if exp < limit {
				exp = exp*10 + int(lit[i]-'0')
			}
		}
		if i == first {
			mantissa = false
		}
		if minus {
			exp = -exp
		}
	}
	if !mantissa || i != len(lit) {
		return strconv.ParseFloat(View(lit), bitSize)
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	e := dp + exp
	switch {
	case nd == 0 || e < -400: // below every subnormal
		return math.Copysign(0, sign), nil
	case e > 400: // beyond every finite float
		return math.Inf(int(sign)), &strconv.NumError{Func: "ParseFloat", Num: clipLiteral(lit), Err: strconv.ErrRange}
	}
	buf := make([]byte, 0, keptDigits+16)
	if neg {
		buf = append(buf, '-')
	}
	buf = append(buf, "0."...)
	buf = append(buf, digits[:nd]...)
	if sticky {
		buf = append(buf, '1')
	}
	buf = append(buf, 'e')
	buf = strconv.AppendInt(buf, int64(e), 10)
	f, err := strconv.ParseFloat(View(buf), bitSize)
	if ne, ok := err.(*strconv.NumError); ok {
		ne.Num = clipLiteral(lit)
	}
	return f, err
}

// clipLiteral shortens a long literal for an error message.
func clipLiteral(lit []byte) string {
	const max = 40
	if len(lit) <= max {
		return string(lit)
	}
	return string(lit[:max]) + "…"
}
