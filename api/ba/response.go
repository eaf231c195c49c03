package ba

import (
	"math"
	"strconv"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

// AppendResponse appends the batch response for results to dst:
//
//	{"response":[{"model_path":"p","tensors":[...]},{"model_path":"q","error":{...}}]}
//
// Each tensor is written with the PyTorch parser's key order
// (tensor_shape, data_type, tensor_content), preceded by tensor_name when
// the tensor has a non-empty Name. Numbers are formatted as the rapidjson
// Writer does. An output holding NaN or ±Inf, or whose data does not match
// its type and shape, turns that item (not the whole batch, as in the
// sidecar) into an OUTPUT_PARSING error.
func AppendResponse(dst []byte, results []Result) []byte {
	dst = append(dst, `{"response":[`...)
	for i := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendResult(dst, &results[i])
	}
	return append(dst, "]}"...)
}

// AppendBatchError appends the response for a batch that failed as a whole:
// {"response":[{"model_path":"p","error":{...}}]}, where model_path is left
// out when modelPath is empty. A nil e is written as an UNKNOWN error.
func AppendBatchError(dst []byte, e *Error, modelPath string) []byte {
	dst = append(dst, `{"response":[{`...)
	if modelPath != "" {
		dst = append(dst, `"model_path":`...)
		dst = appendString(dst, modelPath)
		dst = append(dst, ',')
	}
	dst = append(dst, `"error":`...)
	dst = appendError(dst, e)
	return append(dst, "}]}"...)
}

// AppendModelPaths appends the getModelPaths result, a JSON array of
// strings such as ["pcvr_v1/","pcvr_v2/"]; no paths give [].
func AppendModelPaths(dst []byte, paths []string) []byte {
	dst = append(dst, '[')
	for i, p := range paths {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, p)
	}
	return append(dst, ']')
}

func appendResult(dst []byte, r *Result) []byte {
	start := len(dst)
	dst = append(dst, `{"model_path":`...)
	dst = appendString(dst, r.ModelPath)
	if r.Err == nil {
		dst = append(dst, `,"tensors":[`...)
		for i := range r.Outputs {
			if i > 0 {
				dst = append(dst, ',')
			}
			var problem string
			dst, problem = appendTensor(dst, &r.Outputs[i])
			if problem != "" {
				// Rewrite the item as an error.
				dst = append(dst[:start], `{"model_path":`...)
				dst = appendString(dst, r.ModelPath)
				desc := "Error during output parsing to json: output " + strconv.Itoa(i) + " of model " + r.ModelPath + problem
				dst = append(dst, `,"error":`...)
				dst = appendError(dst, &Error{Type: OutputParsing, Description: desc})
				return append(dst, '}')
			}
		}
		return append(dst, "]}"...)
	}
	dst = append(dst, `,"error":`...)
	dst = appendError(dst, r.Err)
	return append(dst, '}')
}

// appendError writes {"error_type":...,"description":...}, leaving out an
// empty description.
func appendError(dst []byte, e *Error) []byte {
	typ, desc := Unknown, ""
	if e != nil {
		typ, desc = e.Type, e.Description
		if typ == "" {
			typ = Unknown
		}
	}
	dst = append(dst, `{"error_type":`...)
	dst = appendString(dst, string(typ))
	if desc != "" {
		dst = append(dst, `,"description":`...)
		dst = appendString(dst, desc)
	}
	return append(dst, '}')
}

// appendTensor writes one output tensor. On failure it returns the end of
// the error description (" contains NaN or Inf" or ": <reason>") and dst
// holds partial output that the caller discards.
func appendTensor(dst []byte, t *servables.Tensor) ([]byte, string) {
	if err := t.Validate(); err != nil {
		return dst, ": " + err.Error()
	}
	if !baDType(t.DType) {
		return dst, ": output type " + t.DType.String() + " is not supported by the B&A API"
	}
	dst = append(dst, '{')
	if t.Name != "" {
		dst = append(dst, `"tensor_name":`...)
		dst = appendString(dst, t.Name)
		dst = append(dst, ',')
	}
	dst = append(dst, `"tensor_shape":[`...)
	for i, d := range t.Shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, d, 10)
	}
	dst = append(dst, `],"data_type":"`...)
	dst = append(dst, t.DType.String()...)
	dst = append(dst, `","tensor_content":[`...)
	const nonFinite = " contains NaN or Inf"
	switch t.DType {
	case servables.Float32:
		for i, v := range t.Float32s() {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return dst, nonFinite
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendDouble(dst, f)
		}
	case servables.Float64:
		for i, f := range t.Float64s() {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return dst, nonFinite
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendDouble(dst, f)
		}
	case servables.Int8:
		for i, v := range t.Int8s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(v), 10)
		}
	case servables.Int16:
		for i, v := range t.Int16s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(v), 10)
		}
	case servables.Int32:
		for i, v := range t.Int32s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(v), 10)
		}
	case servables.Int64:
		for i, v := range t.Int64s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, v, 10)
		}
	}
	return append(dst, "]}"...), ""
}

// appendString writes s as a JSON string the way the rapidjson Writer does:
// control characters as \u00XX in upper case (jsonscan.AppendString).
func appendString(dst []byte, s string) []byte {
	return jsonscan.AppendString(dst, s, jsonscan.HexUpper)
}
