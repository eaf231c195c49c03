package httpserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/groveml/grove/api/auth"
	"github.com/groveml/grove/api/tlsconf"
)

// routeRole is the role auth.HTTPRoles gives pattern; with Options.Auth, a
// pattern missing there panics, as a route net/http cannot serve does.
func (s *Server) routeRole(pattern string) auth.Role {
	if s.opts.Auth == nil {
		return auth.Open
	}
	r, ok := auth.HTTPRoles[pattern]
	if !ok {
		panic(fmt.Sprintf("httpserver: route %q has no role in auth.HTTPRoles: give it one (or auth.Open)", pattern))
	}
	return r
}

// guard serves h to callers holding role, answering 401, 403 or 429
// otherwise; the caller's identity is in the request's context
// (auth.FromContext). An open route (or no Options.Auth) is h itself.
func (s *Server) guard(role auth.Role, h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Auth == nil || role == auth.Open {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r, ok := s.authorize(w, r, role); ok {
			h(w, r)
		}
	}
}

// guardMount guards the subtree at prefix with the role auth.MountRoles'
// function gives each request.
func (s *Server) guardMount(prefix string, h http.Handler) http.Handler {
	if s.opts.Auth == nil {
		return h
	}
	roleOf, ok := auth.MountRoles[prefix]
	if !ok {
		panic(fmt.Sprintf("httpserver: mount %q has no entry in auth.MountRoles", prefix))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := roleOf(r.Method, r.URL.Path)
		if role == auth.Open {
			h.ServeHTTP(w, r)
			return
		}
		if r, ok := s.authorize(w, r, role); ok {
			h.ServeHTTP(w, r)
		}
	})
}

// errNoClientCert refuses a request without the client certificate that
// tls.client_auth require asks for.
const errNoClientCert = "a client certificate signed by the client CA is required (tls.client_auth is require)"

// AuthorizeProbePath authorizes, for role, a request that was let in
// without credentials because its path is an open probe's (IsProbe,
// auth.MountRoles) but that the mounted handler reads as another endpoint
// (GET /v2/models/a/ready as the metadata of a model named "a/ready"): a
// probe path may only ever answer readiness. It enforces what the request
// would have needed: the client certificate when one is required, then
// the credentials, the role and the limit (a caller the guard already
// admitted with role passes). Refused, it answers and returns false.
func (s *Server) AuthorizeProbePath(w http.ResponseWriter, r *http.Request, role auth.Role) (*http.Request, bool) {
	if s.opts.RequireClientCert && !tlsconf.HasVerifiedClientCert(r.TLS) {
		authError(w, r, http.StatusUnauthorized, errNoClientCert)
		return nil, false
	}
	if s.opts.Auth == nil {
		return r, true
	}
	if id, ok := auth.FromContext(r.Context()); ok && id.Has(role) {
		return r, true
	}
	return s.authorize(w, r, role)
}

// authorize authenticates r's caller, checks it holds role and is within
// its limit, and returns r carrying the identity; when it is not, it
// answers and returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, role auth.Role) (*http.Request, bool) {
	id, err := s.opts.Auth.HTTP(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="grove"`)
		authError(w, r, http.StatusUnauthorized, auth.Reason(err))
		return nil, false
	}
	if !id.Has(role) {
		authError(w, r, http.StatusForbidden, fmt.Sprintf("%s %q lacks role %s", id.Method, id.Name, role))
		return nil, false
	}
	if ok, wait := s.opts.Auth.Allow(id); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(wait, time.Second).Seconds()))))
		authError(w, r, http.StatusTooManyRequests, fmt.Sprintf("%q is over its request limit", id.Name))
		return nil, false
	}
	return r.WithContext(auth.NewContext(r.Context(), id)), true
}

// authError answers a refused request in its protocol's error format: the
// Open Inference Protocol's {"error": ...} under /v2, else plain text, as
// the other protocols answer errors.
func authError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if p := r.URL.Path; p == "/v2" || strings.HasPrefix(p, "/v2/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		b, _ := json.Marshal(msg)
		_, _ = w.Write(slices.Concat([]byte(`{"error":`), b, []byte("}\n")))
		return
	}
	http.Error(w, msg, code)
}

// Route is a route or mount of the server and the role it needs.
type Route struct {
	// Pattern is the route's pattern, or a mount's prefix followed by "/...".
	Pattern string
	// Role is the role it needs (auth.Open for none); a mount's requests
	// may need different ones (auth.MountRoles).
	Role auth.Role
}

// Routes lists the routes and mounts Handler serves (the server's own
// among them), in the order they were added, with their roles from
// auth.HTTPRoles (a mount's is its role for a GET of its prefix).
func (s *Server) Routes() []Route {
	var out []Route
	add := func(p string) { out = append(out, Route{Pattern: p, Role: auth.HTTPRoles[p]}) }
	add("GET /healthz")
	add("GET /readyz")
	if s.opts.Status != nil {
		add("GET /v1/status")
	}
	if s.opts.Gatherer != nil {
		add("GET /metrics")
	}
	for _, r := range s.routes {
		add(r.pattern)
	}
	mounts := slices.Clone(s.mounts)
	if s.opts.Pprof {
		mounts = append(mounts, mount{prefix: "/debug/pprof"})
	}
	for _, m := range mounts {
		role := auth.Open
		if f, ok := auth.MountRoles[m.prefix]; ok {
			role = f(http.MethodGet, m.prefix)
		}
		out = append(out, Route{Pattern: m.prefix + "/...", Role: role})
	}
	return out
}
