package ba

import "github.com/groveml/grove/internal/jsonscan"

// syntaxErrText holds rapidjson's GetParseError_En messages for the
// syntax errors of jsonscan, which follows rapidjson 1.1.0's grammar and
// error positions (Parse<kParseFullPrecisionFlag> with its
// RapidjsonNumbers): no comments, no trailing commas, no NaN/Infinity
// literals, plus UTF-8 validation of strings. Reading past the end yields
// 0, like rapidjson's NUL-terminated input, so truncation and a NUL byte
// fail at the same place.
var syntaxErrText = [...]string{
	jsonscan.OK:                            "No error.",
	jsonscan.DocumentEmpty:                 "The document is empty.",
	jsonscan.RootNotSingular:               "The document root must not be followed by other values.",
	jsonscan.ValueInvalid:                  "Invalid value.",
	jsonscan.ObjectMissName:                "Missing a name for object member.",
	jsonscan.ObjectMissColon:               "Missing a colon after a name of object member.",
	jsonscan.ObjectMissCommaOrCurlyBracket: "Missing a comma or '}' after an object member.",
	jsonscan.ArrayMissCommaOrSquareBracket: "Missing a comma or ']' after an array element.",
	jsonscan.StringUnterminated:            "Missing a closing quotation mark in string.",
	// rapidjson 1.1.0 says so of a raw control character, too (of a NUL,
	// that the closing quote is missing: nulText replaces both).
	jsonscan.StringControl:          "Invalid escape character in string.",
	jsonscan.StringEscapeInvalid:    "Invalid escape character in string.",
	jsonscan.StringHexInvalid:       "Incorrect hex digit after \\u escape in string.",
	jsonscan.StringSurrogateInvalid: "The surrogate pair in string is invalid.",
	jsonscan.StringInvalidUTF8:      "Invalid encoding in string.",
	// A '-' without a digit is not a number for rapidjson: no value starts
	// there.
	jsonscan.NumberMissDigit:    "Invalid value.",
	jsonscan.NumberMissFraction: "Miss fraction part in number.",
	jsonscan.NumberMissExponent: "Miss exponent in number.",
	jsonscan.NumberTooBig:       "Number too big to be stored in double.",
}

// nulText replaces the rapidjson message when the error is at a NUL byte.
// The sidecar reads the request as a C string, so it would silently ignore
// everything from the first NUL on; Grove rejects such documents instead.
const nulText = "The document contains a NUL character."

// syntaxMessage returns the rapidjson-style text of the scanner's error.
func syntaxMessage(s *jsonscan.Scanner) string {
	if s.ErrPos < len(s.Buf) && s.Buf[s.ErrPos] == 0 {
		return nulText
	}
	return syntaxErrText[s.Err]
}

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
