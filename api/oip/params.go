package oip

import (
	"math"
	"strconv"
)

// ParamKind is the JSON type of a parameter value.
type ParamKind uint8

// The kinds of parameter value. A JSON number is an Int when it is an
// integer literal (no fraction, no exponent) within the int64 range, a Uint
// when it is an integer literal above that but within uint64 (the OIP and
// Triton protos' uint64_param), and a Float otherwise.
const (
	ParamString ParamKind = iota + 1
	ParamBool
	ParamInt
	ParamUint
	ParamFloat
)

// String returns "string", "bool", "int", "uint" or "float".
func (k ParamKind) String() string {
	switch k {
	case ParamString:
		return "string"
	case ParamBool:
		return "bool"
	case ParamInt:
		return "int"
	case ParamUint:
		return "uint"
	case ParamFloat:
		return "float"
	}
	return "ParamKind(" + strconv.Itoa(int(k)) + ")"
}

// phrase names the kind with its article, for messages ("an integer").
func (k ParamKind) phrase() string {
	switch k {
	case ParamString:
		return "a string"
	case ParamBool:
		return "a boolean"
	case ParamInt:
		return "an integer"
	case ParamUint:
		return "an integer above 2^63"
	case ParamFloat:
		return "a number with a fraction or an exponent"
	}
	return "of kind " + k.String()
}

// Parameter is one name/value pair of a $parameters object. Only the field
// of its Kind is meaningful.
type Parameter struct {
	Name  string
	Kind  ParamKind
	Str   string  // ParamString
	Bool  bool    // ParamBool
	Int   int64   // ParamInt
	Uint  uint64  // ParamUint
	Float float64 // ParamFloat
}

// StringParam returns a string parameter.
func StringParam(name, v string) Parameter {
	return Parameter{Name: name, Kind: ParamString, Str: v}
}

// BoolParam returns a boolean parameter.
func BoolParam(name string, v bool) Parameter { return Parameter{Name: name, Kind: ParamBool, Bool: v} }

// IntParam returns an integer parameter.
func IntParam(name string, v int64) Parameter { return Parameter{Name: name, Kind: ParamInt, Int: v} }

// FloatParam returns a floating-point parameter (it must be finite to be
// written).
func FloatParam(name string, v float64) Parameter {
	return Parameter{Name: name, Kind: ParamFloat, Float: v}
}

// Int64 returns the value of an Int parameter, or of a Float one that holds
// an integer in the int64 range.
func (p Parameter) Int64() (int64, bool) {
	switch p.Kind {
	case ParamInt:
		return p.Int, true
	case ParamFloat:
		if p.Float == math.Trunc(p.Float) && p.Float >= -(1<<63) && p.Float < 1<<63 {
			return int64(p.Float), true
		}
	}
	return 0, false
}

// Float64 returns the value of a numeric parameter as a float64.
func (p Parameter) Float64() (float64, bool) {
	switch p.Kind {
	case ParamInt:
		return float64(p.Int), true
	case ParamUint:
		return float64(p.Uint), true
	case ParamFloat:
		return p.Float, true
	}
	return 0, false
}

// Parameters is a $parameters object, in document order. Names are unique
// in a parsed one.
type Parameters []Parameter

// Get returns the parameter with the given name.
func (ps Parameters) Get(name string) (Parameter, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return Parameter{}, false
}

// appendParameters writes ps as a JSON object. A non-finite Float or an
// unknown Kind is an error.
func appendParameters(dst []byte, ps Parameters, what string) ([]byte, *Error) {
	dst = append(dst, '{')
	for i := range ps {
		p := &ps[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, p.Name)
		dst = append(dst, ':')
		switch p.Kind {
		case ParamString:
			dst = appendString(dst, p.Str)
		case ParamBool:
			dst = strconv.AppendBool(dst, p.Bool)
		case ParamInt:
			dst = strconv.AppendInt(dst, p.Int, 10)
		case ParamUint:
			dst = strconv.AppendUint(dst, p.Uint, 10)
		case ParamFloat:
			if math.IsNaN(p.Float) || math.IsInf(p.Float, 0) {
				return dst, internalError(what + " parameter " + strconv.Quote(p.Name) + " is " + strconv.FormatFloat(p.Float, 'g', -1, 64) + ", which JSON cannot represent")
			}
			dst = strconv.AppendFloat(dst, p.Float, 'g', -1, 64)
		default:
			return dst, internalError(what + " parameter " + strconv.Quote(p.Name) + " has no valid kind (" + p.Kind.String() + ")")
		}
	}
	return append(dst, '}'), nil
}
