package forestflow

import (
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/groveml/grove/servables"
)

// outputBase is the field base name of output i: its Name, or output_<i>.
func outputBase(i int, t servables.Tensor) string {
	if t.Name != "" {
		return t.Name
	}
	return "output_" + strconv.Itoa(i)
}

// CheckOutputs checks that outputs can be written as a Prediction of rows
// rows: there is at least one output, and each is a valid tensor of a dtype
// ForestFlow has a type for, of rank 1 or more, whose first dimension is
// rows. The HTTP layer calls it with Request.Rows so that a model answering
// with the wrong number of rows is caught. Errors are *OutputError.
func CheckOutputs(rows int, outputs []servables.Tensor) error {
	if len(outputs) == 0 {
		return &OutputError{Output: -1, Msg: "the model returned no outputs"}
	}
	for i, t := range outputs {
		name := outputBase(i, t)
		fail := func(format string, args ...any) error {
			return &OutputError{Output: i, Name: name, Msg: fmt.Sprintf("output %d (%s): ", i, name) + fmt.Sprintf(format, args...)}
		}
		if _, ok := TypeOf(t.DType); !ok {
			return fail("dtype %v has no ForestFlow tensor type", t.DType)
		}
		if err := t.Validate(); err != nil {
			return fail("%v", err)
		}
		if len(t.Shape) == 0 {
			return fail("is a scalar; outputs need a first dimension of %d rows", rows)
		}
		if t.Shape[0] != int64(rows) {
			return fail("shape %v has %d rows, want %d", t.Shape, t.Shape[0], rows)
		}
		switch t.DType {
		case servables.Float32:
			for j, v := range t.Float32s() {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fail("element %d is %v, which JSON cannot carry", j, v)
				}
			}
		case servables.Float64:
			for j, v := range t.Float64s() {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fail("element %d is %v, which JSON cannot carry", j, v)
				}
			}
		}
	}
	return nil
}

// AppendPrediction appends ForestFlow's score response for outputs to dst:
//
//	{"Prediction":{"fqrv":{"contract":{"organization":…,"project":…,"contractNumber":…},"releaseVersion":…},
//	 "schema":[{"type":…,"fields":[…]},…],"datum":[{"tensors":[{"<Type>":{"data":[…]}},…]},…]}}
//
// The reply is wrapped in "Prediction", as ForestFlow's /score returns it;
// members are in protobuf field order and there is no whitespace.
//
// Outputs map back as follows. The row count is the first dimension of
// outputs[0]; every output must have it (CheckOutputs; an error names the
// output). Output i, of shape [rows] or [rows, d1, …], becomes schema entry
// i, of the ForestFlow type of its dtype (see TypeOf), with k = d1·d2·…
// fields (1 for shape [rows]). With base = the output's Name, or "output_i"
// when it has none, the fields are [base] when k == 1 and base_0 … base_{k-1}
// (row-major element order within the row) otherwise. Datum r holds one
// tensor per output, in output order: row r of output i. Two outputs of the
// same dtype give two schema entries of the same type (unlike a request's
// schema, which names each type once).
//
// BYTES outputs are String entries, their elements JSON strings, when every
// element is UTF-8 text; otherwise Bytes entries, their elements base64.
//
// Numbers: Float64 and Float32 values are JSON numbers in their shortest
// round-tripping form (Float32 as a float32, so 0.1 stays 0.1); Int8, Int16
// and Int32 are JSON numbers; Int64 values are JSON strings, as protobuf
// JSON (and ScalaPB's printer) writes int64. A NaN or infinite value is an
// error naming the output and element, not a "NaN" string: the caller gets
// a 500 (see AppendErrorResponse) rather than a value it may not parse.
//
// On error dst is returned unchanged with an *OutputError.
func AppendPrediction(dst []byte, fqrv FQRV, outputs []servables.Tensor) ([]byte, error) {
	rows := 0
	if len(outputs) > 0 && len(outputs[0].Shape) > 0 {
		rows = int(outputs[0].Shape[0])
	}
	if err := CheckOutputs(rows, outputs); err != nil {
		return dst, err
	}
	widths := make([]int, len(outputs))
	types := make([]TensorType, len(outputs))
	elems := make([][][]byte, len(outputs)) // of BYTES outputs
	for i, t := range outputs {
		widths[i] = t.Len() / rows
		types[i], _ = TypeOf(t.DType)
		if t.DType == servables.Bytes {
			elems[i], _ = t.BytesElements() // valid: CheckOutputs
			for _, e := range elems[i] {
				if !utf8.Valid(e) {
					types[i] = Bytes
					break
				}
			}
		}
	}

	dst = append(dst, `{"Prediction":{"fqrv":`...)
	dst = appendFQRV(dst, fqrv)
	dst = append(dst, `,"schema":[`...)
	for i, t := range outputs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"`...)
		dst = append(dst, types[i].String()...)
		dst = append(dst, `","fields":[`...)
		base := outputBase(i, t)
		if widths[i] == 1 {
			dst = appendString(dst, base)
		} else {
			for j := 0; j < widths[i]; j++ {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendString(dst, base+"_"+strconv.Itoa(j))
			}
		}
		dst = append(dst, "]}"...)
	}
	dst = append(dst, `],"datum":[`...)
	for r := 0; r < rows; r++ {
		if r > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"tensors":[`...)
		for i, t := range outputs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"`...)
			dst = append(dst, types[i].caseName()...)
			dst = append(dst, `":{"data":[`...)
			k := widths[i]
			for j := r * k; j < (r+1)*k; j++ {
				if j > r*k {
					dst = append(dst, ',')
				}
				if elems[i] != nil {
					dst = appendBytesElem(dst, elems[i][j], types[i])
				} else {
					dst = appendElem(dst, t, j)
				}
			}
			dst = append(dst, "]}}"...)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}}"...), nil
}

// appendBytesElem appends a BYTES element as a String value (text) or a
// Bytes value (standard base64, as protobuf JSON writes bytes).
func appendBytesElem(dst, e []byte, tt TensorType) []byte {
	if tt == String {
		return appendString(dst, string(e))
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, e)
	return append(dst, '"')
}

// appendElem appends element j of t as protobuf JSON.
func appendElem(dst []byte, t servables.Tensor, j int) []byte {
	switch t.DType {
	case servables.Float32:
		return appendFloat(dst, float64(t.Float32s()[j]), 32)
	case servables.Float64:
		return appendFloat(dst, t.Float64s()[j], 64)
	case servables.Int8:
		return strconv.AppendInt(dst, int64(t.Int8s()[j]), 10)
	case servables.Int16:
		return strconv.AppendInt(dst, int64(t.Int16s()[j]), 10)
	case servables.Int32:
		return strconv.AppendInt(dst, int64(t.Int32s()[j]), 10)
	case servables.Int64:
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, t.Int64s()[j], 10)
		return append(dst, '"')
	}
	return dst
}

// appendFloat appends a finite v as encoding/json does: the shortest
// representation that round-trips at the given bit size, in plain notation
// unless it is below 1e-6 or at least 1e21.
func appendFloat(dst []byte, v float64, bits int) []byte {
	abs := math.Abs(v)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, v, format, -1, bits)
	if format == 'e' { // clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendString appends s as a JSON string. Control characters are escaped
// as \u00XX and invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

func appendContract(dst []byte, c Contract) []byte {
	dst = append(dst, `{"organization":`...)
	dst = appendString(dst, c.Organization)
	dst = append(dst, `,"project":`...)
	dst = appendString(dst, c.Project)
	dst = append(dst, `,"contractNumber":`...)
	dst = strconv.AppendInt(dst, int64(c.ContractNumber), 10)
	return append(dst, '}')
}

func appendFQRV(dst []byte, f FQRV) []byte {
	dst = append(dst, `{"contract":`...)
	dst = appendContract(dst, f.Contract)
	dst = append(dst, `,"releaseVersion":`...)
	dst = appendString(dst, f.ReleaseVersion)
	return append(dst, '}')
}

// ErrorCase is a case of ForestFlow's ErrorResponse oneof
// (ErrorResponses.proto) that the score and management APIs answer with.
type ErrorCase string

// The ErrorResponse cases this package writes, with their HTTP status.
const (
	// UnknownServableError (500): a servable failed; body {fqrv, errorMessage}.
	UnknownServableError ErrorCase = "UnknownServableError"
	// UnknownServable (404): no such release; body {fqrv}.
	UnknownServable ErrorCase = "UnknownServable"
	// NoActiveServablesForContract (422): the contract has no valid servable
	// to route to; body {contract}.
	NoActiveServablesForContract ErrorCase = "NoActiveServablesForContract"
	// UnknownContract (404): no such contract; body {contract}.
	UnknownContract ErrorCase = "UnknownContract"
	// ContractValidationError (422): contract settings are invalid; body
	// {contract, msg}.
	ContractValidationError ErrorCase = "ContractValidationError"
	// ServableAlreadyExistsError (409): the release exists; body {fqrv}.
	ServableAlreadyExistsError ErrorCase = "ServableAlreadyExistsError"
	// CreateServableRequestInvalidError (422): a serve request is invalid;
	// body {fqrv, msg}.
	CreateServableRequestInvalidError ErrorCase = "CreateServableRequestInvalidError"
)

// Status is the HTTP status ForestFlow answers the case with (its
// StatusCode default), or 500 for an unknown case.
func (c ErrorCase) Status() int {
	switch c {
	case UnknownServable, UnknownContract:
		return http.StatusNotFound
	case NoActiveServablesForContract, ContractValidationError, CreateServableRequestInvalidError:
		return http.StatusUnprocessableEntity
	case ServableAlreadyExistsError:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// ErrorResponse is one ForestFlow error reply. Which fields are written
// depends on Case: FQRV for the servable cases, Contract for the contract
// cases, Message for UnknownServableError (errorMessage, omitted when empty),
// ContractValidationError and CreateServableRequestInvalidError (msg).
type ErrorResponse struct {
	Case     ErrorCase
	FQRV     FQRV
	Contract Contract
	Message  string
}

// AppendErrorResponse appends e's JSON body to dst, as ForestFlow writes
// it: {"<Case>":{…}} with the case's members in protobuf field order, e.g.
//
//	{"UnknownContract":{"contract":{"organization":"ads","project":"pctr","contractNumber":1}}}
//
// Like ForestFlow (ScalaPB prints only the fields that are set), it leaves
// out the StatusCode member; serve the body with e.Case.Status(). An
// unknown case is written as UnknownServableError.
func AppendErrorResponse(dst []byte, e ErrorResponse) []byte {
	c := e.Case
	switch c {
	case UnknownServable, NoActiveServablesForContract, UnknownContract, ContractValidationError,
		ServableAlreadyExistsError, CreateServableRequestInvalidError:
	default:
		c = UnknownServableError
	}
	dst = append(dst, `{"`...)
	dst = append(dst, c...)
	dst = append(dst, `":{`...)
	switch c {
	case UnknownServableError:
		dst = append(dst, `"fqrv":`...)
		dst = appendFQRV(dst, e.FQRV)
		if e.Message != "" {
			dst = append(dst, `,"errorMessage":`...)
			dst = appendString(dst, e.Message)
		}
	case UnknownServable, ServableAlreadyExistsError:
		dst = append(dst, `"fqrv":`...)
		dst = appendFQRV(dst, e.FQRV)
	case CreateServableRequestInvalidError:
		dst = append(dst, `"fqrv":`...)
		dst = appendFQRV(dst, e.FQRV)
		dst = append(dst, `,"msg":`...)
		dst = appendString(dst, e.Message)
	case NoActiveServablesForContract, UnknownContract:
		dst = append(dst, `"contract":`...)
		dst = appendContract(dst, e.Contract)
	case ContractValidationError:
		dst = append(dst, `"contract":`...)
		dst = appendContract(dst, e.Contract)
		dst = append(dst, `,"msg":`...)
		dst = appendString(dst, e.Message)
	}
	return append(dst, "}}"...)
}
