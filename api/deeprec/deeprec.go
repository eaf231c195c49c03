// Package deeprec is DeepRec's serving processor protocol over Grove's
// actors: the PredictRequest and PredictResponse of package
// tensorflow.eas (api/deeprec/deeprecpb), converted to and from Grove's tensors
// (FromArray, ToArray), run through the router actor (Predict: batching,
// priorities, deadlines and the prediction log apply), the model's
// signature in DeepRec's JSON (SignatureJSON, what DeepRec's process()
// answers to an empty input), and the one table from a kind of failure to
// an HTTP status and a gRPC code (StatusOf). Over the network it serves
// POST /api/predict/{model} with application/x-protobuf bodies, as PAI-EAS
// does, and the gRPC service grove.deeprec.v1.Processor (Register). The
// processor library calls Process (or Predict) and ModelInfo directly.
//
// The package holds no state of its own: the models, their signatures and
// the requests in flight are the actors' (package actors).
package deeprec

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/httpserver"
)

// DefaultSignature is the signature name a Grove model answers to when
// the caller configures none: TensorFlow's default serving signature.
const DefaultSignature = "serving_default"

// Backend is what the protocol needs: inference through the router and
// the signature of the model serving a path; *actors.System is one.
type Backend interface {
	Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error)
	ModelMetadata(path string) (meta servables.Metadata, checksum string, ok bool)
}

// Call says who makes a Predict call, for the checks, the metrics and the
// prediction log.
type Call struct {
	// API labels the request in metrics and the prediction log
	// ("deeprec", "deeprec-grpc", "deeprec-processor").
	API string
	// RequestID identifies the call in the prediction log.
	RequestID string
	// Configs are the caller's key/value settings (Grove-Config-* headers).
	Configs map[string]string
	// Signature is the signature name the model answers to; empty means
	// DefaultSignature. A request naming another one is refused; one
	// naming none gets this one.
	Signature string
}

// ModelPath returns the model path a DeepRec model name stands for: the
// name with its trailing "/" (model paths in the model config end with
// one; DeepRec's callers may leave it out).
func ModelPath(name string) string {
	if name == "" || strings.HasSuffix(name, "/") {
		return name
	}
	return name + "/"
}

// ParseRequest decodes a serialized PredictRequest; a body that is not
// one is an error wrapping servables.ErrInvalidInput.
func ParseRequest(body []byte) (*deeprecpb.PredictRequest, error) {
	req := &deeprecpb.PredictRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: the body is not a serialized tensorflow.eas.PredictRequest: %w", servables.ErrInvalidInput, err)
	}
	return req, nil
}

// Predict runs req on the model serving modelPath (a path of the model
// config; ModelPath adds a missing trailing "/") through b's router and
// returns its answer. The inputs are bound to the model's by name (a
// TensorFlow-style "x:0" stands for the model's "x" when the model has no
// input of that name); output_filter names the outputs to return (none:
// every output), with the same ":0" allowance; the answer keys them as
// the filter wrote them, as DeepRec does. Every error wraps a
// servables sentinel (StatusOf gives its statuses; ErrorText its text in
// DeepRec's type names): a request that names another signature than
// call.Signature, has no inputs, an array Grove cannot convert (FromArray)
// or an output the model does not have is InvalidInput; a model that is
// not served is NotFound.
func Predict(ctx context.Context, b Backend, modelPath string, req *deeprecpb.PredictRequest, call Call) (*deeprecpb.PredictResponse, error) {
	path := ModelPath(modelPath)
	if path == "" {
		return nil, fmt.Errorf("%w: no model named: the model path is empty", servables.ErrNotFound)
	}
	sig := call.Signature
	if sig == "" {
		sig = DefaultSignature
	}
	if s := req.GetSignatureName(); s != "" && s != sig {
		return nil, fmt.Errorf("%w: signature_name %q is not served; model %s has the one signature %q", servables.ErrInvalidInput, s, path, sig)
	}
	_, span := tracing.Start(ctx, tracing.SpanDecode)
	meta, _, known := b.ModelMetadata(path)
	inputs, err := Inputs(req, meta.Inputs)
	if err != nil {
		tracing.End(span, err)
		return nil, err
	}
	span.End()
	filter := outputFilter(req.GetOutputFilter(), meta.Outputs)
	if known && len(filter) > 0 && len(meta.Outputs) > 0 {
		for _, name := range filter {
			if !slices.ContainsFunc(meta.Outputs, func(s servables.TensorSpec) bool { return s.Name == name }) {
				return nil, unknownOutput(path, name, meta.Outputs)
			}
		}
	}
	if len(filter) > 0 {
		ctx = servables.WithOutputs(ctx, filter)
	}
	res, err := b.Infer(ctx, []actors.Request{{API: call.API, ModelPath: path, Inputs: inputs, RequestID: call.RequestID, Configs: call.Configs}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, err
	}
	_, span = tracing.Start(ctx, tracing.SpanEncode)
	resp, err := Response(path, res[0].Outputs, filter)
	if err == nil {
		keyAsFiltered(resp, req.GetOutputFilter(), meta.Outputs)
	}
	tracing.End(span, err)
	return resp, err
}

// keyAsFiltered keys resp's outputs by the names of filter as the caller
// wrote them, as DeepRec does ("y:0" when asked for "y:0", which stands
// for the model's "y"; tensorName).
func keyAsFiltered(resp *deeprecpb.PredictResponse, filter []string, specs []servables.TensorSpec) {
	var renamed map[string]bool
	for _, f := range filter {
		if n := tensorName(f, specs); n != f {
			if a, ok := resp.Outputs[n]; ok {
				resp.Outputs[f] = a
				if renamed == nil {
					renamed = map[string]bool{}
				}
				renamed[n] = true
			}
		}
	}
	for n := range renamed {
		if !slices.Contains(filter, n) {
			delete(resp.Outputs, n)
		}
	}
}

// Process is DeepRec's process() over b: input is a serialized
// PredictRequest for the model at modelPath, and the serialized
// PredictResponse (deterministic: map keys sorted) is appended to dst; an
// empty input is answered with the model's signature JSON instead
// (SignatureJSON, under call.Signature), and signature reports so. Errors
// are Predict's, ParseRequest's and Signature's.
func Process(ctx context.Context, b Backend, modelPath string, input []byte, call Call, dst []byte) (out []byte, signature bool, err error) {
	if len(input) == 0 {
		sig, err := Signature(b, modelPath, call.Signature)
		if err != nil {
			return nil, true, err
		}
		return append(dst, sig...), true, nil
	}
	req, err := ParseRequest(input)
	if err != nil {
		return nil, false, err
	}
	resp, err := Predict(ctx, b, modelPath, req, call)
	if err != nil {
		return nil, false, err
	}
	out, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(dst, resp)
	if err != nil {
		return nil, false, fmt.Errorf("%w: encoding the response: %w", servables.ErrOutput, err)
	}
	return out, false, nil
}

// Inputs converts req's inputs (FromArray), in name order. specs are the
// model's inputs, when known: an input named "x:0" is renamed "x" when
// the model has an input "x" and none named "x:0". A request with no
// inputs is an error wrapping servables.ErrInvalidInput.
func Inputs(req *deeprecpb.PredictRequest, specs []servables.TensorSpec) ([]servables.Tensor, error) {
	if len(req.GetInputs()) == 0 {
		if len(specs) > 0 {
			return nil, servables.InvalidInputf("the request has no inputs; the model's inputs are: %s", specs)
		}
		return nil, fmt.Errorf("%w: the request has no inputs", servables.ErrInvalidInput)
	}
	names := make([]string, 0, len(req.GetInputs()))
	for name := range req.GetInputs() {
		names = append(names, name)
	}
	slices.Sort(names)
	inputs := make([]servables.Tensor, len(names))
	for i, name := range names {
		t, err := FromArray(name, req.GetInputs()[name])
		if err != nil {
			return nil, err
		}
		t.Name = tensorName(name, specs)
		inputs[i] = t
	}
	return inputs, nil
}

// tensorName is the model's name for name: name itself, or, for a
// TensorFlow tensor name "x:0", "x" when specs has "x" and not "x:0".
func tensorName(name string, specs []servables.TensorSpec) string {
	base, ok := strings.CutSuffix(name, ":0")
	if !ok || base == "" {
		return name
	}
	has := func(n string) bool {
		return slices.ContainsFunc(specs, func(s servables.TensorSpec) bool { return s.Name == n })
	}
	if !has(name) && has(base) {
		return base
	}
	return name
}

// outputFilter returns the names of filter as the model names them
// (tensorName), each once, in request order.
func outputFilter(filter []string, specs []servables.TensorSpec) []string {
	if len(filter) == 0 {
		return nil
	}
	out := make([]string, 0, len(filter))
	for _, f := range filter {
		if n := tensorName(f, specs); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// unknownOutput is the error for an output_filter name the model at path
// does not have.
func unknownOutput(path, name string, outputs []servables.TensorSpec) error {
	return servables.InvalidInputf("output_filter names %q, which model %s does not have; its outputs are: %s", name, path, outputs)
}

// Response is the PredictResponse of the model at path that answered
// outputs: every output, keyed by its name, or only those filter names
// (an error wrapping servables.ErrInvalidInput when the model has no
// output of one of those names).
func Response(path string, outputs []servables.Tensor, filter []string) (*deeprecpb.PredictResponse, error) {
	resp := &deeprecpb.PredictResponse{Outputs: make(map[string]*deeprecpb.ArrayProto, max(len(filter), len(outputs)))}
	add := func(t servables.Tensor) error {
		a, err := ToArray(t)
		if err != nil {
			return err
		}
		resp.Outputs[t.Name] = a
		return nil
	}
	if len(filter) == 0 {
		for _, t := range outputs {
			if err := add(t); err != nil {
				return nil, err
			}
		}
		return resp, nil
	}
	for _, name := range filter {
		i := slices.IndexFunc(outputs, func(t servables.Tensor) bool { return t.Name == name })
		if i < 0 {
			return nil, unknownOutput(path, name, servables.Sent(outputs))
		}
		if err := add(outputs[i]); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// SignatureJSON writes meta, a model's signature named name, as DeepRec's
// processor describes its model when process() gets an empty input:
//
//	{"signature_name": "serving_default","inputs": [{"name": "x","shape": [-1, 64],"type": "DT_FLOAT"}],"outputs": [...]}
//
// with the same members in the same order and spacing. Shapes list the
// dimensions, -1 for a variable one, [] when the shape is unknown (as
// TensorFlow's unknown rank prints); a type Grove does not know yet (a
// TorchScript model without a declared or learned signature) is
// "DT_INVALID". Names are JSON-escaped.
func SignatureJSON(meta servables.Metadata, name string) []byte {
	var b []byte
	b = append(b, `{"signature_name": `...)
	b = appendJSONString(b, name)
	b = append(b, `,"inputs": [`...)
	b = appendSpecs(b, meta.Inputs)
	b = append(b, `],"outputs": [`...)
	b = appendSpecs(b, meta.Outputs)
	return append(b, "]}"...)
}

func appendSpecs(b []byte, specs []servables.TensorSpec) []byte {
	for i, s := range specs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name": `...)
		b = appendJSONString(b, s.Name)
		b = append(b, `,"shape": [`...)
		for k, d := range s.Shape {
			if k > 0 {
				b = append(b, ", "...)
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"type": "`...)
		t := deeprecpb.ArrayDataType_DT_INVALID.String()
		if a, ok := ArrayType(s.DType); ok {
			t = a.String()
		}
		b = append(b, t...)
		b = append(b, `"}`...)
	}
	return b
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// Signature returns the signature JSON (SignatureJSON) of the model
// serving modelPath, under signature name sig (empty: DefaultSignature);
// an error wrapping servables.ErrNotFound when no model serves it here.
func Signature(b Backend, modelPath, sig string) ([]byte, error) {
	path := ModelPath(modelPath)
	meta, _, ok := b.ModelMetadata(path)
	if !ok {
		return nil, fmt.Errorf("%w: no model is served at %q", servables.ErrNotFound, path)
	}
	if sig == "" {
		sig = DefaultSignature
	}
	return SignatureJSON(meta, sig), nil
}

// ErrorText is err's message with data types named as DeepRec names them
// (DT_FLOAT, not FLOAT).
func ErrorText(err error) string { return servables.RenderDTypes(err, TypeName) }

// StatusOf is the protocol's one table from a kind of failure to the HTTP
// status of POST /api/predict/{model} and the gRPC code of
// grove.deeprec.v1.Processor/Predict: the caller's mistake 400 and
// INVALID_ARGUMENT, an unknown model 404 and NOT_FOUND, a full queue 503
// and RESOURCE_EXHAUSTED, a passed deadline 504 and DEADLINE_EXCEEDED, a
// stopping server 503 and UNAVAILABLE, a caller gone 499 and CANCELED, a
// failure of the model or the server 500 and INTERNAL. (The processor
// library answers 200 or 500 only, as DeepRec's does.)
func StatusOf(err error) (httpStatus int, code codes.Code) {
	switch servables.KindOf(err) {
	case servables.OK:
		return http.StatusOK, codes.OK
	case servables.NotFound:
		return http.StatusNotFound, codes.NotFound
	case servables.InvalidInput:
		return http.StatusBadRequest, codes.InvalidArgument
	case servables.Overloaded:
		return http.StatusServiceUnavailable, codes.ResourceExhausted
	case servables.DeadlineExceeded:
		return http.StatusGatewayTimeout, codes.DeadlineExceeded
	case servables.Canceled:
		return httpserver.StatusClientClosedRequest, codes.Canceled
	case servables.Unavailable:
		return http.StatusServiceUnavailable, codes.Unavailable
	case servables.Conflict:
		return http.StatusConflict, codes.FailedPrecondition
	}
	return http.StatusInternalServerError, codes.Internal // OutputUnsupported, Crashed, Execution, ReadOnly
}

// InfoBackend is what ModelInfo needs: the content serving a path and a
// versioned entry's newest version; *actors.System is one.
type InfoBackend interface {
	ModelMetadata(path string) (meta servables.Metadata, checksum string, ok bool)
	NewestVersion(parent string) (path string, ok bool)
}

// ModelInfo describes the content serving modelPath (ModelPath adds a
// missing trailing "/") as get_serving_model_info reports it: model_path
// is the path of the content that serves (for a versioned entry, its
// newest ready version's: "pcvr/3/"), version that version's number
// ("3"; empty for a model without versions) and checksum the content's
// checksum. No model serving the path is an error wrapping
// servables.ErrNotFound.
func ModelInfo(b InfoBackend, modelPath string) (*deeprecpb.ServingModelInfo, error) {
	path := ModelPath(modelPath)
	// The checksum and the version are read apart: read the version on
	// both sides of the checksum so that a swap between the reads does not
	// pair one version's number with another's checksum.
	var v, checksum string
	var versioned bool
	for range 3 {
		var ok bool
		v, versioned = b.NewestVersion(path)
		if _, checksum, ok = b.ModelMetadata(path); !ok {
			return nil, fmt.Errorf("%w: no model is served at %q", servables.ErrNotFound, path)
		}
		if v2, ok2 := b.NewestVersion(path); v2 == v && ok2 == versioned {
			break
		}
	}
	info := &deeprecpb.ServingModelInfo{ModelPath: path, Checksum: checksum}
	if versioned {
		info.ModelPath, info.Version = v, routing.NameModel(v).Version
	} else if mv := routing.NameModel(path); mv.Name != strings.TrimSuffix(path, "/") {
		info.Version = mv.Version // a version's own path, "pcvr/3/"
	}
	return info, nil
}
