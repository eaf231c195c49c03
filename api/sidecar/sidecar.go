// Package sidecar serves the B&A inference sidecar's gRPC service,
// privacy_sandbox.bidding_auction_servers.inference.InferenceService, so
// that a B&A bidding server can use Grove as its sidecar: batch inference
// (through api/ba, in the batch JSON or as protos), model registration and
// the list of ready models. Its one table from a kind of failure to a gRPC
// code is code; item errors inside a Predict answer take api/ba's.
package sidecar

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/grpcserver"
)

// Backend is what the sidecar's service needs: batch inference and model
// registration; *actors.System is one.
type Backend interface {
	ba.Inferer
	RegisterModel(ctx context.Context, modelPath string, files map[string][]byte, warmUpJSON string) error
	DeleteModel(ctx context.Context, modelPath string) error
	ModelPaths() []string
}

// Register serves the sidecar's InferenceService over b on g; Predict's
// JSON input is parsed with opts. Predictions need role infer, model
// registration and deletion manage, the list of models read.
// RegisterModel and DeleteModel calls, refused or not, are recorded with
// rec (see audit.Begin); nil records nothing.
func Register(g grpcserver.Registrar, b Backend, opts ba.ParseOptions, rec audit.Recorder) {
	g.Register(&sidecarpb.InferenceService_ServiceDesc, &service{b: b, opts: opts, rec: rec}, map[string]auth.Role{
		"PredictBatch":  auth.RoleInfer,
		"Predict":       auth.RoleInfer,
		"RegisterModel": auth.RoleManage,
		"DeleteModel":   auth.RoleManage,
		"GetModelPaths": auth.RoleRead,
	})
}

type service struct {
	sidecarpb.UnimplementedInferenceServiceServer
	b    Backend
	opts ba.ParseOptions
	rec  audit.Recorder
}

// The service implements its generated interface, checked here at build
// time (gRPC checks it only when grpcserver.Register registers it).
var _ sidecarpb.InferenceServiceServer = (*service)(nil)

// Predict runs a batch request: the JSON of POST /v1/inference in input
// (with the same answer in output), or the proto form in proto_input
// (answered in proto_output). As in the sidecar, failures are encoded in
// the answer and the call itself succeeds; only a batch that cannot run at
// all (the server is stopping: UNAVAILABLE) fails it.
func (s *service) Predict(ctx context.Context, req *sidecarpb.PredictRequest) (*sidecarpb.PredictResponse, error) {
	call := ba.Call{API: "ba-grpc", Parse: s.opts, RequestID: grpcserver.RequestID(ctx)}
	switch in := req.GetInputData().(type) {
	case *sidecarpb.PredictRequest_ProtoInput:
		out, err := s.predictProto(ctx, in.ProtoInput, call)
		if err != nil {
			return nil, err
		}
		return &sidecarpb.PredictResponse{OutputData: &sidecarpb.PredictResponse_ProtoOutput{ProtoOutput: out}}, nil
	default:
		out, _, err := ba.Run(ctx, s.b, nil, req.GetInput(), call)
		if err != nil {
			return nil, statusOf(err)
		}
		return &sidecarpb.PredictResponse{OutputData: &sidecarpb.PredictResponse_Output{Output: out}}, nil
	}
}

// predictProto runs a BatchInferenceRequest; each item's failure is in its own error.
func (s *service) predictProto(ctx context.Context, in *sidecarpb.BatchInferenceRequest, call ba.Call) (*sidecarpb.BatchInferenceResponse, error) {
	_, span := tracing.Start(ctx, tracing.SpanDecode)
	items := make([]ba.Item, len(in.GetRequest()))
	for i, item := range in.GetRequest() {
		items[i].ModelPath = item.GetModelPath()
		if len(item.GetTensors()) == 0 {
			// Found after the model lookup, as in the JSON form.
			items[i].InputErr = &ba.Error{Type: ba.InputParsing, Description: "tensors must not be empty"}
			continue
		}
		inputs, err := tensorsFromProto(item.GetTensors())
		if err != nil {
			e := &ba.Error{Type: ba.InputParsing, Description: err.Error()}
			var late *rangeError
			if errors.As(err, &late) {
				items[i].InputErr = e
			} else {
				items[i].Err = e
			}
			continue
		}
		items[i].Inputs = inputs
	}
	span.End()
	results, _, err := ba.Infer(ctx, s.b, items, nil, call)
	if err != nil {
		return nil, statusOf(err)
	}
	_, span = tracing.Start(ctx, tracing.SpanEncode)
	defer span.End()
	out := &sidecarpb.BatchInferenceResponse{Response: make([]*sidecarpb.InferenceResponseProto, len(results))}
	for i, r := range results {
		resp := &sidecarpb.InferenceResponseProto{ModelPath: r.ModelPath}
		if r.Err == nil {
			if resp.Tensors, err = tensorsToProto(r.Outputs); err != nil {
				r.Err = &ba.Error{Type: ba.OutputParsing, Description: err.Error()}
			}
		}
		if r.Err != nil {
			resp.Tensors = nil
			resp.Error = &sidecarpb.ErrorProto{ErrorType: sidecarpb.ErrorProto_ErrorType(sidecarpb.ErrorProto_ErrorType_value[string(r.Err.Type)]),
				Description: r.Err.Description, ModelPath: r.ModelPath}
		}
		out.Response[i] = resp
	}
	return out, nil
}

// RegisterModel loads the model whose files the request carries (keys are
// full bucket paths under model_spec.model_path), warms it up and answers
// once it is ready. The registration is kept apart from the bucket config,
// which wins for a path it lists (FAILED_PRECONDITION).
func (s *service) RegisterModel(ctx context.Context, req *sidecarpb.RegisterModelRequest) (*sidecarpb.RegisterModelResponse, error) {
	path := req.GetModelSpec().GetModelPath()
	err := s.recorded(ctx, path, func(ctx context.Context) error {
		return s.b.RegisterModel(ctx, path, req.GetModelFiles(), req.GetWarmUpBatchRequestJson())
	})
	if err != nil {
		return nil, err
	}
	return &sidecarpb.RegisterModelResponse{}, nil
}

// DeleteModel unloads a registered model.
func (s *service) DeleteModel(ctx context.Context, req *sidecarpb.DeleteModelRequest) (*sidecarpb.DeleteModelResponse, error) {
	path := req.GetModelSpec().GetModelPath()
	if err := s.recorded(ctx, path, func(ctx context.Context) error { return s.b.DeleteModel(ctx, path) }); err != nil {
		return nil, err
	}
	return &sidecarpb.DeleteModelResponse{}, nil
}

// recorded runs write, a call on model path, with its audit record, and
// returns its gRPC status (nil on success).
func (s *service) recorded(ctx context.Context, path string, write func(context.Context) error) error {
	ctx, rec := audit.Begin(ctx, s.rec, audit.GRPCOp(ctx, "sidecar", path))
	err := write(ctx)
	if err == nil {
		rec.Finish(ctx, codes.OK.String(), nil)
		return nil
	}
	rec.Finish(ctx, code(err).String(), err)
	return statusOf(err)
}

// GetModelPaths lists the models ready to serve, registered or configured.
func (s *service) GetModelPaths(context.Context, *sidecarpb.GetModelPathsRequest) (*sidecarpb.GetModelPathsResponse, error) {
	paths := s.b.ModelPaths()
	out := &sidecarpb.GetModelPathsResponse{ModelSpecs: make([]*sidecarpb.ModelSpec, len(paths))}
	for i, p := range paths {
		out.ModelSpecs[i] = &sidecarpb.ModelSpec{ModelPath: p}
	}
	return out, nil
}

// statusOf is the gRPC status of a call that failed with err (see code).
func statusOf(err error) error { return status.Error(code(err), err.Error()) }
