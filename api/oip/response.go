package oip

import (
	"context"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

// AppendInferResponse appends the $inference_response for resp to dst:
//
//	{"model_name":"m","model_version":"1","id":"42","parameters":{...},
//	 "outputs":[{"name":"o","datatype":"FP32","shape":[3,2],"data":[1,1.1,2,2.1,3,3.1]}]}
//
// model_version, id and parameters are left out when empty; data is always
// flat. Outputs are those of resp.Requested, in its order, or every output
// in resp.Outputs order when it is nil. A binary output has
// "parameters":{"binary_data_size":N} instead of "data", and its bytes
// follow the JSON, in output order; headerLen is then the length of the
// JSON (the Inference-Header-Content-Length response header, with
// Content-Type application/octet-stream), and 0 when the response has no
// binary data.
//
// On error dst is returned unchanged (so that AppendError can follow) with
// an *Error: status 400 when a requested output is not one the model
// produced (the message lists those it did), 500 when an output cannot be
// encoded (an invalid tensor, a DType OIP cannot carry here, or NaN/±Inf in
// JSON data without NonFiniteLiterals, a BYTES element that is not UTF-8 in
// JSON data). BYTES outputs are JSON strings in data, and in binary the
// elements each as a 4-byte little-endian length and its bytes.
func AppendInferResponse(dst []byte, resp InferResponse) (out []byte, headerLen int, err error) {
	start := len(dst)
	dst, binary, e := appendResponseJSON(dst, &resp)
	if e != nil {
		return dst[:start], 0, e
	}
	if !binary {
		return dst, 0, nil
	}
	headerLen = len(dst) - start
	n := resp.count()
	for i := 0; i < n; i++ {
		t, bin, _ := resp.output(i)
		if bin {
			dst = append(dst, t.Data...)
		}
	}
	return dst, headerLen, nil
}

// count is the number of outputs to write.
func (r *InferResponse) count() int {
	if r.Requested != nil {
		return len(r.Requested)
	}
	return len(r.Outputs)
}

// output returns the i-th output to write and whether it is binary.
func (r *InferResponse) output(i int) (*servables.Tensor, bool, *Error) {
	if r.Requested == nil {
		return &r.Outputs[i], r.BinaryOutputs, nil
	}
	req := &r.Requested[i]
	for j := range r.Outputs {
		if r.Outputs[j].Name == req.Name {
			return &r.Outputs[j], req.Binary, nil
		}
	}
	return nil, false, r.unknownOutput(req.Name)
}

func (r *InferResponse) unknownOutput(name string) *Error {
	model := "the model"
	if r.ModelName != "" {
		model = "model " + strconv.Quote(r.ModelName)
	}
	b := []byte("requested output " + strconv.Quote(name) + " is not an output of " + model)
	if len(r.Outputs) == 0 {
		b = append(b, ", which produced no outputs"...)
	} else {
		b = append(b, "; its outputs are "...)
		for j := range r.Outputs {
			if j > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendQuote(b, r.Outputs[j].Name)
		}
	}
	return badRequest(string(b))
}

// SelectOutputs returns the outputs a response to requested carries, in
// order: every output when requested is nil, otherwise the output named by
// each requested output. A name no output has is an *Error (status 400)
// that lists the model's outputs. It is for transports that write outputs
// themselves, such as gRPC; AppendInferResponse does the same selection
// without allocating.
func SelectOutputs(modelName string, outputs []servables.Tensor, requested []RequestedOutput) ([]servables.Tensor, error) {
	r := InferResponse{ModelName: modelName, Outputs: outputs, Requested: requested}
	if requested == nil {
		return outputs, nil
	}
	sel := make([]servables.Tensor, len(requested))
	for i := range requested {
		t, _, err := r.output(i)
		if err != nil {
			return nil, err
		}
		sel[i] = *t
	}
	return sel, nil
}

// WithRequestedOutputs returns ctx for the inference of model modelName
// (whose declared outputs are declared; none when its runtime does not
// say) asking for requested: ctx itself when requested is nil (every
// output), else ctx naming them (servables.WithOutputs), so that the
// runtime converts only those. A name the model does not declare is an
// *Error (status 400) listing the declared outputs, before the model runs.
func WithRequestedOutputs(ctx context.Context, modelName string, declared []servables.TensorSpec, requested []RequestedOutput) (context.Context, error) {
	if requested == nil {
		return ctx, nil
	}
	names := make([]string, len(requested))
	for i, r := range requested {
		names[i] = r.Name
	}
	if len(declared) > 0 {
		outs := make([]servables.Tensor, len(declared))
		for i, d := range declared {
			outs[i].Name = d.Name
		}
		if _, err := SelectOutputs(modelName, outs, requested); err != nil {
			return nil, err
		}
	}
	return servables.WithOutputs(ctx, names), nil
}

// appendResponseJSON writes the JSON part of the response, reporting
// whether any output is binary.
func appendResponseJSON(dst []byte, r *InferResponse) ([]byte, bool, *Error) {
	dst = append(dst, `{"model_name":`...)
	dst = appendString(dst, r.ModelName)
	if r.ModelVersion != "" {
		dst = append(dst, `,"model_version":`...)
		dst = appendString(dst, r.ModelVersion)
	}
	if r.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = appendString(dst, r.ID)
	}
	if len(r.Parameters) > 0 {
		dst = append(dst, `,"parameters":`...)
		var err *Error
		if dst, err = appendParameters(dst, r.Parameters, "response"); err != nil {
			return dst, false, err
		}
	}
	dst = append(dst, `,"outputs":[`...)
	anyBinary := false
	n := r.count()
	for i := 0; i < n; i++ {
		t, bin, err := r.output(i)
		if err != nil {
			return dst, false, err
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendOutput(dst, t, bin, r.NonFiniteLiterals); err != nil {
			return dst, false, err
		}
		anyBinary = anyBinary || bin
	}
	return append(dst, "]}"...), anyBinary, nil
}

// appendOutput writes one $response_output.
func appendOutput(dst []byte, t *servables.Tensor, binary, nonFinite bool) ([]byte, *Error) {
	name := strconv.Quote(t.Name)
	if verr := t.Validate(); verr != nil {
		return dst, internalError("output " + name + " is not a valid tensor: " + verr.Error())
	}
	d := byDType(t.DType)
	if d == nil {
		return dst, internalError("output " + name + " has data type " + servables.OIPName(t.DType) + ", which Grove cannot send over OIP; supported datatypes: " + supportedList)
	}
	dst = append(dst, `{"name":`...)
	dst = appendString(dst, t.Name)
	dst = append(dst, `,"datatype":"`...)
	dst = append(dst, d.name...)
	dst = append(dst, `","shape":`...)
	dst = appendShape(dst, t.Shape)
	if binary {
		dst = append(dst, `,"parameters":{"binary_data_size":`...)
		dst = strconv.AppendInt(dst, int64(len(t.Data)), 10)
		return append(dst, "}}"...), nil
	}
	dst = append(dst, `,"data":`...)
	var err *Error
	if dst, err = appendData(dst, t, d, nonFinite); err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

func appendShape(dst []byte, shape []int64) []byte {
	dst = append(dst, '[')
	for i, v := range shape {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, v, 10)
	}
	return append(dst, ']')
}

// appendData writes a valid tensor's elements as a flat JSON array.
func appendData(dst []byte, t *servables.Tensor, d *datatype, nonFinite bool) ([]byte, *Error) {
	dst = append(dst, '[')
	switch t.DType {
	case servables.Float32:
		for i, v := range t.Float32s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				if !nonFinite {
					return dst, nonFiniteError(t, d, i, f)
				}
				dst = appendNonFinite(dst, f)
				continue
			}
			dst = strconv.AppendFloat(dst, f, 'g', -1, 32)
		}
	case servables.Float64:
		for i, f := range t.Float64s() {
			if i > 0 {
				dst = append(dst, ',')
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				if !nonFinite {
					return dst, nonFiniteError(t, d, i, f)
				}
				dst = appendNonFinite(dst, f)
				continue
			}
			dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
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
	case servables.Float16, servables.BFloat16:
		for i := range t.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			f := t.HalfAt(i)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				if !nonFinite {
					return dst, nonFiniteError(t, d, i, f)
				}
				dst = appendNonFinite(dst, f)
				continue
			}
			dst = appendHalf(dst, f, t.Uint16s()[i], t.DType)
		}
	case servables.Uint8:
		for i, v := range t.Data {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(v), 10)
		}
	case servables.Bool:
		for i, v := range t.Data {
			if i > 0 {
				dst = append(dst, ',')
			}
			if v != 0 {
				dst = append(dst, "true"...)
			} else {
				dst = append(dst, "false"...)
			}
		}
	case servables.Bytes:
		data := t.Data
		for i := 0; ; i++ {
			e, rest, ok := servables.NextBytesElement(data)
			if !ok {
				break // Validate checked the elements
			}
			if !utf8.Valid(e) {
				return dst, internalError("output " + strconv.Quote(t.Name) + " element " + strconv.Itoa(i) +
					" is not valid UTF-8, which a JSON string cannot carry; request the output with the " +
					ParamBinaryData + " parameter to receive its raw BYTES")
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, jsonscan.View(e))
			data = rest
		}
	default: // unreachable: byDType found the DType
		return dst, internalError("output " + strconv.Quote(t.Name) + " has data type " + t.DType.String() + ", which has no JSON encoder")
	}
	return append(dst, ']'), nil
}

// appendHalf writes f, the value of the 2-byte float bits of type dt, as
// the shortest decimal that reads back to the same bits (at most 5
// significant digits for FP16, 4 for BF16): an FP16 0.1 is written 0.1,
// not 0.0999755859375.
func appendHalf(dst []byte, f float64, bits uint16, dt servables.DType) []byte {
	round, digits := servables.Float16Bits, 5
	if dt == servables.BFloat16 {
		round, digits = servables.BFloat16Bits, 4
	}
	start := len(dst)
	for prec := 1; prec < digits; prec++ {
		dst = strconv.AppendFloat(dst[:start], f, 'g', prec, 64)
		if g, err := strconv.ParseFloat(string(dst[start:]), 64); err == nil {
			if b, _ := round(g); b == bits {
				return dst
			}
		}
	}
	return strconv.AppendFloat(dst[:start], f, 'g', digits, 64)
}

func nonFiniteError(t *servables.Tensor, d *datatype, i int, f float64) *Error {
	return internalError("output " + strconv.Quote(t.Name) + " element " + strconv.Itoa(i) + " is " +
		strconv.FormatFloat(f, 'g', -1, 64) + ", which JSON cannot represent; request the output with the " +
		ParamBinaryData + " parameter to receive its raw " + d.name + " values")
}

// appendNonFinite writes NaN, Infinity or -Infinity, as rapidjson does with
// kWriteNanAndInfFlag.
func appendNonFinite(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case f > 0:
		return append(dst, "Infinity"...)
	}
	return append(dst, "-Infinity"...)
}

// ServerMetadata is the $metadata_server_response.
type ServerMetadata struct {
	Name       string
	Version    string
	Extensions []string
}

// AppendServerMetadata appends {"name":…,"version":…,"extensions":[…]}
// (extensions is [] when there are none).
func AppendServerMetadata(dst []byte, m ServerMetadata) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendString(dst, m.Name)
	dst = append(dst, `,"version":`...)
	dst = appendString(dst, m.Version)
	dst = append(dst, `,"extensions":`...)
	dst = appendStrings(dst, m.Extensions)
	return append(dst, '}')
}

// ModelMetadata is the $metadata_model_response.
type ModelMetadata struct {
	Name string
	// Versions is written when not empty.
	Versions []string
	// Platform is written as it is; see Platform for Grove's runtimes.
	Platform string
	// Inputs and Outputs are written as $metadata_tensor objects: a DType
	// that is Unknown (or has no OIP datatype) leaves out "datatype", and a
	// nil Shape leaves out "shape", since a runtime that cannot tell them
	// (TorchScript) has nothing true to put there; -1 dimensions are
	// written as they are (variable size).
	Inputs, Outputs []servables.TensorSpec
	// Signature, when not empty, is written as the parameter "signature":
	// where the datatypes and shapes come from (servables.SignatureDeclared,
	// SignatureWarmUp or SignatureRuntime).
	Signature string
	// Parameters are the runtime's (servables.Metadata.Parameters: an
	// XGBoost model's objective, feature names, ...), written beside
	// "signature" in the order of their names.
	Parameters map[string]string
}

// AppendModelMetadata appends
// {"name":…,"versions":[…],"platform":…,"inputs":[…],"outputs":[…]}, and
// "parameters":{"signature":…,…} when m.Signature or m.Parameters is set
// (a runtime parameter named signature gives way to m.Signature).
func AppendModelMetadata(dst []byte, m ModelMetadata) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendString(dst, m.Name)
	if len(m.Versions) > 0 {
		dst = append(dst, `,"versions":`...)
		dst = appendStrings(dst, m.Versions)
	}
	dst = append(dst, `,"platform":`...)
	dst = appendString(dst, m.Platform)
	dst = append(dst, `,"inputs":`...)
	dst = appendTensorSpecs(dst, m.Inputs)
	dst = append(dst, `,"outputs":`...)
	dst = appendTensorSpecs(dst, m.Outputs)
	if m.Signature == "" && len(m.Parameters) == 0 {
		return append(dst, '}')
	}
	dst = append(dst, `,"parameters":{`...)
	sep := false
	if m.Signature != "" {
		dst = append(dst, `"signature":`...)
		dst = appendString(dst, m.Signature)
		sep = true
	}
	for _, k := range slices.Sorted(maps.Keys(m.Parameters)) {
		if k == "signature" && m.Signature != "" {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m.Parameters[k])
		sep = true
	}
	return append(dst, '}', '}')
}

func appendTensorSpecs(dst []byte, specs []servables.TensorSpec) []byte {
	dst = append(dst, '[')
	for i := range specs {
		s := &specs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendString(dst, s.Name)
		if d := byDType(s.DType); d != nil {
			dst = append(dst, `,"datatype":"`...)
			dst = append(dst, d.name...)
			dst = append(dst, '"')
		}
		if s.Shape != nil {
			dst = append(dst, `,"shape":`...)
			dst = appendShape(dst, s.Shape)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// AppendServerLive appends the $live_server_response {"live":true}.
func AppendServerLive(dst []byte, live bool) []byte {
	dst = append(dst, `{"live":`...)
	dst = strconv.AppendBool(dst, live)
	return append(dst, '}')
}

// AppendServerReady appends the $ready_server_response {"ready":true}
// (the spec's example says "live", a known typo; KServe's and Triton's
// protos say ready).
func AppendServerReady(dst []byte, ready bool) []byte {
	dst = append(dst, `{"ready":`...)
	dst = strconv.AppendBool(dst, ready)
	return append(dst, '}')
}

// AppendModelReady appends the $ready_model_response {"name":…,"ready":…}.
func AppendModelReady(dst []byte, name string, ready bool) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendString(dst, name)
	dst = append(dst, `,"ready":`...)
	dst = strconv.AppendBool(dst, ready)
	return append(dst, '}')
}

// AppendError appends the error object of every OIP API, {"error":msg}.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendString(dst, msg)
	return append(dst, '}')
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendString writes s as a JSON string (jsonscan.AppendString).
func appendString(dst []byte, s string) []byte {
	return jsonscan.AppendString(dst, s, jsonscan.HexLower)
}
