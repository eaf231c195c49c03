// Package jsondoc reads JSON documents token by token for Grove's readers
// of untrusted JSON: the model config (conf/modelconfig) and the
// ForestFlow management documents (api/forestflow). It gives them one way
// to report bad input, *Error, which names the field path of the problem
// ("contracts[0].servables[1].phase_in") or the line and column of a
// syntax error, and what the two share:
//
//   - Decoder, a token reader whose errors are *Error, with Skip and the
//     readers of a string, an integer or a double field;
//   - the number checks of protobuf's JSON mapping (IntValue, FloatValue):
//     numbers or quoted numbers, integral values in any notation, ranges
//     checked with the value as written in the error;
//   - BlankTrailingCommas, which makes "[1,]" and "{"a": 1,}" acceptable
//     without moving any byte;
//   - a decoder of objects led by a table of fields (Field, Decode,
//     DecodeObject, DecodeArray, DecodeOneOf): snake_case or
//     lowerCamelCase names, unknown and duplicate fields refused, null as
//     the default, choice objects with exactly one key.
package jsondoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/groveml/grove/internal/jsonscan"
)

// Error reports a document that was read but could not be accepted.
type Error struct {
	// Field locates the problem, e.g. "model_metadata[1].checksum"; it is
	// empty when the problem concerns the whole document.
	Field string
	// Msg describes the problem.
	Msg string
	// Err is the underlying error, if any, such as a *json.SyntaxError.
	Err error
}

// Error returns "field: message", or the message alone for document-level problems.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Decoder reads the JSON tokens of one document and turns failures into
// *Error. Numbers are read as json.Number.
type Decoder struct {
	dec  *json.Decoder
	data []byte // the whole input (same offsets and lines as the file), for error positions
}

// NewDecoder returns a decoder of data.
func NewDecoder(data []byte) *Decoder {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return &Decoder{dec: dec, data: data}
}

// More reports whether the current array or object has another element.
func (d *Decoder) More() bool { return d.dec.More() }

// InputOffset returns the offset in the data of the end of the last token read.
func (d *Decoder) InputOffset() int64 { return d.dec.InputOffset() }

// Token reads the next token; path names where it is for errors.
func (d *Decoder) Token(path string) (json.Token, error) {
	tok, err := d.dec.Token()
	if err == nil {
		return tok, nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// The decoder counts the offset of an error inside a scalar value
		// from the start of that value; checking the whole input finds the
		// same first error with its offset in the file, which counts the
		// bytes read, the offending one included.
		var whole *json.SyntaxError
		if errors.As(json.Unmarshal(d.data, new(json.RawMessage)), &whole) {
			se, err = whole, whole
		}
		line, col := Position(d.data, se.Offset-1)
		return nil, &Error{Msg: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se), Err: err}
	}
	return nil, &Error{Field: path, Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
}

// End checks that nothing but white space follows the document's
// top-level object, which what names in the error.
func (d *Decoder) End(what string) error {
	if _, err := d.dec.Token(); err != io.EOF {
		return &Error{Msg: fmt.Sprintf("unexpected data after the %s object at offset %d", what, d.dec.InputOffset())}
	}
	return nil
}

// TypeError reports a value of the wrong type at path: want names the
// expected value ("an object"), got is the token read. If the value is an
// array or object it is not consumed: decoding stops at the first error.
func TypeError(path, want string, got json.Token) error {
	return &Error{Field: path, Msg: fmt.Sprintf("expected %s, got %s", want, Describe(got))}
}

// Describe names the JSON type of a token for error messages: "null",
// "an object", "an array", `string "x"`, "number 1.5", "boolean true".
func Describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return fmt.Sprintf("string %q", v)
	case json.Number:
		return "number " + string(v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	}
	return fmt.Sprintf("%v", tok)
}

// isNumber reports whether s is a JSON number with no surrounding space.
func isNumber(s string) bool {
	if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') || !('0' <= s[len(s)-1] && s[len(s)-1] <= '9') {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// Position converts a byte offset of data into a 1-based line and column
// (counted in bytes).
func Position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// BlankTrailingCommas replaces with a space each comma (outside strings)
// that is followed, after optional whitespace, by "]" or "}" and that
// follows a value. Blanking rather than removing keeps syntax error offsets
// right. Commas after "[", "{" or another comma are left for the JSON
// decoder to reject. data is not modified; a copy is made if needed.
func BlankTrailingCommas(data []byte) []byte {
	out, copied := data, false
	inString, escaped := false, false
	var last byte // last significant byte outside strings
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		case ',':
			if last == '[' || last == '{' || last == ',' || last == 0 {
				break
			}
			j := i + 1
			for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
				j++
			}
			if j < len(data) && (data[j] == ']' || data[j] == '}') {
				if !copied {
					out, copied = bytes.Clone(data), true
				}
				out[i] = ' '
			}
		}
		last = c
	}
	return out
}

// OrList joins names as "a, b or c".
func OrList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// IntValue checks that tok, a JSON number or a quoted number as protobuf's
// JSON mapping allows for integer fields, is an integer in lo..hi.
// Integral values written with a fraction or an exponent (6e4, 60000.0)
// are integers, as protobuf reads them too.
func IntValue(path string, tok json.Token, lo, hi int64) (int64, error) {
	s, err := numberText(path, tok, "an integer")
	if err != nil {
		return 0, err
	}
	outOfRange := &Error{Field: path, Msg: fmt.Sprintf("%s is out of range %d..%d", s, lo, hi)}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < lo || i > hi {
			return 0, outOfRange
		}
		return i, nil
	}
	_, err = strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, &Error{Field: path, Msg: fmt.Sprintf("%s is not an integer", s), Err: err}
	case !integral(s):
		return 0, &Error{Field: path, Msg: fmt.Sprintf("%s is not an integer", s)}
	}
	i, ok := integralValue(s)
	if !ok || i < lo || i > hi {
		return 0, outOfRange
	}
	return i, nil
}

// integralValue returns the value of s, a JSON number that integral
// accepts, exactly (not rounded through a double); ok is false beyond int64.
func integralValue(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	intp, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intp+frac, "0")
	if digits == "" {
		return 0, true
	}
	e := 0
	if exp != "" {
		var err error
		if e, err = strconv.Atoi(exp); err != nil {
			return 0, false // non-zero digits times a huge power of ten
		}
	}
	// digits × 10^shift; below the point there are only zeros.
	switch shift := e - len(frac); {
	case shift < 0:
		digits = digits[:max(len(digits)+shift, 0)]
	case shift > 19-len(digits): // not len(digits)+shift, which can overflow
		return 0, false // at least 10^19
	default:
		digits += strings.Repeat("0", shift)
	}
	if neg {
		digits = "-" + digits
	}
	i, err := strconv.ParseInt(digits, 10, 64)
	return i, err == nil
}

// integral reports whether s, a JSON number, is an integer, exactly as
// written: 1.000000000000000000001 is not, though it rounds to the double 1.
func integral(s string) bool {
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	intp, frac, _ := strings.Cut(mant, ".")
	digits := intp + frac
	e, err := strconv.Atoi(exp)
	switch {
	case exp == "":
		e = 0
	case err != nil || e > len(digits) || e < -len(digits):
		// An exponent beyond the digits: all of them are on one side of the point.
		return !strings.HasPrefix(exp, "-") || strings.Trim(digits, "0") == ""
	}
	point := max(len(intp)+e, 0) // digits from here on are fractional
	return strings.Trim(digits[min(point, len(digits)):], "0") == ""
}

// FloatValue checks that tok, a JSON number or a quoted number as
// protobuf's JSON mapping allows for double fields, is a finite double
// (protobuf's "NaN", "Infinity" and "-Infinity" are not numbers here).
func FloatValue(path string, tok json.Token) (float64, error) {
	s, err := numberText(path, tok, "a number")
	if err != nil {
		return 0, err
	}
	f, err := jsonscan.ParseFloat([]byte(s), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, &Error{Field: path, Msg: fmt.Sprintf("%s is out of range of a finite double", s), Err: err}
	}
	return f, nil
}

// numberText returns the text of tok, a JSON number or a string holding
// one; want names the expected value for the error about any other token.
func numberText(path string, tok json.Token, want string) (string, error) {
	switch v := tok.(type) {
	case json.Number:
		return string(v), nil
	case string:
		if !isNumber(v) {
			return "", &Error{Field: path, Msg: fmt.Sprintf("%q is not a number", v)}
		}
		return v, nil
	}
	return "", TypeError(path, want, tok)
}

// Skip reads and discards one JSON value, token by token (so that syntax
// errors report their position in the document).
func (d *Decoder) Skip(path string) error {
	tok, err := d.Token(path)
	if err != nil {
		return err
	}
	return d.SkipRest(path, tok)
}

// SkipRest reads and discards the rest of a value whose first token, tok,
// has been read: nothing for a scalar, up to the matching "}" or "]" for
// an object or array.
func (d *Decoder) SkipRest(path string, tok json.Token) error {
	for depth := nesting(tok); depth > 0; {
		tok, err := d.Token(path)
		if err != nil {
			return err
		}
		depth += nesting(tok)
	}
	return nil
}

// nesting is 1 for a token that opens an object or array, -1 for one
// that closes it, and 0 for the others.
func nesting(tok json.Token) int {
	switch tok {
	case json.Delim('{'), json.Delim('['):
		return 1
	case json.Delim('}'), json.Delim(']'):
		return -1
	}
	return 0
}
