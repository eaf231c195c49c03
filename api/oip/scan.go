package oip

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// The scanner validates JSON text (RFC 8259: no comments, no trailing
// commas, no leading zeros, strings in valid UTF-8 without raw control
// characters or lone surrogate escapes) and records what the request
// parser needs. Reading past the end yields 0, which no valid token
// contains, so truncation fails where the token does.

// strRef locates the contents of a JSON string, between the quotes.
type strRef struct {
	start, end int
	esc        bool // it contains a backslash escape
}

// scanner is the state of one scan. err holds the first error, syntax or
// semantic; every scanning function returns false once it is set.
type scanner struct {
	buf   []byte
	pos   int
	err   *Error
	stack []uint64 // skipValue's container kinds, one bit per level (1 = object)
}

func at(buf []byte, i int) byte {
	if i < len(buf) {
		return buf[i]
	}
	return 0
}

func (s *scanner) peek() byte { return at(s.buf, s.pos) }

func (s *scanner) skipWS() {
	buf, i := s.buf, s.pos
	for i < len(buf) && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t') {
		i++
	}
	s.pos = i
}

// describe names the byte at i for a syntax error.
func (s *scanner) describe(i int) string {
	if i >= len(s.buf) {
		return "the end of the JSON"
	}
	c := s.buf[i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// syntax records a syntax error at byte i: "expected X, found Y".
func (s *scanner) syntax(i int, expected string) bool {
	if s.err == nil {
		s.err = badRequest(fmt.Sprintf("malformed JSON at byte %d: expected %s, found %s", i, expected, s.describe(i)))
	}
	return false
}

// syntaxMsg records a syntax error at byte i with its own message.
func (s *scanner) syntaxMsg(i int, msg string) bool {
	if s.err == nil {
		s.err = badRequest(fmt.Sprintf("malformed JSON at byte %d: %s", i, msg))
	}
	return false
}

// fail records a semantic error.
func (s *scanner) fail(msg string) bool {
	if s.err == nil {
		s.err = badRequest(msg)
	}
	return false
}

func isDigit(c byte) bool { return c-'0' < 10 }

func hexVal(c byte) int {
	switch {
	case c-'0' < 10:
		return int(c - '0')
	case c-'a' < 6:
		return int(c-'a') + 10
	case c-'A' < 6:
		return int(c-'A') + 10
	}
	return -1
}

// plainEnd returns the index of the first byte at or after i that is not
// plain string content (a quote, a backslash, a control character or a
// non-ASCII byte), or len(buf). It tests eight bytes at a time.
func plainEnd(buf []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(buf); i += 8 {
		x := binary.LittleEndian.Uint64(buf[i:])
		q := x ^ ('"' * ones)
		b := x ^ ('\\' * ones)
		// Flag bytes that are zero after the XOR (a quote or a backslash),
		// below 0x20, or have their high bit set. Only the lowest flag is
		// exact (borrows can flag bytes above it), and only it is used.
		m := ((q - ones) &^ q) | ((b - ones) &^ b) | ((x - 0x20*ones) &^ x) | x
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(buf) {
		c := buf[i]
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			break
		}
		i++
	}
	return i
}

// hex4 reads the four hex digits of a \u escape at i.
func (s *scanner) hex4(i int) (rune, bool) {
	var r rune
	for k := 0; k < 4; k++ {
		v := hexVal(at(s.buf, i+k))
		if v < 0 {
			return 0, s.syntax(i+k, "a hex digit in a \\u escape")
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// scanString validates the string whose opening quote is at s.pos and moves
// past its closing quote.
func (s *scanner) scanString() (strRef, bool) {
	buf := s.buf
	i := s.pos + 1
	ref := strRef{start: i}
	for {
		i = plainEnd(buf, i)
		if i >= len(buf) {
			return ref, s.syntaxMsg(i, "unterminated string")
		}
		switch c := buf[i]; {
		case c == '"':
			ref.end = i
			s.pos = i + 1
			return ref, true
		case c == '\\':
			ref.esc = true
			e := at(buf, i+1)
			if escapeChar[e] != 0 {
				i += 2
				continue
			}
			if e != 'u' {
				return ref, s.syntaxMsg(i, "invalid escape in string")
			}
			r, ok := s.hex4(i + 2)
			if !ok {
				return ref, false
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if at(buf, i+6) != '\\' || at(buf, i+7) != 'u' {
					return ref, s.syntaxMsg(i, "lone surrogate \\u escape in string")
				}
				r2, ok := s.hex4(i + 8)
				if !ok {
					return ref, false
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return ref, s.syntaxMsg(i, "lone surrogate \\u escape in string")
				}
				i += 12
			case r >= 0xDC00 && r <= 0xDFFF:
				return ref, s.syntaxMsg(i, "lone surrogate \\u escape in string")
			default:
				i += 6
			}
		case c < 0x20:
			return ref, s.syntaxMsg(i, "control character in string")
		default: // non-ASCII
			r, n := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && n == 1 {
				return ref, s.syntaxMsg(i, "invalid UTF-8 in string")
			}
			i += n
		}
	}
}

// escapeChar maps the character after a backslash to the byte it stands for
// (0: not a one-character escape).
var escapeChar = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unescape appends the decoded contents of a validated string to dst.
func unescape(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c != '\\' {
			j := i + 1
			for j < len(src) && src[j] != '\\' {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
			continue
		}
		e := src[i+1]
		if e != 'u' {
			dst = append(dst, escapeChar[e])
			i += 2
			continue
		}
		r := rune(hexVal(src[i+2])<<12 | hexVal(src[i+3])<<8 | hexVal(src[i+4])<<4 | hexVal(src[i+5]))
		i += 6
		if r >= 0xD800 && r <= 0xDBFF {
			r2 := rune(hexVal(src[i+2])<<12 | hexVal(src[i+3])<<8 | hexVal(src[i+4])<<4 | hexVal(src[i+5]))
			r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
			i += 6
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// number is a validated JSON number literal, with its first 19
// significant digits accumulated: its value is mant × 10^(dp+exp), give or
// take the dropped digits (trunc).
type number struct {
	start, end int
	mant       uint64
	dp         int  // decimal exponent of mant's last digit
	exp        int  // the explicit exponent, clamped to ±1e6
	neg        bool // a leading '-'
	trunc      bool // non-zero digits beyond the 19th were dropped
	isInt      bool // no fraction and no exponent
}

// lexNumber validates the number at s.pos, moves past it and describes it
// in n.
func (s *scanner) lexNumber(n *number) bool {
	buf := s.buf
	i := s.pos
	*n = number{start: i, isInt: true}
	nd := 0 // significant digits in mant
	if at(buf, i) == '-' {
		n.neg = true
		i++
	}
	switch c := at(buf, i); {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		j := i + 1
		for j < len(buf) && isDigit(buf[j]) {
			j++
		}
		nd, n.mant, n.dp, n.trunc = accumulate(buf[i:j], 0, 0, false)
		i = j
	default:
		return s.syntax(i, "a digit")
	}
	if at(buf, i) == '.' {
		n.isInt = false
		i++
		j := i
		for j < len(buf) && isDigit(buf[j]) {
			j++
		}
		if j == i {
			return s.syntax(i, "a digit after the decimal point")
		}
		digits := buf[i:j]
		if nd == 0 {
			// Leading zeros of the fraction only move the decimal point.
			k := 0
			for k < len(digits) && digits[k] == '0' {
				k++
			}
			n.dp -= k
			digits = digits[k:]
		}
		var dropped int
		nd, n.mant, dropped, n.trunc = accumulate(digits, nd, n.mant, n.trunc)
		// Fraction digits kept in mant lower the exponent; dropped ones do
		// not.
		n.dp -= len(digits) - dropped
		i = j
	}
	if c := at(buf, i); c == 'e' || c == 'E' {
		n.isInt = false
		i++
		minus := false
		if c := at(buf, i); c == '+' || c == '-' {
			minus = c == '-'
			i++
		}
		if !isDigit(at(buf, i)) {
			return s.syntax(i, "a digit in the exponent")
		}
		for ; i < len(buf) && isDigit(buf[i]); i++ {
			if n.exp < 1e6 {
				n.exp = n.exp*10 + int(buf[i]-'0')
			}
		}
		if minus {
			n.exp = -n.exp
		}
	}
	n.end = i
	s.pos = i
	return true
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

// Exactly representable powers of ten for the fast path.
var (
	float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
		1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
	float32pow10 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
)

// float converts n, correctly rounded, to a float of bitSize 32 or 64. ok
// is false when a finite literal is beyond the type's range (it would round
// to ±Inf); values below the smallest subnormal round to ±0, as IEEE does.
func (n *number) float(buf []byte, bitSize int) (f float64, ok bool) {
	if n.mant == 0 {
		if n.neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if !n.trunc {
		// Clinger's fast path: an exact mantissa and an exact power of ten
		// give a correctly rounded result in one operation.
		e := n.dp + n.exp
		if bitSize == 32 {
			if n.mant < 1<<24 && e >= -10 && e <= 10 {
				v := float32(n.mant)
				if e < 0 {
					v /= float32pow10[-e]
				} else {
					v *= float32pow10[e]
				}
				if n.neg {
					v = -v
				}
				return float64(v), true
			}
			if f, ok := float32ViaFloat64(n.mant, e); ok {
				if n.neg {
					f = -f
				}
				return f, true
			}
		} else if n.mant < 1<<53 && e >= -22 && e <= 22 {
			v := float64(n.mant)
			if e < 0 {
				v /= float64pow10[-e]
			} else {
				v *= float64pow10[e]
			}
			if n.neg {
				v = -v
			}
			return v, true
		}
	}
	f, err := strconv.ParseFloat(bstr(buf[n.start:n.end]), bitSize)
	if err != nil { // only ErrRange: the literal was validated
		return f, false
	}
	return f, true
}

// float32ViaFloat64 rounds mant × 10^e to float32 through float64, for the
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
func float32ViaFloat64(mant uint64, e int) (float64, bool) {
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

// integer returns the magnitude of an integer literal; ok is false when n
// has a fraction or an exponent, or its magnitude exceeds uint64.
func (n *number) integer(buf []byte) (mag uint64, ok bool) {
	if !n.isInt {
		return 0, false
	}
	if n.dp == 0 {
		return n.mant, true // at most 19 digits
	}
	start := n.start
	if n.neg {
		start++
	}
	v, err := strconv.ParseUint(bstr(buf[start:n.end]), 10, 64)
	return v, err == nil
}

// nonFinite matches the NaN and infinity literals of rapidjson's
// kParseNanAndInfFlag at s.pos (NaN, Inf, Infinity, each with an optional
// '-'), which Triton's parser accepts and Python's json.dumps writes.
func (s *scanner) nonFinite() (float64, bool) {
	buf, i := s.buf, s.pos
	neg := at(buf, i) == '-'
	if neg {
		i++
	}
	word := func(w string) bool {
		for k := 0; k < len(w); k++ {
			if at(buf, i+k) != w[k] {
				return false
			}
		}
		return true
	}
	switch {
	case word("NaN"):
		s.pos = i + 3
		return math.NaN(), true
	case word("Infinity"):
		s.pos = i + 8
	case word("Inf"):
		s.pos = i + 3
	default:
		return 0, false
	}
	if neg {
		return math.Inf(-1), true
	}
	return math.Inf(1), true
}

// literal validates null, true or false at s.pos.
func (s *scanner) literal(lit string) bool {
	for k := 0; k < len(lit); k++ {
		if at(s.buf, s.pos+k) != lit[k] {
			return s.syntax(s.pos, "a JSON value")
		}
	}
	s.pos += len(lit)
	return true
}

// skipScalar validates a value that is not an object or an array.
func (s *scanner) skipScalar() bool {
	switch s.peek() {
	case 'n':
		return s.literal("null")
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case '"':
		_, ok := s.scanString()
		return ok
	}
	if c := s.peek(); c != '-' && !isDigit(c) {
		return s.syntax(s.pos, "a JSON value")
	}
	var n number
	return s.lexNumber(&n)
}

// memberName validates `"name" ws : ws` at s.pos.
func (s *scanner) memberName() (strRef, bool) {
	if s.peek() != '"' {
		return strRef{}, s.syntax(s.pos, "a member name in quotes")
	}
	k, ok := s.scanString()
	if !ok {
		return k, false
	}
	s.skipWS()
	if s.peek() != ':' {
		return k, s.syntax(s.pos, "':' after a member name")
	}
	s.pos++
	s.skipWS()
	return k, true
}

// skipValue validates the value at s.pos (whitespace already skipped) and
// moves past it. It is iterative: deep nesting costs one bit per level.
func (s *scanner) skipValue() bool {
	depth := 0
	s.stack = s.stack[:0]
	for {
		switch c := s.peek(); c {
		case '{', '[':
			object := c == '{'
			s.pos++
			s.skipWS()
			if e := s.peek(); (object && e == '}') || (!object && e == ']') {
				s.pos++
				break // an empty container is a complete value
			}
			if depth/64 == len(s.stack) {
				s.stack = append(s.stack, 0)
			}
			if object {
				s.stack[depth/64] |= 1 << (depth % 64)
			} else {
				s.stack[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if object {
				if _, ok := s.memberName(); !ok {
					return false
				}
			}
			continue // the first member or element
		default:
			if !s.skipScalar() {
				return false
			}
		}
		// A value ended: close containers until one has more to come.
		for {
			if depth == 0 {
				return true
			}
			object := s.stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			s.skipWS()
			c := s.peek()
			if c == ',' {
				s.pos++
				s.skipWS()
				if object {
					if _, ok := s.memberName(); !ok {
						return false
					}
				}
				break
			}
			if object && c == '}' || !object && c == ']' {
				s.pos++
				depth--
				continue
			}
			if object {
				return s.syntax(s.pos, "',' or '}' after an object member")
			}
			return s.syntax(s.pos, "',' or ']' after an array element")
		}
	}
}

// bstr views b as a string without copying; the string must not outlive
// b's current contents.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// jsonType names the JSON type of the value starting with c.
func jsonType(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// quote returns b as a quoted Go string, shortened past 64 bytes.
func quote(b []byte) string {
	if len(b) > 64 {
		cut := 64
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strconv.Quote(string(b[:cut])) + "…"
	}
	return strconv.Quote(string(b))
}
