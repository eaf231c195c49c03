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

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/tlsconf"
)

// The roles of the server's own endpoints (the probes, GET /healthz and
// /readyz, are open).
const (
	statusRole  = auth.RoleRead  // GET /v1/status
	metricsRole = auth.RoleRead  // GET /metrics
	pprofRole   = auth.RoleAdmin // everything under /debug/pprof
)

// RoleFunc gives the role a request to a mounted subtree needs, from its
// method and path (auth.Open for none).
type RoleFunc func(method, path string) auth.Role

// Always is the RoleFunc of a subtree whose every request needs role.
func Always(role auth.Role) RoleFunc {
	return func(string, string) auth.Role { return role }
}

// mustRole panics, naming the route or mount what, unless role is one a
// route can need (auth.CheckRequired): a wiring mistake, which net/http
// answers the same way for a pattern it cannot serve.
func mustRole(what string, role auth.Role) {
	if err := auth.CheckRequired(role); err != nil {
		panic(fmt.Sprintf("httpserver: %s has no valid role: %v", what, err))
	}
}

// ErrorWriter answers a request the server refused before its handler
// ran (401 without valid credentials or without a required client
// certificate, 403 for a missing role, 429 past a limit) with code and
// msg, in the error format of the protocol that owns the route. Headers
// the refusal needs (WWW-Authenticate, Retry-After, and Connection: close:
// a refused caller's connection is closed after the answer) are set
// before it is called; it sets Content-Type, writes code and the body.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, code int, msg string)

// TextError is the ErrorWriter of plain text (http.Error): the server's
// /metrics and pprof, and any route whose protocol registers none.
func TextError(w http.ResponseWriter, _ *http.Request, code int, msg string) {
	http.Error(w, msg, code)
}

// JSONError is the ErrorWriter of {"error": msg}, the Open Inference
// Protocol's error object, which Grove's own JSON routes (/v1/status,
// /v1/audit) answer too.
func JSONError(w http.ResponseWriter, _ *http.Request, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(msg)
	_, _ = w.Write(slices.Concat([]byte(`{"error":`), b, []byte("}\n")))
}

// SetErrorWriter makes ew answer the refusals of the routes Handle adds
// under api (its metrics label, "inference"), or of the mount whose prefix
// is api ("/v2"), so that each protocol answers them in its own error
// format; call it while setting up, before Handler. Without one, refusals
// are plain text (TextError); GET /v1/status answers JSONError.
func (s *Server) SetErrorWriter(api string, ew ErrorWriter) {
	s.errs[strings.TrimSuffix(api, "/")] = ew
}

// errorWriter is the ErrorWriter of api (a label or a mount's prefix).
func (s *Server) errorWriter(api string) ErrorWriter {
	if ew, ok := s.errs[api]; ok {
		return ew
	}
	return TextError
}

// guard serves h to callers holding role, answering 401, 403 or 429 with
// api's ErrorWriter otherwise, and 401 to a caller without a required
// client certificate (Options.RequireClientCert); the caller's identity
// is in the request's context (auth.FromContext), and the request counts
// among its requests in flight while h runs. A refusal closes the
// connection; an admitted request gets the read deadline of a known
// caller (admitted). An open route without required certificates (or
// with neither Options.Auth nor them) is h itself.
func (s *Server) guard(role auth.Role, api string, h http.HandlerFunc) http.HandlerFunc {
	cert := s.opts.RequireClientCert
	if !cert && (s.opts.Auth == nil || role == auth.Open) {
		if !s.callerUnknownFirst() {
			return h
		}
		return func(w http.ResponseWriter, r *http.Request) {
			s.admitted(w)
			h(w, r)
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if cert && s.refuseCert(w, r, api) {
			return
		}
		if s.opts.Auth == nil || role == auth.Open {
			s.admitted(w)
			h(w, r)
			return
		}
		if r, f, ok := s.authorize(w, r, role, api); ok {
			defer f.End()
			h(w, r)
		}
	}
}

// guardMount guards the subtree at prefix with the role roleOf gives each
// request, answering refusals with prefix's ErrorWriter.
func (s *Server) guardMount(prefix string, roleOf RoleFunc, h http.Handler) http.Handler {
	cert := s.opts.RequireClientCert
	if s.opts.Auth == nil && !cert {
		return h
	}
	if s.opts.Auth == nil {
		roleOf = Always(auth.Open)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cert && s.refuseCert(w, r, prefix) {
			return
		}
		role := roleOf(r.Method, r.URL.Path)
		if role == auth.Open {
			s.admitted(w)
			h.ServeHTTP(w, r)
			return
		}
		if r, f, ok := s.authorize(w, r, role, prefix); ok {
			defer f.End()
			h.ServeHTTP(w, r)
		}
	})
}

// AuthorizeProbePath authorizes, for role, a request that was let in
// without credentials because its path is an open probe's (IsProbe, and
// its mount's RoleFunc) but that the mounted handler reads as another
// endpoint (GET /v2/models/a/ready as the metadata of a model named
// "a/ready"): a probe path may only ever answer readiness. It enforces
// what the request would have needed: the client certificate when one is
// required, then the credentials, the role and the limits (a caller the
// guard already admitted with role passes); call the InFlight's End when
// the request is answered. Refused, it answers with the ErrorWriter
// registered for api (a Handle label or a Mount prefix) and returns false.
func (s *Server) AuthorizeProbePath(w http.ResponseWriter, r *http.Request, role auth.Role, api string) (*http.Request, auth.InFlight, bool) {
	if s.opts.RequireClientCert && !tlsconf.HasVerifiedClientCert(r.TLS) {
		s.refuse(w, r, api, http.StatusUnauthorized, certRequired)
		return nil, auth.InFlight{}, false
	}
	if s.opts.Auth == nil {
		return r, auth.InFlight{}, true
	}
	if id, ok := auth.FromContext(r.Context()); ok && id.May(role) {
		return r, auth.InFlight{}, true
	}
	return s.authorize(w, r, role, api)
}

// certRequired is the answer to a caller without a required client
// certificate.
const certRequired = "a client certificate signed by the client CA is required (tls.client_auth is require)"

// refuseCert answers 401 with api's ErrorWriter and returns true when r
// has no verified client certificate and is not a probe.
func (s *Server) refuseCert(w http.ResponseWriter, r *http.Request, api string) bool {
	if tlsconf.HasVerifiedClientCert(r.TLS) || IsProbe(r.Method, r.URL.Path) {
		return false
	}
	s.refuse(w, r, api, http.StatusUnauthorized, certRequired)
	return true
}

// authorize authenticates r's caller, checks it may call a route needing role
// (auth.Identity.May: it holds it, or manage for feedback) and is within
// its limits, and returns r carrying the identity, with the read deadline
// of a known caller (admitted), counted among the caller's requests in
// flight until the InFlight's End; when it is not, it answers with api's
// ErrorWriter (refuse) and returns false.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, role auth.Role, api string) (*http.Request, auth.InFlight, bool) {
	id, err := s.opts.Auth.HTTP(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="grove"`)
		s.refuse(w, r, api, http.StatusUnauthorized, auth.Reason(err))
		return nil, auth.InFlight{}, false
	}
	if !id.May(role) {
		s.refuse(w, r, api, http.StatusForbidden, fmt.Sprintf("%s %q lacks role %s", id.Method, id.Name, role))
		return nil, auth.InFlight{}, false
	}
	f, err := s.opts.Auth.Begin(id)
	if err != nil {
		s.refuseOverLimit(w, r, api, time.Second, err.Error())
		return nil, auth.InFlight{}, false
	}
	if ok, wait := s.opts.Auth.Allow(id); !ok {
		f.End()
		s.refuseOverLimit(w, r, api, wait, fmt.Sprintf("%q is over its request limit", id.Qualified()))
		return nil, auth.InFlight{}, false
	}
	s.admitted(w)
	return r.WithContext(auth.NewContext(r.Context(), id)), f, true
}

// refuseOverLimit refuses with 429 and msg, with Retry-After wait (whole
// seconds, at least 1): the refusal of a caller over one of its own
// limits (its request rate, its requests in flight), never of a server
// that is full; like every refusal (refuse) it closes the connection.
func (s *Server) refuseOverLimit(w http.ResponseWriter, r *http.Request, api string, wait time.Duration, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(wait, time.Second).Seconds()))))
	s.refuse(w, r, api, http.StatusTooManyRequests, msg)
}

// refuse answers a request refused before its handler ran with code and
// msg in api's error format, whole and at once, and closes its connection
// after the answer (Connection: close): the refused caller keeps no
// connection open for free, and net/http, which would otherwise read up
// to 256 KiB of an unread body before it writes the answer, writes it
// without waiting for the body (what is left of it is read after the
// answer, within the short read deadline of a caller not known yet:
// Server.linger).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, api string, code int, msg string) {
	w.Header().Set("Connection", "close")
	a := &heldAnswer{w: w}
	s.errorWriter(api)(a, r, code, msg)
	a.send()
}

// Route is a route or mount of the server and the role it needs.
type Route struct {
	// Pattern is the route's pattern, or a mount's prefix followed by "/...".
	Pattern string
	// Role is the role it needs (auth.Open for none); a mount's requests
	// may need different ones (its RoleFunc's): this is its role for a GET
	// of its prefix.
	Role auth.Role
}

// Routes lists the routes and mounts Handler serves (the server's own
// among them), in the order they were added, with the roles they were
// declared with (a mount's is its role for a GET of its prefix).
func (s *Server) Routes() []Route {
	out := []Route{{"GET /healthz", auth.Open}, {"GET /readyz", auth.Open}}
	if s.opts.Status != nil {
		out = append(out, Route{"GET /v1/status", statusRole})
	}
	if s.opts.Gatherer != nil {
		out = append(out, Route{"GET /metrics", metricsRole})
	}
	for _, r := range s.routes {
		out = append(out, Route{r.pattern, r.role})
	}
	mounts := slices.Clone(s.mounts)
	if s.opts.Pprof {
		mounts = append(mounts, mount{prefix: "/debug/pprof", roleOf: Always(pprofRole)})
	}
	for _, m := range mounts {
		out = append(out, Route{m.prefix + "/...", m.roleOf(http.MethodGet, m.prefix)})
	}
	return out
}
