package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// Str locates the contents of a JSON string in Buf, between the quotes.
type Str struct {
	Start, End int
	Esc        bool // it contains a backslash escape (decode it with Unescape)
}

// escapeChar maps the character after a backslash to the byte it stands
// for (0: not a one-character escape).
var escapeChar = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// HexVal returns the value of the hex digit c, or -1.
func HexVal(c byte) int {
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

// PlainEnd returns the index of the first byte at or after i that is not
// plain string content (a quote, a backslash, a control character or a
// non-ASCII byte), or len(buf). It tests eight bytes at a time; a parser
// may call it for an inline fast path of its own over short strings.
func PlainEnd(buf []byte, i int) int {
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

// hex4 reads the four hex digits of a \u escape at i; esc is where the
// escape (or its surrogate pair) starts, for the error.
func (s *Scanner) hex4(i, esc int) (rune, bool) {
	var r rune
	for k := 0; k < 4; k++ {
		v := HexVal(s.At(i + k))
		if v < 0 {
			return 0, s.fail(StringHexInvalid, i+k, esc)
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// ScanString validates the string whose opening quote is at Pos and moves
// past its closing quote.
func (s *Scanner) ScanString() (Str, bool) {
	buf := s.Buf
	i := s.Pos + 1
	ref := Str{Start: i}
	for {
		i = PlainEnd(buf, i)
		if i >= len(buf) {
			return ref, s.Fail(StringUnterminated, i)
		}
		switch c := buf[i]; {
		case c == '"':
			ref.End = i
			s.Pos = i + 1
			return ref, true
		case c == '\\':
			ref.Esc = true
			e := at(buf, i+1)
			if escapeChar[e] != 0 {
				i += 2
				continue
			}
			if e != 'u' {
				return ref, s.fail(StringEscapeInvalid, i+1, i)
			}
			r, ok := s.hex4(i+2, i)
			if !ok {
				return ref, false
			}
			switch {
			case r >= 0xD800 && r <= 0xDBFF:
				if at(buf, i+6) != '\\' {
					return ref, s.fail(StringSurrogateInvalid, i+6, i)
				}
				if at(buf, i+7) != 'u' {
					return ref, s.fail(StringSurrogateInvalid, i+7, i)
				}
				r2, ok := s.hex4(i+8, i)
				if !ok {
					return ref, false
				}
				if r2 < 0xDC00 || r2 > 0xDFFF {
					return ref, s.fail(StringSurrogateInvalid, i+8, i)
				}
				i += 12
			case r >= 0xDC00 && r <= 0xDFFF:
				// rapidjson would encode a lone low surrogate as invalid
				// UTF-8; it is refused.
				return ref, s.Fail(StringSurrogateInvalid, i)
			default:
				i += 6
			}
		case c < 0x20:
			return ref, s.Fail(StringControl, i)
		default: // non-ASCII
			r, n := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && n == 1 {
				return ref, s.Fail(StringInvalidUTF8, i)
			}
			i += n
		}
	}
}

// Unescape appends the decoded contents of a string that ScanString
// validated to dst.
func Unescape(dst, src []byte) []byte {
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
		r := rune(HexVal(src[i+2])<<12 | HexVal(src[i+3])<<8 | HexVal(src[i+4])<<4 | HexVal(src[i+5]))
		i += 6
		if r >= 0xD800 && r <= 0xDBFF {
			r2 := rune(HexVal(src[i+2])<<12 | HexVal(src[i+3])<<8 | HexVal(src[i+4])<<4 | HexVal(src[i+5]))
			r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
			i += 6
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// View returns b as a string without copying, for looking a name up or
// converting a literal; the string must not outlive b's current contents.
func View(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
