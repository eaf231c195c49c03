package oip

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/httpserver"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// rest serves the OIP v2 REST API.
type rest struct {
	h       *httpserver.Server
	b       Backend
	version string
}

// restRoutes returns the handler of /v2 and below. Model names may hold "/"
// (a model path's segments), so /v2/models/... is parsed by hand.
func restRoutes(h *httpserver.Server, b Backend, version string) http.Handler {
	a := &rest{h: h, b: b, version: version}
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

// fail answers err with its kind's status (Retry-After for a full queue).
func fail(w http.ResponseWriter, err error) {
	k := servables.KindOf(err)
	if k == servables.Overloaded {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, statusOf(k).http, errorText(err))
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

// parseModelPath splits the part of a /v2/models/ path after "models/" into
// the model name, the version ("" for none) and the action (the last
// segment if it is "ready", "infer", "stats" or "config", else "").
func parseModelPath(rest string) (name, version, action string) {
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		switch last := rest[i+1:]; last {
		case "ready", "infer", "stats", "config":
			action, rest = last, rest[:i]
		}
	}
	if i := strings.LastIndex(rest, "/versions/"); i >= 0 {
		return rest[:i], rest[i+len("/versions/"):], action
	}
	return rest, "", action
}

// model serves GET /v2/models/{name}[/versions/{v}][/ready|/stats|/config] and
// POST .../infer.
func (a *rest) model(post bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, version, action := parseModelPath(r.PathValue("rest"))
		switch {
		case post && action == "infer":
			a.infer(w, r, name, version)
		case post:
			writeError(w, http.StatusNotFound, "no such endpoint: POST "+r.URL.Path)
		case action == "ready":
			_, ok := routing.Resolve(a.b.ModelPaths(), name, version)
			write(w, okOr(ok, http.StatusServiceUnavailable), AppendModelReady(nil, name, ok))
		case action == "stats":
			a.stats(name, version)(w, r)
		case action == "config":
			a.config(w, name, version)
		case action == "":
			a.metadata(w, name, version)
		default:
			writeError(w, http.StatusNotFound, "no such endpoint: GET "+r.URL.Path)
		}
	}
}

func (a *rest) metadata(w http.ResponseWriter, name, version string) {
	mv, ok := routing.Resolve(a.b.ModelPaths(), name, version)
	meta, _, loaded := a.b.ModelMetadata(mv.Path)
	if !ok || !loaded {
		fail(w, unknownModel{name, version})
		return
	}
	var versions []string
	for _, v := range routing.Versions(a.b.ModelPaths(), name) {
		versions = append(versions, v.Version)
	}
	write(w, http.StatusOK, AppendModelMetadata(nil, ModelMetadata{Name: mv.Name, Versions: versions,
		Platform: Platform(meta.Runtime), Inputs: meta.Inputs, Outputs: meta.Outputs, Signature: meta.Signature}))
}

// infer serves POST /v2/models/{name}[/versions/{v}]/infer, JSON or with
// Triton's binary tensor extension.
func (a *rest) infer(w http.ResponseWriter, r *http.Request, name, version string) {
	mv, ok := routing.Resolve(a.b.ModelPaths(), name, version)
	if !ok {
		fail(w, unknownModel{name, version})
		return
	}
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
		writeError(w, code, err.Error())
		return
	}
	req, err := ParseInferRequest(body, headerLen)
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
	out, hlen, err := AppendInferResponse((*rp)[:0], req.Response(mv.Name, mv.Version, res[0].Outputs))
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

// Triton's statistics documents.
type (
	modelStatsDoc struct {
		Name           string        `json:"name"`
		Version        string        `json:"version"`
		LastInference  int64         `json:"last_inference"`
		InferenceCount int64         `json:"inference_count"`
		ExecutionCount int64         `json:"execution_count"`
		InferenceStats inferStatsDoc `json:"inference_stats"`
		BatchStats     []any         `json:"batch_stats"`
	}
	inferStatsDoc struct {
		Success       durationDoc `json:"success"`
		Fail          durationDoc `json:"fail"`
		Queue         durationDoc `json:"queue"`
		ComputeInput  durationDoc `json:"compute_input"`
		ComputeInfer  durationDoc `json:"compute_infer"`
		ComputeOutput durationDoc `json:"compute_output"`
	}
	durationDoc struct {
		Count int64 `json:"count"`
		Ns    int64 `json:"ns"`
	}
)

func durDoc(d actors.Duration) durationDoc { return durationDoc{Count: d.Count, Ns: int64(d.Total)} }

// stats serves Triton's statistics extension: GET /v2/models/stats (every
// ready model) and GET /v2/models/{name}[/versions/{v}]/stats. Counts are
// since the serving content loaded; compute_input and compute_output are
// part of compute_infer.
func (a *rest) stats(name, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		vs, err := statsOf(a.b, name, version)
		if err != nil {
			fail(w, err)
			return
		}
		doc := struct {
			ModelStats []modelStatsDoc `json:"model_stats"`
		}{ModelStats: []modelStatsDoc{}}
		for _, v := range vs {
			st := v.st
			doc.ModelStats = append(doc.ModelStats, modelStatsDoc{Name: v.mv.Name, Version: v.mv.Version,
				LastInference: v.lastInferenceMs(), InferenceCount: st.Inferences, ExecutionCount: st.Executions,
				InferenceStats: inferStatsDoc{Success: durDoc(st.Success), Fail: durDoc(st.Fail), Queue: durDoc(st.Queue),
					ComputeInfer: durDoc(st.Compute)}, BatchStats: []any{}})
		}
		httpserver.WriteJSON(w, http.StatusOK, doc)
	}
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
			writeError(w, code, err.Error())
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
