package conf

// JSON token helpers shared by the model config reader (model.go,
// modelscan.go) and the management documents' decoder (document.go): a
// token reader whose errors are *ConfigError with line and column, and the
// checks of numbers given as JSON numbers or quoted numbers.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// decoder reads JSON tokens and turns failures into *ConfigError.
type decoder struct {
	dec  *json.Decoder
	data []byte // the whole input (same offsets and lines as the file), for error positions
}

// token reads the next token; path names where it is for errors.
func (d *decoder) token(path string) (json.Token, error) {
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
		line, col := position(d.data, se.Offset-1)
		return nil, &ConfigError{Msg: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se), Err: err}
	}
	return nil, &ConfigError{Field: path, Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err}
}

// typeError reports a value of the wrong type. If the value is an array
// or object it is not consumed: decoding stops at the first error.
func typeError(path, want string, got json.Token) error {
	return &ConfigError{Field: path, Msg: fmt.Sprintf("expected %s, got %s", want, describe(got))}
}

// describe names the JSON type of a token for error messages.
func describe(tok json.Token) string {
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

// position converts a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}

// blankTrailingCommas replaces with a space each comma (outside strings)
// that is followed, after optional whitespace, by "]" or "}" and that
// follows a value. Blanking rather than removing keeps syntax error offsets
// right. Commas after "[", "{" or another comma are left for the JSON
// decoder to reject. data is not modified; a copy is made if needed.
func blankTrailingCommas(data []byte) []byte {
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

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// intValue checks that tok, a JSON number or a quoted number as protobuf's
// JSON mapping allows for integer fields, is an integer in lo..hi.
// Integral values written with a fraction or an exponent (6e4, 60000.0)
// are integers, as protobuf reads them too.
func intValue(path string, tok json.Token, lo, hi int64) (int64, error) {
	s, err := numberText(path, tok, "an integer")
	if err != nil {
		return 0, err
	}
	outOfRange := &ConfigError{Field: path, Msg: fmt.Sprintf("%s is out of range %d..%d", s, lo, hi)}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if i < lo || i > hi {
			return 0, outOfRange
		}
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%s is not an integer", s), Err: err}
	case !integral(s):
		return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%s is not an integer", s)}
	case err != nil || f < float64(lo) || f > float64(hi) || f >= 0x1p63: // float64(MaxInt64) rounds up to 2^63
		return 0, outOfRange
	}
	return int64(f), nil
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

// floatValue checks that tok, a JSON number or a quoted number as
// protobuf's JSON mapping allows for double fields, is a finite double
// (protobuf's "NaN", "Infinity" and "-Infinity" are not numbers here).
func floatValue(path string, tok json.Token) (float64, error) {
	s, err := numberText(path, tok, "a number")
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, &ConfigError{Field: path, Msg: fmt.Sprintf("%s is out of range of a finite double", s), Err: err}
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
			return "", &ConfigError{Field: path, Msg: fmt.Sprintf("%q is not a number", v)}
		}
		return v, nil
	}
	return "", typeError(path, want, tok)
}

// skip reads and discards one JSON value, token by token (so that syntax
// errors report their position in the file).
func (d *decoder) skip(path string) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	return d.skipRest(path, tok)
}

// skipRest reads and discards the rest of a value whose first token, tok,
// has been read: nothing for a scalar, up to the matching "}" or "]" for
// an object or array.
func (d *decoder) skipRest(path string, tok json.Token) error {
	for depth := nesting(tok); depth > 0; {
		tok, err := d.token(path)
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
