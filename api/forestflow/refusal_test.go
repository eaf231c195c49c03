package forestflow

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsAreErrorResponses checks that every refusal of the score and
// contract read routes is ForestFlow's UnknownServableError body, naming
// the contract and release of the path and carrying the refusal's
// message, and keeps its status and headers.
func TestRefusalsAreErrorResponses(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil) }
	for _, c := range []struct {
		method, path string
		role         auth.Role
		fqrv         string
	}{
		{"POST", "/ads/pctr/7/score", auth.RoleInfer, `{"contract":{"organization":"ads","project":"pctr","contractNumber":7},"releaseVersion":""}`},
		{"POST", "/ads/pctr/7/r1/score", auth.RoleInfer, `{"contract":{"organization":"ads","project":"pctr","contractNumber":7},"releaseVersion":"r1"}`},
		{"GET", "/ads/pctr/x/stats", auth.RoleRead, `{"contract":{"organization":"ads","project":"pctr","contractNumber":0},"releaseVersion":""}`},
		{"GET", "/contracts/list", auth.RoleRead, `{"contract":{"organization":"","project":"","contractNumber":0},"releaseVersion":""}`},
	} {
		for _, r := range httpservertest.Refusals(t, register, c.method, c.path, c.role) {
			var doc map[string]struct {
				FQRV         json.RawMessage `json:"fqrv"`
				ErrorMessage string          `json:"errorMessage"`
			}
			err := json.Unmarshal(r.Body, &doc)
			e, ok := doc[string(UnknownServableError)]
			if err != nil || len(doc) != 1 || !ok || string(e.FQRV) != c.fqrv || !strings.Contains(e.ErrorMessage, r.Want) ||
				r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s, %s: %s %s (%v), want UnknownServableError of %s saying %q", c.method, c.path, r.Why,
					r.Header.Get("Content-Type"), r.Body, err, c.fqrv, r.Want)
			}
		}
	}
}
