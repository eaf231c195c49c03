package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/console"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/servables/runtimes"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/ui"
)

// wantHTTPRoles is the role of every HTTP route grove serve serves (a
// mount's, prefix + "/...", is its role for a GET of its prefix), as the
// central table in package auth had them before each protocol declared
// its own: a role that changes, a route that appears or goes, fails the
// test.
var wantHTTPRoles = map[string]auth.Role{
	// The server's own endpoints.
	"GET /healthz":     auth.Open,
	"GET /readyz":      auth.Open,
	"GET /v1/status":   auth.RoleRead,
	"GET /metrics":     auth.RoleRead,
	"/debug/pprof/...": auth.RoleAdmin,

	// B&A.
	"POST /v1/inference": auth.RoleInfer,
	"GET /v1/models":     auth.RoleRead,

	// OIP (mountSamples has its requests' roles).
	"/v2/...": auth.RoleRead,

	// DeepRec.
	"POST /api/predict/{model...}": auth.RoleInfer,
	"GET /api/predict/{model...}":  auth.RoleRead,

	// ForestFlow and GraphPipe.
	"POST /{org}/{project}/{n}/score":      auth.RoleInfer,
	"POST /{org}/{project}/{n}/{rv}/score": auth.RoleInfer,
	"POST /{org}/{project}/{n}/gp":         auth.RoleInfer,
	"GET /contracts/list":                  auth.RoleRead,
	"GET /{org}/{project}/{n}/stats":       auth.RoleRead,

	// The management API: its writes (and the metrics feed) manage, its
	// reads read.
	"POST /servable":                                 auth.RoleManage,
	"POST /contract/{org}/{project}/{n}":             auth.RoleManage,
	"PUT /{org}/{project}/{n}":                       auth.RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/policy":           auth.RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/policy-settings":  auth.RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/logging":          auth.RoleManage,
	"PUT /{org}/{project}/{n}/{rv}/logging-settings": auth.RoleManage,
	"DELETE /{org}/{project}/{n}/{rv}":               auth.RoleManage,
	"POST /{org}/{project}/{n}/{rv}/metrics":         auth.RoleManage,
	"GET /{org}/{project}/{n}/releases":              auth.RoleRead,
	"GET /{org}/{project}/{n}/list":                  auth.RoleRead,
	"GET /{org}/{project}/{n}/c-settings":            auth.RoleRead,
	"GET /{org}/{project}/{n}/contract-settings":     auth.RoleRead,
	"GET /{org}/{project}/{n}/s-settings":            auth.RoleRead,
	"GET /{org}/{project}/{n}/servable-settings":     auth.RoleRead,
	"GET /{org}/{project}/{n}/{rv}/settings":         auth.RoleRead,
	"GET /{org}/{project}/{n}/metadata":              auth.RoleRead,
	"GET /{org}/{project}/{n}/{rv}/metadata":         auth.RoleRead,
	"GET /v1/audit":                                  auth.RoleRead,
	"POST /v1/rollback":                              auth.RoleManage,
	"GET /v1/cluster":                                auth.RoleManage,

	// Outcomes: feedback (or manage, which the servers let stand in for it).
	"POST /v1/outcomes": auth.RoleFeedback,

	// The web console: its document, and its page (open).
	"GET /v1/console": auth.RoleRead,
	"/ui/...":         auth.Open,
}

// wantGRPCRoles is the role of every gRPC method grove serve serves, as
// the central table in package auth had them.
var wantGRPCRoles = map[string]auth.Role{
	"/grpc.health.v1.Health/Check": auth.Open,
	"/grpc.health.v1.Health/Watch": auth.Open,
	"/grpc.health.v1.Health/List":  auth.Open,

	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      auth.RoleRead,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": auth.RoleRead,

	"/inference.GRPCInferenceService/ServerLive":                   auth.Open,
	"/inference.GRPCInferenceService/ServerReady":                  auth.Open,
	"/inference.GRPCInferenceService/ModelReady":                   auth.Open,
	"/inference.GRPCInferenceService/ServerMetadata":               auth.RoleRead,
	"/inference.GRPCInferenceService/ModelMetadata":                auth.RoleRead,
	"/inference.GRPCInferenceService/ModelInfer":                   auth.RoleInfer,
	"/inference.GRPCInferenceService/ModelStreamInfer":             auth.RoleInfer,
	"/inference.GRPCInferenceService/ModelConfig":                  auth.RoleRead,
	"/inference.GRPCInferenceService/ModelStatistics":              auth.RoleRead,
	"/inference.GRPCInferenceService/RepositoryIndex":              auth.RoleRead,
	"/inference.GRPCInferenceService/RepositoryModelLoad":          auth.RoleManage,
	"/inference.GRPCInferenceService/RepositoryModelUnload":        auth.RoleManage,
	"/inference.GRPCInferenceService/SystemSharedMemoryStatus":     auth.RoleRead,
	"/inference.GRPCInferenceService/SystemSharedMemoryRegister":   auth.RoleManage,
	"/inference.GRPCInferenceService/SystemSharedMemoryUnregister": auth.RoleManage,
	"/inference.GRPCInferenceService/CudaSharedMemoryStatus":       auth.RoleRead,
	"/inference.GRPCInferenceService/CudaSharedMemoryRegister":     auth.RoleManage,
	"/inference.GRPCInferenceService/CudaSharedMemoryUnregister":   auth.RoleManage,
	"/inference.GRPCInferenceService/TraceSetting":                 auth.RoleManage,
	"/inference.GRPCInferenceService/LogSettings":                  auth.RoleManage,

	"/grove.deeprec.v1.Processor/Predict": auth.RoleInfer,

	"/grove.v1.Outcomes/Report": auth.RoleFeedback,

	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/PredictBatch":  auth.RoleInfer,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/Predict":       auth.RoleInfer,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/RegisterModel": auth.RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/DeleteModel":   auth.RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/GetModelPaths": auth.RoleRead,
}

// wantAdminGRPCRoles is the role each method of the admin gRPC listener
// needs: the same as on the gRPC listener.
var wantAdminGRPCRoles = map[string]auth.Role{
	"/grpc.health.v1.Health/Check": auth.Open,
	"/grpc.health.v1.Health/Watch": auth.Open,
	"/grpc.health.v1.Health/List":  auth.Open,

	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      auth.RoleRead,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": auth.RoleRead,

	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/RegisterModel": auth.RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/DeleteModel":   auth.RoleManage,
	"/privacy_sandbox.bidding_auction_servers.inference.InferenceService/GetModelPaths": auth.RoleRead,
}

// mountSamples are requests into each mounted subtree with the role each
// needs (it/auth_test.go sends the same to the binary).
var mountSamples = map[string][]struct {
	method, path string
	role         auth.Role
}{
	"/v2/...": {
		{"GET", "/v2", auth.RoleRead},
		{"GET", "/v2/health/live", auth.Open},
		{"GET", "/v2/health/ready", auth.Open},
		{"GET", "/v2/models/m/ready", auth.Open},
		{"HEAD", "/v2/models/m/ready", auth.Open},
		{"GET", "/v2/models/m", auth.RoleRead},
		{"GET", "/v2/models/ready", auth.RoleRead},
		{"GET", "/v2/models/m/config", auth.RoleRead},
		{"GET", "/v2/models/stats", auth.RoleRead},
		{"POST", "/v2/models/m/infer", auth.RoleInfer},
		{"POST", "/v2/repository/index", auth.RoleRead},
		{"POST", "/v2/repository/models/m/load", auth.RoleManage},
		{"POST", "/v2/repository/models/m/unload", auth.RoleManage},
		{"POST", "/v2/trace/setting", auth.RoleManage},
		{"GET", "/v2/trace/setting", auth.RoleRead},
	},
	"/debug/pprof/...": {{"GET", "/debug/pprof/", auth.RoleAdmin}, {"GET", "/debug/pprof/cmdline", auth.RoleAdmin}},
	"/ui/...":          {{"GET", "/ui/", auth.Open}, {"GET", "/ui/app.js", auth.Open}},
}

// TestEveryRouteAndMethodNeedsTheRoleItAlwaysHad wires every API as grove
// serve does (registerAPIs, with an admin gRPC listener), with
// authentication on, and checks that no registered gRPC method lacks a
// role, that the route and method lines grove serve logs at start
// (logRoles) list exactly wantHTTPRoles, wantGRPCRoles and
// wantAdminGRPCRoles, and that each mount refuses a request of mountSamples
// without the role it needs (401 without credentials, 403 naming the
// role with another) and lets an open one in.
func TestEveryRouteAndMethodNeedsTheRoleItAlwaysHad(t *testing.T) {
	tokens := map[auth.Role]string{auth.RoleInfer: "t-infer", auth.RoleRead: "t-read", auth.RoleManage: "t-manage", auth.RoleAdmin: "t-admin",
		auth.RoleFeedback: "t-feedback"}
	var doc strings.Builder
	doc.WriteString("tokens:\n")
	for role, tok := range tokens {
		fmt.Fprintf(&doc, "  - {name: only-%s, sha256: %x, roles: [%s]}\n", role, sha256.Sum256([]byte(tok)), role)
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	authn, err := auth.New(auth.Config{TokensFile: file, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	b := bucket.NewMemory("roles", map[string][]byte{"model_config.json": []byte(`{"model_metadata":[]}`)})
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), MaxBatchRows: 64, IntraOpThreads: 1, Runtimes: runtimesOf(runtimes.Libraries{}), ParseWarmUp: ba.ParseOptions{}.ParseWarmUp,
		Logger: discard, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	trail := audit.New(audit.Options{Bucket: b, Dir: audit.DirOf("model_config.json"), Logger: discard})
	t.Cleanup(func() { _ = trail.Close(context.Background()) })
	reg := prometheus.NewRegistry()
	h := httpserver.New(httpserver.Options{Logger: discard, Registerer: reg, Gatherer: reg, Pprof: true,
		Status: func() any { return sys.Status() }, Auth: authn})
	gs, admin := grpcserver.New(grpcserver.Options{Auth: authn}), grpcserver.New(grpcserver.Options{Auth: authn})
	registerAPIs(h, grpcserver.Split{Public: gs, Admin: admin, AdminMethods: adminGRPCMethods}, apis{sys: sys, trail: trail,
		console: console.New(console.Options{Source: sys, Assets: ui.Assets(), Logger: discard})})

	if err := gs.CheckRoles(); err != nil {
		t.Errorf("CheckRoles() = %v", err)
	}
	if err := admin.CheckRoles(); err != nil {
		t.Errorf("admin CheckRoles() = %v", err)
	}
	var logs bytes.Buffer
	logRoles(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), h, gs, admin)
	gotHTTP, gotGRPC, gotAdmin := map[string]auth.Role{}, map[string]auth.Role{}, map[string]auth.Role{}
	// The lines it/auth_test.go reads from the binary's log.
	for _, m := range regexp.MustCompile(`msg="http route" pattern="?([^"]+?)"? role=(\w+)\n`).FindAllStringSubmatch(logs.String(), -1) {
		gotHTTP[m[1]] = auth.Role(m[2])
	}
	for _, m := range regexp.MustCompile(`msg="grpc method" method=(\S+) role=(\w+)\n`).FindAllStringSubmatch(logs.String(), -1) {
		gotGRPC[m[1]] = auth.Role(m[2])
	}
	for _, m := range regexp.MustCompile(`msg="admin grpc method" method=(\S+) role=(\w+)\n`).FindAllStringSubmatch(logs.String(), -1) {
		gotAdmin[m[1]] = auth.Role(m[2])
	}
	if n := strings.Count(logs.String(), "\n"); n != len(gotHTTP)+len(gotGRPC)+len(gotAdmin) {
		t.Errorf("%d lines logged, %d read as routes and methods:\n%s", n, len(gotHTTP)+len(gotGRPC)+len(gotAdmin), logs.String())
	}
	compareRoles(t, "HTTP route", gotHTTP, wantHTTPRoles)
	compareRoles(t, "gRPC method", gotGRPC, wantGRPCRoles)
	compareRoles(t, "admin gRPC method", gotAdmin, wantAdminGRPCRoles)

	handler := h.Handler()
	call := func(method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w
	}
	for pattern := range gotHTTP {
		if strings.HasSuffix(pattern, "/...") && mountSamples[pattern] == nil {
			t.Errorf("mount %s has no samples in mountSamples", pattern)
		}
	}
	for pattern, samples := range mountSamples {
		for _, s := range samples {
			what := fmt.Sprintf("%s %s (%s)", s.method, s.path, pattern)
			if s.role == auth.Open {
				if w := call(s.method, s.path, ""); w.Code == http.StatusUnauthorized || w.Code == http.StatusForbidden {
					t.Errorf("%s without credentials: %d %s, want it open", what, w.Code, w.Body)
				}
				continue
			}
			if w := call(s.method, s.path, ""); w.Code != http.StatusUnauthorized {
				t.Errorf("%s without credentials: %d %s, want 401", what, w.Code, w.Body)
			}
			other := tokens[auth.RoleRead]
			if s.role == auth.RoleRead {
				other = tokens[auth.RoleInfer]
			}
			if w := call(s.method, s.path, other); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "lacks role "+string(s.role)) {
				t.Errorf("%s with another role's token: %d %s, want 403 lacking role %s", what, w.Code, w.Body, s.role)
			}
		}
	}
}

// compareRoles fails t for each entry of got that differs from want's, or
// that either lacks.
func compareRoles(t *testing.T, what string, got, want map[string]auth.Role) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s %s is not served (want role %s)", what, k, want[k])
		} else if g != want[k] {
			t.Errorf("%s %s needs role %s, want %s", what, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s %s (role %s) is new: add it to the expected table", what, k, got[k])
		}
	}
}
