package oip

import (
	"slices"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

func TestRESTRole(t *testing.T) {
	for _, c := range []struct {
		method, path string
		role         auth.Role
	}{
		{"GET", "/v2", auth.RoleRead},
		{"GET", "/v2/health/live", auth.Open},
		{"GET", "/v2/health/ready", auth.Open},
		{"GET", "/v2/models/a/b/ready", auth.Open},
		{"GET", "/v2/models/a/versions/1/ready", auth.Open},
		{"HEAD", "/v2/models/a/ready", auth.Open},
		{"GET", "/v2/models/ready", auth.RoleRead}, // the metadata of a model named "ready"
		{"HEAD", "/v2/models/ready", auth.RoleRead},
		{"GET", "/v2/models/a", auth.RoleRead},
		{"GET", "/v2/models/a/config", auth.RoleRead},
		{"GET", "/v2/models/stats", auth.RoleRead},
		{"POST", "/v2/models/a/infer", auth.RoleInfer},
		{"POST", "/v2/models/a/ready", auth.RoleManage},
		{"POST", "/v2/repository/index", auth.RoleRead},
		{"POST", "/v2/repository/models/a/load", auth.RoleManage},
		{"POST", "/v2/repository/models/a/unload", auth.RoleManage},
		{"POST", "/v2/trace/setting", auth.RoleManage},
		{"GET", "/v2/trace/setting", auth.RoleRead},
	} {
		if got := RESTRole(c.method, c.path); got != c.role {
			t.Errorf("RESTRole(%s %s) = %s, want %s", c.method, c.path, got, c.role)
		}
	}
}

// TestRegisterGivesEveryGRPCMethodARole: every method of
// inference.GRPCInferenceService is registered with a role (Register
// panics otherwise), and /v2 is mounted needing read for a GET of /v2.
func TestRegisterGivesEveryGRPCMethodARole(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	g := grpcserver.New(grpcserver.Options{})
	Register(h, g, &fake{}, "1.0", nil)
	if err := g.CheckRoles(); err != nil {
		t.Error(err)
	}
	for m, want := range map[string]auth.Role{"ServerLive": auth.Open, "ModelInfer": auth.RoleInfer, "ModelMetadata": auth.RoleRead, "RepositoryModelLoad": auth.RoleManage} {
		if got, ok := g.Role("/inference.GRPCInferenceService/" + m); !ok || got != want {
			t.Errorf("%s: role %q, %v; want %q", m, got, ok, want)
		}
	}
	if !slices.Contains(h.Routes(), httpserver.Route{Pattern: "/v2/...", Role: auth.RoleRead}) {
		t.Errorf("routes %v, want /v2/... with role read (GET /v2's)", h.Routes())
	}
}
