package oip

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// Backend is what the Open Inference Protocol needs: inference, the ready
// models with their metadata, serving settings and statistics, the
// configured models' status and the server's readiness; *actors.System is
// one.
type Backend interface {
	Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error)
	ModelPaths() []string
	// NewestVersion reports, for a versioned entry's path ("pcvr/"), the
	// path of the version it serves ("pcvr/3/"), see routing.Newest.
	NewestVersion(parent string) (path string, ok bool)
	ModelMetadata(path string) (meta servables.Metadata, checksum string, ok bool)
	ModelServing(path string) (serving actors.ModelServing, ok bool)
	ModelStats(path string) (actors.ModelStats, bool)
	Status() actors.Status
	Ready() bool
}

// ServerName is the server name metadata reports.
const ServerName = "grove"

// Register serves the Open Inference Protocol v2 over b: its REST API under
// /v2 on h, each request needing the role RESTRole gives it, and its gRPC
// service, inference.GRPCInferenceService, on g, each method needing the
// role grpcRoles gives it. version is the server version metadata
// reports. Model names and versions come from model paths
// (routing.NameModel). Model repository load and unload calls, which are
// refused, are recorded with rec (see audit.Begin); nil records nothing.
// REST refusals (no or bad credentials, a missing role, over its limit)
// answer OIP's {"error": ...}.
func Register(h *httpserver.Server, g grpcserver.Registrar, b Backend, version string, rec audit.Recorder) {
	h.Mount("/v2", RESTRole, restRoutes(h, b, version, rec))
	h.SetErrorWriter("/v2", func(w http.ResponseWriter, _ *http.Request, code int, msg string) { writeError(w, code, msg) })
	g.Register(&oippb.GRPCInferenceService_ServiceDesc, &grpcService{b: b, version: version, rec: rec}, grpcRoles())
}

// RESTRole is the role an Open Inference Protocol REST request (under /v2)
// needs: the probes (server live and ready, model ready: GET or HEAD of
// /v2/models/{name}[/versions/{v}]/ready) are open,
// inference needs RoleInfer, repository load and unload RoleManage, the
// other reads RoleRead, and any other request RoleManage.
func RESTRole(method, path string) auth.Role {
	switch {
	case path == "/v2/health/live" || path == "/v2/health/ready":
		return auth.Open
	case method == "POST" && strings.HasPrefix(path, "/v2/repository/models/"):
		return auth.RoleManage
	case method == "POST" && path == "/v2/repository/index":
		return auth.RoleRead
	case strings.HasPrefix(path, "/v2/models/"):
		switch {
		case (method == "GET" || method == "HEAD") && strings.HasSuffix(path, "/ready") && len(path) > len("/v2/models//ready"):
			// A model-ready probe: a model name, then /ready (what
			// httpserver.IsProbe lets in without a client certificate).
			// "/v2/models/ready" names no model to probe: it is the
			// metadata of a model named "ready".
			return auth.Open
		case method == "POST" && strings.HasSuffix(path, "/infer"):
			return auth.RoleInfer
		case method == "GET" || method == "HEAD":
			return auth.RoleRead
		}
	case method == "GET" || method == "HEAD":
		return auth.RoleRead
	}
	return auth.RoleManage
}

// grpcRoles is the role each method of inference.GRPCInferenceService
// needs, by name: the probes are open, inference needs RoleInfer, the
// reads RoleRead, and the methods that can change the server (repository
// load and unload, shared memory registration, and the trace and log
// settings, which one method both reads and sets) RoleManage.
func grpcRoles() map[string]auth.Role {
	return map[string]auth.Role{
		"ServerLive":                   auth.Open,
		"ServerReady":                  auth.Open,
		"ModelReady":                   auth.Open,
		"ServerMetadata":               auth.RoleRead,
		"ModelMetadata":                auth.RoleRead,
		"ModelInfer":                   auth.RoleInfer,
		"ModelStreamInfer":             auth.RoleInfer,
		"ModelConfig":                  auth.RoleRead,
		"ModelStatistics":              auth.RoleRead,
		"RepositoryIndex":              auth.RoleRead,
		"RepositoryModelLoad":          auth.RoleManage,
		"RepositoryModelUnload":        auth.RoleManage,
		"SystemSharedMemoryStatus":     auth.RoleRead,
		"SystemSharedMemoryRegister":   auth.RoleManage,
		"SystemSharedMemoryUnregister": auth.RoleManage,
		"CudaSharedMemoryStatus":       auth.RoleRead,
		"CudaSharedMemoryRegister":     auth.RoleManage,
		"CudaSharedMemoryUnregister":   auth.RoleManage,
		"TraceSetting":                 auth.RoleManage,
		"LogSettings":                  auth.RoleManage,
	}
}

// status is how OIP answers a failure of one kind, over REST and gRPC.
type status struct {
	http int
	grpc codes.Code
}

// statusOf is OIP's one table from a kind of failure to its answer, with
// Triton's statuses over REST: a full model queue is 503 (with
// Retry-After) and RESOURCE_EXHAUSTED, a caller gone 499 (for the metrics:
// nobody reads it).
func statusOf(k servables.Kind) status {
	switch k {
	case servables.OK:
		return status{http.StatusOK, codes.OK}
	case servables.NotFound:
		return status{http.StatusNotFound, codes.NotFound}
	case servables.InvalidInput:
		return status{http.StatusBadRequest, codes.InvalidArgument}
	case servables.Overloaded:
		return status{http.StatusServiceUnavailable, codes.ResourceExhausted}
	case servables.DeadlineExceeded:
		return status{http.StatusGatewayTimeout, codes.DeadlineExceeded}
	case servables.Canceled:
		return status{httpserver.StatusClientClosedRequest, codes.Canceled}
	case servables.Unavailable:
		return status{http.StatusServiceUnavailable, codes.Unavailable}
	case servables.Conflict:
		return status{http.StatusConflict, codes.FailedPrecondition}
	case servables.ReadOnly:
		return status{http.StatusForbidden, codes.FailedPrecondition}
	}
	return status{http.StatusInternalServerError, codes.Internal} // OutputUnsupported, Crashed, Execution
}

// unknownModel is Triton's error for a model that is not ready (NotFound).
type unknownModel struct{ name, version string }

func (e unknownModel) Error() string {
	if e.version != "" {
		return "Request for unknown model: '" + e.name + "' version " + e.version + " is not found"
	}
	return "Request for unknown model: '" + e.name + "' is not found"
}

func (unknownModel) Unwrap() error { return servables.ErrNotFound }

// answeredVersion is the model version an answer of mv names: mv's, or,
// when mv is a versioned entry's unversioned name, that of the version
// that ran the request (the entry may have moved to a newer one since mv
// was resolved).
func answeredVersion(mv routing.ModelVersion, res actors.Result) string {
	if res.ContentPath == "" || res.ContentPath == mv.Path {
		return mv.Version
	}
	return routing.NameModel(res.ContentPath).Version
}
