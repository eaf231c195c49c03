// Package ba is Grove's Privacy Sandbox Bidding & Auction (B&A) inference
// API: the codec of the sidecar's batch inference JSON (the string a
// bidding script passes to runInference, the string it gets back, and the
// getModelPaths list), the batch runner over the actors (Run, Infer), which
// the B&A sidecar's gRPC service shares, the HTTP endpoints POST
// /v1/inference and GET /v1/models (Register), and the one table from a
// kind of failure to its B&A error_type and HTTP status (ItemError). The
// codec (ParseOptions.ParseRequest, Append*) does no I/O.
//
// Parsing follows the sidecar (release 4.9.0, rapidjson 1.1.0 and Abseil)
// closely: the same document-level and item-level checks in the same order,
// with the same messages, and the same precedence between an item's
// failures (see Infer): the document, then the item's structure (an
// unquoted number in tensor_content included), then the model lookup, then
// the conversion of tensor_content to its data_type, then the model run.
// Unlike the sidecar, Grove converts tensor_content to typed buffers while
// parsing (the messages are those the sidecar reports when it converts
// later, and Item.InputErr keeps them for after the lookup). Unquoted JSON
// numbers in tensor_content are refused as the sidecar refuses them, unless
// the server sets ba_accept_unquoted_numbers (ParseOptions). Encoding
// reproduces the rapidjson Writer byte for byte, including its Grisu2
// number formatting. An output tensor's tensor_name is written only when it
// has a name of its own: the outputs of a model whose metadata says
// UnnamedOutputs (TorchScript) have none, as in the sidecar's PyTorch
// answers. Inputs a model refuses (their count, types or shapes) are a
// MODEL_EXECUTION error, as the sidecar reports forward's exception.
//
// Where the sidecar's behaviour is undefined or unsafe, Grove decides:
//
//   - a NUL byte anywhere is an error ("The document contains a NUL
//     character."; the sidecar stops reading at it), and so are invalid
//     UTF-8 and an escaped lone low surrogate in a string (rapidjson's
//     "Invalid encoding in string." and "The surrogate pair in string is
//     invalid.");
//   - an item or tensor that is not an object, a tensor_shape element that
//     is not an integer literal and a shape of more than
//     servables.MaxElements elements are item errors, found with the
//     item's structure; an empty tensors array (which the sidecar passes
//     to the model) is an item error found after the model lookup;
//   - a NaN or infinite output fails only its item, not the whole batch.
//
// The parser walks the document with internal/jsonscan's lexer (with its
// RapidjsonNumbers, and rapidjson's messages for its errors: syntax.go),
// validates the whole of it and writes numbers straight into tensor
// buffers; it allocates little besides the tensors it returns, and never
// allocates a tensor before its content is known to match its shape.
package ba

import (
	"github.com/groveml/grove/servables"
)

// ErrorType is the error_type of a B&A error object.
type ErrorType string

// The error types of the B&A inference API.
const (
	// Unknown is an error of no known kind.
	Unknown ErrorType = "UNKNOWN"
	// InputParsing is a malformed request, item or tensor.
	InputParsing ErrorType = "INPUT_PARSING"
	// ModelNotFound is a request for a model that is not loaded.
	ModelNotFound ErrorType = "MODEL_NOT_FOUND"
	// ModelExecution is a failure while the model ran.
	ModelExecution ErrorType = "MODEL_EXECUTION"
	// OutputParsing is a model output that cannot be written as JSON.
	OutputParsing ErrorType = "OUTPUT_PARSING"
	// GRPC is a transport failure between the caller and the model server.
	GRPC ErrorType = "GRPC"
)

// Error is a B&A error object: an error_type and a description.
type Error struct {
	Type        ErrorType
	Description string
}

// Error returns the type and the description, e.g.
// "INPUT_PARSING: Missing tensors in the JSON document".
func (e *Error) Error() string {
	return string(e.Type) + ": " + e.Description
}

func inputError(desc string) *Error { return &Error{Type: InputParsing, Description: desc} }

// Item is one element of a batch request.
type Item struct {
	// ModelPath is the model_path of the item. It is empty when Err is about
	// the model_path itself, as in the sidecar.
	ModelPath string
	// Inputs are the item's tensors, in request order, each with its Name
	// (empty if tensor_name was absent or not a string), DType, Shape and
	// Data filled in.
	Inputs []servables.Tensor
	// Err is non-nil when this item could not be parsed (an INPUT_PARSING
	// error); Inputs is then nil. Other items of the batch are unaffected.
	Err *Error
	// InputErr is non-nil when the item parsed but its inputs cannot be
	// given to a model: a tensor_content value that does not convert to
	// its data_type, or an empty tensors array. The sidecar finds these
	// only once it has looked the model up, so they are the item's answer
	// for a model that is served, and an item for a model that is not is
	// MODEL_NOT_FOUND (see Infer). Inputs is then nil.
	InputErr *Error
}

// Request is a parsed batch request.
type Request struct {
	// Items are the elements of the request array, in order.
	Items []Item
	// Configs is the optional top-level "configs" object, a Grove extension
	// mapping string keys to string values; nil when absent.
	Configs map[string]string
}

// Result is the outcome of one item of a batch, as written in the response.
type Result struct {
	// ModelPath is written as the item's model_path (always, even if empty).
	ModelPath string
	// Outputs are written as the item's tensors when Err is nil.
	Outputs []servables.Tensor
	// Err, when non-nil, is written as the item's error instead of tensors.
	Err *Error
}

// parseDType returns the DType of a B&A data_type name. The B&A API knows
// FLOAT, DOUBLE, INT8, INT16, INT32 and INT64 only; the other Grove names
// (BOOL, UINT8) are unsupported here, as in the sidecar.
func parseDType(s string) (servables.DType, bool) {
	dt, ok := servables.ParseDType(s)
	if !ok || !baDType(dt) {
		return servables.Unknown, false
	}
	return dt, true
}

// baDType reports whether the B&A API has a data_type for dt.
func baDType(dt servables.DType) bool {
	switch dt {
	case servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64:
		return true
	}
	return false
}
