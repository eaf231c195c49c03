// Package forestflow is ForestFlow's BASIC score API and contract read API
// over Grove's contracts: POST /{org}/{project}/{n}[/{release}]/score,
// GET /contracts/list and GET /{org}/{project}/{n}/stats (Register), with
// the one table from a kind of failure to an HTTP status (StatusOf), the
// helpers the management and GraphPipe APIs share (ContractOf, WriteError
// and ForestFlow's JSON shapes), the management API's documents, and the
// codec of the score API's JSON, which does no I/O: the InferenceRequest a
// client POSTs, the Prediction it gets back, and ForestFlow's typed error
// bodies. ForestFlow serialises its protobuf messages with ScalaPB's JSON
// format (scalapb-json4s); this package reads and writes that form.
//
// # Requests
//
// An InferenceRequest is
//
//	{"schema": [{"type": "Float64", "fields": ["hp", "attack"]}, ...],
//	 "datum":  [{"tensors": [{"Float64": {"data": [67.37, 25.2]}}, ...]}, ...],
//	 "configs": {"key": "value"}}
//
// ParseInferenceRequest turns every schema entry into one input tensor of
// shape [rows, len(fields)] (rows = number of datums), in schema order, named
// after the entry's type ("Float64"). Datum i fills row i. As in ForestFlow,
// which keys the schema by type, a datum's tensors are matched to schema
// entries by their type, in any order; so the schema may name each type only
// once.
//
// Type mapping (ForestFlow TensorType → Grove DType): Float32 → Float32,
// Float64 → Float64, Int8 → Int8, Int16 → Int16, Int32 → Int32,
// Int64 → Int64, String → Bytes, Bytes → Bytes. Float16 and Bool have no
// Grove dtype; a schema entry of those types is an unsupported-type error.
// A request may have both a String and a Bytes entry: two BYTES tensors,
// named "String" and "Bytes".
//
// Values follow the protobuf JSON mapping: a number, or a string holding a
// number; String values are JSON strings (their UTF-8 bytes are the
// elements), Bytes values are base64 strings (standard or URL-safe
// alphabet, padding optional; the decoded bytes are the elements), and
// anything else for those types is malformed; for Float32 and Float64 also
// "NaN", "Infinity" and "-Infinity"
// (accepted, since protobuf JSON allows them). Integers must be integer
// literals within the range of their type ("1.0" is not an Int32). Float64
// and Float32 values beyond the type's range are errors. A "tensorType"
// member inside a tensor, if present, must name the tensor's own type.
// Unknown members are errors (a misspelt "datums" is not silently ignored);
// a member whose value is null is treated as absent.
//
// # Errors and HTTP status codes
//
// Request errors are *RequestError values; RequestError.Status gives the
// HTTP status the score endpoint answers with:
//
//   - 400 Bad Request (Malformed, errors.Is(err, ErrMalformed)): the body is
//     not an InferenceRequest in protobuf JSON, i.e. ForestFlow's ScalaPB
//     parser would already reject it and Akka HTTP would answer 400 "The
//     request content was malformed". Bad JSON, a wrong JSON type, an
//     unknown member or enum name, a tensor with two values, a number out of
//     its protobuf type's range.
//   - 422 Unprocessable Entity (Unprocessable or UnsupportedType,
//     errors.Is(err, ErrUnprocessable); ErrUnsupportedType as well for an
//     unsupported type): a well-formed request that cannot be scored: no
//     schema or no datum, an entry without fields, a type named twice, a
//     datum missing a schema type or carrying one the schema lacks, a value
//     count different from len(fields), an Int8/Int16 value out of range.
//     ForestFlow uses 422 for its own validation errors.
//
// ForestFlow answers 400s with Akka HTTP's text/plain rejection text; the
// HTTP layer can do the same with RequestError.Error().
//
// # Predictions
//
// AppendPrediction writes {"Prediction":{"fqrv":…,"schema":[…],"datum":[…]}},
// wrapped in the "Prediction" key as ForestFlow's score endpoint returns it
// (every ForestFlow reply is a ScalaPB sealed oneof, {"<Case>":{…}}), with
// the members in protobuf field order. See AppendPrediction for how output
// tensors map to schema entries.
//
// Errors while encoding outputs are *OutputError values (errors.Is(err,
// ErrOutput)); they are server faults, answered with ForestFlow's
// UnknownServableError body and status 500 (AppendErrorResponse).
//
// # Management documents
//
// The bodies the management API (package manage) takes are read here too,
// in Grove's shapes (those of the model config file) and in ForestFlow's:
// ParseServeRequest (POST /servable), ParseContractSettings, ParsePolicy,
// ParseLogging and ParseMetrics. They give the model config's own values
// (package modelconfig), which the config's edits apply; every error is a
// *modelconfig.Error naming the field.
package forestflow

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/groveml/grove/servables"
)

// TensorType is ForestFlow's TensorType enum (Tensor.proto).
type TensorType int32

// The TensorType values, numbered as in Tensor.proto.
const (
	Float16 TensorType = 1
	Float32 TensorType = 2
	Float64 TensorType = 3
	Int8    TensorType = 4
	Int16   TensorType = 5
	Int32   TensorType = 6
	Int64   TensorType = 7
	String  TensorType = 8
	Bool    TensorType = 9
	Bytes   TensorType = 10
)

var typeNames = [...]string{
	Float16: "Float16", Float32: "Float32", Float64: "Float64", Int8: "Int8", Int16: "Int16",
	Int32: "Int32", Int64: "Int64", String: "String", Bool: "Bool", Bytes: "Bytes",
}

// String returns the enum name, e.g. "Float64".
func (t TensorType) String() string {
	if t >= Float16 && t <= Bytes {
		return typeNames[t]
	}
	return fmt.Sprintf("TensorType(%d)", int32(t))
}

// caseName is the name of t's case in the Tensor oneof; it is the enum name
// except for Bytes, whose oneof case is "Byte".
func (t TensorType) caseName() string {
	if t == Bytes {
		return "Byte"
	}
	return t.String()
}

// DType returns the Grove element type of t; ok is false for Float16 and
// Bool, which Grove does not support. String and Bytes are both
// servables.Bytes.
func (t TensorType) DType() (dt servables.DType, ok bool) {
	switch t {
	case String, Bytes:
		return servables.Bytes, true
	case Float32:
		return servables.Float32, true
	case Float64:
		return servables.Float64, true
	case Int8:
		return servables.Int8, true
	case Int16:
		return servables.Int16, true
	case Int32:
		return servables.Int32, true
	case Int64:
		return servables.Int64, true
	}
	return servables.Unknown, false
}

// TypeOf returns the ForestFlow type of a Grove dtype; ok is false for a
// dtype ForestFlow has no type for. servables.Bytes is String here;
// AppendPrediction writes an output whose elements are not all UTF-8 text
// as Bytes instead.
func TypeOf(dt servables.DType) (t TensorType, ok bool) {
	switch dt {
	case servables.Bytes:
		return String, true
	case servables.Float32:
		return Float32, true
	case servables.Float64:
		return Float64, true
	case servables.Int8:
		return Int8, true
	case servables.Int16:
		return Int16, true
	case servables.Int32:
		return Int32, true
	case servables.Int64:
		return Int64, true
	}
	return 0, false
}

// Contract identifies a ForestFlow contract (Contract.proto).
type Contract struct {
	Organization   string
	Project        string
	ContractNumber int32
}

// FQRV is a fully qualified release version: a contract and one of its
// releases (FQRV.proto).
type FQRV struct {
	Contract       Contract
	ReleaseVersion string
}

// SchemaEntry is one TensorSchema: a type and its positional field names.
type SchemaEntry struct {
	Type   TensorType
	Fields []string
}

// Request is a parsed InferenceRequest.
type Request struct {
	// Schema is the request's schema, in request order.
	Schema []SchemaEntry
	// Inputs holds one tensor per schema entry, in the same order, of shape
	// [Rows, len(Fields)], named after the entry's type (e.g. "Float64").
	Inputs []servables.Tensor
	// Rows is the number of datums; row i of every input is datum i.
	Rows int
	// Configs is the request's configs map (empty, not nil, when absent).
	Configs map[string]string
}

// ErrorKind classifies a RequestError.
type ErrorKind uint8

// The kinds of request error.
const (
	// Malformed is a body that is not an InferenceRequest in protobuf JSON (400).
	Malformed ErrorKind = iota + 1
	// Unprocessable is a well-formed request that cannot be scored (422).
	Unprocessable
	// UnsupportedType is a schema entry of a type Grove has no dtype for (422).
	UnsupportedType
)

// Sentinels for errors.Is on a *RequestError or *OutputError.
var (
	// ErrMalformed matches Malformed request errors.
	ErrMalformed = errors.New("forestflow: malformed InferenceRequest")
	// ErrUnprocessable matches Unprocessable and UnsupportedType request errors.
	ErrUnprocessable = errors.New("forestflow: unprocessable InferenceRequest")
	// ErrUnsupportedType matches UnsupportedType request errors.
	ErrUnsupportedType = errors.New("forestflow: unsupported tensor type")
	// ErrOutput matches every *OutputError.
	ErrOutput = errors.New("forestflow: output cannot be encoded")
)

// RequestError is an error in an InferenceRequest.
type RequestError struct {
	Kind ErrorKind
	// Datum is the index of the datum concerned, or -1.
	Datum int
	// Entry is the index of the schema entry concerned, or -1.
	Entry int
	// Type is the tensor type concerned, or 0.
	Type TensorType
	// Msg is the whole message, naming datum, entry, type and counts.
	Msg string
}

// Error returns the message.
func (e *RequestError) Error() string { return e.Msg }

// Status is the HTTP status for the error: 400 for Malformed, else 422.
func (e *RequestError) Status() int {
	if e.Kind == Malformed {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// Is reports whether target is the sentinel for e's kind.
func (e *RequestError) Is(target error) bool {
	switch target {
	case ErrMalformed:
		return e.Kind == Malformed
	case ErrUnprocessable:
		return e.Kind == Unprocessable || e.Kind == UnsupportedType
	case ErrUnsupportedType:
		return e.Kind == UnsupportedType
	}
	return false
}

// OutputError is an output tensor that cannot be written as a Prediction.
type OutputError struct {
	// Output is the index of the output tensor, or -1 for the list as a whole.
	Output int
	// Name is the output's field base name (its Name, or output_<i>).
	Name string
	// Msg is the whole message.
	Msg string
}

// Error returns the message.
func (e *OutputError) Error() string { return e.Msg }

// Is reports whether target is ErrOutput.
func (e *OutputError) Is(target error) bool { return target == ErrOutput }
