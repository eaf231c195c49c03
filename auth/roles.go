package auth

import "strings"

// Open marks a route or method that needs no credentials (the probes). It
// is not a role a caller can hold.
const Open Role = "open"

// HTTPRoles is the role each HTTP route needs, by its pattern as
// registered with the HTTP server (httpserver.Server.Handle and its own
// endpoints). The HTTP server refuses to build a handler with a route
// missing here, so a new route cannot go unprotected; the OIP subtree
// (/v2) is classified by OIPRole and pprof needs RoleAdmin.
var HTTPRoles = map[string]Role{
	// The server's own endpoints.
	"GET /healthz":   Open,
	"GET /readyz":    Open,
	"GET /v1/status": RoleRead,
	"GET /metrics":   RoleRead,

	// B&A.
	"POST /v1/inference": RoleInfer,
	"GET /v1/models":     RoleRead,

	// DeepRec's processor protocol (api/deeprec).
	"POST /api/predict/{model...}": RoleInfer,
	"GET /api/predict/{model...}":  RoleRead,

	// ForestFlow and GraphPipe.
	"POST /{org}/{project}/{n}/score":      RoleInfer,
	"POST /{org}/{project}/{n}/{rv}/score": RoleInfer,
	"POST /{org}/{project}/{n}/gp":         RoleInfer,
	"GET /contracts/list":                  RoleRead,
	"GET /{org}/{project}/{n}/stats":       RoleRead,

	// The management API: its writes (and the metrics feed) manage, its
	// reads read.
	"POST /servable":                                 RoleManage,
	"POST /contract/{org}/{project}/{n}":             RoleManage,
	"PUT /{org}/{project}/{n}":                       RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/policy":           RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/policy-settings":  RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/logging":          RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/logging-settings": RoleManage,
	"DELETE /{org}/{project}/{n}/{rv}":               RoleManage,
	"POST /{org}/{project}/{n}/{rv}/metrics":         RoleManage,
	"GET /{org}/{project}/{n}/releases":              RoleRead,
	"GET /{org}/{project}/{n}/list":                  RoleRead,
	"GET /{org}/{project}/{n}/c-settings":            RoleRead,
	"GET /{org}/{project}/{n}/contract-settings":     RoleRead,
	"GET /{org}/{project}/{n}/s-settings":            RoleRead,
	"GET /{org}/{project}/{n}/servable-settings":     RoleRead,
	"GET /{org}/{project}/{n}/{rv}/settings":         RoleRead,
	"GET /{org}/{project}/{n}/metadata":              RoleRead,
	"GET /{org}/{project}/{n}/{rv}/metadata":         RoleRead,
	"GET /v1/audit":                                  RoleRead,
	"POST /v1/rollback":                              RoleManage,
	"GET /v1/cluster":                                RoleManage,

	// The web console's document (its page, under /ui, is open).
	"GET /v1/console": RoleRead,
}

// MountRoles classifies the requests of each subtree mounted on the HTTP
// server (httpserver.Server.Mount), by its prefix; the HTTP server refuses
// a mount missing here.
var MountRoles = map[string]func(method, path string) Role{
	"/v2":          OIPRole,
	"/debug/pprof": func(string, string) Role { return RoleAdmin },
	// The web console's page holds no data: every figure it shows comes
	// from GET /v1/console and the other routes, with the caller's token.
	"/ui": func(string, string) Role { return Open },
}

// OIPRole is the role an Open Inference Protocol REST request (under /v2)
// needs: the probes (server live and ready, model ready: GET or HEAD of
// /v2/models/{name}[/versions/{v}]/ready) are open,
// inference needs RoleInfer, repository load and unload RoleManage, the
// other reads RoleRead, and any other request RoleManage.
func OIPRole(method, path string) Role {
	switch {
	case path == "/v2/health/live" || path == "/v2/health/ready":
		return Open
	case method == "POST" && strings.HasPrefix(path, "/v2/repository/models/"):
		return RoleManage
	case method == "POST" && path == "/v2/repository/index":
		return RoleRead
	case strings.HasPrefix(path, "/v2/models/"):
		switch {
		case (method == "GET" || method == "HEAD") && strings.HasSuffix(path, "/ready") && len(path) > len("/v2/models//ready"):
			// A model-ready probe: a model name, then /ready (what
			// httpserver.IsProbe lets in without a client certificate).
			// "/v2/models/ready" names no model to probe: it is the
			// metadata of a model named "ready".
			return Open
		case method == "POST" && strings.HasSuffix(path, "/infer"):
			return RoleInfer
		case method == "GET" || method == "HEAD":
			return RoleRead
		}
	case method == "GET" || method == "HEAD":
		return RoleRead
	}
	return RoleManage
}

// GRPCRoles is the role each gRPC method needs, by its full name. The gRPC
// server refuses to start with a registered method missing here.
var GRPCRoles = map[string]Role{
	"/grpc.health.v1.Health/Check": Open,
	"/grpc.health.v1.Health/Watch": Open,
	"/grpc.health.v1.Health/List":  Open,

	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      RoleRead,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": RoleRead,

	"/inference.GRPCInferenceService/ServerLive":                   Open,
	"/inference.GRPCInferenceService/ServerReady":                  Open,
	"/inference.GRPCInferenceService/ModelReady":                   Open,
	"/inference.GRPCInferenceService/ServerMetadata":               RoleRead,
	"/inference.GRPCInferenceService/ModelMetadata":                RoleRead,
	"/inference.GRPCInferenceService/ModelInfer":                   RoleInfer,
	"/inference.GRPCInferenceService/ModelStreamInfer":             RoleInfer,
	"/inference.GRPCInferenceService/ModelConfig":                  RoleRead,
	"/inference.GRPCInferenceService/ModelStatistics":              RoleRead,
	"/inference.GRPCInferenceService/RepositoryIndex":              RoleRead,
	"/inference.GRPCInferenceService/RepositoryModelLoad":          RoleManage,
	"/inference.GRPCInferenceService/RepositoryModelUnload":        RoleManage,
	"/inference.GRPCInferenceService/SystemSharedMemoryStatus":     RoleRead,
	"/inference.GRPCInferenceService/SystemSharedMemoryRegister":   RoleManage,
	"/inference.GRPCInferenceService/SystemSharedMemoryUnregister": RoleManage,
	"/inference.GRPCInferenceService/CudaSharedMemoryStatus":       RoleRead,
	"/inference.GRPCInferenceService/CudaSharedMemoryRegister":     RoleManage,
	"/inference.GRPCInferenceService/CudaSharedMemoryUnregister":   RoleManage,
	"/inference.GRPCInferenceService/TraceSetting":                 RoleManage,
	"/inference.GRPCInferenceService/LogSettings":                  RoleManage,

	"/grove.deeprec.v1.Processor/Predict": RoleInfer,

	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/PredictBatch":  RoleInfer,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/Predict":       RoleInfer,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/RegisterModel": RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/DeleteModel":   RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/GetModelPaths": RoleRead,
}
