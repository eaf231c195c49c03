// Package httpserver is the protocol-free part of Grove's HTTP API: one
// handler for the routes every protocol package adds, with request metrics,
// pooled body reading under a size limit (413), with gzip and deflate
// request bodies decoded (Content-Encoding), X-Request-Id, the
// Grove-Config-* headers, and the server's own endpoints (health,
// readiness, status, metrics, pprof), and the hardening every route gets:
// per-handler read and write deadlines, required client certificates, and
// the http.Server limits (NewHTTPServer, which also guards HTTP/2 over TLS
// against rapid reset: h2guard). With AdminAPIs, the management routes
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
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/internal/urlspace"
	"github.com/groveml/grove/tracing"
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
}

// Server gathers the routes of the protocols it serves; Handler serves them.
// Handle and Mount are for setting up, before Handler is called.
type Server struct {
	opts     Options
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bufs     sync.Pool
	dec      decoders
	routes   []route
	mounts   []mount
	errs     map[string]ErrorWriter // by api label or mount prefix (SetErrorWriter)
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
	opts := &h.s.opts
	if opts.ReadTimeout > 0 || opts.WriteTimeout > 0 {
		setDeadlines(w, r, opts.ReadTimeout, opts.WriteTimeout)
	}
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
	if opts.RequireClientCert && !tlsconf.HasVerifiedClientCert(r.TLS) {
		if _, pattern := mux.Handler(r); pattern == "" && h.s.refuseCert(w, r, "") {
			return
		}
	}
	mux.ServeHTTP(w, r)
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
// no global WriteTimeout: deadlines are set per handler. Over TLS, its
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

// Instrument counts h's requests by status code and observes their latency
// under api, and with Options.TracerProvider gives each a server span.
func (s *Server) Instrument(api string, h http.HandlerFunc) http.HandlerFunc {
	lat := s.latency.WithLabelValues(api)
	tr := tracing.NewHTTPServer(s.opts.TracerProvider, api)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &StatusRecorder{ResponseWriter: w, Code: http.StatusOK}
		if tr != nil {
			r, span := tr.Start(r)
			h(rec, r)
			tracing.EndHTTP(span, rec.Code)
		} else {
			h(rec, r)
		}
		lat.Observe(time.Since(start).Seconds())
		s.requests.WithLabelValues(api, strconv.Itoa(rec.Code)).Inc()
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
// one: a compression bomb is not inflated past the limit), 415 for another
// coding, else 400 (a corrupt stream among them).
func (s *Server) ReadBody(r *http.Request, buf *[]byte) ([]byte, int, error) {
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
		if len(name) <= len(ConfigHeaderPrefix) || !strings.EqualFold(name[:len(ConfigHeaderPrefix)], ConfigHeaderPrefix) || len(vals) == 0 {
			continue
		}
		if configs == nil {
			configs = make(map[string]string, 4)
		}
		configs[strings.ToLower(name[len(ConfigHeaderPrefix):])] = vals[0]
	}
	return configs
}

// RequestID returns the caller's X-Request-Id (up to 128 bytes), or a new
// random one, and echoes it in the response.
func RequestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
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
// not a positive duration is the caller's mistake, returned as an error
// that names it.
func WithTimeout(r *http.Request) (ctx context.Context, cancel context.CancelFunc, err error) {
	v := r.Header.Get(TimeoutHeader)
	if v == "" {
		return r.Context(), func() {}, nil
	}
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
