package outcomes

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsAreJSONErrors checks that every refusal of POST
// /v1/outcomes (no or bad credentials, a missing role, over the limit, no
// client certificate) is {"error": message}, as its whole-body errors,
// with its status and headers.
func TestRefusalsAreJSONErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, grpcserver.New(grpcserver.Options{}), Options{}) }
	for _, r := range httpservertest.Refusals(t, register, "POST", "/v1/outcomes", auth.RoleFeedback) {
		var doc struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil || r.Header.Get("Content-Type") != "application/json" || !strings.Contains(doc.Error, r.Want) {
			t.Errorf("%s: %s %q, want {\"error\": ...} with %q", r.Why, r.Header.Get("Content-Type"), r.Body, r.Want)
		}
	}
}
