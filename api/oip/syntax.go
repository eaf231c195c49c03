package oip

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/groveml/grove/internal/jsonscan"
)

// syntaxText words each kind of syntax error: what was expected where it
// was found ("expected X, found Y"), or what is wrong there; atStart
// places it at the start of its literal or escape sequence rather than at
// the byte found wrong.
var syntaxText = [...]struct {
	expected, wrong string
	atStart         bool
}{
	jsonscan.RootNotSingular:               {expected: "the end of the JSON after the request object"},
	jsonscan.ValueInvalid:                  {expected: "a JSON value", atStart: true},
	jsonscan.ObjectMissName:                {expected: "a member name in quotes"},
	jsonscan.ObjectMissColon:               {expected: "':' after a member name"},
	jsonscan.ObjectMissCommaOrCurlyBracket: {expected: "',' or '}' after an object member"},
	jsonscan.ArrayMissCommaOrSquareBracket: {expected: "',' or ']' after an array element"},
	jsonscan.StringUnterminated:            {wrong: "unterminated string"},
	jsonscan.StringControl:                 {wrong: "control character in string"},
	jsonscan.StringEscapeInvalid:           {wrong: "invalid escape in string", atStart: true},
	jsonscan.StringHexInvalid:              {expected: "a hex digit in a \\u escape"},
	jsonscan.StringSurrogateInvalid:        {wrong: "lone surrogate \\u escape in string", atStart: true},
	jsonscan.StringInvalidUTF8:             {wrong: "invalid UTF-8 in string"},
	jsonscan.NumberMissDigit:               {expected: "a digit"},
	jsonscan.NumberMissFraction:            {expected: "a digit after the decimal point"},
	jsonscan.NumberMissExponent:            {expected: "a digit in the exponent"},
	// Only with RapidjsonNumbers, which OIP leaves off.
	jsonscan.NumberTooBig: {wrong: "number too big for a double", atStart: true},
}

// syntaxError returns the error of the scanner's syntax error: "malformed
// JSON at byte N: " and its syntaxText, or, for an empty document, that
// the request body is empty.
func syntaxError(s *jsonscan.Scanner) *Error {
	if s.Err == jsonscan.DocumentEmpty {
		return badRequest("the request body is empty")
	}
	t, pos := syntaxText[s.Err], s.ErrPos
	if t.atStart {
		pos = s.ErrStart
	}
	if t.expected != "" {
		return badRequest(fmt.Sprintf("malformed JSON at byte %d: expected %s, found %s", pos, t.expected, describe(s.Buf, pos)))
	}
	return badRequest(fmt.Sprintf("malformed JSON at byte %d: %s", pos, t.wrong))
}

// describe names the byte at i for a syntax error.
func describe(buf []byte, i int) string {
	if i >= len(buf) {
		return "the end of the JSON"
	}
	c := buf[i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// nonFinite matches the NaN and infinity literals of rapidjson's
// kParseNanAndInfFlag at p.Pos (NaN, Inf, Infinity, each with an optional
// '-'), which Triton's parser accepts and Python's json.dumps writes.
func (p *parser) nonFinite() (float64, bool) {
	i := p.Pos
	neg := p.At(i) == '-'
	if neg {
		i++
	}
	word := func(w string) bool {
		for k := 0; k < len(w); k++ {
			if p.At(i+k) != w[k] {
				return false
			}
		}
		return true
	}
	switch {
	case word("NaN"):
		p.Pos = i + 3
		return math.NaN(), true
	case word("Infinity"):
		p.Pos = i + 8
	case word("Inf"):
		p.Pos = i + 3
	default:
		return 0, false
	}
	if neg {
		return math.Inf(-1), true
	}
	return math.Inf(1), true
}

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
