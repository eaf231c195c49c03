package deeprec

import (
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsArePlainText checks that every refusal of POST and GET
// /api/predict/{model} (no or bad credentials, a missing role, over the
// limit, no client certificate) is its message as plain text, as the
// protocol's other failures, with its status and headers.
func TestRefusalsArePlainText(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, grpcserver.New(grpcserver.Options{}), nil) }
	for _, c := range []struct {
		method string
		role   auth.Role
	}{{"POST", auth.RoleInfer}, {"GET", auth.RoleRead}} {
		for _, r := range httpservertest.Refusals(t, register, c.method, PathPrefix+"ads/pctr/7/score", c.role) {
			body := string(r.Body)
			if r.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.HasPrefix(body, r.Want) || !strings.HasSuffix(body, "\n") {
				t.Errorf("%s %s: %s %q, want plain text starting %q", c.method, r.Why, r.Header.Get("Content-Type"), body, r.Want)
			}
		}
	}
}
