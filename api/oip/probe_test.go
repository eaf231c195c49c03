package oip

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
)

// TestOpenModelReadyPathOnlyAnswersReadiness checks that GET
// /v2/models/x/ready, let in without credentials as a model-ready probe,
// answers x's readiness when x is served, but not the metadata of a
// served model named "x/ready" (while x is not served) unless the caller
// has the role read, nor without a client certificate when one is required.
func TestOpenModelReadyPathOnlyAnswersReadiness(t *testing.T) {
	var tokens strings.Builder
	tokens.WriteString("tokens:\n")
	for tok, spec := range map[string]string{"tok-read": "console:read", "tok-infer": "bidder:infer"} {
		name, role, _ := strings.Cut(spec, ":")
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&tokens, "  - {name: %s, sha256: %s, roles: [%s]}\n", name, hex.EncodeToString(sum[:]), role)
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(tokens.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	b := &served{paths: []string{"x/ready/", "y/", "ready/"}}
	for _, c := range []struct {
		name        string
		opts        httpserver.Options
		path, authz string
		code        int
		has, hasNot string
	}{
		{"probe of a served model", httpserver.Options{Auth: a}, "/v2/models/y/ready", "", 200, `{"name":"y","ready":true}`, ""},
		{"probe of x/ready", httpserver.Options{Auth: a}, "/v2/models/x/ready/ready", "", 200, `{"name":"x/ready","ready":true}`, ""},
		{"metadata through a probe path, no credentials", httpserver.Options{Auth: a}, "/v2/models/x/ready", "", 401, `{"error":"no credentials`, `"x/ready/"`},
		{"metadata through a probe path, bad token", httpserver.Options{Auth: a}, "/v2/models/x/ready", "Bearer nope", 401, `unknown bearer token`, `"x/ready/"`},
		{"metadata through a probe path, no read role", httpserver.Options{Auth: a}, "/v2/models/x/ready", "Bearer tok-infer", 403, `lacks role read`, `"x/ready/"`},
		{"metadata through a probe path, role read", httpserver.Options{Auth: a}, "/v2/models/x/ready", "Bearer tok-read", 200, `"name":"x/ready/"`, ""},
		{"metadata through a probe path, no auth configured", httpserver.Options{}, "/v2/models/x/ready", "", 200, `"name":"x/ready/"`, ""},
		// "/v2/models/ready" ends in "/ready" but is no probe's path (no
		// model name before it): it reads the metadata of model "ready".
		{"metadata of a model named ready, no credentials", httpserver.Options{Auth: a}, "/v2/models/ready", "", 401, `{"error":"no credentials`, `"ready/"`},
		{"metadata of a model named ready, role read", httpserver.Options{Auth: a}, "/v2/models/ready", "Bearer tok-read", 200, `"name":"ready/"`, ""},
		{"client certificate required: probe", httpserver.Options{RequireClientCert: true}, "/v2/models/y/ready", "", 200, `"ready":true`, ""},
		{"client certificate required: metadata", httpserver.Options{RequireClientCert: true}, "/v2/models/x/ready", "", 401, `client certificate`, `"x/ready/"`},
	} {
		h := httpserver.New(c.opts)
		Register(h, noGRPC{}, b, "1.0", nil)
		r := httptest.NewRequest("GET", c.path, nil)
		if c.authz != "" {
			r.Header.Set("Authorization", c.authz)
		}
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, r)
		body := rec.Body.String()
		if rec.Code != c.code || !strings.Contains(body, c.has) || c.hasNot != "" && strings.Contains(body, c.hasNot) {
			t.Errorf("%s: GET %s: %d %s, want %d with %s", c.name, c.path, rec.Code, body, c.code, c.has)
		}
		if c.code == 401 && c.opts.Auth != nil && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without WWW-Authenticate: Bearer", c.name)
		}
	}
}
