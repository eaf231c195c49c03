// Package rest serves Grove's HTTP API: the B&A batch inference endpoint,
// model listing, status, health and metrics.
package rest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/api/batch"
)

// Backend is what the HTTP API needs from the actors.
type Backend interface {
	Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error)
	ModelPaths() []string
	Status() actors.Status
	Ready() bool
}

// Options configure a Server.
type Options struct {
	// MaxBodyBytes rejects larger request bodies with 413.
	MaxBodyBytes int64
	// Logger receives request errors; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the HTTP metrics and Gatherer serves /metrics; nil means none.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Version is the server version OIP server metadata reports.
	Version string
	// Status adds top-level sections (such as "prediction_log") to /v1/status; nil adds none.
	Status func() map[string]any
}

// Server is the HTTP API.
type Server struct {
	b        Backend
	opts     Options
	log      *slog.Logger
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bufs     sync.Pool
	mux      *http.ServeMux
	oip      *http.ServeMux // the OIP v2 API, nil if the backend has none
	debug    *http.ServeMux // pprof, nil unless Options.Pprof
}

// New returns the HTTP API over b.
func New(b Backend, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 64 << 20
	}
	s := &Server{b: b, opts: opts, log: opts.Logger,
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
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/inference", s.instrument("inference", s.inference))
	mux.HandleFunc("GET /v1/models", s.instrument("models", s.models))
	mux.HandleFunc("GET /v1/status", s.instrument("status", s.status))
	var score, gp, create http.HandlerFunc
	if sc, ok := b.(Scorer); ok {
		score, gp = s.instrument("forestflow", s.score(sc)), s.instrument("graphpipe", s.graphPipe(sc))
		mux.HandleFunc("POST /{org}/{project}/{n}/{rv}/score", s.instrument("forestflow", s.score(sc)))
	}
	if ob, ok := b.(OIPBackend); ok {
		s.oip = http.NewServeMux()
		s.oipRoutes(s.oip, ob, opts.Version)
	}
	if m, ok := b.(Manager); ok {
		create = s.instrument("manage", s.createContract(m))
		s.manageRoutes(mux, m)
	}
	if score != nil || create != nil {
		mux.HandleFunc("POST /{a}/{b}/{c}/{d}", dispatchPost(score, gp, create))
	}
	if ci, ok := b.(ContractInspector); ok {
		mux.HandleFunc("GET /contracts/list", s.instrument("contracts", s.contractList(ci)))
		mux.HandleFunc("GET /{org}/{project}/{n}/stats", s.instrument("contracts", s.contractStats(ci)))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.ready)
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	if opts.Pprof {
		s.debug = http.NewServeMux()
		s.debug.HandleFunc("GET /debug/pprof/", pprof.Index)
		s.debug.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		s.debug.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		s.debug.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		s.debug.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.mux = mux
	return s
}

// ServeHTTP serves the API. The OIP paths (/v2 and below) and the pprof
// paths (/debug/pprof/) have their own muxes: their paths overlap the
// contract paths in ways net/http's patterns cannot order (so "v2" cannot
// be a contract organization, nor "debug" with project "pprof").
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.oip != nil && (r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/")) {
		s.oip.ServeHTTP(w, r)
		return
	}
	if s.debug != nil && strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		s.debug.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) instrument(api string, h http.HandlerFunc) http.HandlerFunc {
	lat := s.latency.WithLabelValues(api)
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r)
		lat.Observe(time.Since(start).Seconds())
		s.requests.WithLabelValues(api, strconv.Itoa(rec.code)).Inc()
	}
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if !s.b.Ready() {
		http.Error(w, "not ready\n", http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ready\n")
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(ba.AppendModelPaths(nil, s.b.ModelPaths()))
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	st := s.b.Status()
	if s.opts.Status == nil {
		_ = enc.Encode(st)
		return
	}
	doc := map[string]any{"ready": st.Ready, "config": st.Config, "models": st.Models}
	for k, v := range s.opts.Status() {
		doc[k] = v
	}
	_ = enc.Encode(doc)
}

// inference serves POST /v1/inference: a B&A batch request in, a B&A batch response out.
func (s *Server) inference(w http.ResponseWriter, r *http.Request) {
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	body, code, err := s.body(r, bp)
	if err != nil {
		s.batchError(w, code, &ba.Error{Type: ba.InputParsing, Description: err.Error()})
		return
	}
	rp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(rp)
	out, code := batch.Run(r.Context(), s.b, (*rp)[:0], body, batch.Call{API: "ba", RequestID: requestID(w, r),
		Configs: func(c map[string]string) map[string]string { return withHeaderConfigs(c, r.Header) }})
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(out)
	*rp = out[:0]
}

func (s *Server) batchError(w http.ResponseWriter, code int, e *ba.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(ba.AppendBatchError(nil, e, ""))
}

// ConfigHeaderPrefix starts the HTTP headers that carry request configs:
// "Grove-Config-User_id: 42" sets config "user_id" to "42". HTTP header names
// are case-insensitive, so the config name is lowercased.
const ConfigHeaderPrefix = "Grove-Config-"

// withHeaderConfigs adds the Grove-Config-* headers to configs (from the
// body); a header overrides a body config of the same name.
func withHeaderConfigs(configs map[string]string, h http.Header) map[string]string {
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

// requestID returns the caller's X-Request-Id, or a new random one, and
// echoes it in the response.
func requestID(w http.ResponseWriter, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-Id", id)
	return id
}

var errTooLarge = errors.New("request body too large")

// body reads r's body into the pooled buffer *bp. On failure it also returns
// the HTTP status that fits: 413 over max_body_bytes, else 400.
func (s *Server) body(r *http.Request, bp *[]byte) ([]byte, int, error) {
	body, err := readBody(r.Body, (*bp)[:0], s.opts.MaxBodyBytes)
	*bp = body[:0]
	switch {
	case errors.Is(err, errTooLarge):
		return nil, http.StatusRequestEntityTooLarge, err
	case err != nil:
		return nil, http.StatusBadRequest, err
	}
	return body, http.StatusOK, nil
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
