package graphpipe

import (
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsArePlainText checks that every refusal of POST .../gp is
// the refusal's message as plain text, as GraphPipe's clients read a
// failed answer, and keeps its status and headers.
func TestRefusalsArePlainText(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil) }
	for _, r := range httpservertest.Refusals(t, register, "POST", "/ads/pctr/7/gp", auth.RoleInfer) {
		body := string(r.Body)
		if r.Header.Get("Content-Type") != "text/plain; charset=utf-8" || len(body) < len(r.Want) || body[:len(r.Want)] != r.Want || body[len(body)-1] != '\n' {
			t.Errorf("%s: %s %q, want plain text starting %q", r.Why, r.Header.Get("Content-Type"), body, r.Want)
		}
	}
}
