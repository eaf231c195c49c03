package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/batch"
	"github.com/groveml/grove/api/sidecarpb"
	"github.com/groveml/grove/servables"
)

// Registry is what the sidecar's model registration needs.
type Registry interface {
	RegisterModel(ctx context.Context, modelPath string, files map[string][]byte, warmUpJSON string) error
	DeleteModel(ctx context.Context, modelPath string) error
	ModelPaths() []string
}

// sidecar serves privacy_sandbox.bidding_auction_servers.inference.InferenceService,
// the B&A inference sidecar's gRPC service, so a B&A bidding server can use
// Grove as its sidecar.
type sidecar struct {
	sidecarpb.UnimplementedInferenceServiceServer
	inf batch.Inferer
	reg Registry
}

// Predict runs a batch request: the JSON of POST /v1/inference in input
// (with the same answer in output), or the proto form in proto_input
// (answered in proto_output). As in the sidecar, failures are encoded in
// the answer and the call itself succeeds; only a stopping server fails it
// (UNAVAILABLE).
func (s *sidecar) Predict(ctx context.Context, req *sidecarpb.PredictRequest) (*sidecarpb.PredictResponse, error) {
	switch in := req.GetInputData().(type) {
	case *sidecarpb.PredictRequest_ProtoInput:
		out, err := s.predictProto(ctx, in.ProtoInput)
		if err != nil {
			return nil, err
		}
		return &sidecarpb.PredictResponse{OutputData: &sidecarpb.PredictResponse_ProtoOutput{ProtoOutput: out}}, nil
	default:
		out, code := batch.Run(ctx, s.inf, nil, req.GetInput(), batch.Call{API: "ba-grpc", RequestID: requestID(ctx)})
		if code == 503 {
			return nil, status.Error(codes.Unavailable, "the server is stopping")
		}
		return &sidecarpb.PredictResponse{OutputData: &sidecarpb.PredictResponse_Output{Output: out}}, nil
	}
}

// predictProto runs a BatchInferenceRequest; each item's failure is in its own error.
func (s *sidecar) predictProto(ctx context.Context, in *sidecarpb.BatchInferenceRequest) (*sidecarpb.BatchInferenceResponse, error) {
	out := &sidecarpb.BatchInferenceResponse{Response: make([]*sidecarpb.InferenceResponseProto, len(in.GetRequest()))}
	reqs := make([]actors.Request, 0, len(in.GetRequest()))
	idx := make([]int, 0, len(in.GetRequest()))
	rid := requestID(ctx)
	for i, item := range in.GetRequest() {
		inputs, err := tensorsFromProto(item.GetTensors())
		if err != nil {
			out.Response[i] = &sidecarpb.InferenceResponseProto{ModelPath: item.GetModelPath(), Error: &sidecarpb.ErrorProto{
				ErrorType: sidecarpb.ErrorProto_INPUT_PARSING, Description: err.Error(), ModelPath: item.GetModelPath()}}
			continue
		}
		reqs = append(reqs, actors.Request{API: "ba-grpc", ModelPath: item.GetModelPath(), Inputs: inputs, RequestID: rid})
		idx = append(idx, i)
	}
	res, err := s.inf.Infer(ctx, reqs)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	for j, r := range res {
		b := batch.Result(r)
		resp := &sidecarpb.InferenceResponseProto{ModelPath: b.ModelPath}
		if b.Err == nil {
			resp.Tensors, err = tensorsToProto(b.Outputs)
			if err != nil {
				b.Err = &ba.Error{Type: ba.OutputParsing, Description: err.Error()}
			}
		}
		if b.Err != nil {
			resp.Tensors = nil
			resp.Error = &sidecarpb.ErrorProto{ErrorType: sidecarpb.ErrorProto_ErrorType(sidecarpb.ErrorProto_ErrorType_value[string(b.Err.Type)]),
				Description: b.Err.Description, ModelPath: b.ModelPath}
		}
		out.Response[idx[j]] = resp
	}
	return out, nil
}

// RegisterModel loads the model whose files the request carries (keys are
// full bucket paths under model_spec.model_path), warms it up and answers
// once it is ready. The registration is kept apart from the bucket config,
// which wins for a path it lists (FAILED_PRECONDITION).
func (s *sidecar) RegisterModel(ctx context.Context, req *sidecarpb.RegisterModelRequest) (*sidecarpb.RegisterModelResponse, error) {
	err := s.reg.RegisterModel(ctx, req.GetModelSpec().GetModelPath(), req.GetModelFiles(), req.GetWarmUpBatchRequestJson())
	if err != nil {
		return nil, registrationStatus(err)
	}
	return &sidecarpb.RegisterModelResponse{}, nil
}

// DeleteModel unloads a registered model.
func (s *sidecar) DeleteModel(ctx context.Context, req *sidecarpb.DeleteModelRequest) (*sidecarpb.DeleteModelResponse, error) {
	if err := s.reg.DeleteModel(ctx, req.GetModelSpec().GetModelPath()); err != nil {
		return nil, registrationStatus(err)
	}
	return &sidecarpb.DeleteModelResponse{}, nil
}

// GetModelPaths lists the models ready to serve, registered or configured.
func (s *sidecar) GetModelPaths(context.Context, *sidecarpb.GetModelPathsRequest) (*sidecarpb.GetModelPathsResponse, error) {
	paths := s.reg.ModelPaths()
	out := &sidecarpb.GetModelPathsResponse{ModelSpecs: make([]*sidecarpb.ModelSpec, len(paths))}
	for i, p := range paths {
		out.ModelSpecs[i] = &sidecarpb.ModelSpec{ModelPath: p}
	}
	return out, nil
}

// registrationStatus maps a registration error to its gRPC status.
func registrationStatus(err error) error {
	code := codes.Internal
	switch {
	case errors.Is(err, actors.ErrBadRegistration):
		code = codes.InvalidArgument
	case errors.Is(err, actors.ErrAlreadyRegistered):
		code = codes.AlreadyExists
	case errors.Is(err, actors.ErrManagedByConfig):
		code = codes.FailedPrecondition
	case errors.Is(err, actors.ErrNotRegistered):
		code = codes.NotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, servables.ErrUnsupportedRuntime):
		code = codes.InvalidArgument
	}
	return status.Error(code, err.Error())
}

// tensorsFromProto converts the sidecar's TensorProtos; INT8 and INT16
// values travel in tensor_content_int32 and must fit their type.
func tensorsFromProto(in []*sidecarpb.TensorProto) ([]servables.Tensor, error) {
	out := make([]servables.Tensor, len(in))
	for i, tp := range in {
		dt, ok := servables.ParseDType(tp.GetDataType().String())
		if !ok {
			return nil, fmt.Errorf("tensor %d: unsupported data_type %v", i, tp.GetDataType())
		}
		n, err := servables.NumElements(tp.GetTensorShape())
		if err != nil {
			return nil, fmt.Errorf("tensor %d (%s): %w", i, tp.GetTensorName(), err)
		}
		c := tp.GetTensorContent()
		// The count is checked before anything is allocated: a few bytes of
		// request must not ask for gigabytes.
		var got int
		switch dt {
		case servables.Float32:
			got = len(c.GetTensorContentFloat())
		case servables.Float64:
			got = len(c.GetTensorContentDouble())
		case servables.Int64:
			got = len(c.GetTensorContentInt64())
		case servables.Int32, servables.Int8, servables.Int16:
			got = len(c.GetTensorContentInt32())
		}
		if got != n {
			return nil, fmt.Errorf("tensor %d (%s): %d values for shape %v (%d elements)", i, tp.GetTensorName(), got, tp.GetTensorShape(), n)
		}
		t, err := servables.NewTensor(tp.GetTensorName(), dt, tp.GetTensorShape())
		if err != nil {
			return nil, fmt.Errorf("tensor %d (%s): %w", i, tp.GetTensorName(), err)
		}
		switch dt {
		case servables.Float32:
			copy(t.Float32s(), c.GetTensorContentFloat())
		case servables.Float64:
			copy(t.Float64s(), c.GetTensorContentDouble())
		case servables.Int64:
			copy(t.Int64s(), c.GetTensorContentInt64())
		case servables.Int32:
			copy(t.Int32s(), c.GetTensorContentInt32())
		case servables.Int8, servables.Int16:
			vals := c.GetTensorContentInt32()
			lo, hi := int32(-128), int32(127)
			if dt == servables.Int16 {
				lo, hi = -32768, 32767
			}
			for j, v := range vals {
				if v < lo || v > hi {
					return nil, fmt.Errorf("tensor %d (%s): value %d at %d is out of range for %v", i, tp.GetTensorName(), v, j, dt)
				}
				if dt == servables.Int8 {
					t.Int8s()[j] = int8(v)
				} else {
					t.Int16s()[j] = int16(v)
				}
			}
		}
		out[i] = t
	}
	return out, nil
}

// tensorsToProto converts model outputs to TensorProtos.
func tensorsToProto(in []servables.Tensor) ([]*sidecarpb.TensorProto, error) {
	out := make([]*sidecarpb.TensorProto, len(in))
	for i, t := range in {
		v, ok := sidecarpb.DataTypeProto_value[t.DType.String()]
		if !ok {
			return nil, fmt.Errorf("output %d (%s) has type %v, which is not supported by the B&A API", i, t.Name, t.DType)
		}
		tp := &sidecarpb.TensorProto{DataType: sidecarpb.DataTypeProto(v), TensorShape: t.Shape, TensorName: t.Name, TensorContent: &sidecarpb.TensorContent{}}
		c := tp.TensorContent
		switch t.DType {
		case servables.Float32:
			c.TensorContentFloat = append([]float32(nil), t.Float32s()...)
		case servables.Float64:
			c.TensorContentDouble = append([]float64(nil), t.Float64s()...)
		case servables.Int64:
			c.TensorContentInt64 = append([]int64(nil), t.Int64s()...)
		case servables.Int32:
			c.TensorContentInt32 = append([]int32(nil), t.Int32s()...)
		case servables.Int8:
			for _, x := range t.Int8s() {
				c.TensorContentInt32 = append(c.TensorContentInt32, int32(x))
			}
		case servables.Int16:
			for _, x := range t.Int16s() {
				c.TensorContentInt32 = append(c.TensorContentInt32, int32(x))
			}
		}
		out[i] = tp
	}
	return out, nil
}
