package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestListRefusalsAreJSONErrors checks that GET /v1/audit's refusals are
// {"error": message}, as its other errors, with their status and headers.
func TestListRefusalsAreJSONErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil) }
	for _, r := range httpservertest.Refusals(t, register, "GET", "/v1/audit", auth.RoleRead) {
		var doc map[string]string
		err := json.Unmarshal(r.Body, &doc)
		if err != nil || len(doc) != 1 || !strings.Contains(doc["error"], r.Want) || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %s %s (%v), want {\"error\": ...} saying %q", r.Why, r.Header.Get("Content-Type"), r.Body, err, r.Want)
		}
	}
}
