package rest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
)

// OIPBackend is what the Open Inference Protocol v2 REST API needs beyond Backend.
type OIPBackend interface {
	ModelMetadata(path string) (meta servables.Metadata, checksum string, ok bool)
	ModelStats(path string) (actors.ModelStats, bool)
}

// oipExtensions are the OIP/Triton extensions Grove serves in full over
// REST. Triton's model_repository extension also loads and unloads models,
// which in Grove only the bucket config does, so it is not advertised
// (POST /v2/repository/index is served all the same).
var oipExtensions = []string{oip.ExtensionBinaryTensorData, "statistics"}

// oipRoutes registers the OIP v2 REST API. Model names may hold "/" (a
// model path's segments), so /v2/models/... is parsed by hand.
func (s *Server) oipRoutes(mux *http.ServeMux, ob OIPBackend, version string) {
	h := func(f http.HandlerFunc) http.HandlerFunc { return s.instrument("oip", f) }
	mux.HandleFunc("GET /v2", h(func(w http.ResponseWriter, _ *http.Request) {
		writeOIP(w, http.StatusOK, oip.AppendServerMetadata(nil, oip.ServerMetadata{Name: "grove", Version: version, Extensions: oipExtensions}))
	}))
	mux.HandleFunc("GET /v2/health/live", h(func(w http.ResponseWriter, _ *http.Request) {
		writeOIP(w, http.StatusOK, oip.AppendServerLive(nil, true))
	}))
	mux.HandleFunc("GET /v2/health/ready", h(func(w http.ResponseWriter, _ *http.Request) {
		ready := s.b.Ready()
		writeOIP(w, okOr(ready, http.StatusServiceUnavailable), oip.AppendServerReady(nil, ready))
	}))
	mux.HandleFunc("GET /v2/models/stats", h(s.oipStats(ob, "", "")))
	mux.HandleFunc("POST /v2/repository/index", h(s.oipIndex))
	mux.HandleFunc("GET /v2/models/{rest...}", h(s.oipModel(ob, false)))
	mux.HandleFunc("POST /v2/models/{rest...}", h(s.oipModel(ob, true)))
	// Anything else under /v2 answers in OIP's error shape, not net/http's text.
	mux.HandleFunc("/v2/", h(func(w http.ResponseWriter, r *http.Request) {
		oipError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	}))
}

func okOr(ok bool, code int) int {
	if ok {
		return http.StatusOK
	}
	return code
}

func writeOIP(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func oipError(w http.ResponseWriter, code int, msg string) {
	writeOIP(w, code, oip.AppendError(nil, msg))
}

// parseModelPath splits the part of a /v2/models/ path after "models/" into
// the model name, the version ("" for none) and the action (the last
// segment if it is "ready", "infer" or "stats", else "").
func parseModelPath(rest string) (name, version, action string) {
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		switch last := rest[i+1:]; last {
		case "ready", "infer", "stats":
			action, rest = last, rest[:i]
		}
	}
	if i := strings.LastIndex(rest, "/versions/"); i >= 0 {
		return rest[:i], rest[i+len("/versions/"):], action
	}
	return rest, "", action
}

// oipModel serves GET /v2/models/{name}[/versions/{v}][/ready|/stats] and
// POST .../infer.
func (s *Server) oipModel(ob OIPBackend, post bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, version, action := parseModelPath(r.PathValue("rest"))
		switch {
		case post && action == "infer":
			s.oipInfer(w, r, name, version)
		case post:
			oipError(w, http.StatusNotFound, "no such endpoint: POST "+r.URL.Path)
		case action == "ready":
			_, ok := routing.Resolve(s.b.ModelPaths(), name, version)
			writeOIP(w, okOr(ok, http.StatusServiceUnavailable), oip.AppendModelReady(nil, name, ok))
		case action == "stats":
			s.oipStats(ob, name, version)(w, r)
		case action == "":
			s.oipMetadata(w, ob, name, version)
		default:
			oipError(w, http.StatusNotFound, "no such endpoint: GET "+r.URL.Path)
		}
	}
}

// unknownModel is Triton's message for a model that is not ready.
func unknownModel(name, version string) string {
	if version != "" {
		return "Request for unknown model: '" + name + "' version " + version + " is not found"
	}
	return "Request for unknown model: '" + name + "' is not found"
}

func (s *Server) oipMetadata(w http.ResponseWriter, ob OIPBackend, name, version string) {
	mv, ok := routing.Resolve(s.b.ModelPaths(), name, version)
	meta, _, loaded := ob.ModelMetadata(mv.Path)
	if !ok || !loaded {
		oipError(w, http.StatusNotFound, unknownModel(name, version))
		return
	}
	var versions []string
	for _, v := range routing.Versions(s.b.ModelPaths(), name) {
		versions = append(versions, v.Version)
	}
	writeOIP(w, http.StatusOK, oip.AppendModelMetadata(nil, oip.ModelMetadata{Name: mv.Name, Versions: versions,
		Platform: oip.Platform(meta.Runtime), Inputs: meta.Inputs, Outputs: meta.Outputs}))
}

// oipInfer serves POST /v2/models/{name}[/versions/{v}]/infer, JSON or
// with Triton's binary tensor extension.
func (s *Server) oipInfer(w http.ResponseWriter, r *http.Request, name, version string) {
	mv, ok := routing.Resolve(s.b.ModelPaths(), name, version)
	if !ok {
		oipError(w, http.StatusNotFound, unknownModel(name, version))
		return
	}
	headerLen := 0
	if v := r.Header.Get(oip.HeaderContentLength); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			oipError(w, http.StatusBadRequest, "invalid "+oip.HeaderContentLength+" header "+strconv.Quote(v)+": a positive length of the JSON part is needed")
			return
		}
		headerLen = n
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	body, code, err := s.body(r, bp)
	if err != nil {
		oipError(w, code, err.Error())
		return
	}
	req, err := oip.ParseInferRequest(body, headerLen)
	if err != nil {
		code := http.StatusBadRequest
		var oe *oip.Error
		if errors.As(err, &oe) {
			code = oe.Status
		}
		oipError(w, code, err.Error())
		return
	}
	id := req.ID
	if id == "" || len(id) > 128 {
		id = requestID(w, r)
	}
	res, err := s.b.Infer(r.Context(), []actors.Request{{API: "oip", ModelPath: mv.Path, Inputs: req.Inputs, RequestID: id,
		Configs: withHeaderConfigs(nil, r.Header)}})
	if err != nil {
		oipError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err := res[0].Err; err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, actors.ErrOverloaded):
			code = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "1")
		case actors.ErrorType(err) == "INPUT_PARSING":
			code = http.StatusBadRequest
		case actors.ErrorType(err) == "MODEL_NOT_FOUND":
			code = http.StatusNotFound
		}
		oipError(w, code, err.Error())
		return
	}
	rp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(rp)
	out, hlen, err := oip.AppendInferResponse((*rp)[:0], req.Response(mv.Name, mv.Version, res[0].Outputs))
	if err != nil {
		code := http.StatusInternalServerError
		var oe *oip.Error
		if errors.As(err, &oe) {
			code = oe.Status
		}
		oipError(w, code, err.Error())
		return
	}
	if hlen > 0 {
		w.Header().Set(oip.HeaderContentLength, strconv.Itoa(hlen))
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

// oipStats serves Triton's statistics extension: GET /v2/models/stats (every
// ready model) and GET /v2/models/{name}[/versions/{v}]/stats. Counts are
// since the serving content loaded; compute_input and compute_output are
// part of compute_infer.
func (s *Server) oipStats(ob OIPBackend, name, version string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		var mvs []routing.ModelVersion
		switch {
		case name == "":
			for _, p := range s.b.ModelPaths() {
				mvs = append(mvs, routing.NameModel(p))
			}
		case version == "":
			mvs = routing.Versions(s.b.ModelPaths(), name)
		default:
			if mv, ok := routing.Resolve(s.b.ModelPaths(), name, version); ok {
				mvs = []routing.ModelVersion{mv}
			}
		}
		if name != "" && len(mvs) == 0 {
			oipError(w, http.StatusNotFound, unknownModel(name, version))
			return
		}
		doc := struct {
			ModelStats []modelStatsDoc `json:"model_stats"`
		}{ModelStats: []modelStatsDoc{}}
		for _, mv := range mvs {
			st, ok := ob.ModelStats(mv.Path)
			if !ok {
				continue
			}
			d := modelStatsDoc{Name: mv.Name, Version: mv.Version, InferenceCount: st.Inferences, ExecutionCount: st.Executions,
				InferenceStats: inferStatsDoc{Success: durDoc(st.Success), Fail: durDoc(st.Fail), Queue: durDoc(st.Queue),
					ComputeInfer: durDoc(st.Compute)}, BatchStats: []any{}}
			if !st.LastInference.IsZero() {
				d.LastInference = st.LastInference.UnixMilli()
			}
			doc.ModelStats = append(doc.ModelStats, d)
		}
		writeJSON(w, http.StatusOK, doc)
	}
}

// oipIndex serves POST /v2/repository/index: every configured model with
// its state (READY, LOADING, UNAVAILABLE) and the reason; {"ready": true}
// lists only the ready ones.
func (s *Server) oipIndex(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Ready bool `json:"ready"`
	}
	if r.ContentLength != 0 {
		var buf []byte
		body, code, err := s.body(r, &buf)
		if err != nil {
			oipError(w, code, err.Error())
			return
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			if err := json.Unmarshal(body, &q); err != nil {
				oipError(w, http.StatusBadRequest, "repository index request: "+err.Error())
				return
			}
		}
	}
	type entry struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		State   string `json:"state"`
		Reason  string `json:"reason,omitempty"`
	}
	out := []entry{}
	for _, m := range s.b.Status().Models {
		mv := routing.NameModel(m.Path)
		e := entry{Name: mv.Name, Version: mv.Version, State: "UNAVAILABLE", Reason: m.LastError}
		switch m.State {
		case actors.StateReady, actors.StateEvicting, actors.StateExpiring:
			e.State, e.Reason = "READY", ""
		case actors.StateLoading:
			e.State = "LOADING"
		case actors.StateExpired:
			e.Reason = "expired by its contracts"
		}
		if q.Ready && e.State != "READY" {
			continue
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, out)
}
