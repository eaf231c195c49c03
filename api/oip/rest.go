package oip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/tracing"
	"github.com/groveml/grove/transport/httpserver"
)

// rest serves the OIP v2 REST API.
type rest struct {
	h       *httpserver.Server
	b       Backend
	version string
	rec     audit.Recorder
}

// restRoutes returns the handler of /v2 and below. Model names may hold "/"
// (a model path's segments), so /v2/models/... is parsed by hand.
func restRoutes(h *httpserver.Server, b Backend, version string, rec audit.Recorder) http.Handler {
	a := &rest{h: h, b: b, version: version, rec: rec}
	mux := http.NewServeMux()
	handle := func(pattern string, f http.HandlerFunc) { mux.HandleFunc(pattern, h.Instrument("oip", f)) }
	handle("GET /v2", func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, AppendServerMetadata(nil, ServerMetadata{Name: ServerName, Version: a.version, Extensions: extensions}))
	})
	handle("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, AppendServerLive(nil, true))
	})
	handle("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		ready := a.b.Ready()
		write(w, okOr(ready, http.StatusServiceUnavailable), AppendServerReady(nil, ready))
	})
	handle("GET /v2/models/stats", a.stats("", ""))
	handle("POST /v2/repository/index", a.index)
	refuseUnserved(handle)
	handle("POST /v2/repository/models/{rest...}", a.repositoryControl)
	handle("GET /v2/models/{rest...}", a.model(false))
	handle("POST /v2/models/{rest...}", a.model(true))
	// Anything else under /v2 answers in OIP's error shape, not net/http's text.
	handle("/v2/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

func okOr(ok bool, code int) int {
	if ok {
		return http.StatusOK
	}
	return code
}

func write(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	write(w, code, AppendError(nil, msg))
}

// fail answers err with its kind's status (Retry-After for a full queue,
// and for a model that is loading: when it should be loaded; retryAfter).
func fail(w http.ResponseWriter, err error) {
	if s, ok := retryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	writeError(w, statusOf(servables.KindOf(err)).http, errorText(err))
}

// retryAfter is, for a failure that says when to retry, the whole seconds
// the caller should wait: when the model should be loaded for one that is
// loading (or its node back in its cluster: actors.RetryAfter), 1 for a
// full queue; false for any other. REST answers it as Retry-After, gRPC
// as the grpc-retry-pushback-ms trailer.
func retryAfter(err error) (int, bool) {
	if s, ok := actors.RetryAfter(err); ok {
		return s, true
	}
	if servables.KindOf(err) == servables.Overloaded {
		return 1, true
	}
	return 0, false
}

// failBody answers a body that could not be read with its status, and a
// 415 (an unknown Content-Encoding) with the codings Grove decodes.
func failBody(w http.ResponseWriter, code int, err error) {
	if code == http.StatusUnsupportedMediaType {
		w.Header().Set("Accept-Encoding", httpserver.AcceptedEncodings)
	}
	writeError(w, code, err.Error())
}

// failCodec answers a request that cannot be parsed, or a response that
// cannot be written, with the codec's status (400 or 500).
func failCodec(w http.ResponseWriter, err error, code int) {
	var oe *Error
	if errors.As(err, &oe) {
		code = oe.Status
	}
	writeError(w, code, err.Error())
}

// actionWords are the words that end a /v2/models/ path to name its
// endpoint: readiness, inference, statistics and the model configuration.
var actionWords = [...]string{"ready", "infer", "stats", "config"}

// modelRoute is one reading of the part of a /v2/models/ path after
// "models/": a model name, a version ("" for none) and an action (one of
// actionWords, or "" for the model's metadata).
type modelRoute struct{ name, version, action string }

// modelRoutes appends every reading of rest to dst, the OIP reading first,
// then those that take fewer of the trailing segments as endpoint words
// and more as the model name: without the version, without the action,
// without both. Model names may hold "/", so a model can be named
// "a/ready" or "m/versions/2/infer".
func modelRoutes(rest string, dst []modelRoute) []modelRoute {
	base, action := rest, ""
	if i := strings.LastIndexByte(rest, '/'); i >= 0 && slices.Contains(actionWords[:], rest[i+1:]) {
		base, action = rest[:i], rest[i+1:]
	}
	for _, act := range [...]string{action, ""} {
		b := base
		if act == "" && action != "" {
			b = rest
		}
		if i := strings.LastIndexByte(b, '/'); i >= 0 && strings.HasSuffix(b[:i], "/versions") && i+1 < len(b) {
			dst = append(dst, modelRoute{b[:i-len("/versions")], b[i+1:], act})
		}
		dst = append(dst, modelRoute{b, "", act})
		if action == "" {
			break
		}
	}
	return dst
}

// route picks the reading of rest that a request with method post (or
// GET) means: among the readings that name an endpoint of that method
// (POST: infer; GET: the others), the first whose model is served at that
// version, else the first (a model that is not served: its error names
// it). So a model named "a/ready" answers GET /v2/models/a/ready with its
// metadata unless a model "a" is served, in which case the OIP reading
// wins: every endpoint of "a" stays reachable, and "a/ready" still has
// GET /v2/models/a/ready/versions/{v}. ok is false when no reading fits
// the method.
func (a *rest) route(rest string, post bool) (r modelRoute, mv routing.ModelVersion, served, ok bool) {
	var buf [4]modelRoute
	paths := a.b.ModelPaths()
	for _, c := range modelRoutes(rest, buf[:0]) {
		if (c.action == "infer") != post {
			continue
		}
		if !ok {
			r, ok = c, true
		}
		if m, found := routing.Resolve(paths, a.b.NewestVersion, c.name, c.version); found {
			return c, m, true, true
		}
	}
	return r, routing.ModelVersion{}, false, ok
}

// model serves GET /v2/models/{name}[/versions/{v}][/ready|/stats|/config]
// and POST .../infer, with the reading of the path that route picks.
func (a *rest) model(post bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rest := r.PathValue("rest")
		rt, mv, served, ok := a.route(rest, post)
		if ok && rt.action != "ready" && httpserver.IsProbe(r.Method, r.URL.Path) {
			// Let in as a model-ready probe, without credentials: any
			// other reading (a model named "x/ready") needs the role of
			// a read.
			var f auth.InFlight
			if r, f, ok = a.h.AuthorizeProbePath(w, r, auth.RoleRead, "/v2"); !ok {
				return
			}
			defer f.End()
		}
		switch {
		case !served && strings.HasSuffix(rest, "/trace/setting"):
			// Triton's per-model trace settings (tritonclient's
			// get_trace_settings(model_name=...)), unless a model is so named.
			writeError(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+" is not supported: "+whyNoTrace)
		case !ok:
			writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
		case !served && rt.action != "ready" && rt.action != "stats":
			fail(w, unknownModel{rt.name, rt.version})
		case rt.action == "infer":
			a.infer(w, r, mv)
		case rt.action == "ready":
			write(w, okOr(served, http.StatusServiceUnavailable), AppendModelReady(nil, rt.name, served))
		case rt.action == "stats":
			a.stats(rt.name, rt.version)(w, r)
		case rt.action == "config":
			a.config(w, rt.name, rt.version)
		default:
			a.metadata(w, mv)
		}
	}
}

// metadata answers the metadata of model version mv.
func (a *rest) metadata(w http.ResponseWriter, mv routing.ModelVersion) {
	meta, _, loaded := a.b.ModelMetadata(mv.Path)
	if !loaded {
		fail(w, unknownModel{mv.Name, mv.Version})
		return
	}
	var versions []string
	for _, v := range routing.Versions(a.b.ModelPaths(), a.b.NewestVersion, mv.Name) {
		versions = append(versions, v.Version)
	}
	write(w, http.StatusOK, AppendModelMetadata(nil, ModelMetadata{Name: mv.Name, Versions: versions,
		Platform: Platform(meta.Runtime), Inputs: meta.Inputs, Outputs: meta.Outputs, Signature: meta.Signature,
		Parameters: meta.Parameters}))
}

// infer serves POST /v2/models/{name}[/versions/{v}]/infer for model
// version mv, JSON or with Triton's binary tensor extension.
func (a *rest) infer(w http.ResponseWriter, r *http.Request, mv routing.ModelVersion) {
	headerLen := 0
	if v := r.Header.Get(HeaderContentLength); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			writeError(w, http.StatusBadRequest, "invalid "+HeaderContentLength+" header "+strconv.Quote(v)+": a positive length of the JSON part is needed")
			return
		}
		headerLen = n
	}
	bp := a.h.Buffer()
	defer a.h.Release(bp)
	body, code, err := a.h.ReadBody(r, bp)
	if err != nil {
		failBody(w, code, err)
		return
	}
	_, span := tracing.Start(r.Context(), tracing.SpanDecode)
	req, err := ParseInferRequest(body, headerLen)
	tracing.End(span, err)
	if err != nil {
		failCodec(w, err, http.StatusBadRequest)
		return
	}
	timeout, err := restTimeout(req.Parameters)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := withTimeout(r.Context(), timeout)
	defer cancel()
	if req.Outputs != nil {
		meta, _, _ := a.b.ModelMetadata(mv.Path)
		if ctx, err = WithRequestedOutputs(ctx, mv.Name, meta.Outputs, req.Outputs); err != nil {
			failCodec(w, err, http.StatusBadRequest)
			return
		}
	}
	id := req.ID
	if id == "" || len(id) > 128 {
		id = httpserver.RequestID(w, r)
	}
	res, err := a.b.Infer(ctx, []actors.Request{{API: "oip", ModelPath: mv.Path, Inputs: req.Inputs, RequestID: id,
		Configs: httpserver.HeaderConfigs(nil, r.Header)}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		fail(w, err)
		return
	}
	rp := a.h.Buffer()
	defer a.h.Release(rp)
	_, span = tracing.Start(r.Context(), tracing.SpanEncode)
	out, hlen, err := AppendInferResponse((*rp)[:0], req.Response(mv.Name, answeredVersion(mv, res[0]), res[0].Outputs))
	tracing.End(span, err)
	if err != nil {
		failCodec(w, err, http.StatusInternalServerError)
		return
	}
	if hlen > 0 {
		w.Header().Set(HeaderContentLength, strconv.Itoa(hlen))
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(out)
	*rp = out[:0]
}

// stats serves Triton's statistics extension: GET /v2/models/stats (every
// ready model) and GET /v2/models/{name}[/versions/{v}]/stats, the
// ModelStatisticsResponse gRPC's ModelStatistics answers, in Triton's JSON
// (every member of the extension's schema, counts as JSON numbers).
func (a *rest) stats(name, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		vs, err := statsOf(a.b, name, version)
		if err != nil {
			fail(w, err)
			return
		}
		body, err := appendTritonJSON(nil, statisticsResponse(vs))
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		write(w, http.StatusOK, body)
	}
}

// repositoryControl answers Triton's model repository load and unload,
// POST /v2/repository/models/{name}/load and .../unload, with the refusal
// RepositoryControlRefusal says (409), recorded in the audit trail; any
// other path there is not an endpoint.
func (a *rest) repositoryControl(w http.ResponseWriter, r *http.Request) {
	rest := r.PathValue("rest")
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || (rest[i+1:] != "load" && rest[i+1:] != "unload") {
		writeError(w, http.StatusNotFound, "no such endpoint: POST "+r.URL.Path)
		return
	}
	action, name := rest[i+1:], rest[:i]
	op := audit.HTTPOp(r, "oip", "POST /v2/repository/models/{name}/"+action)
	op.Target = name
	ctx, rec := audit.Begin(r.Context(), a.rec, op)
	err := RepositoryControlRefusal(action, name)
	rec.Finish(ctx, strconv.Itoa(statusOf(servables.KindOf(err)).http), err)
	fail(w, err)
}

// refuseRepositoryControl is the gRPC answer to a model repository load or
// unload (action) of model name, recorded in the audit trail.
func (o *grpcService) refuseRepositoryControl(ctx context.Context, action, name string) error {
	ctx, rec := audit.Begin(ctx, o.rec, audit.GRPCOp(ctx, "oip", name))
	err := RepositoryControlRefusal(action, name)
	rec.Finish(ctx, statusOf(servables.KindOf(err)).grpc.String(), err)
	return grpcError(err)
}

// RepositoryControlRefusal is the answer to a model repository load or
// unload (action) of model name, over REST and gRPC alike: Grove loads
// what the model config in the bucket lists, so the request is refused
// (servables.ErrConflict: 409, FAILED_PRECONDITION) with where to make
// the change instead.
func RepositoryControlRefusal(action, name string) error {
	return fmt.Errorf("%w: model repository %s of model '%s' is refused: the model config in the bucket (model_config.json, its model_metadata entries) decides which models Grove loads, on every replica; "+
		"edit it there, or through the management API: POST /servable adds a servable with its model, DELETE /{org}/{project}/{n}/{rv} removes one and its model",
		servables.ErrConflict, action, name)
}

// index serves POST /v2/repository/index: every configured model with its
// state (READY, LOADING, UNAVAILABLE) and the reason; {"ready": true} lists
// only the ready ones.
func (a *rest) index(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Ready bool `json:"ready"`
	}
	if r.ContentLength != 0 {
		var buf []byte
		body, code, err := a.h.ReadBody(r, &buf)
		if err != nil {
			failBody(w, code, err)
			return
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			if err := json.Unmarshal(body, &q); err != nil {
				writeError(w, http.StatusBadRequest, "repository index request: "+err.Error())
				return
			}
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, repositoryIndex(a.b, q.Ready))
}
