package oip

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// Triton's methods of inference.GRPCInferenceService beyond KServe's:
// model configuration, statistics and the repository index (streaming is
// in grpc_stream.go; the methods Grove does not serve in unserved.go).

// ModelConfig answers the model's configuration, as REST's GET
// /v2/models/{name}[/versions/{v}]/config (modelConfig).
func (o *grpcService) ModelConfig(_ context.Context, req *oippb.ModelConfigRequest) (*oippb.ModelConfigResponse, error) {
	cfg, err := modelConfigOf(o.b, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	return &oippb.ModelConfigResponse{Config: cfg}, nil
}

// ModelStatistics answers the statistics REST's GET
// /v2/models[/{name}[/versions/{v}]]/stats answers, with the same numbers.
func (o *grpcService) ModelStatistics(_ context.Context, req *oippb.ModelStatisticsRequest) (*oippb.ModelStatisticsResponse, error) {
	vs, err := statsOf(o.b, req.GetName(), req.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	return statisticsResponse(vs), nil
}

// RepositoryIndex lists the configured models as REST's POST
// /v2/repository/index does. Grove has one repository (the model config's
// bucket): a repository_name is refused, as Triton refuses it.
func (o *grpcService) RepositoryIndex(_ context.Context, req *oippb.RepositoryIndexRequest) (*oippb.RepositoryIndexResponse, error) {
	if req.GetRepositoryName() != "" {
		return nil, grpcstatus.Errorf(codes.Unimplemented, "'repository_name' specification is not supported: Grove has one repository, the models its model config lists (got %q)", req.GetRepositoryName())
	}
	out := &oippb.RepositoryIndexResponse{Models: []*oippb.RepositoryIndexResponse_ModelIndex{}}
	for _, e := range repositoryIndex(o.b, req.GetReady()) {
		out.Models = append(out.Models, &oippb.RepositoryIndexResponse_ModelIndex{Name: e.Name, Version: e.Version, State: e.State, Reason: e.Reason})
	}
	return out, nil
}

// The parameters of Triton's extensions Grove does not have, on an input
// (shared memory) and on a requested output (shared memory,
// classification). REST's parser refuses them with the same messages.
var (
	sharedMemoryParams = [...]string{"shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"}
	outputParams       = [...]struct{ name, extension string }{
		{"classification", "classification"},
		{"shared_memory_region", "shared memory"},
		{"shared_memory_offset", "shared memory"},
		{"shared_memory_byte_size", "shared memory"},
	}
)

// refuseExtensionParameters refuses a request that asks for Triton's
// shared memory (on an input or an output) or classification (class_count
// on an output), naming the tensor and the parameter as REST does.
func refuseExtensionParameters(req *oippb.ModelInferRequest) error {
	for i, in := range req.GetInputs() {
		for _, name := range sharedMemoryParams {
			if _, ok := in.GetParameters()[name]; ok {
				return fmt.Errorf("%s: parameter %s is not supported (Grove has no shared memory extension)",
					tensorName("input", "inputs", in.GetName(), i), name)
			}
		}
	}
	for i, out := range req.GetOutputs() {
		for _, p := range outputParams {
			if _, ok := out.GetParameters()[p.name]; ok {
				return fmt.Errorf("%s: parameter %s is not supported (Grove has no %s extension)",
					tensorName("requested output", "outputs", out.GetName(), i), p.name, p.extension)
			}
		}
	}
	return nil
}

// tensorName names a request's tensor as REST's messages do: `input "x"`,
// or `inputs[2]` when it has no name.
func tensorName(what, list, name string, i int) string {
	if name == "" {
		return list + "[" + strconv.Itoa(i) + "]"
	}
	return what + " " + quote([]byte(name))
}
