package oip

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRESTRefusalsAreOIPErrors checks that every refusal under /v2 is
// OIP's error object {"error": message}, with its status and headers.
func TestRESTRefusalsAreOIPErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, noGRPC{}, nil, "test", nil) }
	for _, c := range []struct {
		method, path string
		role         auth.Role
	}{{"POST", "/v2/models/m/infer", auth.RoleInfer}, {"GET", "/v2", auth.RoleRead}, {"POST", "/v2/repository/models/m/load", auth.RoleManage}} {
		for _, r := range httpservertest.Refusals(t, register, c.method, c.path, c.role) {
			var doc map[string]string
			err := json.Unmarshal(r.Body, &doc)
			if err != nil || len(doc) != 1 || !strings.Contains(doc["error"], r.Want) || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s, %s: %s %s (%v), want {\"error\": ...} saying %q", c.method, c.path, r.Why, r.Header.Get("Content-Type"), r.Body, err, r.Want)
			}
		}
	}
}
