// Package httpserver is the protocol-free part of Grove's HTTP API: one
// handler for the routes every protocol package adds, with request metrics,
// pooled body reading under a size limit (413), with gzip and deflate
// request bodies decoded (Content-Encoding), X-Request-Id, the
// Grove-Config-* headers, and the server's own endpoints (health,
// readiness, status, metrics, pprof), and the hardening every route gets:
// per-handler read and write deadlines (a short read deadline until the
// caller is known), required client certificates, refusals that close the
// connection without waiting for the body, a 413 from Content-Length before
// any of the body is read and a lingering close after it, and the
// http.Server limits (NewHTTPServer, which also guards HTTP/2 over TLS
// against rapid reset: h2guard), and the same on Grove's own HTTP/1.1
// server (NewH1Server, which hands HTTP/2 to such an http.Server). With
// AdminAPIs, the management routes
// and mounts named there (the web console's), /metrics and pprof move to
// a second handler (AdminHandler).
//
// Protocol packages add their routes with Handle, which resolves route
// shapes that overlap (see Handle), and whole subtrees with Mount (the OIP
// API owns /v2), each with the role it needs, and the ErrorWriter that
// answers their refusals in their own error format with SetErrorWriter.
// The server knows no protocol: it declares the roles of its own
// endpoints only.
package httpserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/reqid"
	"github.com/groveml/grove/internal/urlspace"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/connlimit"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/tlsconf"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Server.
type Options struct {
	// MaxBodyBytes rejects larger request bodies with 413; 0 means 64 MiB.
	MaxBodyBytes int64
	// Logger receives request errors; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the HTTP metrics and Gatherer serves /metrics; nil means none.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Ready answers /readyz (200 or 503); nil means always ready.
	Ready func() bool
	// Status is the document GET /v1/status serves as JSON; nil serves none.
	Status func() any
	// Auth authenticates the callers of every route whose role (declared
	// with Handle, or by a mount's RoleFunc) is not auth.Open, and applies
	// their limits; nil serves every route without authentication.
	Auth Authenticator
	// AdminAPIs, when set, names the APIs (Handle's api argument) and
	// mounts (Mount's prefix, "/ui") that AdminHandler serves instead of
	// Handler, with /metrics and pprof: the scoring port can be exposed
	// without them.
	AdminAPIs []string
	// ReadTimeout bounds reading a request's body and WriteTimeout writing
	// its answer, from when the handler starts (http.ResponseController);
	// pprof's profile and trace get their seconds on top. 0 means none.
	// With Auth or RequireClientCert, a request's read deadline is
	// ReadHeaderTimeout from when the handler starts until its caller is
	// known (its route admits it), and ReadTimeout from then on.
	ReadTimeout, WriteTimeout time.Duration
	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes configure the
	// http.Server of NewHTTPServer; 0 means net/http's default.
	ReadHeaderTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                 int
	// RequireClientCert refuses every route but the probes (IsProbe) with
	// 401 to a caller without a client certificate verified by TLS.
	RequireClientCert bool
	// TracerProvider, when set, gives every instrumented route (Instrument)
	// a server span continuing the caller's traceparent (package
	// tracing); nil traces nothing.
	TracerProvider trace.TracerProvider
}

// Authenticator is what the server asks about a request's caller
// (*auth.Authenticator is one).
type Authenticator interface {
	// HTTP returns the caller of r, or an error wrapping
	// auth.ErrUnauthenticated that says why there is none.
	HTTP(r *http.Request) (auth.Identity, error)
	// Allow takes one request from id's limit, or returns false and when
	// to retry.
	Allow(id auth.Identity) (ok bool, retryAfter time.Duration)
	// Begin counts a request of id in flight until its End, or returns
	// an error, for the caller, when id has too many in flight already.
	Begin(id auth.Identity) (auth.InFlight, error)
}

// Server gathers the routes of the protocols it serves; Handler serves them.
// Handle and Mount are for setting up, before Handler is called.
type Server struct {
	opts     Options
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bufs     sync.Pool
	// recs are Instrument's StatusRecorders, one per request in flight.
	recs   sync.Pool
	dec    decoders
	routes []route
	mounts []mount
	errs   map[string]ErrorWriter // by api label or mount prefix (SetErrorWriter)
}

// mount is a subtree served by one handler.
type mount struct {
	prefix string
	roleOf RoleFunc
	h      http.Handler
}

// New returns a Server with no protocol routes yet.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 64 << 20
	}
	if opts.Ready == nil {
		opts.Ready = func() bool { return true }
	}
	s := &Server{opts: opts, errs: map[string]ErrorWriter{"status": JSONError},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_http_requests_total",
			Help: "HTTP requests by API and status code.",
		}, []string{"api", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grove_http_request_duration_seconds",
			Help:    "HTTP request latency by API, from the first byte read to the last byte written.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"api"}),
	}
	s.bufs.New = func() any { b := make([]byte, 0, 16<<10); return &b }
	s.recs.New = func() any { return new(StatusRecorder) }
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(s.requests, s.latency)
	}
	return s
}

// Logger is the logger the protocols report request errors to.
func (s *Server) Logger() *slog.Logger { return s.opts.Logger }

// Handle serves pattern (net/http's syntax, with a method:
// "POST /{org}/{project}/{n}/score") with h to callers holding role,
// counted in the metrics under api. Patterns whose shapes overlap
// without one being more specific, which net/http refuses
// (POST /contract/{org}/{project}/{n} and
// POST /{org}/{project}/{n}/score), are served together: the path is
// compared with them from its last segment backwards, and at the first
// segment where one route has a literal and the other a wildcard, the
// literal wins (so /contract/a/b/score scores contract contract/a/b).
//
// role is auth.Open for a route that needs no credentials, else one of
// auth.Roles, which Options.Auth checks; Handle panics, naming the route,
// for any other (an empty one among them), so that no route goes
// unprotected by accident. Refusals are answered by api's ErrorWriter
// (SetErrorWriter).
func (s *Server) Handle(pattern string, role auth.Role, api string, h http.HandlerFunc) {
	mustRole(fmt.Sprintf("route %q", pattern), role)
	r := newRoute(pattern, s.Instrument(api, s.guard(role, api, h)))
	r.api, r.role = api, role
	s.routes = append(s.routes, r)
}

// Mount serves the path prefix and every path below it (prefix + "/...")
// with h, before any route: a protocol that owns a subtree routes it
// itself. h is not instrumented; wrap its handlers with Instrument.
// Each request needs the role roleOf gives its method and path, which
// Options.Auth checks (auth.Open for none); Mount panics, naming the
// prefix, without a roleOf or when its role for a GET of prefix is not
// one a route can need (auth.CheckRequired). Refusals are answered by
// prefix's ErrorWriter (SetErrorWriter).
func (s *Server) Mount(prefix string, roleOf RoleFunc, h http.Handler) {
	prefix = strings.TrimSuffix(prefix, "/")
	if roleOf == nil {
		panic(fmt.Sprintf("httpserver: mount %q has no RoleFunc: give it one (Always(auth.Open) for an open subtree)", prefix))
	}
	mustRole(fmt.Sprintf("mount %q", prefix), roleOf(http.MethodGet, prefix))
	s.mounts = append(s.mounts, mount{prefix: prefix, roleOf: roleOf, h: s.guardMount(prefix, roleOf, h)})
}

// Handler returns the handler of every route and mount added so far, and
// of the server's own endpoints: GET /healthz, /readyz, /v1/status (with
// Options.Status), /metrics (with Options.Gatherer) and /debug/pprof/
// (with Options.Pprof); with Options.AdminAPIs, all but those APIs,
// /metrics and pprof. It panics, as net/http does, if two routes have the
// same shape.
func (s *Server) Handler() http.Handler {
	if len(s.opts.AdminAPIs) == 0 {
		return s.handler(s.routes, s.mounts, true, true)
	}
	return s.handler(s.selectRoutes(false), s.selectMounts(false), true, false)
}

// AdminHandler returns the handler of the routes and mounts of
// Options.AdminAPIs, /metrics, pprof and the probes; nil without
// Options.AdminAPIs.
func (s *Server) AdminHandler() http.Handler {
	if len(s.opts.AdminAPIs) == 0 {
		return nil
	}
	return s.handler(s.selectRoutes(true), s.selectMounts(true), false, true)
}

// selectMounts returns the mounts whose prefix Options.AdminAPIs names,
// or all others.
func (s *Server) selectMounts(admin bool) []mount {
	return selectAdmin(s.mounts, s.opts.AdminAPIs, admin, func(m mount) string { return m.prefix })
}

// selectRoutes returns the routes of Options.AdminAPIs, or all others.
func (s *Server) selectRoutes(admin bool) []route {
	return selectAdmin(s.routes, s.opts.AdminAPIs, admin, func(r route) string { return r.api })
}

// selectAdmin returns the items whose name is in adminAPIs if admin, else
// the others.
func selectAdmin[T any](items []T, adminAPIs []string, admin bool, name func(T) string) []T {
	var out []T
	for _, it := range items {
		if slices.Contains(adminAPIs, name(it)) == admin {
			out = append(out, it)
		}
	}
	return out
}

// handler serves routes and mounts, the probes, /v1/status if status, and
// /metrics and pprof if admin. Routes under a reserved first segment
// (urlspace: /api/, /ui/, /v1/, /v2/, /debug/) go to a mux of their own,
// which serves every request under those segments: such a request never
// reaches a route whose first segment is a wildcard (ForestFlow's
// /{org}/{project}/{n}/...), which net/http would otherwise match it to, or
// refuse to register beside a route such as /api/predict/{model...}.
func (s *Server) handler(routes []route, mounts []mount, status, admin bool) http.Handler {
	mux, reserved := http.NewServeMux(), http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.opts.Ready() {
			http.Error(w, "not ready\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	if status && s.opts.Status != nil {
		reserved.HandleFunc("GET /v1/status", s.Instrument("status", s.guard(statusRole, "status", func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, s.opts.Status())
		})))
	}
	if admin && s.opts.Gatherer != nil {
		mux.Handle("GET /metrics", s.guard(metricsRole, "metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
	}
	notFound := func(w http.ResponseWriter, r *http.Request) {
		if s.opts.RequireClientCert && s.refuseCert(w, r, "") {
			return
		}
		http.NotFound(w, r)
	}
	var open, under []route
	for _, r := range routes {
		if urlspace.ReservedPath(patternPath(r.pattern)) {
			under = append(under, r)
		} else {
			open = append(open, r)
		}
	}
	registerRoutes(mux, open, notFound)
	registerRoutes(reserved, under, notFound)
	if admin && s.opts.Pprof {
		debug := http.NewServeMux()
		debug.HandleFunc("GET /debug/pprof/", pprof.Index)
		debug.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		debug.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		debug.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		debug.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mounts = append(mounts[:len(mounts):len(mounts)], mount{prefix: "/debug/pprof", roleOf: Always(pprofRole), h: s.guardMount("/debug/pprof", Always(pprofRole), debug)})
	}
	return &handler{mux: mux, reserved: reserved, mounts: mounts, s: s}
}

// patternPath is the path of a net/http pattern ("POST /v1/inference" ->
// "/v1/inference"; a pattern with a host keeps it, and so is under no
// reserved segment).
func patternPath(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return strings.TrimLeft(path, " \t")
	}
	return pattern
}

// handler serves the mounts first, then the routes, within the deadlines:
// a path under a reserved segment (urlspace.ReservedPath) with the
// reserved mux, any other with mux. Each route and mount refuses callers
// without a required client certificate in its protocol's error format
// (guard); a request no route serves is refused here, as plain text.
type handler struct {
	mux      *http.ServeMux
	reserved *http.ServeMux
	mounts   []mount
	s        *Server
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	opts := &s.opts
	if r.ProtoMajor == 1 && len(r.TransferEncoding) > 0 {
		// net/http drops a Content-Length sent beside Transfer-Encoding
		// before any handler sees the request, so a request that carried
		// both (a request smuggling attempt) cannot be told from any other
		// chunked one: the connection of either closes after its answer
		// (RFC 9112, section 6.3).
		w.Header().Set("Connection", "close")
	} else if r.ProtoMajor == 2 {
		// An HTTP/2 connection carries requests its server never marks
		// busy: hold it open while this one is in flight.
		if c, ok := r.Context().Value(limitedConnKey{}).(*connlimit.Conn); ok {
			c.Hold()
			defer c.Release()
		}
	}
	if read := s.firstReadTimeout(); read > 0 || opts.WriteTimeout > 0 {
		setDeadlines(w, r, read, opts.WriteTimeout)
	}
	switch {
	case r.ProtoMajor != 1 || r.ContentLength <= 0:
		h.route(w, r)
	case r.ContentLength > opts.MaxBodyBytes:
		// Refused from its Content-Length (ReadBody), unread: answered
		// whole first, then drained, then closed.
		a := &heldAnswer{w: w}
		h.route(a, r)
		w.Header().Set("Connection", "close")
		a.send()
		s.linger(w, r)
	default:
		h.route(w, r)
		if w.Header().Get("Connection") == "close" { // refused (refuse), answered already
			s.linger(w, r)
		}
	}
}

// route serves r with its mount, else its route.
func (h *handler) route(w http.ResponseWriter, r *http.Request) {
	for _, m := range h.mounts {
		if p := r.URL.Path; strings.HasPrefix(p, m.prefix) && (len(p) == len(m.prefix) || p[len(m.prefix)] == '/') {
			m.h.ServeHTTP(w, r)
			return
		}
	}
	mux := h.mux
	if urlspace.ReservedPath(r.URL.Path) {
		mux = h.reserved
	}
	if h.s.opts.RequireClientCert && !tlsconf.HasVerifiedClientCert(r.TLS) {
		if _, pattern := mux.Handler(r); pattern == "" && h.s.refuseCert(w, r, "") {
			return
		}
	}
	mux.ServeHTTP(w, r)
}

// firstReadTimeout is the read deadline a request gets when its handler
// starts: Options.ReadHeaderTimeout while its caller is not known yet,
// when there are callers to know (Auth, RequireClientCert) and it is the
// shorter, else Options.ReadTimeout.
func (s *Server) firstReadTimeout() time.Duration {
	if s.callerUnknownFirst() {
		return s.opts.ReadHeaderTimeout
	}
	return s.opts.ReadTimeout
}

// callerUnknownFirst reports whether requests start with the short read
// deadline of a caller not known yet (firstReadTimeout), which admitted
// replaces.
func (s *Server) callerUnknownFirst() bool {
	o := &s.opts
	return (o.Auth != nil || o.RequireClientCert) && o.ReadHeaderTimeout > 0 && (o.ReadTimeout <= 0 || o.ReadHeaderTimeout < o.ReadTimeout)
}

// admitted gives a request whose route admitted its caller the read
// deadline of a known caller, Options.ReadTimeout from now, in place of
// the short one it started with (firstReadTimeout).
func (s *Server) admitted(w http.ResponseWriter) {
	if !s.callerUnknownFirst() {
		return
	}
	var deadline time.Time
	if s.opts.ReadTimeout > 0 {
		deadline = time.Now().Add(s.opts.ReadTimeout)
	}
	_ = http.NewResponseController(w).SetReadDeadline(deadline)
}

// maxLingerFactor bounds a lingering close (linger): at most this many
// times Options.MaxBodyBytes of a body are read and discarded.
const maxLingerFactor = 4

// linger reads and discards the body of r, which an HTTP/1 handler
// answered, whole and flushed, without reading it (a refusal, or a 413
// from its Content-Length), before the connection closes, so that a
// client that sends its whole body before it reads the answer (Python's
// urllib, many SDKs) reads the answer, not a connection reset: net/http
// reads at most 256 KiB of a body left unread and then closes the
// connection with the rest in flight. It reads within the read deadline in
// force (the short one of a caller not known yet); a body larger than
// maxLingerFactor times Options.MaxBodyBytes, or one whose client waits
// for 100 Continue (it sends nothing unasked), is not read at all. This
// is nginx's lingering close.
func (s *Server) linger(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength/maxLingerFactor > s.opts.MaxBodyBytes || strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength)
}

// heldAnswer is a ResponseWriter that holds what is written to it until
// send writes it whole, with its Content-Length: an answer sent before the
// body it answers is drained (linger) must be complete, not a chunked
// stream whose end waits for the drain. It passes deadlines on (through
// http.ResponseController), not flushes.
type heldAnswer struct {
	w    http.ResponseWriter
	code int
	body bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.w.Header() }

func (a *heldAnswer) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}

func (a *heldAnswer) Write(p []byte) (int, error) {
	if a.code == 0 {
		a.code = http.StatusOK
	}
	return a.body.Write(p)
}

// SetReadDeadline sets the read deadline of the connection under a.
func (a *heldAnswer) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(a.w).SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline of the connection under a.
func (a *heldAnswer) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(a.w).SetWriteDeadline(t)
}

// send writes the answer held, with its Content-Length, and flushes it.
func (a *heldAnswer) send() {
	if a.code == 0 {
		a.code = http.StatusOK
	}
	if a.code != http.StatusNoContent && a.code != http.StatusNotModified {
		a.w.Header().Set("Content-Length", strconv.Itoa(a.body.Len()))
	}
	a.w.WriteHeader(a.code)
	_, _ = a.w.Write(a.body.Bytes())
	_ = http.NewResponseController(a.w).Flush()
}

// setDeadlines bounds reading r's body by read and writing its answer by
// write from now (a zero duration sets no deadline); a pprof profile or
// trace gets the seconds it asks for on top of write.
func setDeadlines(w http.ResponseWriter, r *http.Request, read, write time.Duration) {
	rc := http.NewResponseController(w)
	now := time.Now()
	if read > 0 {
		_ = rc.SetReadDeadline(now.Add(read))
	}
	if write > 0 {
		_ = rc.SetWriteDeadline(now.Add(write + streamDuration(r)))
	}
}

// streamDuration is how long pprof's profile or trace at r streams: its
// seconds parameter, else net/http/pprof's default (30 s, 1 s); 0 for any
// other request.
func streamDuration(r *http.Request) time.Duration {
	var def time.Duration
	switch r.URL.Path {
	case "/debug/pprof/profile":
		def = 30 * time.Second
	case "/debug/pprof/trace":
		def = time.Second
	default:
		if !strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			return 0
		}
	}
	if n, err := strconv.ParseFloat(r.URL.Query().Get("seconds"), 64); err == nil && n > 0 && n < 1e6 {
		return time.Duration(n * float64(time.Second))
	}
	return def
}

// IsProbe reports whether a request is a health or readiness probe, which
// needs no credentials: GET /healthz, /readyz, /v2/health/live,
// /v2/health/ready and /v2/models/.../ready.
func IsProbe(method, path string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	switch path {
	case "/healthz", "/readyz", "/v2/health/live", "/v2/health/ready":
		return true
	}
	return strings.HasPrefix(path, "/v2/models/") && strings.HasSuffix(path, "/ready") && len(path) > len("/v2/models//ready")
}

// NewHTTPServer returns an http.Server serving h with Options'
// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes, over TLS with
// tlsConfig unless it is nil (serve it with ServeTLS(ln, "", "")). It has
// no global WriteTimeout: deadlines are set per handler. Served on a
// connlimit.Listener, it tells the listener which connections are idle
// (new, or between two HTTP/1 requests, and without an HTTP/2 request in
// flight), which the listener may close to make room at its limit; a
// ConnState hook set later must call the one it replaces. Over TLS, its
// HTTP/2 connections are guarded (h2guard, listener "http", counted in
// Options.Registerer): one whose client resets streams without pause is
// closed.
func (s *Server) NewHTTPServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
		ConnState:         markIdle,
		ConnContext:       withLimitedConn,
	}
	if tlsConfig != nil {
		g := h2guard.New(h2guard.Options{Listener: "http", Registerer: s.opts.Registerer, Logger: s.opts.Logger})
		if err := g.ConfigureServer(srv); err != nil {
			// net/http's own HTTP/2 fails the same way: ServeTLS returns it.
			s.opts.Logger.Warn("HTTP/2 over TLS cannot be configured", "err", err)
		}
	}
	return srv
}

// limitedConnKey is the context key of a request's connection when it
// came from a connlimit.Listener (withLimitedConn).
type limitedConnKey struct{}

// withLimitedConn puts c's connlimit.Conn, if it has one, in the context of
// its requests, for an HTTP/2 request to hold it (handler.ServeHTTP).
func withLimitedConn(ctx context.Context, c net.Conn) context.Context {
	if lc := connlimit.Find(c); lc != nil {
		return context.WithValue(ctx, limitedConnKey{}, lc)
	}
	return ctx
}

// markIdle tells c's connlimit.Listener, if it has one, whether c is idle:
// new (a TLS handshake or an HTTP/1 request not read yet; an HTTP/2
// connection stays new to these hooks, and holds itself while a request
// is in flight) or between HTTP/1 requests.
func markIdle(c net.Conn, state http.ConnState) {
	if lc := connlimit.Find(c); lc != nil {
		lc.SetIdle(state == http.StateNew || state == http.StateIdle)
	}
}

// StatusRecorder is an http.ResponseWriter that keeps the status code the
// handler wrote (Code; start it at http.StatusOK), for middleware that
// reports it.
type StatusRecorder struct {
	http.ResponseWriter
	Code int
}

// WriteHeader records code and writes it.
func (r *StatusRecorder) WriteHeader(code int) {
	r.Code = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap returns the ResponseWriter r wraps, for http.ResponseController.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Instrument counts h's requests by status code and observes their latency
// under api, and with Options.TracerProvider gives each a server span. The
// series of 200 answers is looked up once, at the first.
func (s *Server) Instrument(api string, h http.HandlerFunc) http.HandlerFunc {
	lat := s.latency.WithLabelValues(api)
	ok := sync.OnceValue(func() prometheus.Counter { return s.requests.WithLabelValues(api, "200") })
	tr := tracing.NewHTTPServer(s.opts.TracerProvider, api)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The handler has returned, and net/http drops w, when rec goes
		// back to the pool.
		rec := s.recs.Get().(*StatusRecorder)
		*rec = StatusRecorder{ResponseWriter: w, Code: http.StatusOK}
		if tr != nil {
			r, span := tr.Start(r)
			h(rec, r)
			tracing.EndHTTP(span, rec.Code)
		} else {
			h(rec, r)
		}
		code := rec.Code
		*rec = StatusRecorder{}
		s.recs.Put(rec)
		lat.Observe(time.Since(start).Seconds())
		if code == http.StatusOK {
			ok().Inc()
		} else {
			s.requests.WithLabelValues(api, strconv.Itoa(code)).Inc()
		}
	}
}

// Buffer returns a pooled buffer for a request or response body; give it
// back with Release once nothing refers to its bytes.
func (s *Server) Buffer() *[]byte { return s.bufs.Get().(*[]byte) }

// Release returns a buffer from Buffer to the pool.
func (s *Server) Release(b *[]byte) { s.bufs.Put(b) }

var errTooLarge = errors.New("request body too large")

// ReadBody reads r's body into *buf, which it grows as needed and keeps
// (so a pooled buffer keeps its capacity), decoding it first when its
// Content-Encoding is gzip or deflate (zlib, or raw deflate), or several of
// them. On failure it also returns the HTTP status that fits: 413 past
// Options.MaxBodyBytes (which bounds the decoded body, and the compressed
// one: a compression bomb is not inflated past the limit; a body whose
// Content-Length exceeds it is refused before any of it is read), 415 for
// another coding, else 400 (a corrupt stream among them).
func (s *Server) ReadBody(r *http.Request, buf *[]byte) ([]byte, int, error) {
	if r.ContentLength > s.opts.MaxBodyBytes {
		// Refused before a byte of it is read; the handler's caller
		// drains it after the answer (linger).
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: the body's Content-Length of %d bytes exceeds the limit of %d bytes",
			errTooLarge, r.ContentLength, s.opts.MaxBodyBytes)
	}
	var body []byte
	var err error
	if ce := r.Header["Content-Encoding"]; len(ce) == 0 {
		body, err = readBody(r.Body, (*buf)[:0], s.opts.MaxBodyBytes)
	} else if cs, cerr := codings(ce); cerr != nil {
		return nil, http.StatusUnsupportedMediaType, cerr
	} else if len(cs) == 0 {
		body, err = readBody(r.Body, (*buf)[:0], s.opts.MaxBodyBytes)
	} else {
		body, err = s.decodedBody(r.Body, cs, (*buf)[:0], s.opts.MaxBodyBytes)
	}
	*buf = body[:0]
	switch {
	case errors.Is(err, errTooLarge):
		return nil, http.StatusRequestEntityTooLarge, err
	case err != nil:
		return nil, http.StatusBadRequest, err
	}
	return body, http.StatusOK, nil
}

// Body reads r's body as ReadBody does; when it cannot, it answers with the
// error as text and its status, and reports false.
func (s *Server) Body(w http.ResponseWriter, r *http.Request, buf *[]byte) ([]byte, bool) {
	body, code, err := s.ReadBody(r, buf)
	if err != nil {
		if code == http.StatusUnsupportedMediaType {
			w.Header().Set("Accept-Encoding", AcceptedEncodings)
		}
		http.Error(w, err.Error(), code)
		return nil, false
	}
	return body, true
}

// readBody reads all of body into buf, failing once more than limit bytes arrive.
func readBody(body io.Reader, buf []byte, limit int64) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, fmt.Errorf("%w: the body exceeds the limit of %d bytes", errTooLarge, limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, fmt.Errorf("reading request body: %w", err)
		}
	}
}

// StatusClientClosedRequest is the HTTP status of a request whose caller
// went away before it was answered (nginx's 499): only the metrics see it.
const StatusClientClosedRequest = 499

// ConfigHeaderPrefix starts the HTTP headers that carry request configs:
// "Grove-Config-User_id: 42" sets config "user_id" to "42". HTTP header names
// are case-insensitive, so the config name is lowercased.
const ConfigHeaderPrefix = "Grove-Config-"

// HeaderConfigs adds the Grove-Config-* headers of h to configs (from the
// body, possibly nil) and returns them; a header overrides a body config of
// the same name.
func HeaderConfigs(configs map[string]string, h http.Header) map[string]string {
	for name, vals := range h {
		if !isConfigHeader(name, vals) {
			continue
		}
		if configs == nil {
			configs = make(map[string]string, 4)
		}
		configs[strings.ToLower(name[len(ConfigHeaderPrefix):])] = vals[0]
	}
	return configs
}

// HasHeaderConfigs reports whether h holds a config header, one that
// HeaderConfigs would add.
func HasHeaderConfigs(h http.Header) bool {
	for name, vals := range h {
		if isConfigHeader(name, vals) {
			return true
		}
	}
	return false
}

// isConfigHeader reports whether the header name, with vals, is a config
// header: ConfigHeaderPrefix and a name after it, with a value.
func isConfigHeader(name string, vals []string) bool {
	return len(name) > len(ConfigHeaderPrefix) && strings.EqualFold(name[:len(ConfigHeaderPrefix)], ConfigHeaderPrefix) && len(vals) > 0
}

// RequestID returns the caller's X-Request-Id (up to 128 bytes), or a new
// random one, and echoes it in the response.
func RequestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		id = reqid.New()
	}
	w.Header().Set("X-Request-Id", id)
	return id
}

// WriteJSON answers with v as indented JSON and status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// TimeoutHeader carries a request's deadline for the B&A, ForestFlow and
// GraphPipe APIs, as a Go duration: "Grove-Timeout: 50ms", "1.5s". Work
// still queued at the deadline is dropped and the caller answered then.
const TimeoutHeader = "Grove-Timeout"

// WithTimeout returns r's context, bounded by its Grove-Timeout header if
// it has one; call cancel when the request is answered. A header that is
// not a positive duration, or more than one such header, is the caller's
// mistake, returned as an error that names it.
func WithTimeout(r *http.Request) (ctx context.Context, cancel context.CancelFunc, err error) {
	vs := r.Header.Values(TimeoutHeader)
	if len(vs) > 1 {
		return nil, nil, fmt.Errorf("more than one %s header: send one", TimeoutHeader)
	}
	if len(vs) == 0 || vs[0] == "" {
		return r.Context(), func() {}, nil
	}
	v := vs[0]
	d, perr := time.ParseDuration(v)
	if perr != nil || d <= 0 {
		return nil, nil, fmt.Errorf("invalid %s header %q: want a positive duration such as 50ms or 1.5s", TimeoutHeader, v)
	}
	ctx, cancel = context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

// TimeoutContext is WithTimeout for an API that answers a malformed
// header with a plain-text 400 itself; ok is false when it did.
func TimeoutContext(w http.ResponseWriter, r *http.Request) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	ctx, cancel, err := WithTimeout(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, false
	}
	return ctx, cancel, true
}
