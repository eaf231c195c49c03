// Package oip is Grove's Open Inference Protocol v2 (KServe v2, as served
// by Triton, MLServer and Seldon): the REST API under /v2 and the gRPC
// service inference.GRPCInferenceService over the actors (Register), both
// with Triton's model configuration, statistics and repository index, and
// Triton's streaming inference over gRPC (docs/oip.md), with
// the one table from a kind of failure to an HTTP status and a gRPC code
// (statusOf), and the codec of the REST API's JSON, which does no I/O: the
// $inference_request a client POSTs to v2/models/{name}[/versions/{v}]/infer,
// the $inference_response it gets back, the metadata and readiness
// documents, and the {"error": "..."} body of every failure. The codec also
// implements Triton's binary tensor data extension ("binary_tensor_data")
// in both directions.
//
// # Requests
//
// ParseInferRequest reads the request with a hand-written parser over
// internal/jsonscan's lexer (syntax.go gives its errors their messages)
// that validates the whole JSON text and decodes every input's "data"
// straight into the servables.Tensor it returns (no reflection, no
// interface boxing per element). Allocations per request do not depend on the number of
// elements: the request, one slice of tensors, one slice of shapes, one
// string holding every name, one data buffer per input, and the requested
// outputs and parameters if there are any (6 for a one-input JSON request
// with an outputs list). Memory follows the data actually present, not the
// shape: a tensor larger than the JSON left to read (a shape the data may
// not fill, or short literals such as 0 for an 8-byte type) is decoded
// into a pooled, growing arena and allocated only once its element count
// is known to be right.
//
// Checks, each failing with an *Error of HTTP status 400 whose message
// names the input (or output) and the problem:
//
//   - the JSON text must be valid (RFC 8259, UTF-8) and its root an object;
//     unknown members are ignored at every level (OIP allows extension
//     fields, and Triton's own examples put "model_name" in the request),
//     but a known member that appears twice or has the wrong JSON type is
//     an error; a known optional member whose value is null counts as
//     absent;
//   - "id" is a string; "parameters" (of the request, an input or an
//     output) is an object whose values are strings, numbers or booleans,
//     with no name twice;
//   - "inputs" is a non-empty array; each input has a non-empty "name"
//     unique in the request, a "datatype", a "shape" of integers ≥ 1 whose
//     product is at most servables.MaxElements, and either "data" or a
//     "binary_data_size" parameter (not both, not neither);
//   - "data" is the tensor in row-major order, either flat (an array of
//     exactly product(shape) values) or nested exactly as the shape (one
//     array level per dimension, each of the dimension's length), as the
//     OIP spec allows; partially nested or ragged data is an error;
//   - FP32 and FP64 values are JSON numbers (integer, fraction and exponent
//     forms, correctly rounded to the type), or the non-JSON literals NaN,
//     Infinity and -Infinity that Python's json module writes and Triton's
//     parser (rapidjson's kParseNanAndInfFlag, which also takes Inf, -Inf
//     and -NaN) accepts; only there, nowhere else in the document. A finite
//     number beyond the type's range is an error (1e39 is not an FP32);
//     one below the smallest subnormal becomes ±0. Integer values are
//     integer literals (no fraction or exponent: 1.0 is not an INT32)
//     within the type's range (300 is not an INT8). Strings, booleans and
//     null are not numbers;
//   - "outputs", if present, is an array of objects, each with a non-empty
//     "name" requested once; an empty array means every output, as an
//     absent one does (Triton's behaviour).
//
// # Datatypes
//
// OIP datatypes map to Grove DTypes through one table (datatypes, in
// oip.go): FP32 → Float32, FP64 → Float64, INT8 … INT64 → Int8 … Int64,
// BOOL → Bool, UINT8 → Uint8, FP16 → Float16, BF16 → BFloat16 and BYTES →
// Bytes. BOOL data are JSON true and false (one byte 1 or 0 in the tensor;
// numbers and strings are errors), UINT8 data integer literals from 0 to
// 255. In binary data both take one byte per element, and every BOOL byte
// must be 0 or 1. FP16 and BF16 data are JSON numbers (and the NaN and
// Infinity literals), as KServe and Triton take them, rounded to the
// nearest, ties to even, from the literal itself (a literal that the
// float64 reading moves onto a tie is decided exactly); a finite number
// that rounds beyond the type's range is an error. In binary data (and
// gRPC's raw_input_contents, their only place there) they take two bytes
// an element. Outputs are the shortest numbers that read back to the same
// bits. BYTES data are JSON strings (their UTF-8 bytes, escapes decoded,
// are the elements), and in binary data (as in gRPC raw contents) each
// element is a 4-byte little-endian length followed by that many bytes,
// the framing servables.Bytes tensors hold; binary_data_size is the framed
// size, and a framing that does not give exactly product(shape) elements
// is an error saying where it breaks. The other OIP datatypes (UINT16,
// UINT32, UINT64) have no Grove DType and are rejected with an error
// naming the datatype and listing the supported ones. Errors of the
// runtimes name datatypes as OIP does (FP32, not FLOAT:
// servables.DTypeError). The JSON decoder already handles the wider
// unsigned integers, so adding one of those is one line in the table once
// servables has the DType.
//
// # Binary tensor data
//
// With a headerLen > 0 (the Inference-Header-Content-Length request
// header), body[:headerLen] is the JSON and body[headerLen:] holds the raw
// data of every input that has a "binary_data_size" parameter, in input
// order. Each size must be exactly product(shape) × element size (for
// BYTES, the framed elements), and the
// sizes must add up to exactly the bytes after the JSON. The bytes are
// copied as they are: the extension defines them as little-endian, and
// Grove keeps tensors in host byte order, so this package assumes a
// little-endian host (as are amd64 and arm64, Grove's targets).
//
// Triton's "raw binary request" (an Inference-Header-Content-Length of 0
// and a body that is only the bytes of the model's single input) is not
// supported: headerLen 0 means the whole body is JSON, so the HTTP layer
// should reject a header of 0 itself.
//
// On the response side, an output is sent as binary when its request
// output has the "binary_data" parameter true, or, when it does not say,
// when the request has the "binary_data_output" parameter true (the
// precedence of Triton's documentation). AppendInferResponse then writes
// "parameters":{"binary_data_size":N} instead of "data", appends the raw
// bytes after the JSON, and returns the JSON's length for the
// Inference-Header-Content-Length response header.
//
// Triton's shared-memory and classification parameters are rejected, not
// ignored: Grove cannot honour them, and ignoring them would send the
// client something else than it asked for.
//
// # Responses
//
// AppendInferResponse appends the $inference_response to a caller's
// buffer with no intermediate maps. Floats are written in the shortest form
// that reads back to the same value (strconv 'g', -1, at the tensor's bit
// size, so an FP32 0.1 is 0.1, not 0.10000000149011612). NaN and ±Inf are
// not JSON: by default an output holding one fails with an *Error of status
// 500 that says so (binary outputs carry them fine); with
// InferResponse.NonFiniteLiterals they are written as NaN, Infinity and
// -Infinity, as Triton does (its rapidjson writer runs with
// kWriteNanAndInfFlag), which Python's json module and Triton's clients
// read but strict JSON parsers reject.
package oip

import (
	"strings"

	"github.com/groveml/grove/servables"
)

// HeaderContentLength is the HTTP header of the binary tensor data
// extension that gives the length of the JSON part of a request or response
// body.
const HeaderContentLength = "Inference-Header-Content-Length"

// ExtensionBinaryTensorData is the name of Triton's binary tensor data
// extension, as listed in the server metadata's extensions.
const ExtensionBinaryTensorData = "binary_tensor_data"

// Names of the parameters this package interprets.
const (
	// ParamBinaryDataSize is an input's (request) or output's (response)
	// size in bytes of its binary data.
	ParamBinaryDataSize = "binary_data_size"
	// ParamBinaryData is a requested output's choice of binary data.
	ParamBinaryData = "binary_data"
	// ParamBinaryDataOutput is the request's default for ParamBinaryData.
	ParamBinaryDataOutput = "binary_data_output"
)

// Error is a request that cannot be parsed, or a response that cannot be
// written. Msg names the input or output concerned and the problem; it is
// what AppendError should send.
type Error struct {
	// Status is the HTTP status to answer with: 400 for a bad request
	// (including a requested output the model does not have), 500 for an
	// output that cannot be encoded.
	Status int
	// Msg is the description of the error.
	Msg string
}

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

func badRequest(msg string) *Error { return &Error{Status: 400, Msg: msg} }

func internalError(msg string) *Error { return &Error{Status: 500, Msg: msg} }

// InferRequest is a parsed $inference_request.
type InferRequest struct {
	// ID is the request's "id", to be echoed in the response; empty when
	// absent.
	ID string
	// Parameters are the request's parameters in document order; nil when
	// absent.
	Parameters Parameters
	// Inputs are the input tensors in request order, each with its Name,
	// DType, Shape and Data (host byte order, 8-byte aligned). Their Data
	// and Shape do not alias body, and no two inputs share memory.
	Inputs []servables.Tensor
	// InputParameters is nil when no input has parameters, otherwise it has
	// one entry per input (nil for an input without any).
	InputParameters []Parameters
	// Outputs are the requested outputs in request order; nil when the
	// request does not name any (absent, null or an empty array), which
	// means every output of the model.
	Outputs []RequestedOutput
	// BinaryDataOutput is the request's binary_data_output parameter: the
	// default for every output that does not set binary_data.
	BinaryDataOutput bool
}

// RequestedOutput is one element of the request's "outputs".
type RequestedOutput struct {
	// Name is the output's name.
	Name string
	// Parameters are the output's parameters; nil when absent.
	Parameters Parameters
	// Binary tells whether to send this output as binary data: its
	// binary_data parameter, or the request's binary_data_output when it
	// has none.
	Binary bool
}

// Response returns the skeleton of the response to r: the model's name and
// version (version may be empty), the model's outputs, and r's ID, output
// selection and binary choices.
func (r *InferRequest) Response(modelName, modelVersion string, outputs []servables.Tensor) InferResponse {
	return InferResponse{
		ModelName:     modelName,
		ModelVersion:  modelVersion,
		ID:            r.ID,
		Outputs:       outputs,
		Requested:     r.Outputs,
		BinaryOutputs: r.BinaryDataOutput,
	}
}

// InferResponse is what AppendInferResponse writes.
type InferResponse struct {
	// ModelName is written as "model_name".
	ModelName string
	// ModelVersion is written as "model_version" when not empty.
	ModelVersion string
	// ID is written as "id" when not empty (the request's id, if any).
	ID string
	// Parameters are written as "parameters" when not empty.
	Parameters Parameters
	// Outputs are every tensor the model produced, each with its Name.
	Outputs []servables.Tensor
	// Requested selects and orders the outputs to write; nil writes every
	// output in Outputs order. A name that no output has is an error.
	Requested []RequestedOutput
	// BinaryOutputs, when Requested is nil, sends every output as binary
	// data (the request's binary_data_output).
	BinaryOutputs bool
	// NonFiniteLiterals writes NaN and ±Inf in JSON data as NaN, Infinity
	// and -Infinity, as Triton does, instead of failing.
	NonFiniteLiterals bool
}

// elemKind is how a datatype's elements are written in JSON.
type elemKind uint8

const (
	kindFloat    elemKind = iota + 1 // JSON numbers, NaN/Infinity literals
	kindSigned                       // integer literals, two's complement
	kindUnsigned                     // non-negative integer literals
	kindBool                         // true and false, one byte 1 or 0
	kindBytes                        // JSON strings; binary: 4-byte LE length + bytes each
)

// datatype is one OIP datatype Grove supports.
type datatype struct {
	name string // the OIP name, e.g. "FP32"
	dt   servables.DType
	kind elemKind
}

// size is the element size in bytes (0 for BYTES, whose elements vary).
func (d *datatype) size() int { return d.dt.Size() }

// datatypes maps OIP datatypes to Grove DTypes. Supporting another OIP
// datatype is one line here once servables has a DType for it, e.g.
// {"UINT16", servables.Uint16, kindUnsigned}: the JSON decoder, the binary
// extension, the encoder and the error messages all follow this table.
var datatypes = [...]datatype{
	{"FP32", servables.Float32, kindFloat},
	{"FP64", servables.Float64, kindFloat},
	{"INT8", servables.Int8, kindSigned},
	{"INT16", servables.Int16, kindSigned},
	{"INT32", servables.Int32, kindSigned},
	{"INT64", servables.Int64, kindSigned},
	{"BOOL", servables.Bool, kindBool},
	{"UINT8", servables.Uint8, kindUnsigned},
	{"FP16", servables.Float16, kindFloat},
	{"BF16", servables.BFloat16, kindFloat},
	{"BYTES", servables.Bytes, kindBytes},
}

// oipDatatypes are all the datatypes of the OIP spec (with BF16 from
// KServe's required_api.md), to tell an unsupported one from a misspelt one.
var oipDatatypes = [...]string{"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"}

// supportedList is the supported datatype names, comma-separated.
var supportedList = func() string {
	names := make([]string, len(datatypes))
	for i := range datatypes {
		names[i] = datatypes[i].name
	}
	return strings.Join(names, ", ")
}()

// lookupDatatype returns the table entry for an OIP datatype name.
func lookupDatatype(name []byte) *datatype {
	for i := range datatypes {
		if datatypes[i].name == string(name) {
			return &datatypes[i]
		}
	}
	return nil
}

// byDType returns the table entry for a Grove DType.
func byDType(dt servables.DType) *datatype {
	for i := range datatypes {
		if datatypes[i].dt == dt {
			return &datatypes[i]
		}
	}
	return nil
}

// Datatype returns the OIP datatype name of a Grove DType ("FP32" for
// Float32); ok is false for a DType OIP cannot carry here.
func Datatype(dt servables.DType) (name string, ok bool) {
	if d := byDType(dt); d != nil {
		return d.name, true
	}
	return "", false
}

// errorText is err's message with its data types named as OIP names them
// (see servables.DTypeError).
func errorText(err error) string { return servables.RenderDTypes(err, servables.OIPName) }

// DTypeOf returns the Grove DType of an OIP datatype name. The error (an
// *Error, status 400) says whether the name is an OIP datatype Grove does
// not support or no OIP datatype at all, and lists the supported ones.
func DTypeOf(name string) (servables.DType, error) {
	if d := lookupDatatype([]byte(name)); d != nil {
		return d.dt, nil
	}
	return servables.Unknown, badRequest(datatypeProblem([]byte(name)))
}

// datatypeProblem describes an unsupported or unknown datatype name.
func datatypeProblem(name []byte) string {
	for _, n := range oipDatatypes {
		if n == string(name) {
			return "datatype " + quote(name) + " is not supported by Grove; supported datatypes: " + supportedList
		}
	}
	return "unknown datatype " + quote(name) + "; supported datatypes: " + supportedList
}

// SupportedDatatypes returns the OIP datatypes Grove supports, in table
// order.
func SupportedDatatypes() []string {
	names := make([]string, len(datatypes))
	for i := range datatypes {
		names[i] = datatypes[i].name
	}
	return names
}

// Platform returns Triton's platform name of a Grove runtime, which
// Triton's clients read in model metadata and configuration
// ("pytorch_libtorch" for "torchscript", "onnxruntime_onnx" for "onnx");
// any other runtime name is returned as it is.
func Platform(runtime string) string {
	switch runtime {
	case "torchscript":
		return "pytorch_libtorch"
	case "onnx":
		return "onnxruntime_onnx"
	}
	return runtime
}
