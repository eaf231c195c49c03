package oip

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/grpcserver"
)

// grpcService serves inference.GRPCInferenceService, the Open Inference
// Protocol v2 over gRPC with Triton's additions
// (api/oip/proto/inference/grpc_service.proto): the KServe methods, streaming
// inference, model configuration, statistics and the repository index.
// The methods Grove does not serve answer why (unserved.go).
type grpcService struct {
	oippb.UnimplementedGRPCInferenceServiceServer
	b       Backend
	version string
	rec     audit.Recorder
}

// The service implements its generated interface, checked here at build
// time (gRPC checks it only when grpcserver.Register registers it).
var _ oippb.GRPCInferenceServiceServer = (*grpcService)(nil)

// grpcError is the gRPC status of a call that failed with err.
func grpcError(err error) error {
	return grpcstatus.Error(statusOf(servables.KindOf(err)).grpc, errorText(err))
}

func (o *grpcService) ServerLive(context.Context, *oippb.ServerLiveRequest) (*oippb.ServerLiveResponse, error) {
	return &oippb.ServerLiveResponse{Live: true}, nil
}

func (o *grpcService) ServerReady(context.Context, *oippb.ServerReadyRequest) (*oippb.ServerReadyResponse, error) {
	return &oippb.ServerReadyResponse{Ready: o.b.Ready()}, nil
}

// ServerMetadata lists the same extensions as REST's GET /v2.
func (o *grpcService) ServerMetadata(context.Context, *oippb.ServerMetadataRequest) (*oippb.ServerMetadataResponse, error) {
	return &oippb.ServerMetadataResponse{Name: ServerName, Version: o.version, Extensions: extensions}, nil
}

// resolve finds the model path serving name at version ("" for the highest
// ready one); it fails with unknownModel.
func (o *grpcService) resolve(name, version string) (routing.ModelVersion, error) {
	mv, ok := routing.Resolve(o.b.ModelPaths(), o.b.NewestVersion, name, version)
	if !ok {
		return mv, unknownModel{name, version}
	}
	return mv, nil
}

func (o *grpcService) ModelReady(_ context.Context, req *oippb.ModelReadyRequest) (*oippb.ModelReadyResponse, error) {
	_, err := o.resolve(req.GetName(), req.GetVersion())
	return &oippb.ModelReadyResponse{Ready: err == nil}, nil
}

func (o *grpcService) ModelMetadata(_ context.Context, req *oippb.ModelMetadataRequest) (*oippb.ModelMetadataResponse, error) {
	mv, err := o.resolve(req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	meta, _, ok := o.b.ModelMetadata(mv.Path)
	if !ok {
		return nil, grpcError(fmt.Errorf("%w: model '%s' version %s was unloaded", servables.ErrUnavailable, mv.Name, mv.Version))
	}
	out := &oippb.ModelMetadataResponse{Name: mv.Name, Platform: Platform(meta.Runtime)}
	for _, v := range routing.Versions(o.b.ModelPaths(), o.b.NewestVersion, mv.Name) {
		out.Versions = append(out.Versions, v.Version)
	}
	for _, t := range meta.Inputs {
		out.Inputs = append(out.Inputs, tensorMetadata(t))
	}
	for _, t := range meta.Outputs {
		out.Outputs = append(out.Outputs, tensorMetadata(t))
	}
	return out, nil
}

func tensorMetadata(t servables.TensorSpec) *oippb.ModelMetadataResponse_TensorMetadata {
	shape := t.Shape
	if shape == nil {
		shape = []int64{-1} // unknown rank: TorchScript records none
	}
	dt, _ := Datatype(t.DType) // "" when the runtime does not say
	return &oippb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: dt, Shape: shape}
}

// ModelInfer runs one inference request (infer). A failure REST answers
// with Retry-After (a full queue, a model that is loading) carries the
// same wait in the grpc-retry-pushback-ms trailer (gRFC A6), which a
// grpc-go client with a retry policy waits before it retries.
func (o *grpcService) ModelInfer(ctx context.Context, req *oippb.ModelInferRequest) (*oippb.ModelInferResponse, error) {
	return o.infer(ctx, req, func(err error) error {
		if s, ok := retryAfter(err); ok {
			grpcserver.SetRetryPushback(ctx, time.Duration(s)*time.Second)
		}
		return grpcError(err)
	})
}

// infer runs one inference request of ModelInfer or ModelStreamInfer.
// Inputs come from raw_input_contents (little-endian, one entry per input)
// or from the typed contents; outputs go back in raw_output_contents,
// filtered and ordered by the requested outputs if any. Triton's
// shared-memory and classification parameters are refused as REST refuses
// them. The error is a gRPC status; failed makes it for an unknown model
// and a failure of the run (ModelInfer's also sets the retry pushback
// trailer; a stream's is grpcError, as its answers are messages).
func (o *grpcService) infer(ctx context.Context, req *oippb.ModelInferRequest, failed func(error) error) (*oippb.ModelInferResponse, error) {
	mv, err := o.resolve(req.GetModelName(), req.GetModelVersion())
	if err != nil {
		return nil, failed(err)
	}
	if err := refuseExtensionParameters(req); err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	_, span := tracing.Start(ctx, tracing.SpanDecode)
	inputs, err := inferInputs(req)
	tracing.End(span, err)
	if err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	timeout, err := grpcTimeout(req.GetParameters())
	if err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var requested []RequestedOutput
	if i, j := firstRepeat(req.GetOutputs(), (*oippb.ModelInferRequest_InferRequestedOutputTensor).GetName); i >= 0 {
		if j < 0 {
			return nil, grpcstatus.Errorf(codes.InvalidArgument, "outputs[%d] has an empty name", i)
		}
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "output '%s' is requested twice (outputs[%d] and outputs[%d])", req.GetOutputs()[i].GetName(), j, i)
	}
	for _, r := range req.GetOutputs() {
		requested = append(requested, RequestedOutput{Name: r.GetName()})
	}
	if requested != nil {
		meta, _, _ := o.b.ModelMetadata(mv.Path)
		if ctx, err = WithRequestedOutputs(ctx, mv.Name, meta.Outputs, requested); err != nil {
			return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
		}
	}
	res, err := o.b.Infer(ctx, []actors.Request{{API: "oip-grpc", ModelPath: mv.Path, Inputs: inputs, RequestID: requestIDOr(ctx, req.GetId())}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, failed(err)
	}
	outputs, err := SelectOutputs(mv.Name, res[0].Outputs, requested)
	if err != nil {
		return nil, grpcstatus.Error(codes.InvalidArgument, err.Error())
	}
	_, span = tracing.Start(ctx, tracing.SpanEncode)
	defer span.End()
	out := &oippb.ModelInferResponse{ModelName: mv.Name, ModelVersion: answeredVersion(mv, res[0]), Id: req.GetId()}
	for _, t := range outputs {
		dt, ok := Datatype(t.DType)
		if !ok {
			return nil, grpcstatus.Errorf(codes.Internal, "output '%s' has data type %s, which OIP cannot carry; supported datatypes: %s", t.Name, servables.OIPName(t.DType), supportedList)
		}
		out.Outputs = append(out.Outputs, &oippb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: dt, Shape: t.Shape})
		out.RawOutputContents = append(out.RawOutputContents, t.Data)
	}
	return out, nil
}

// firstRepeat returns the index i of the first of items whose name is
// empty (j -1) or is the name of an earlier one, items[j]; i is -1 when
// every name is given once, as REST requires of inputs and outputs.
func firstRepeat[T any](items []T, name func(T) string) (i, j int) {
	var seen map[string]int // past a few items: the list is the caller's
	for i, it := range items {
		n := name(it)
		if n == "" {
			return i, -1
		}
		if len(items) <= 8 {
			for j := range i {
				if name(items[j]) == n {
					return i, j
				}
			}
			continue
		}
		if seen == nil {
			seen = make(map[string]int, len(items))
		}
		if j, ok := seen[n]; ok {
			return i, j
		}
		seen[n] = i
	}
	return -1, -1
}

// requestIDOr is the request's id if it has one, else the call's request id.
func requestIDOr(ctx context.Context, id string) string {
	if id != "" && len(id) <= 128 {
		return id
	}
	return grpcserver.RequestID(ctx)
}

// inferInputs converts the request's inputs to tensors.
func inferInputs(req *oippb.ModelInferRequest) ([]servables.Tensor, error) {
	if len(req.GetInputs()) == 0 {
		return nil, errors.New("the request has no inputs")
	}
	if i, j := firstRepeat(req.GetInputs(), (*oippb.ModelInferRequest_InferInputTensor).GetName); i >= 0 {
		if j < 0 {
			return nil, fmt.Errorf("inputs[%d] has an empty name", i)
		}
		return nil, fmt.Errorf("input '%s' appears twice in the request (inputs[%d] and inputs[%d])", req.GetInputs()[i].GetName(), j, i)
	}
	raw := req.GetRawInputContents()
	if len(raw) > 0 && len(raw) != len(req.GetInputs()) {
		return nil, fmt.Errorf("expected %d raw_input_contents, one per input, got %d", len(req.GetInputs()), len(raw))
	}
	out := make([]servables.Tensor, len(req.GetInputs()))
	for i, in := range req.GetInputs() {
		dt, err := DTypeOf(in.GetDatatype())
		if err != nil {
			return nil, fmt.Errorf("input '%s': %w", in.GetName(), err)
		}
		n, err := servables.NumElements(in.GetShape())
		if err != nil {
			return nil, fmt.Errorf("input '%s': %w", in.GetName(), err)
		}
		// The shape is checked against the contents sent before anything is
		// allocated: a few bytes of request must not ask for gigabytes.
		if len(raw) > 0 {
			if in.GetContents() != nil {
				return nil, fmt.Errorf("input '%s': contents given along with raw_input_contents", in.GetName())
			}
			if dt == servables.Bytes {
				if err := servables.CheckBytes(raw[i], n); err != nil {
					return nil, fmt.Errorf("input '%s': raw_input_contents of BYTES must be %d elements (shape %v), each a 4-byte little-endian length and that many bytes: %w", in.GetName(), n, in.GetShape(), err)
				}
				out[i] = servables.Tensor{Name: in.GetName(), DType: dt, Shape: slices.Clone(in.GetShape()), Data: slices.Clone(raw[i])}
				continue
			}
			if want := int64(n) * int64(dt.Size()); int64(len(raw[i])) != want {
				return nil, fmt.Errorf("input '%s': %d bytes of raw_input_contents, expected %d for shape %v of %s", in.GetName(), len(raw[i]), want, in.GetShape(), in.GetDatatype())
			}
		} else if field, got := contentsLen(dt, in.GetContents()); got != n {
			if field == "" {
				return nil, fmt.Errorf("input '%s': %s data travel only in raw_input_contents (InferTensorContents has no field for them)", in.GetName(), in.GetDatatype())
			}
			return nil, fmt.Errorf("input '%s': %d values in %s, expected %d for shape %v", in.GetName(), got, field, n, in.GetShape())
		}
		if dt == servables.Bytes {
			out[i], err = bytesContents(in.GetName(), in.GetShape(), in.GetContents().GetBytesContents())
			if err != nil {
				return nil, fmt.Errorf("input '%s': %w", in.GetName(), err)
			}
			continue
		}
		t, err := servables.NewTensor(in.GetName(), dt, in.GetShape())
		if err != nil {
			return nil, fmt.Errorf("input '%s': %w", in.GetName(), err)
		}
		if len(raw) > 0 {
			copy(t.Data, raw[i]) // little-endian on every platform Grove builds for
			if t.DType == servables.Bool {
				if err := servables.CheckBools(t.Data); err != nil {
					return nil, fmt.Errorf("input '%s': raw_input_contents: %w", in.GetName(), err)
				}
			}
		} else if err := fillContents(t, in.GetContents()); err != nil {
			return nil, fmt.Errorf("input '%s': %w", in.GetName(), err)
		}
		out[i] = t
	}
	return out, nil
}

// contentsLen names the typed contents field that carries dt and counts
// its values; the field is "" for a type no field carries.
func contentsLen(dt servables.DType, c *oippb.InferTensorContents) (field string, n int) {
	switch dt {
	case servables.Float32:
		return "fp32_contents", len(c.GetFp32Contents())
	case servables.Float64:
		return "fp64_contents", len(c.GetFp64Contents())
	case servables.Int64:
		return "int64_contents", len(c.GetInt64Contents())
	case servables.Int32, servables.Int16, servables.Int8:
		return "int_contents", len(c.GetIntContents())
	case servables.Uint8:
		return "uint_contents", len(c.GetUintContents())
	case servables.Bool:
		return "bool_contents", len(c.GetBoolContents())
	case servables.Bytes:
		return "bytes_contents", len(c.GetBytesContents())
	}
	return "", -1
}

// bytesContents makes a BYTES tensor of bytes_contents, counted already.
func bytesContents(name string, shape []int64, elems [][]byte) (servables.Tensor, error) {
	size := 0
	for j, e := range elems {
		if len(e) > servables.MaxBytesElement {
			return servables.Tensor{}, fmt.Errorf("bytes_contents[%d] has %d bytes, more than a BYTES element can hold", j, len(e))
		}
		size += servables.BytesLenSize + len(e)
	}
	data := make([]byte, 0, size)
	for _, e := range elems {
		data = servables.AppendBytesElement(data, e)
	}
	return servables.Tensor{Name: name, DType: servables.Bytes, Shape: slices.Clone(shape), Data: data}, nil
}

// fillContents copies typed contents into t, checking each value's range.
// The caller has checked the count against t's shape (contentsLen).
func fillContents(t servables.Tensor, c *oippb.InferTensorContents) error {
	switch t.DType {
	case servables.Float32:
		copy(t.Float32s(), c.GetFp32Contents())
	case servables.Float64:
		copy(t.Float64s(), c.GetFp64Contents())
	case servables.Int64:
		copy(t.Int64s(), c.GetInt64Contents())
	case servables.Int32:
		copy(t.Int32s(), c.GetIntContents())
	case servables.Int8, servables.Int16:
		for j, v := range c.GetIntContents() {
			if t.DType == servables.Int8 {
				if v < -128 || v > 127 {
					return fmt.Errorf("value %d at %d is out of range for INT8", v, j)
				}
				t.Int8s()[j] = int8(v)
			} else {
				if v < -32768 || v > 32767 {
					return fmt.Errorf("value %d at %d is out of range for INT16", v, j)
				}
				t.Int16s()[j] = int16(v)
			}
		}
	case servables.Uint8:
		for j, v := range c.GetUintContents() {
			if v > 255 {
				return fmt.Errorf("value %d at %d is out of range for UINT8 (0 to 255)", v, j)
			}
			t.Data[j] = byte(v)
		}
	case servables.Bool:
		for j, v := range c.GetBoolContents() {
			if v {
				t.Data[j] = 1
			}
		}
	default:
		return fmt.Errorf("no contents field for %s", servables.OIPName(t.DType))
	}
	return nil
}
