package httpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/auth"
)

// v2Role stands in for the OIP API's RoleFunc (oip.RESTRole, in a layer
// above): its probes open, inference infer, repository loads manage, the
// rest read.
func v2Role(method, path string) auth.Role {
	switch {
	case IsProbe(method, path):
		return auth.Open
	case strings.HasSuffix(path, "/infer"):
		return auth.RoleInfer
	case strings.HasPrefix(path, "/v2/repository/models/"):
		return auth.RoleManage
	}
	return auth.RoleRead
}

// newAuth returns an authenticator of tokens (token → "name:role,role"),
// with limits, on clock now.
func newAuth(t testing.TB, tokens map[string]string, limits []auth.Limit, now func() time.Time) *auth.Authenticator {
	t.Helper()
	var b strings.Builder
	b.WriteString("tokens:\n")
	for tok, spec := range tokens {
		name, roles, _ := strings.Cut(spec, ":")
		h := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&b, "  - {name: %s, sha256: %s, roles: [%s]}\n", name, hex.EncodeToString(h[:]), roles)
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: path, Limits: limits, Now: now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthRefusesAndAdmitsByRole(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newAuth(t, map[string]string{"tok-infer": "bidder:infer", "tok-read": "console:read", "tok-limited": "tiny:infer"},
		[]auth.Limit{{Name: "tiny", RPS: 1, Burst: 1}}, func() time.Time { return now })
	reg := prometheus.NewRegistry()
	s := New(Options{Auth: a, Status: func() any { return "ok" }, Gatherer: reg, Pprof: true})
	var seen []string
	who := func(w http.ResponseWriter, r *http.Request) {
		id, ok := auth.FromContext(r.Context())
		seen = append(seen, fmt.Sprintf("%s/%v", id.Name, ok))
		_, _ = io.WriteString(w, "served\n")
	}
	s.Handle("POST /v1/inference", auth.RoleInfer, "inference", who)
	s.Handle("GET /v1/models", auth.RoleRead, "models", who)
	s.Mount("/v2", v2Role, http.HandlerFunc(who))
	s.SetErrorWriter("/v2", JSONError)
	h := s.Handler()
	for _, c := range []struct {
		method, path, authz string
		code                int
		body                string
	}{
		{"GET", "/healthz", "", 200, "ok"},
		{"GET", "/readyz", "", 200, "ready"},
		{"GET", "/v2/health/live", "", 200, "served"},
		{"GET", "/v2/models/m/ready", "", 200, "served"},
		{"POST", "/v1/inference", "", 401, "no credentials"},
		{"POST", "/v1/inference", "Bearer nope", 401, "unknown bearer token"},
		{"POST", "/v1/inference", "Basic abc", 401, "Bearer <token>"},
		{"POST", "/v1/inference", "Bearer tok-read", 403, `token "console" lacks role infer`},
		{"POST", "/v1/inference", "Bearer tok-infer", 200, "served"},
		{"GET", "/v1/models", "Bearer tok-read", 200, "served"},
		{"GET", "/v1/status", "", 401, ""},
		{"GET", "/v1/status", "Bearer tok-read", 200, "ok"},
		{"GET", "/metrics", "Bearer tok-infer", 403, "lacks role read"},
		{"GET", "/metrics", "Bearer tok-read", 200, ""},
		{"GET", "/debug/pprof/", "Bearer tok-read", 403, "lacks role admin"},
		{"POST", "/v2/models/m/infer", "", 401, `{"error":"no credentials`},
		{"POST", "/v2/models/m/infer", "Bearer tok-read", 403, `{"error":"token \"console\" lacks role infer"}`},
		{"POST", "/v2/models/m/infer", "Bearer tok-infer", 200, "served"},
		{"POST", "/v2/repository/models/m/load", "Bearer tok-infer", 403, "lacks role manage"},
		{"POST", "/v1/inference", "Bearer tok-limited", 200, "served"},
		{"POST", "/v1/inference", "Bearer tok-limited", 429, `"token:tiny" is over its request limit`},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.authz != "" {
			r.Header.Set("Authorization", c.authz)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.String()
		if rec.Code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s %s (%s): %d %q, want %d %q", c.method, c.path, c.authz, rec.Code, body, c.code, c.body)
		}
		if got := rec.Header().Get("WWW-Authenticate"); (c.code == 401) != (got != "") || got != "" && !strings.HasPrefix(got, "Bearer") {
			t.Errorf("%s %s: WWW-Authenticate %q", c.method, c.path, got)
		}
		if c.code == 429 && rec.Header().Get("Retry-After") != "1" {
			t.Errorf("429 without Retry-After: 1: %q", rec.Header().Get("Retry-After"))
		}
		if strings.Contains(body, "tok-") {
			t.Errorf("%s %s: the answer quotes a token: %q", c.method, c.path, body)
		}
	}
	if want := "[/false /false bidder/true console/true bidder/true tiny/true]"; fmt.Sprint(seen) != want {
		t.Errorf("identities seen by handlers: %v, want %s", seen, want)
	}
}

// TestRefusalsUseTheRoutesErrorWriter checks that each refusal (401, 403,
// 429 and a missing client certificate) is answered by the ErrorWriter of
// the route's api label or mount, with the status and headers unchanged,
// and that routes without one, /metrics and pprof answer plain text and
// /v1/status JSON.
func TestRefusalsUseTheRoutesErrorWriter(t *testing.T) {
	now := time.Unix(1000, 0)
	a := newAuth(t, map[string]string{"tok-read": "console:read", "tok-limited": "tiny:read,infer"},
		[]auth.Limit{{Name: "tiny", RPS: 1, Burst: 1}}, func() time.Time { return now })
	tagged := func(tag string) ErrorWriter {
		return func(w http.ResponseWriter, r *http.Request, code int, msg string) {
			w.Header().Set("Content-Type", "text/x-"+tag)
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, "%s %d %s: %s", tag, code, r.URL.Path, msg)
		}
	}
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") }
	for _, cert := range []bool{false, true} {
		s := New(Options{Auth: a, Status: func() any { return "ok" }, Gatherer: prometheus.NewRegistry(), Pprof: true, RequireClientCert: cert})
		s.Handle("POST /v1/inference", auth.RoleInfer, "inference", ok)
		s.Handle("GET /v1/models", auth.RoleRead, "models", ok)
		s.Handle("POST /{org}/{project}/{n}/score", auth.RoleInfer, "forestflow", ok)
		s.Handle("POST /contract/{org}/{project}/{n}", auth.RoleManage, "manage", ok)
		s.Handle("GET /v1/audit", auth.RoleRead, "audit", ok)
		s.Mount("/v2", v2Role, http.HandlerFunc(ok))
		s.SetErrorWriter("inference", tagged("ba"))
		s.SetErrorWriter("forestflow", tagged("ff"))
		s.SetErrorWriter("manage", tagged("mg"))
		s.SetErrorWriter("/v2/", tagged("oip"))
		h := s.Handler()
		for _, c := range []struct {
			method, path, authz string
			code                int
			ctype, body         string
		}{
			{"POST", "/v1/inference", "", 401, "text/x-ba", "ba 401 /v1/inference: no credentials"},
			{"POST", "/v1/inference", "Bearer tok-read", 403, "text/x-ba", `ba 403 /v1/inference: token "console" lacks role infer`},
			{"GET", "/v1/models", "", 401, "text/plain; charset=utf-8", "no credentials"},
			{"POST", "/a/b/1/score", "Bearer tok-read", 403, "text/x-ff", "ff 403 /a/b/1/score: "},
			{"POST", "/contract/a/b/1", "Bearer tok-read", 403, "text/x-mg", "mg 403 /contract/a/b/1: "},
			{"GET", "/v1/audit", "", 401, "text/plain; charset=utf-8", "no credentials"},
			{"POST", "/v2/models/m/infer", "Bearer tok-read", 403, "text/x-oip", "oip 403 /v2/models/m/infer: "},
			{"GET", "/v1/status", "", 401, "application/json", `{"error":"no credentials`},
			{"GET", "/metrics", "", 401, "text/plain; charset=utf-8", "no credentials"},
			{"GET", "/debug/pprof/", "Bearer tok-read", 403, "text/plain; charset=utf-8", "lacks role admin"},
			{"POST", "/v1/inference", "Bearer tok-limited", 200, "text/plain; charset=utf-8", "served"},
			{"POST", "/v1/inference", "Bearer tok-limited", 429, "text/x-ba", `ba 429 /v1/inference: "token:tiny" is over its request limit`},
		} {
			r := httptest.NewRequest(c.method, c.path, nil)
			if c.authz != "" {
				r.Header.Set("Authorization", c.authz)
			}
			code, ctype, body := c.code, c.ctype, c.body
			if cert {
				// Without a client certificate, every route is refused
				// first, by its writer, with no WWW-Authenticate.
				code, body = 401, "client certificate"
				if tag, _, ok := strings.Cut(c.body, " "+strconv.Itoa(c.code)+" "); ok {
					body = tag + " 401 " + c.path + ": a client certificate"
				}
				if c.code == 200 {
					ctype, body = "text/x-ba", "ba 401 /v1/inference: a client certificate"
				}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			got := rec.Body.String()
			what := fmt.Sprintf("cert=%v %s %s (%s)", cert, c.method, c.path, c.authz)
			if rec.Code != code || rec.Header().Get("Content-Type") != ctype || !strings.Contains(got, body) {
				t.Errorf("%s: %d %q %q, want %d %q %q", what, rec.Code, rec.Header().Get("Content-Type"), got, code, ctype, body)
			}
			if cert && !strings.Contains(got, "client certificate") {
				t.Errorf("%s: %q does not name the client certificate", what, got)
			}
			if wa := rec.Header().Get("WWW-Authenticate"); (code == 401 && !cert) != (wa == `Bearer realm="grove"`) {
				t.Errorf("%s: WWW-Authenticate %q", what, wa)
			}
			if ra := rec.Header().Get("Retry-After"); (code == 429) != (ra == "1") {
				t.Errorf("%s: Retry-After %q", what, ra)
			}
		}
		if cert {
			// A path no route serves is refused as plain text, as before.
			for _, p := range []string{"/nowhere", "/a/b/1/nowhere"} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("POST", p, nil))
				if rec.Code != 401 || !strings.Contains(rec.Body.String(), "client certificate") {
					t.Errorf("POST %s without a certificate: %d %q", p, rec.Code, rec.Body.String())
				}
			}
		}
	}
}

// TestRegistrationRefusesARouteWithoutAValidRole: Handle and Mount
// panic, naming the route or mount, for an empty role or one no route can
// need, with authentication on or off; nothing is added.
func TestRegistrationRefusesARouteWithoutAValidRole(t *testing.T) {
	refused := func(t *testing.T, want string, register func()) {
		t.Helper()
		defer func() {
			t.Helper()
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("recover() = %v, want %q", r, want)
			}
		}()
		register()
	}
	nop := func(http.ResponseWriter, *http.Request) {}
	for _, opts := range []Options{{Auth: newAuth(t, nil, nil, time.Now)}, {}} {
		s := New(opts)
		refused(t, `route "POST /new" has no valid role: no role given`, func() { s.Handle("POST /new", "", "new", nop) })
		refused(t, `route "POST /new" has no valid role: "root" is not a role`, func() { s.Handle("POST /new", "root", "new", nop) })
		refused(t, `mount "/sub" has no RoleFunc`, func() { s.Mount("/sub", nil, http.HandlerFunc(nop)) })
		refused(t, `mount "/sub" has no valid role: "root" is not a role`, func() { s.Mount("/sub/", Always("root"), http.HandlerFunc(nop)) })
		if got := fmt.Sprint(s.Routes()); got != "[{GET /healthz open} {GET /readyz open}]" {
			t.Errorf("Routes() after refused registrations = %s", got)
		}
	}
}

func TestRoutesListsEveryRouteWithItsRole(t *testing.T) {
	s := New(Options{Gatherer: prometheus.NewRegistry(), Status: func() any { return nil }, Pprof: true})
	s.Handle("POST /v1/inference", auth.RoleInfer, "inference", func(http.ResponseWriter, *http.Request) {})
	s.Mount("/v2/", v2Role, http.NotFoundHandler())
	want := "[{GET /healthz open} {GET /readyz open} {GET /v1/status read} {GET /metrics read} {POST /v1/inference infer} {/v2/... read} {/debug/pprof/... admin}]"
	if got := fmt.Sprint(s.Routes()); got != want {
		t.Errorf("Routes() = %s\nwant %s", got, want)
	}
}

// BenchmarkAuthGuard serves a route through the whole handler without
// authentication and with a static token: the difference is what the
// auth check adds to a request.
func BenchmarkAuthGuard(b *testing.B) {
	for _, c := range []struct {
		name string
		auth bool
	}{{"no_auth", false}, {"static_token", true}} {
		b.Run(c.name, func(b *testing.B) {
			opts := Options{}
			if c.auth {
				opts.Auth = newAuth(b, map[string]string{"bench-token-0123456789": "bidder:infer"}, nil, time.Now)
			}
			s := New(opts)
			s.Handle("POST /v1/inference", auth.RoleInfer, "inference", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
			h := s.Handler()
			r := httptest.NewRequest("POST", "/v1/inference", nil)
			r.Header.Set("Authorization", "Bearer bench-token-0123456789")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
			if w.Code != 204 {
				b.Fatal(w.Code)
			}
		})
	}
}
