// Package jsonscan is the JSON lexer under the protocols' request parsers,
// api/ba (B&A batch requests) and api/oip ($inference_request): a Scanner
// over the bytes of one document that validates whitespace, strings
// (UTF-8, escapes, surrogate pairs), numbers, literals, member names and
// whole values (SkipValue, iterative, one bit of stack per level), and
// decodes strings (Unescape) and numbers (Number: correctly rounded floats,
// integer magnitudes; ExactFloat, its fast path, serves B&A's numbers in
// strings too), without allocating. The parsers walk the document
// themselves with a Scanner embedded and keep their own messages: the
// Scanner records only what went wrong (a Kind) and where (ErrPos,
// ErrStart), and each protocol makes its text from that once a request has
// failed (api/ba: rapidjson's messages byte for byte; api/oip: "malformed
// JSON at byte N: ..."). AppendString, Unescape's inverse, writes the
// strings of both protocols' answers.
//
// The grammar is RFC 8259's (no comments, trailing commas, NaN or
// Infinity, or leading zeros), with strings held to valid UTF-8 and no
// lone surrogate escapes. Reading past the end of Buf yields 0, which no
// valid token contains, so a truncated document fails where its token
// does. Errors are found where rapidjson 1.1.0 (the B&A sidecar's parser)
// finds them, and RapidjsonNumbers adds its one rule beyond the grammar:
// numbers it cannot hold in a double are NumberTooBig.
//
// It is a package of its own beside internal/jsondoc, not a part of it:
// jsondoc reads configuration documents through encoding/json's token
// decoder, for errors that name a field path or a line and column, at a
// cost per token (interface values, allocations) that a config file can
// afford and a request of thousands of numbers cannot; the two share no
// code and no callers.
package jsonscan

import "strconv"

// Kind is what went wrong in a scan.
type Kind uint8

// The kinds of syntax error, in rapidjson's terms where it has one.
const (
	OK                            Kind = iota // no error
	DocumentEmpty                             // nothing but whitespace
	RootNotSingular                           // something after the root value
	ValueInvalid                              // no value starts here, or a literal is misspelt
	ObjectMissName                            // no quoted member name where one must be
	ObjectMissColon                           // no ':' after a member name
	ObjectMissCommaOrCurlyBracket             // no ',' or '}' after an object member
	ArrayMissCommaOrSquareBracket             // no ',' or ']' after an array element
	StringUnterminated                        // the input ends inside a string
	StringControl                             // a raw control character (below 0x20) in a string
	StringEscapeInvalid                       // a backslash before a character that starts no escape
	StringHexInvalid                          // a \u escape without four hex digits
	StringSurrogateInvalid                    // a surrogate \u escape that is not half of a pair
	StringInvalidUTF8                         // bytes that are not UTF-8 in a string
	NumberMissDigit                           // no digit at the start of a number (after its '-')
	NumberMissFraction                        // no digit after the decimal point
	NumberMissExponent                        // no digit in the exponent
	NumberTooBig                              // beyond a double for rapidjson (RapidjsonNumbers)
	numKinds
)

var kindNames = [numKinds]string{"OK", "DocumentEmpty", "RootNotSingular", "ValueInvalid",
	"ObjectMissName", "ObjectMissColon", "ObjectMissCommaOrCurlyBracket", "ArrayMissCommaOrSquareBracket",
	"StringUnterminated", "StringControl", "StringEscapeInvalid", "StringHexInvalid",
	"StringSurrogateInvalid", "StringInvalidUTF8", "NumberMissDigit", "NumberMissFraction",
	"NumberMissExponent", "NumberTooBig"}

// String returns the kind's Go name, e.g. "StringEscapeInvalid".
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Kinds returns every error kind (all but OK), for the tests that check
// that a protocol has a message for each.
func Kinds() []Kind {
	ks := make([]Kind, 0, numKinds-1)
	for k := OK + 1; k < numKinds; k++ {
		ks = append(ks, k)
	}
	return ks
}

// Scanner is the state of one scan of Buf. Its methods move Pos past what
// they validate and return false on a syntax error, recording the first
// one in Err, ErrPos and ErrStart; once Err is set, the scan is over.
type Scanner struct {
	Buf []byte
	Pos int
	// Err is the first syntax error, OK while there is none.
	Err Kind
	// ErrPos is the offset of the byte found wrong (len(Buf) for the end
	// of the input), as rapidjson reports it; for NumberTooBig, the start
	// of the number.
	ErrPos int
	// ErrStart is the offset where the token holding ErrPos starts: the
	// literal, the number, or the escape sequence (a surrogate pair's
	// first half) of a string error; ErrPos for the other kinds.
	ErrStart int
	// RapidjsonNumbers makes a number NumberTooBig where rapidjson 1.1.0's
	// ParseNumber (kParseFullPrecisionFlag) finds it too big to be stored
	// in a double: an integer part that reaches DBL_MAX/10 in its double
	// accumulator before its last digit, or a positive exponent beyond 308
	// plus the fraction digits it kept.
	RapidjsonNumbers bool
	stack            []uint64 // SkipValue's container kinds, one bit per level (1 = object)
}

// maxStack bounds the container stack, in words, that a released Scanner
// keeps (64 levels a word).
const maxStack = 1 << 10

// Reset starts a scan of buf with the default settings, keeping the
// memory of the container stack.
func (s *Scanner) Reset(buf []byte) {
	*s = Scanner{Buf: buf, stack: s.stack[:0]}
}

// Release drops the reference to Buf, and the container stack if a deep
// document grew it beyond maxStack, so that a pooled Scanner holds neither.
func (s *Scanner) Release() {
	s.Buf = nil
	if cap(s.stack) > maxStack {
		s.stack = nil
	}
}

// Fail records a syntax error of kind k at pos, unless one is recorded
// already, and returns false. The protocols call it for the errors of the
// structures they walk themselves (a missing ',' or ']').
func (s *Scanner) Fail(k Kind, pos int) bool { return s.fail(k, pos, pos) }

func (s *Scanner) fail(k Kind, pos, start int) bool {
	if s.Err == OK {
		s.Err, s.ErrPos, s.ErrStart = k, pos, start
	}
	return false
}

// At returns the byte at i, or 0 at or past the end of Buf.
func (s *Scanner) At(i int) byte { return at(s.Buf, i) }

// at is At on a copy of Buf, which a hot loop keeps in registers.
func at(buf []byte, i int) byte {
	if i < len(buf) {
		return buf[i]
	}
	return 0
}

// Peek returns the byte at Pos, or 0 at the end.
func (s *Scanner) Peek() byte { return s.At(s.Pos) }

// SkipWS moves Pos past JSON whitespace.
func (s *Scanner) SkipWS() {
	buf, i := s.Buf, s.Pos
	for i < len(buf) {
		switch buf[i] {
		case ' ', '\n', '\r', '\t':
			i++
			continue
		}
		break
	}
	s.Pos = i
}

// IsDigit reports whether c is an ASCII decimal digit.
func IsDigit(c byte) bool { return c-'0' < 10 }

// Literal validates the literal lit (null, true or false) at Pos.
func (s *Scanner) Literal(lit string) bool {
	for k := 0; k < len(lit); k++ {
		if s.At(s.Pos+k) != lit[k] {
			return s.fail(ValueInvalid, s.Pos+k, s.Pos)
		}
	}
	s.Pos += len(lit)
	return true
}

// MemberName validates `"name" ws : ws` at Pos and returns the name.
func (s *Scanner) MemberName() (Str, bool) {
	if s.Peek() != '"' {
		return Str{}, s.Fail(ObjectMissName, s.Pos)
	}
	k, ok := s.ScanString()
	if !ok {
		return k, false
	}
	s.SkipWS()
	if s.Peek() != ':' {
		return k, s.Fail(ObjectMissColon, s.Pos)
	}
	s.Pos++
	s.SkipWS()
	return k, true
}

// skipScalar validates a value that is not an object or an array.
func (s *Scanner) skipScalar() bool {
	switch c := s.Peek(); c {
	case 'n':
		return s.Literal("null")
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case '"':
		_, ok := s.ScanString()
		return ok
	default:
		if c != '-' && !IsDigit(c) {
			return s.Fail(ValueInvalid, s.Pos)
		}
	}
	var n Number
	return s.LexNumber(&n)
}

// Open moves past the '{' or '[' at Pos and the whitespace after it, and
// reports whether the object or array has a member or element; if it is
// empty, Open moves past its '}' or ']' as well.
func (s *Scanner) Open() (more bool) {
	end := closer(s.Peek())
	s.Pos++
	s.SkipWS()
	if s.Peek() == end {
		s.Pos++
		return false
	}
	return true
}

// Next moves past what follows a member of an object (end '}') or an
// element of an array (end ']'): a ',' and the whitespace after it, when
// another comes (more), or end. ok is false if neither follows.
func (s *Scanner) Next(end byte) (more, ok bool) {
	s.SkipWS()
	switch s.Peek() {
	case ',':
		s.Pos++
		s.SkipWS()
		return true, true
	case end:
		s.Pos++
		return false, true
	}
	if end == '}' {
		return false, s.Fail(ObjectMissCommaOrCurlyBracket, s.Pos)
	}
	return false, s.Fail(ArrayMissCommaOrSquareBracket, s.Pos)
}

// closer returns the bracket that closes the one c opens.
func closer(c byte) byte {
	if c == '{' {
		return '}'
	}
	return ']'
}

// SkipValue validates the value at Pos (whitespace already skipped) and
// moves past it. It is iterative: deep nesting costs one bit per level,
// not a goroutine stack frame.
func (s *Scanner) SkipValue() bool {
	depth := 0
	s.stack = s.stack[:0]
	for {
		// A value starts here.
		switch c := s.Peek(); c {
		case '{', '[':
			object := c == '{'
			if !s.Open() {
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
				if _, ok := s.MemberName(); !ok {
					return false
				}
			}
			continue // the first member or element
		default:
			if !s.skipScalar() {
				return false
			}
		}
		// A value ended: close containers until one has more to come (as
		// Next does, inline: a call per element costs 6%).
		for {
			if depth == 0 {
				return true
			}
			object := s.stack[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			s.SkipWS()
			c := s.Peek()
			if c == ',' {
				s.Pos++
				s.SkipWS()
				if object {
					if _, ok := s.MemberName(); !ok {
						return false
					}
				}
				break
			}
			if object && c == '}' || !object && c == ']' {
				s.Pos++
				depth--
				continue
			}
			if object {
				return s.Fail(ObjectMissCommaOrCurlyBracket, s.Pos)
			}
			return s.Fail(ArrayMissCommaOrSquareBracket, s.Pos)
		}
	}
}
