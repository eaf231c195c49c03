package ba

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// syntaxErr is a document-level parse error, one per rapidjson ParseErrorCode
// that the sidecar can report.
type syntaxErr uint8

const (
	errNone syntaxErr = iota
	errDocumentEmpty
	errRootNotSingular
	errValueInvalid
	errObjectMissName
	errObjectMissColon
	errObjectMissCommaOrCurlyBracket
	errArrayMissCommaOrSquareBracket
	errStringUnicodeEscapeInvalidHex
	errStringUnicodeSurrogateInvalid
	errStringEscapeInvalid
	errStringMissQuotationMark
	errStringInvalidEncoding
	errNumberTooBig
	errNumberMissFraction
	errNumberMissExponent
)

// syntaxErrText holds rapidjson's GetParseError_En messages.
var syntaxErrText = [...]string{
	errNone:                          "No error.",
	errDocumentEmpty:                 "The document is empty.",
	errRootNotSingular:               "The document root must not be followed by other values.",
	errValueInvalid:                  "Invalid value.",
	errObjectMissName:                "Missing a name for object member.",
	errObjectMissColon:               "Missing a colon after a name of object member.",
	errObjectMissCommaOrCurlyBracket: "Missing a comma or '}' after an object member.",
	errArrayMissCommaOrSquareBracket: "Missing a comma or ']' after an array element.",
	errStringUnicodeEscapeInvalidHex: "Incorrect hex digit after \\u escape in string.",
	errStringUnicodeSurrogateInvalid: "The surrogate pair in string is invalid.",
	errStringEscapeInvalid:           "Invalid escape character in string.",
	errStringMissQuotationMark:       "Missing a closing quotation mark in string.",
	errStringInvalidEncoding:         "Invalid encoding in string.",
	errNumberTooBig:                  "Number too big to be stored in double.",
	errNumberMissFraction:            "Miss fraction part in number.",
	errNumberMissExponent:            "Miss exponent in number.",
}

// nulText replaces the rapidjson message when the error is at a NUL byte.
// The sidecar reads the request as a C string, so it would silently ignore
// everything from the first NUL on; Grove rejects such documents instead.
const nulText = "The document contains a NUL character."

// rapidjson value type codes, as printed in "unexpected member type" errors.
const (
	typeNull   int8 = 0
	typeFalse  int8 = 1
	typeTrue   int8 = 2
	typeObject int8 = 3
	typeArray  int8 = 4
	typeString int8 = 5
	typeNumber int8 = 6
	typeAbsent int8 = -1 // the member is missing
)

// typeOf returns the rapidjson type of the (valid) value starting with c.
func typeOf(c byte) int8 {
	switch c {
	case 'n':
		return typeNull
	case 'f':
		return typeFalse
	case 't':
		return typeTrue
	case '{':
		return typeObject
	case '[':
		return typeArray
	case '"':
		return typeString
	}
	return typeNumber
}

// strPlain marks the bytes a string may hold without further checks.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// escapeChar maps the character after a backslash to the byte it stands for
// (0: not a simple escape).
var escapeChar = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

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
		// A byte is flagged if it is 0 after the XOR (quote or backslash), below
		// 0x20, or has its high bit set; only the lowest flag is exact, which is
		// the one used.
		m := ((q - ones) &^ q) | ((b - ones) &^ b) | ((x - 0x20*ones) &^ x) | x
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(buf) && strPlain[buf[i]] {
		i++
	}
	return i
}

// strRef locates the contents of a JSON string (between the quotes).
type strRef struct {
	start, end int
	esc        bool // it contains a backslash escape
}

// scanner validates JSON with rapidjson 1.1.0's grammar and error rules
// (Parse<kParseFullPrecisionFlag>: no comments, no trailing commas, no
// NaN/Infinity literals), plus UTF-8 validation of strings. Reading past the
// end yields 0, like rapidjson's NUL-terminated input, so truncation and a
// NUL byte fail at the same place.
type scanner struct {
	buf    []byte
	pos    int
	err    syntaxErr
	errPos int
	stack  []uint64 // skipValue's container stack, one bit per level (1 = object)
}

// fail records the first error and returns false.
func (s *scanner) fail(e syntaxErr, pos int) bool {
	if s.err == errNone {
		s.err, s.errPos = e, pos
	}
	return false
}

// message returns the rapidjson-style text of the recorded error.
func (s *scanner) message() string {
	if s.errPos < len(s.buf) && s.buf[s.errPos] == 0 {
		return nulText
	}
	return syntaxErrText[s.err]
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
	for i < len(buf) {
		switch buf[i] {
		case ' ', '\n', '\r', '\t':
			i++
			continue
		}
		break
	}
	s.pos = i
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

// hex4 reads the four hex digits of a \u escape at i.
func (s *scanner) hex4(i int) (rune, bool) {
	var r rune
	for k := 0; k < 4; k++ {
		v := hexVal(at(s.buf, i+k))
		if v < 0 {
			return 0, s.fail(errStringUnicodeEscapeInvalidHex, i+k)
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
		c := at(buf, i)
		switch {
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
				return ref, s.fail(errStringEscapeInvalid, i+1)
			}
			r, ok := s.hex4(i + 2)
			if !ok {
				return ref, false
			}
			i += 6
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if at(buf, i) != '\\' {
					return ref, s.fail(errStringUnicodeSurrogateInvalid, i)
				}
				if at(buf, i+1) != 'u' {
					return ref, s.fail(errStringUnicodeSurrogateInvalid, i+1)
				}
				r2, ok := s.hex4(i + 2)
				if !ok {
					return ref, false
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return ref, s.fail(errStringUnicodeSurrogateInvalid, i+2)
				}
				i += 6
			case r >= 0xDC00 && r <= 0xDFFF:
				// rapidjson would encode a lone low surrogate as invalid
				// UTF-8; Grove rejects it.
				return ref, s.fail(errStringUnicodeSurrogateInvalid, i-6)
			}
		case c < 0x20:
			if c == 0 {
				return ref, s.fail(errStringMissQuotationMark, i)
			}
			return ref, s.fail(errStringEscapeInvalid, i)
		default: // non-ASCII
			r, n := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && n == 1 {
				return ref, s.fail(errStringInvalidEncoding, i)
			}
			i += n
		}
	}
}

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

// scanNumber validates the number at s.pos with the exact rules of
// rapidjson 1.1.0's ParseNumber, whose only subtle errors are the two
// "Number too big" checks. It reports whether the number is written as an
// integer (no fraction, no exponent) and, if so, its value saturated to the
// int64 range.
func (s *scanner) scanNumber() (isInt bool, v int64, ok bool) {
	buf := s.buf
	pos := s.pos
	start := pos
	minus := false
	if at(buf, pos) == '-' {
		minus = true
		pos++
	}
	var (
		i         uint32
		i64       uint64
		use64     bool
		useDouble bool
		d         float64
		sig       int // rapidjson's significandDigit
	)
	c := at(buf, pos)
	switch {
	case c == '0':
		pos++
	case c >= '1' && c <= '9':
		i = uint32(c - '0')
		pos++
		limit, last := uint32(429496729), byte('5') // 2^32-1
		if minus {
			limit, last = 214748364, '8' // 2^31
		}
		for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
			if i >= limit && (i != limit || c > last) {
				i64, use64 = uint64(i), true
				break
			}
			i = i*10 + uint32(c-'0')
			pos++
			sig++
		}
	default:
		s.pos = pos
		return false, 0, s.fail(errValueInvalid, pos)
	}
	if use64 {
		limit, last := uint64(0x1999999999999999), byte('5') // 2^64-1
		if minus {
			limit, last = 0x0CCCCCCCCCCCCCCC, '8' // 2^63
		}
		for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
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
		for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
			if d >= 1.7976931348623157e307 { // DBL_MAX / 10
				s.pos = pos
				return false, 0, s.fail(errNumberTooBig, start)
			}
			d = float64(d*10) + float64(c-'0')
			pos++
		}
	}
	intSyntax := true
	expFrac := 0
	if at(buf, pos) == '.' {
		intSyntax = false
		pos++
		if !isDigit(at(buf, pos)) {
			s.pos = pos
			return false, 0, s.fail(errNumberMissFraction, pos)
		}
		if !useDouble {
			if !use64 {
				i64 = uint64(i)
			}
			for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
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
			d, useDouble = float64(i64), true
		}
		for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
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
	if c = at(buf, pos); c == 'e' || c == 'E' {
		intSyntax = false
		pos++
		expMinus := false
		switch at(buf, pos) {
		case '+':
			pos++
		case '-':
			pos++
			expMinus = true
		}
		c = at(buf, pos)
		if !isDigit(c) {
			s.pos = pos
			return false, 0, s.fail(errNumberMissExponent, pos)
		}
		exp := int(c - '0')
		pos++
		maxExp := 308 - expFrac
		for c = at(buf, pos); isDigit(c); c = at(buf, pos) {
			pos++
			if expMinus {
				if exp < 214748364 {
					exp = exp*10 + int(c-'0')
				}
				continue
			}
			exp = exp*10 + int(c-'0')
			if exp > maxExp {
				s.pos = pos
				return false, 0, s.fail(errNumberTooBig, start)
			}
		}
	}
	s.pos = pos
	if !intSyntax {
		return false, 0, true
	}
	switch {
	case useDouble:
		v = 1<<63 - 1
	case use64:
		if i64 > 1<<63-1 {
			v = 1<<63 - 1
		} else {
			v = int64(i64)
		}
	default:
		v = int64(i)
	}
	if minus {
		if useDouble || (use64 && i64 > 1<<63-1) {
			v = -1 << 63
		} else {
			v = -v
		}
	}
	return true, v, true
}

// skipLiteral validates null, true or false.
func (s *scanner) skipLiteral(lit string) bool {
	for k := 0; k < len(lit); k++ {
		if at(s.buf, s.pos+k) != lit[k] {
			s.pos += k
			return s.fail(errValueInvalid, s.pos)
		}
	}
	s.pos += len(lit)
	return true
}

// skipScalar validates a value that is not an object or an array.
func (s *scanner) skipScalar() bool {
	switch s.peek() {
	case 'n':
		return s.skipLiteral("null")
	case 't':
		return s.skipLiteral("true")
	case 'f':
		return s.skipLiteral("false")
	case '"':
		_, ok := s.scanString()
		return ok
	}
	_, _, ok := s.scanNumber()
	return ok
}

// memberName validates `"name" ws : ws` at s.pos.
func (s *scanner) memberName() (strRef, bool) {
	if s.peek() != '"' {
		return strRef{}, s.fail(errObjectMissName, s.pos)
	}
	k, ok := s.scanString()
	if !ok {
		return k, false
	}
	s.skipWS()
	if s.peek() != ':' {
		return k, s.fail(errObjectMissColon, s.pos)
	}
	s.pos++
	s.skipWS()
	return k, true
}

// skipValue validates the value at s.pos (whitespace already skipped) and
// moves past it. It is iterative, so deep nesting costs one bit of stack per
// level rather than a goroutine stack frame.
func (s *scanner) skipValue() bool {
	depth := 0
	s.stack = s.stack[:0]
	for {
		// A value starts here.
		switch s.peek() {
		case '{', '[':
			object := s.peek() == '{'
			s.pos++
			s.skipWS()
			if c := s.peek(); (object && c == '}') || (!object && c == ']') {
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
			continue // parse the first member or element
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
				return s.fail(errObjectMissCommaOrCurlyBracket, s.pos)
			}
			return s.fail(errArrayMissCommaOrSquareBracket, s.pos)
		}
	}
}

// bstr views b as a string without copying; the string must not outlive b's
// current contents.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
