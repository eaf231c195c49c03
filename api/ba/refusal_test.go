package ba

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsAreBatchErrors checks that every refusal of the B&A routes
// is a batch that failed as a whole, its one error UNKNOWN with the
// refusal's message, and keeps its status and headers.
func TestRefusalsAreBatchErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil, ParseOptions{}) }
	for _, route := range []struct {
		method, path string
		role         auth.Role
	}{{"POST", "/v1/inference", auth.RoleInfer}, {"GET", "/v1/models", auth.RoleRead}} {
		for _, r := range httpservertest.Refusals(t, register, route.method, route.path, route.role) {
			var doc struct {
				Response []struct {
					ModelPath *string `json:"model_path"`
					Error     struct {
						ErrorType   string `json:"error_type"`
						Description string `json:"description"`
					} `json:"error"`
				} `json:"response"`
			}
			dec := json.NewDecoder(strings.NewReader(string(r.Body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&doc); err != nil || len(doc.Response) != 1 || doc.Response[0].ModelPath != nil ||
				doc.Response[0].Error.ErrorType != string(Unknown) || !strings.Contains(doc.Response[0].Error.Description, r.Want) ||
				r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s, %s: %s %q (%v), want a batch error UNKNOWN saying %q", route.method, route.path, r.Why,
					r.Header.Get("Content-Type"), r.Body, err, r.Want)
			}
		}
	}
}
