package ba

import (
	"math"
	"strconv"

	"github.com/groveml/grove/internal/jsonscan"
)

// The conversions below reproduce Abseil's SimpleAtof, SimpleAtod and
// SimpleAtoi, which the sidecar applies to each tensor_content string:
//
//   - leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r) is
//     ignored, and so is one leading '+' (but "+-1" is invalid);
//   - floats are absl::from_chars in general format: decimal with an
//     optional exponent, "0x" hexadecimal with an optional 'p' exponent,
//     "inf", "infinity", "nan" and "nan(chars)" in any case; an overflow
//     gives ±Inf, an underflow ±0;
//   - integers are base 10 only, and overflow is an error.

var asciiSpace = [256]bool{' ': true, '\t': true, '\n': true, '\v': true, '\f': true, '\r': true}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && asciiSpace[b[0]] {
		b = b[1:]
	}
	for len(b) > 0 && asciiSpace[b[len(b)-1]] {
		b = b[:len(b)-1]
	}
	return b
}

func isHexDigit(c byte) bool { return jsonscan.HexVal(c) >= 0 }

// lowerEq reports whether b equals the lower-case ASCII word w, ignoring case.
func lowerEq(b []byte, w string) bool {
	if len(b) != len(w) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != w[i] {
			return false
		}
	}
	return true
}

// mantissaEnd returns the end of a (hex)digits* [. (hex)digits*] mantissa
// at the start of b, or -1 if it has no digit.
func mantissaEnd(b []byte, hex bool) int {
	i, digits := 0, 0
	isD := jsonscan.IsDigit
	if hex {
		isD = isHexDigit
	}
	for i < len(b) && isD(b[i]) {
		i++
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && isD(b[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return -1
	}
	return i
}

// exponentOK reports whether b is empty or a complete exponent: the marker,
// an optional sign and at least one decimal digit.
func exponentOK(b []byte, marker byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0]|0x20 != marker {
		return false
	}
	b = b[1:]
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		b = b[1:]
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !jsonscan.IsDigit(c) {
			return false
		}
	}
	return true
}

// parseFloat converts b like absl::SimpleAtof (bitSize 32) or SimpleAtod
// (bitSize 64). scratch is reused for the rare hexadecimal form.
func parseFloat(b []byte, bitSize int, scratch *[]byte) (float64, bool) {
	// Short cut for the usual plain decimal such as "-0.4549": it starts
	// with a sign or digit, is not hexadecimal and ends with a digit.
	if n := len(b); n > 1 && b[n-1]-'0' < 10 {
		switch c, c1 := b[0], b[1]; {
		case c == '-' && c1-'0' < 10 && (n < 3 || b[2]|0x20 != 'x'):
			return parseDecimal(b, b[1:], true, bitSize)
		case c-'0' < 10 && c1|0x20 != 'x':
			return parseDecimal(b, b, false, bitSize)
		}
	}
	b = trimSpace(b)
	if len(b) > 0 && b[0] == '+' {
		b = b[1:]
		if len(b) > 0 && b[0] == '-' {
			return 0, false
		}
	}
	s := b
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, false
	}
	sign := 1.0
	if neg {
		sign = -1
	}
	switch s[0] | 0x20 {
	case 'i':
		if lowerEq(s, "inf") || lowerEq(s, "infinity") {
			return math.Inf(int(sign)), true
		}
		return 0, false
	case 'n':
		if len(s) < 3 || !lowerEq(s[:3], "nan") {
			return 0, false
		}
		if rest := s[3:]; len(rest) > 0 {
			if rest[0] != '(' || rest[len(rest)-1] != ')' {
				return 0, false
			}
			for _, c := range rest[1 : len(rest)-1] {
				if !(c == '_' || jsonscan.IsDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z') {
					return 0, false
				}
			}
		}
		return math.Copysign(math.NaN(), sign), true
	}
	if len(s) >= 2 && s[0] == '0' && s[1]|0x20 == 'x' {
		h := s[2:]
		end := mantissaEnd(h, true)
		if end < 0 || !exponentOK(h[end:], 'p') {
			return 0, false
		}
		// strconv wants a 'p' exponent on hexadecimal floats.
		buf := append((*scratch)[:0], b...)
		if end == len(h) {
			buf = append(buf, 'p', '0')
		}
		*scratch = buf
		return finishFloat(buf, bitSize)
	}
	return parseDecimal(b, s, neg, bitSize)
}

// parseDecimal validates and converts the decimal form s (b with its sign):
// digits with at most one '.', at least one digit, then an optional
// exponent. Most tensor values have few enough digits to be converted
// exactly by one correctly rounded multiplication or division
// (jsonscan.ExactFloat, Clinger's fast path), and most float32 values
// with more digits through float64 (jsonscan.Float32ViaFloat64); the
// others go to jsonscan.ParseFloat, which rounds correctly too.
func parseDecimal(b, s []byte, neg bool, bitSize int) (float64, bool) {
	var (
		mant     uint64
		nd       int  // significant digits in mant
		dp       int  // decimal exponent adjustment
		inexact  bool // significant digits were dropped
		exp      int
		expMinus bool
	)
	i := 0
	for i < len(s) && s[i] == '0' { // leading zeros
		i++
	}
	for nd <= 19-8 { // eight digits at a time while they fit
		v, ok := jsonscan.Digits8(s, i)
		if !ok {
			break
		}
		mant, nd, i = mant*1e8+v, nd+8, i+8
	}
	for ; i < len(s) && s[i]-'0' < 10; i++ {
		if nd < 19 {
			mant = mant*10 + uint64(s[i]-'0')
			nd++
		} else {
			inexact = inexact || s[i] != '0'
			dp++
		}
	}
	digits := i > 0
	if i < len(s) && s[i] == '.' {
		i++
		frac := i
		if nd == 0 {
			for i < len(s) && s[i] == '0' {
				i++
				dp--
			}
		}
		for nd <= 19-8 {
			v, ok := jsonscan.Digits8(s, i)
			if !ok {
				break
			}
			mant, nd, dp, i = mant*1e8+v, nd+8, dp-8, i+8
		}
		for ; i < len(s) && s[i]-'0' < 10; i++ {
			if nd < 19 {
				mant = mant*10 + uint64(s[i]-'0')
				nd++
				dp--
			} else {
				inexact = inexact || s[i] != '0'
			}
		}
		digits = digits || i > frac
	}
	if !digits {
		return 0, false
	}
	if i < len(s) {
		if s[i]|0x20 != 'e' {
			return 0, false
		}
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expMinus = s[i] == '-'
			i++
		}
		if i == len(s) {
			return 0, false
		}
		// Clamped beyond what the digits can move dp by (len(s)), so that
		// the two never cancel into a fast-path exponent.
		limit := len(s) + 1e6
		for ; i < len(s); i++ {
			c := s[i]
			if c-'0' >= 10 {
				return 0, false
			}
			if exp < limit {
				exp = exp*10 + int(c-'0')
			}
		}
		if expMinus {
			exp = -exp
		}
	}
	if mant == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if !inexact {
		f, ok := jsonscan.ExactFloat(mant, dp+exp, bitSize)
		if !ok && bitSize == 32 {
			// A float32 written with more digits than the exact path
			// takes, as clients that print float32 values as doubles
			// send them ("-0.9682539701461792").
			f, ok = jsonscan.Float32ViaFloat64(mant, dp+exp)
		}
		if ok {
			if neg {
				f = -f
			}
			return f, true
		}
	}
	return finishFloat(b, bitSize)
}

// finishFloat converts an already validated number with
// jsonscan.ParseFloat, which rounds correctly like absl::from_chars, at
// any length. On overflow it returns ±Inf with ErrRange, which is exactly
// SimpleAtof's result.
func finishFloat(b []byte, bitSize int) (float64, bool) {
	f, err := jsonscan.ParseFloat(b, bitSize)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}

// parseInt converts b like absl::SimpleAtoi into a signed integer of
// bitSize bits: base 10, no overflow.
func parseInt(b []byte, bitSize uint) (int64, bool) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg || b[0] == '+' {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	limit := uint64(1)<<(bitSize-1) - 1
	if neg {
		limit++
	}
	var v uint64
	for _, c := range b {
		if !jsonscan.IsDigit(c) {
			return 0, false
		}
		if v > (limit-uint64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		return -int64(v), true
	}
	return int64(v), true
}
