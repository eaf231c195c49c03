package oip

import (
	"context"
	"net/http"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// Triton's extensions Grove does not have: their gRPC methods and REST
// endpoints answer what was asked and why it is not served, with the same
// reasons on both.

// Why Grove does not serve the other methods.
const (
	whyNoSharedMemory = "Grove has no shared memory extension: send tensors in the request " +
		"(raw_input_contents or contents) and read them from the response"
	whyNoCudaSharedMemory = "Grove runs models on the CPU and has no CUDA shared memory extension: " +
		"send tensors in the request and read them from the response"
	whyNoTrace       = "Grove has no trace extension"
	whyNoLogSettings = "Grove has no logging extension: its log level is a server setting (log_level)"
)

// unserved is the status of a method Grove does not serve: what was asked
// and why.
func unserved(code codes.Code, method, why string) error {
	return grpcstatus.Error(code, method+" is not supported: "+why)
}

// RepositoryModelLoad is refused as REST's load is: the model config
// decides what is loaded (RepositoryControlRefusal).
func (o *grpcService) RepositoryModelLoad(ctx context.Context, req *oippb.RepositoryModelLoadRequest) (*oippb.RepositoryModelLoadResponse, error) {
	return nil, o.refuseRepositoryControl(ctx, "load", req.GetModelName())
}

// RepositoryModelUnload is refused as REST's unload is.
func (o *grpcService) RepositoryModelUnload(ctx context.Context, req *oippb.RepositoryModelUnloadRequest) (*oippb.RepositoryModelUnloadResponse, error) {
	return nil, o.refuseRepositoryControl(ctx, "unload", req.GetModelName())
}

// SystemSharedMemoryStatus is refused: Grove has no shared memory.
func (*grpcService) SystemSharedMemoryStatus(context.Context, *oippb.SystemSharedMemoryStatusRequest) (*oippb.SystemSharedMemoryStatusResponse, error) {
	return nil, unserved(codes.Unimplemented, "SystemSharedMemoryStatus", whyNoSharedMemory)
}

// SystemSharedMemoryRegister is refused: Grove has no shared memory.
func (*grpcService) SystemSharedMemoryRegister(context.Context, *oippb.SystemSharedMemoryRegisterRequest) (*oippb.SystemSharedMemoryRegisterResponse, error) {
	return nil, unserved(codes.Unimplemented, "SystemSharedMemoryRegister", whyNoSharedMemory)
}

// SystemSharedMemoryUnregister is refused: Grove has no shared memory.
func (*grpcService) SystemSharedMemoryUnregister(context.Context, *oippb.SystemSharedMemoryUnregisterRequest) (*oippb.SystemSharedMemoryUnregisterResponse, error) {
	return nil, unserved(codes.Unimplemented, "SystemSharedMemoryUnregister", whyNoSharedMemory)
}

// CudaSharedMemoryStatus is refused: Grove has no GPU or shared memory.
func (*grpcService) CudaSharedMemoryStatus(context.Context, *oippb.CudaSharedMemoryStatusRequest) (*oippb.CudaSharedMemoryStatusResponse, error) {
	return nil, unserved(codes.Unimplemented, "CudaSharedMemoryStatus", whyNoCudaSharedMemory)
}

// CudaSharedMemoryRegister is refused: Grove has no GPU or shared memory.
func (*grpcService) CudaSharedMemoryRegister(context.Context, *oippb.CudaSharedMemoryRegisterRequest) (*oippb.CudaSharedMemoryRegisterResponse, error) {
	return nil, unserved(codes.Unimplemented, "CudaSharedMemoryRegister", whyNoCudaSharedMemory)
}

// CudaSharedMemoryUnregister is refused: Grove has no GPU or shared memory.
func (*grpcService) CudaSharedMemoryUnregister(context.Context, *oippb.CudaSharedMemoryUnregisterRequest) (*oippb.CudaSharedMemoryUnregisterResponse, error) {
	return nil, unserved(codes.Unimplemented, "CudaSharedMemoryUnregister", whyNoCudaSharedMemory)
}

// TraceSetting is refused: Grove has no trace extension.
func (*grpcService) TraceSetting(context.Context, *oippb.TraceSettingRequest) (*oippb.TraceSettingResponse, error) {
	return nil, unserved(codes.Unimplemented, "TraceSetting", whyNoTrace)
}

// LogSettings is refused: Grove has no logging extension.
func (*grpcService) LogSettings(context.Context, *oippb.LogSettingsRequest) (*oippb.LogSettingsResponse, error) {
	return nil, unserved(codes.Unimplemented, "LogSettings", whyNoLogSettings)
}

// refuseUnserved adds the REST endpoints of the extensions Grove does not
// have, each answering 501 with the reason its gRPC methods give
// (load and unload are not among them: the bucket config decides; a
// model's /trace/setting is refused by the model routes).
func refuseUnserved(handle func(pattern string, f http.HandlerFunc)) {
	for _, e := range [...]struct{ prefix, why string }{
		{"/v2/systemsharedmemory", whyNoSharedMemory},
		{"/v2/cudasharedmemory", whyNoCudaSharedMemory},
		{"/v2/trace", whyNoTrace},
		{"/v2/logging", whyNoLogSettings},
	} {
		refuse := func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+" is not supported: "+e.why)
		}
		handle(e.prefix, refuse)
		handle(e.prefix+"/", refuse)
	}
}
