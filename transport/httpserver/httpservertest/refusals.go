// Package httpservertest serves the protocols' tests of their refusals:
// Refusals registers a protocol on real httpserver.Servers, with a real
// auth.Authenticator over a tokens file and with required client
// certificates, and returns each way a call to one of its routes is
// refused, checked for its status and headers, for the test to read the
// body in the protocol's error format.
package httpservertest

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
)

// Refusal is one refused call: how it was refused, and the answer.
type Refusal struct {
	// Why is "no credentials" (401), "wrong role" (403), "over limit"
	// (429), "too many in flight" (429) or "no client certificate" (401).
	Why string
	// Code is the answer's status (checked), Header its headers and Body
	// its body.
	Code   int
	Header http.Header
	Body   []byte
	// Want is a part of the message the body must carry.
	Want string
}

// The tokens of the callers Refusals sends.
const (
	wrongToken   = "httpservertest-wrong-role"
	limitedToken = "httpservertest-limited"
	busyToken    = "httpservertest-busy"
)

// Refusals registers a protocol with register on a server with auth and on
// one requiring client certificates, and sends method path (a route of
// the protocol that needs role) without credentials, with a token lacking
// role, with one over its request limit, with one whose requests in
// flight are at auth.max_inflight_per_identity, and without a client
// certificate. It fails t unless each is answered with its status (401,
// 403, 429, 429, 401) and headers (WWW-Authenticate: Bearer on the first,
// Retry-After on the 429s, Connection: close on each), and returns the
// five answers. No answer may quote a token.
func Refusals(t testing.TB, register func(*httpserver.Server), method, path string, role auth.Role) []Refusal {
	t.Helper()
	wrong := auth.RoleAdmin
	if role == auth.RoleAdmin {
		wrong = auth.RoleInfer
	}
	var b strings.Builder
	b.WriteString("tokens:\n")
	for _, tok := range []struct {
		name, token string
		roles       string
	}{{"intruder", wrongToken, string(wrong)}, {"tiny", limitedToken, "read, " + string(role)}, {"busy", busyToken, string(role)}} {
		fmt.Fprintf(&b, "  - {name: %s, sha256: %x, roles: [%s]}\n", tok.name, sha256.Sum256([]byte(tok.token)), tok.roles)
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	a, err := auth.New(auth.Config{TokensFile: file, Now: func() time.Time { return now },
		Limits: []auth.Limit{{Name: "tiny", RPS: 0.001, Burst: 1}}, MaxInFlight: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// The busy caller has its one request in flight.
	busy, err := a.Begin(auth.Identity{Name: "busy", Method: auth.MethodToken})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.End()
	withAuth := httpserver.New(httpserver.Options{Auth: a, Status: func() any { return "ok" }, Logger: slog.New(slog.DiscardHandler)})
	register(withAuth)
	authed := withAuth.Handler()
	withCerts := httpserver.New(httpserver.Options{RequireClientCert: true, Logger: slog.New(slog.DiscardHandler)})
	register(withCerts)
	certed := withCerts.Handler()

	call := func(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	// The limited caller spends its one request on /v1/status.
	if w := call(authed, "GET", "/v1/status", limitedToken); w.Code != http.StatusOK {
		t.Fatalf("GET /v1/status as the limited caller: %d %q", w.Code, w.Body)
	}
	out := []Refusal{
		{Why: "no credentials", Code: http.StatusUnauthorized, Want: "no credentials"},
		{Why: "wrong role", Code: http.StatusForbidden, Want: `token "intruder" lacks role ` + string(role)},
		{Why: "over limit", Code: http.StatusTooManyRequests, Want: `"token:tiny" is over its request limit`},
		{Why: "too many in flight", Code: http.StatusTooManyRequests, Want: `"token:busy" has 1 requests in flight, its limit (auth.max_inflight_per_identity)`},
		{Why: "no client certificate", Code: http.StatusUnauthorized, Want: "a client certificate signed by the client CA is required"},
	}
	retryAfter := map[string]string{"over limit": "1000", "too many in flight": "1"}
	for i, w := range []*httptest.ResponseRecorder{call(authed, method, path, ""), call(authed, method, path, wrongToken),
		call(authed, method, path, limitedToken), call(authed, method, path, busyToken), call(certed, method, path, "")} {
		c := &out[i]
		if w.Code != c.Code {
			t.Errorf("%s %s, %s: %d %q, want %d", method, path, c.Why, w.Code, w.Body, c.Code)
		}
		if got, want := w.Header().Get("WWW-Authenticate"), map[bool]string{true: `Bearer realm="grove"`}[i == 0]; got != want {
			t.Errorf("%s %s, %s: WWW-Authenticate %q, want %q", method, path, c.Why, got, want)
		}
		if got, want := w.Header().Get("Retry-After"), retryAfter[c.Why]; got != want {
			t.Errorf("%s %s, %s: Retry-After %q, want %q", method, path, c.Why, got, want)
		}
		if got := w.Header().Get("Connection"); got != "close" {
			t.Errorf("%s %s, %s: Connection %q, want close", method, path, c.Why, got)
		}
		if s := w.Body.String(); strings.Contains(s, wrongToken) || strings.Contains(s, limitedToken) || strings.Contains(s, busyToken) {
			t.Errorf("%s %s, %s: the answer quotes a token: %q", method, path, c.Why, s)
		}
		c.Header, c.Body = w.Header(), w.Body.Bytes()
	}
	return out
}
